"""`make lab`: a learner's JupyterLab, served on 127.0.0.1 with a token, without nbgrader.

`make lab` installs the package alone (`pip install -e .`, no extras) into its own environment
(.venv-lab), so a learner sees the course and no instructor tool (nbgrader's menus, formgrader).

How that is tested, and why so: a fresh `make lab` install takes 2 to 8 minutes on a 2-core
machine (7 min 46 s measured on a busy one; it unpacks ~1.5 GB), too slow for every CI run. So
CI runs the cheaper, faithful test: pip resolves exactly what `make lab` would install (the spec
read from `make -n lab`, a dry run from nothing), and the JupyterLab extensions installed here
are mapped to the distributions that ship them; the lab shows those whose distribution is in
the resolved set. (Checked against a real fresh install: the same two extensions.) Where
.venv-lab exists its real `jupyter labextension list` is checked too; with CONVS2S_FRESH_LAB=1
a fresh `make lab-install` into a temporary folder is.
"""

import importlib.metadata
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from signal_support import default_signals

ROOT = Path(__file__).resolve().parents[2]
LAB_VENV = ROOT / ".venv-lab"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_install() -> tuple[str, str]:
    """What `make lab` gives pip, read from the Makefile's own commands (`make -n`): the
    local torch pin it installs first, and the package spec."""
    out = subprocess.run(["make", "-n", "lab", "LAB_VENV=/nonexistent/lab"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    pip = r"/nonexistent/lab/bin/python -m pip install -q "
    pins = re.findall(pip + r'"(torch[^"]*)"', out)
    specs = re.findall(pip + r'-e "([^"]*)"', out)
    assert len(pins) == 1 and len(specs) == 1, out
    return pins[0], specs[0]


def labextension_owners() -> dict[str, str]:
    """JupyterLab extension name -> the distribution that installs it (in this environment)."""
    owners = {}
    for dist in importlib.metadata.distributions():
        for f in dist.files or ():
            parts = Path(str(f)).parts
            if "labextensions" in parts and parts[-1] == "package.json":
                i = parts.index("labextensions")
                name = "/".join(parts[i + 1:-1])
                owners[name] = dist.metadata["Name"].lower().replace("_", "-")
    return owners


def listed_extensions(jupyter: Path) -> list[str]:
    """The extension names `jupyter labextension list` prints."""
    proc = subprocess.run([str(jupyter), "labextension", "list"], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, NO_COLOR="1"))
    text = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    return re.findall(r"^\s+(\S+) v\S+ (?:enabled|disabled)", text, re.MULTILINE)


def test_make_lab_installs_the_package_with_only_its_lab_extra():
    """The package, JupyterLab and the widgets' front end (the `lab` extra); no instructor or
    developer tools."""
    assert lab_install()[1] == ".[lab]"


@pytest.mark.slow
def test_the_lab_resolves_to_no_nbgrader(tmp_path):
    """A dry run of `make lab`'s install from nothing, and the extensions it would bring."""
    pin, spec = lab_install()
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    # As the Makefile does: the pin first when a local wheel meets it (else torch comes with
    # the package from the index).
    local = subprocess.run([*pip, "--no-index", "--no-deps", pin], capture_output=True,
                           timeout=300).returncode == 0
    report = tmp_path / "report.json"
    proc = subprocess.run([*pip, "--report", str(report), *([pin] if local else []), spec],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resolved = {item["metadata"]["name"].lower().replace("_", "-")
                for item in json.loads(report.read_text())["install"]}
    assert {"convs2s", "torch", "jupyterlab", "ipywidgets", "ipykernel"} <= resolved
    assert "nbgrader" not in resolved
    owners = labextension_owners()
    here = set(listed_extensions(Path(sys.executable).parent / "jupyter"))
    assert set(owners) >= here, "every listed extension has a known distribution"
    # This (dev) environment shows nbgrader's extension: the test can tell the difference.
    assert any("nbgrader" in name for name in here), sorted(here)
    lab = {name for name in here if owners[name] in resolved}
    assert "@jupyter-widgets/jupyterlab-manager" in lab  # the course's widgets are there
    assert [name for name in lab if "nbgrader" in name] == [], sorted(lab)


def _check_installed_lab(venv: Path) -> None:
    names = listed_extensions(venv / "bin" / "jupyter")
    assert "@jupyter-widgets/jupyterlab-manager" in names, names
    assert [n for n in names if "nbgrader" in n] == [], names
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", "import nbgrader"],
                          capture_output=True, text=True)
    assert proc.returncode != 0, "nbgrader is importable in the learner's environment"


@pytest.mark.slow
def test_installed_lab_lists_no_nbgrader(tmp_path):
    """The real thing: `jupyter labextension list` in the lab's environment."""
    if os.environ.get("CONVS2S_FRESH_LAB") == "1":
        venv = tmp_path / "lab"
        proc = subprocess.run(["make", "lab-install", f"LAB_VENV={venv}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=3600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        _check_installed_lab(venv)
    elif (LAB_VENV / ".convs2s-lab").exists():
        _check_installed_lab(LAB_VENV)
    else:
        pytest.skip("no .venv-lab here (run `make lab`), and CONVS2S_FRESH_LAB=1 not set: a "
                    "fresh lab install takes minutes; the dry-run test above covers CI")


@pytest.mark.slow
def test_make_lab_serves_jupyterlab(tmp_path):
    """`make lab`'s command serves /lab on 127.0.0.1 and refuses a wrong token. It runs with
    .venv-lab when that is installed, else with the test environment (make's -o keeps make
    from installing .venv-lab first)."""
    if (LAB_VENV / ".convs2s-lab").exists():
        venv_args = []
    elif (ROOT / ".venv" / ".convs2s-installed").exists():
        venv_args = ["LAB_VENV=.venv", "-o", ".venv/.convs2s-lab"]
    else:
        pytest.skip("run `make test` (or `make lab`) first: make lab needs an installed venv")
    port, token = _free_port(), "convs2s-test-token"
    env = dict(os.environ, JUPYTER_TOKEN=token, JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    proc = subprocess.Popen(
        ["make", "-s", "lab", f"PORT={port}", "LAB_ARGS=--no-browser --ip=127.0.0.1",
         *venv_args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=default_signals,  # SIGTERM below stops it
    )
    body = None
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/lab?token={token}"
                with urllib.request.urlopen(url, timeout=60) as r:
                    assert r.status == 200
                    body = r.read().decode()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):  # not up yet
                time.sleep(0.5)
        assert body is not None, "JupyterLab did not answer on /lab within 180 s"
        assert "JupyterLab" in body
        # a wrong token must not get in
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=wrong", timeout=60)
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
