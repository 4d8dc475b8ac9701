"""`make lab` really serves JupyterLab: start it on a free port with a token, fetch /lab, stop."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_serves_jupyterlab(tmp_path):
    if not (ROOT / ".venv" / ".convs2s-installed").exists():
        pytest.skip("run `make test` (or `make install`) first: make lab needs the installed .venv")
    port, token = _free_port(), "convs2s-test-token"
    env = dict(os.environ, JUPYTER_TOKEN=token, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"PORT={port}", "LAB_ARGS=--no-browser --ip=127.0.0.1"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    body = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/lab?token={token}"
                with urllib.request.urlopen(url, timeout=5) as r:
                    assert r.status == 200
                    body = r.read().decode()
                break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        assert body is not None, "JupyterLab did not answer on /lab within 90 s"
        assert "JupyterLab" in body
        # a wrong token must not get in
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=wrong", timeout=5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        log = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
        if body is None:
            print(log[-3000:])
