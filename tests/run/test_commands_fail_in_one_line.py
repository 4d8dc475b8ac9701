"""``python -m convs2s.translate`` and ``python -m convs2s.evaluate`` as real processes:
closed standard streams, an endless input line, Ctrl-C and SIGTERM (the
family: one line, exit 130 / 143, no traceback). Every wait is on a condition (a line written,
the process gone), with a generous deadline for a busy machine, never a fixed sleep."""

from __future__ import annotations

import gzip
import hashlib
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from signal_support import wait_until_blocked

from convs2s.data import Vocab, make_tokenizer, multi30k_files
from convs2s.model import ConvS2S
from convs2s.run.checkpoint import save_checkpoint, vocab_to_dict

GOOD = ["Ein Hund läuft.", "Eine Katze schläft."]
DEADLINE = 180  # seconds; the interpreter imports torch and spaCy first, on a busy machine

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file descriptors and signals")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from conftest import TINY_PAIRS

    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src = Vocab.build((tok_de(de) for de, _ in TINY_PAIRS), min_freq=1)
    trg = Vocab.build((tok_en(en) for _, en in TINY_PAIRS), min_freq=1)
    torch.manual_seed(0)
    model = ConvS2S(len(src), len(trg), emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=2,
                    max_positions=24, src_pad_idx=src.pad_idx, trg_pad_idx=trg.pad_idx)
    return save_checkpoint(tmp_path_factory.mktemp("run") / "best.pt", {
        "model_config": dict(model.config), "model": model.state_dict(),
        "src_vocab": vocab_to_dict(src), "trg_vocab": vocab_to_dict(trg)})


def _env() -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONUNBUFFERED", None)  # the CLIs must flush what a reader waits for themselves
    return env


def _default_sigint() -> None:
    """In the child: Ctrl-C as in a terminal, even if this test runs as a background job
    (whose SIGINT a shell sets to ignored, which Python then keeps)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # and SIGTERM, were it ignored too


def command(module: str, *args, redirect: str = "") -> list[str]:
    """``python -m convs2s.<module> args``, through ``sh`` when a stream is to be closed
    (``redirect`` such as ``<&-``: ``exec`` starts Python with that descriptor closed)."""
    cmd = [sys.executable, "-m", f"convs2s.{module}", *(str(a) for a in args)]
    return ["sh", "-c", f'exec "$@" {redirect}', "sh", *cmd] if redirect else cmd


def run_together(*runs: tuple[str, list, str]) -> list[subprocess.CompletedProcess]:
    """Run ``(module, args, redirect)`` commands side by side (each spends seconds importing
    torch); their results in the same order."""
    procs = [subprocess.Popen(command(module, *args, redirect=redirect), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
             for module, args, redirect in runs]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=DEADLINE)
            results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    return results


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a failed run (no traceback)."""
    err = proc.stderr.decode().splitlines()
    assert proc.returncode not in (0, None), (proc.returncode, err)
    assert len(err) == 1 and "Traceback" not in proc.stderr.decode(), err
    return err[0]


# ------------------------------------------------------------------------------------------
# closed stdin / stdout
# ------------------------------------------------------------------------------------------


def test_closed_stdin_or_stdout_is_one_line_and_a_nonzero_exit(checkpoint):
    ckpt = ["--checkpoint", checkpoint, "--device", "cpu", "--beam-size", 1]
    no_stdin, no_stdin_dash, args_only, no_stdout, no_stderr = run_together(
        ("translate", ckpt, "<&-"),
        ("translate", [*ckpt, "--input", "-"], "<&-"),
        ("translate", [*ckpt, GOOD[0]], "<&-"),  # sentences as arguments need no stdin
        ("translate", [*ckpt, GOOD[0]], ">&-"),
        ("translate", [*ckpt, GOOD[0], "", GOOD[1]], "2>&-"))
    for proc in (no_stdin, no_stdin_dash):
        assert proc.returncode == 1 and proc.stdout == b""
        assert one_error_line(proc).startswith("error: standard input is closed")
    assert args_only.returncode == 0 and args_only.stderr == b""
    assert len(args_only.stdout.splitlines()) == 1
    assert no_stdout.returncode == 1
    assert one_error_line(no_stdout).startswith("error: standard output is closed")
    # stderr closed: the warning about the empty line goes nowhere, not into the translations
    proc = no_stderr
    lines = proc.stdout.decode().split("\n")
    assert proc.returncode == 0 and len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert not any("warning" in line for line in lines)


# ------------------------------------------------------------------------------------------
# an endless line (/dev/zero) is reported and skipped in bounded memory
# ------------------------------------------------------------------------------------------


def _proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def _bytes_read(pid: int) -> int:
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


@pytest.mark.skipif(not Path("/dev/zero").exists() or not Path("/proc/self/io").exists(),
                    reason="needs /dev/zero and Linux's /proc/<pid>/io")
