"""Forbid this process, its threads and whatever it forks from starting another program.

:func:`forbid` installs a seccomp filter (Linux's own system-call filter, ``seccomp(2)``) that
makes ``execve`` and ``execveat`` fail with ``EPERM``, for every thread of this process at once
(``SECCOMP_FILTER_FLAG_TSYNC``) and, because filters are inherited and cannot be removed, for
every child it forks. It is one more wall of the grading sandbox
(:mod:`convs2s.course.checks.sandboxed`): the functions an exercise forbids are removed from the
sandboxed Python process, and a program started from the answer (a fresh ``python -c``) would
have them back.

The filter is eight BPF instructions, written out here because no library in the course's
dependencies builds one (``libseccomp`` is a C library, absent on some machines):

1. load the system call's architecture; anything but this machine's native one is refused (a
   64-bit process on x86-64 can still make 32-bit system calls, whose numbers differ);
2. load the system call's number; on x86-64 the x32 numbers (bit 30 set) are refused;
3. ``execve`` or ``execveat``: ``EPERM``; anything else: allowed.

Where it cannot be installed (another architecture, a kernel without seccomp), :func:`forbid`
raises :class:`NoExecUnavailable` with one line saying why; grading refuses to run there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

#: Per architecture (``platform.machine()``): its audit number, ``execve``, ``execveat`` and
#: ``seccomp`` system-call numbers, and whether it has the x32 numbers to refuse.
ARCHITECTURES = {
    "x86_64": (0xC000003E, 59, 322, 317, True),
    "aarch64": (0xC00000B7, 221, 281, 277, False),
}

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_X32_SYSCALL_BIT = 0x40000000

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS: A = the 32-bit word at offset k of seccomp_data
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_NR_OFFSET, _ARCH_OFFSET = 0, 4  # struct seccomp_data: int nr; __u32 arch; ...


class NoExecUnavailable(RuntimeError):
    """The filter cannot be installed here (the message is one line: why)."""


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def program(machine: str) -> bytes:
    """The filter for ``machine`` as ``struct sock_filter`` records (8 bytes each)."""
    arch, execve, execveat, _seccomp, x32 = ARCHITECTURES[machine]
    deny = 7  # the index of the last instruction
    instructions = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        (_JEQ_K, 0, deny - 2, arch),  # another architecture: refused
        (_LD_W_ABS, 0, 0, _NR_OFFSET),
        (_JGE_K, deny - 4, 0, _X32_SYSCALL_BIT) if x32 else (_JEQ_K, 0, 0, 0),
        (_JEQ_K, deny - 5, 0, execve),
        (_JEQ_K, deny - 6, 0, execveat),
        (_RET_K, 0, 0, _RET_ALLOW),
        (_RET_K, 0, 0, _RET_ERRNO | errno.EPERM),
    ]
    return b"".join(struct.pack("=HBBI", *one) for one in instructions)


def forbid() -> None:
    """From now on no thread of this process, nor any process it forks, can start a program.

    Raises :class:`NoExecUnavailable` where the filter cannot be installed."""
    machine = platform.machine()
    if machine not in ARCHITECTURES or not hasattr(os, "fork"):
        raise NoExecUnavailable(f"no filter for this machine ({platform.system()} {machine}); "
                                "grading runs on Linux on x86-64 or aarch64")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise NoExecUnavailable(f"prctl(PR_SET_NO_NEW_PRIVS) failed: "
                                f"{os.strerror(ctypes.get_errno())}")
    code = program(machine)
    buffer = ctypes.create_string_buffer(code, len(code))
    fprog = _SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_char_p))
    seccomp = ARCHITECTURES[machine][3]
    done = libc.syscall(ctypes.c_long(seccomp), ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                        ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if done != 0:
        why = os.strerror(ctypes.get_errno()) if done < 0 else f"thread {done} could not follow"
        raise NoExecUnavailable(f"the kernel refused the seccomp filter ({why})")
