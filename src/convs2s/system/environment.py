"""Where the course finds its data, whether it runs in quick mode, and which device it uses.

Three environment variables steer the whole course:

- ``CONVS2S_QUICK=1`` -- quick mode: every notebook runs in seconds to a minute on a laptop CPU
  (small data slice, tiny model, few steps). The code path is the same; only sizes change.
- ``CONVS2S_DATA_DIR`` -- a folder holding the Multi30k files. CI and tests point it at a local
  copy so nothing is downloaded; learners usually leave it unset.
- ``CONVS2S_DEVICE`` -- force a device (``cpu``, ``cuda``, ``cuda:1``, ``mps``) instead of the
  automatic choice.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def quick_mode() -> bool:
    """True when ``CONVS2S_QUICK`` is set to a true value (``1``, ``true``, ``yes``, ``on``)."""
    value = os.environ.get("CONVS2S_QUICK", "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(
        f"CONVS2S_QUICK={value!r} is not understood; set it to 1 (quick mode) or 0 (full mode)."
    )


def data_dir() -> Path:
    """The folder for the Multi30k files.

    ``CONVS2S_DATA_DIR`` wins when set; otherwise the XDG cache,
    ``$XDG_CACHE_HOME/convs2s/multi30k`` (``~/.cache/convs2s/multi30k`` by default).
    The folder is not created here: the loader creates it only when it downloads.
    ``ValueError`` (one line) when ``CONVS2S_DATA_DIR`` is a symbolic link loop.
    """
    env = os.environ.get("CONVS2S_DATA_DIR", "").strip()
    if env:
        path = Path(env).expanduser()
        try:
            return path.resolve(strict=True)
        except (RuntimeError, OSError) as e:  # RuntimeError: a link loop, before Python 3.13
            if isinstance(e, RuntimeError) or e.errno == errno.ELOOP:
                raise ValueError(
                    f"CONVS2S_DATA_DIR={env!r} is a symbolic link loop (following its links "
                    "leads back to one of them); set it to a folder.") from None
        return path.resolve()  # not there yet: the first download creates it
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "convs2s" / "multi30k"


def device(verbose: bool = False):
    """The best available ``torch.device``: CUDA, then Apple's MPS, then the CPU.

    ``CONVS2S_DEVICE`` overrides the choice. With ``verbose=True`` it prints which device was
    picked and why, so a notebook's stored output says where it ran.
    """
    import torch

    forced = os.environ.get("CONVS2S_DEVICE", "").strip()
    if forced:
        try:
            dev = check_device(forced)
        except ValueError as e:
            raise ValueError(f"CONVS2S_DEVICE={forced!r}: {e} Unset CONVS2S_DEVICE, or set it "
                             "to a device this machine has.") from None
        reason = "forced by CONVS2S_DEVICE"
    elif torch.cuda.is_available():
        dev, reason = torch.device("cuda"), f"CUDA GPU: {torch.cuda.get_device_name(0)}"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        dev, reason = torch.device("mps"), "Apple GPU (MPS)"
    else:
        dev, reason = torch.device("cpu"), f"no GPU found; CPU with {os.cpu_count()} cores"
    if verbose:
        print(f"device: {dev} ({reason})")
    return dev


def check_device(device):
    """``device`` as a ``torch.device`` that exists here, else ``ValueError`` with the fix.

    ``None`` picks the best available one (:func:`device`). Catches what torch would otherwise
    report deep inside ``model.to()`` ("Torch not compiled with CUDA enabled"), or after the
    data is loaded.
    """
    import torch

    if device is None:
        return globals()["device"]()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"{device!r} is not a device (use cpu, cuda, cuda:N or mps).") from e
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {str(dev)!r}: CUDA is not available on this machine "
                             "(torch.cuda.is_available() is False); use cpu.")
        n = torch.cuda.device_count()
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"device {str(dev)!r}: this machine has {n} CUDA device(s), "
                             f"cuda:0 to cuda:{n - 1}.")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"device {str(dev)!r}: Apple's MPS is not available on this "
                             "machine; use cpu.")
    elif dev.type != "cpu":
        raise ValueError(f"device {str(dev)!r} is not supported here (use cpu, cuda or mps).")
    return dev


def describe_device(dev=None) -> str:
    """A one-line human description of a device, for stored notebook outputs and results tables."""
    import platform

    import torch

    dev = torch.device(dev) if dev is not None else device()
    if dev.type == "cuda":
        return f"{torch.cuda.get_device_name(dev)} (CUDA {torch.version.cuda})"
    if dev.type == "mps":
        return f"Apple MPS ({platform.machine()})"
    model = cpu_model()
    named = f"CPU ({model})" if model else "CPU"
    return f"{named}, {os.cpu_count()} cores ({platform.machine()})"


def cpu_model(cpuinfo: str | None = None) -> str:
    """The processor's name as the system gives it ("AMD EPYC", "Intel(R) Xeon(R) ..."), or "".

    Results are compared across machines that differ threefold in speed, so a record names the
    machine. Linux lists the name in ``/proc/cpuinfo`` (``model name``); elsewhere
    :func:`platform.processor` may, and where neither does the record says only "CPU".
    """
    import platform

    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return " ".join(value.split())
    if cpuinfo:
        return ""
    name = platform.processor().strip()
    return "" if name in {"", "x86_64", "aarch64", "arm", "i386"} else name