def test_translate_input_dev_zero_reports_line_1_too_long_in_bounded_memory(checkpoint):
    """/dev/zero is one endless line: it is reported as too long while it is being read, and
    reading on (until killed) does not grow the process (the old reader held it all)."""
    proc = subprocess.Popen(command("translate", "--checkpoint", checkpoint, "--device", "cpu",
                                    "--input", "/dev/zero"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())
    limit_kib = 2 * 1024 * 1024  # 2 GiB: far above the interpreter with torch, far below the RAM
    try:
        err = b""
        deadline = time.monotonic() + DEADLINE
        while b"\n" not in err:
            assert time.monotonic() < deadline, "no report of the long line in time"
            rss = _proc_kib(proc.pid, "VmRSS")
            assert rss < limit_kib, f"{rss} KiB resident: the endless line is held in memory"
            assert proc.poll() is None, proc.stderr.read().decode()
            if select.select([proc.stderr], [], [], 0.1)[0]:
                err += os.read(proc.stderr.fileno(), 4096)
        assert err.decode().startswith("error: line 1: longer than ")
        read_then = _bytes_read(proc.pid)
        while _bytes_read(proc.pid) < read_then + (256 << 20):  # it reads 256 MiB more ...
            assert time.monotonic() < deadline, "the rest of the endless line was not skipped"
            assert proc.poll() is None
            select.select([proc.stderr], [], [], 0.2)
        peak = _proc_kib(proc.pid, "VmHWM")
        assert peak < 1024 * 1024, f"peak {peak} KiB: the line was held in memory"  # ... in < 1 GiB
        out = os.read(proc.stdout.fileno(), 4096) if select.select([proc.stdout], [], [], 0)[0] \
            else b""
        assert out == b"\n"  # the empty output line for line 1, written when it was reported
    finally:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------------------
# the family: Ctrl-C gives one line and 130, SIGTERM one line and 143, no traceback
# ------------------------------------------------------------------------------------------


def _read_until(stream, wanted: bytes, proc: subprocess.Popen) -> bytes:
    """Read ``stream`` until it holds ``wanted`` (or fail when the process ends first)."""
    got = b""
    deadline = time.monotonic() + DEADLINE
    while wanted not in got:
        assert time.monotonic() < deadline, f"{wanted!r} not written in time; got {got!r}"
        if select.select([stream], [], [], 0.5)[0]:
            chunk = os.read(stream.fileno(), 4096)
            assert chunk, f"the process ended (exit {proc.wait()}) before writing {wanted!r}: " \
                          f"{got!r} {proc.stderr.read()!r}"
            got += chunk
    return got


SIGNALS = {"ctrl_c": (signal.SIGINT, 130, "interrupted"),
           "sigterm": (signal.SIGTERM, 143, "stopped by SIGTERM")}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_family_translate_stops_on_ctrl_c_or_sigterm_with_one_line(name, checkpoint):
    sig, code, words = SIGNALS[name]
    proc = subprocess.Popen(command("translate", "--checkpoint", checkpoint, "--device", "cpu",
                                    "--beam-size", 1, "--batch-size", 1),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(), preexec_fn=_default_sigint)
    try:
        proc.stdin.write(f"{GOOD[0]}\n".encode())
        proc.stdin.flush()
        _read_until(proc.stdout, b"\n", proc)  # translated: now it waits for the next line
        wait_until_blocked(proc.pid, "pipe", DEADLINE)  # in the read, not on its way to it
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code
    assert err.decode().splitlines() == [f"{words}."]


def _big_corpus(root: Path) -> dict:
    """Multi30k-named files (de-en) with 24,000 invented training pairs; their checksums."""
    from conftest import TINY_PAIRS

    root.mkdir()
    sizes = {"train": 2000, "val": 1, "test_2016_flickr": 1}
    for stem, times in sizes.items():
        for i, lang in enumerate(("de", "en")):
            text = "".join(f"{pair[i]}\n" for pair in TINY_PAIRS * times)
            (root / f"{stem}.{lang}.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    return {n: hashlib.sha256((root / n).read_bytes()).hexdigest()
            for n in multi30k_files("de", "en")}


@pytest.mark.parametrize("name", list(SIGNALS))
def test_family_evaluate_stops_on_ctrl_c_or_sigterm_with_one_line_and_no_file(name, checkpoint,
                                                                             tmp_path):
    """Evaluation is interrupted during the work: one line, its exit status, no metrics file
    and no temporary file left. (``runpy`` runs the module as ``-m`` does, with the invented
    corpus's checksums in place of Multi30k's.)"""
    sig, code, words = SIGNALS[name]
    sums = _big_corpus(tmp_path / "corpus")
    run_as_m = (f"import runpy, convs2s.data.multi30k as d; d.MULTI30K_SHA256 = {sums!r}; "
                "runpy.run_module('convs2s.evaluate', run_name='__main__', alter_sys=True)")
    folder = tmp_path / "run"
    folder.mkdir()
    ckpt = folder / "best.pt"
    ckpt.write_bytes(checkpoint.read_bytes())
    proc = subprocess.Popen([sys.executable, "-c", run_as_m, "--checkpoint", str(ckpt),
                             "--device", "cpu", "--split", "train",
                             "--data-dir", str(tmp_path / "corpus")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(), preexec_fn=_default_sigint)
    try:
        _read_until(proc.stdout, b"evaluating", proc)  # the work has begun
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=DEADLINE)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == code, err
    assert err.decode().splitlines() == [f"{words}; no metrics written."]
    assert sorted(p.name for p in folder.iterdir()) == ["best.pt"]


MODULES = {"train": "train", "translate": "translate_cli", "evaluate": "evaluate"}


@pytest.mark.parametrize("name", ["train", "translate", "evaluate"])
def test_ctrl_c_while_a_command_imports_is_one_line_and_exit_130(name):
    """Ctrl-C in the seconds torch takes to import: one line, as Ctrl-C later gives. The
    KeyboardInterrupt is raised, deterministically, by an import hook at the command's module."""
    script = textwrap.dedent(f"""
        import runpy, sys

        class CtrlC:
            def find_spec(self, fullname, path=None, target=None):
                if fullname == "convs2s.run.{MODULES[name]}":
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, CtrlC())
        runpy.run_module("convs2s.{name}", run_name="__main__", alter_sys=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_env(), timeout=120)
    assert done.returncode == 130 and done.stderr == "interrupted.\n", done.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("where", ["reading its flags", "counting the model",
                                   "setting up the device"])
def test_a_stop_before_train_starts_is_one_line(sig, where, tmp_path):
    """Between its start and training, `convs2s.train` reads its flags (their checks look at
    the device), counts the model's parameters and sets up the device (seconds on a busy
    machine): Ctrl-C or SIGTERM in any of them gives one line and 130 / 143, nothing made. The
    signal is sent, deterministically, from inside each step."""
    out = tmp_path / "run"
    patched = {"reading its flags": ("train_arguments", "make_parser"),
               "counting the model": ("prepare", "check_model_size"),
               "setting up the device": ("train", "Distributed")}[where]
    script = textwrap.dedent(f"""
        import os, signal, sys
        from convs2s.run import prepare, train, train_arguments

        module = {{"train_arguments": train_arguments, "prepare": prepare,
                   "train": train}}[{patched[0]!r}]

        def stopped_here(*args, **kwargs):
            os.kill(os.getpid(), signal.{sig})
            raise AssertionError("the signal did not stop the command")

        setattr(module, {patched[1]!r}, stopped_here)
        sys.exit(train.main(["--preset", "quick", "--out", {str(out)!r}, "--no-progress"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=_env(), timeout=DEADLINE, preexec_fn=_default_sigint)
    words = "interrupted" if sig == "SIGINT" else "stopped by SIGTERM"
    said = [*done.stdout.splitlines(), *done.stderr.splitlines()]
    assert said == [f"{words} before training started: nothing was trained or saved."], said
    assert done.returncode == 128 + int(getattr(signal, sig))
    assert not out.exists()


@pytest.mark.parametrize("name", ["train", "evaluate", "distill"])
@pytest.mark.parametrize("given", ["missing", "file"])
def test_a_data_dir_that_is_not_a_folder_is_one_line_naming_it(name, given, tmp_path, capsys):
    """A mistyped --data-dir is said to be missing (offline, the download into it failed with
    a long message about the network and CONVS2S_DATA_DIR, which --data-dir overrides)."""
    import importlib

    data = tmp_path / "multi30k"
    if given == "file":
        data.write_text("not a folder")
    main = importlib.import_module({"train": "convs2s.run.train",
                                    "evaluate": "convs2s.run.evaluate",
                                    "distill": "convs2s.run.distill"}[name]).main
    argv = {"train": ["--preset", "quick", "--out", str(tmp_path / "run")],
            "evaluate": ["--pretrained", "de-en", "--split", "valid"],
            "distill": ["--teacher", str(tmp_path / "t.pt"), "--out", str(tmp_path / "d.en")]}
    with pytest.raises(SystemExit) as stop:
        main(["--data-dir", str(data), *argv[name]])  # read first, so it is the one refused
    err = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    said = "does not exist" if given == "missing" else "is a file, not a folder"
    assert "argument --data-dir:" in err[0] and said in err[0], err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if given == "missing" else
                                                          ["multi30k"])


@pytest.mark.parametrize("argv", [
    ["convs2s.evaluate", "--split", "test", "--data-dir", "~nosuchuser_zz/d"],
    ["convs2s.run.distill", "--teacher", "~nosuchuser_zz/t.pt", "--out", "x.en"],
    ["convs2s.train", "--preset", "quick", "--out", "q", "--init-from", "~nosuchuser_zz/a.pt"],
], ids=lambda argv: argv[0])
def test_a_tilde_that_names_no_user_is_one_line(argv, tmp_path):
    """A shell leaves `~nosuchuser/...` as it is; expanding it raised a traceback."""
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True,
                          env=_env(), timeout=DEADLINE, cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "'~nosuchuser_zz' names no user's home folder" in lines[0], lines[0]
    assert list(tmp_path.iterdir()) == []
