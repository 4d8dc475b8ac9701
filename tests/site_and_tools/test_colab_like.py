"""Every notebook runs alone where learners run it: a fresh environment with the package's wheel
and nothing of the repository: Colab, for real.

As on Colab: a new virtual environment outside the repository gets Colab's Jupyter pieces first
(ipykernel, nbclient and the ipywidgets Colab ships, 7.7.1), then the wheel built from this
repository, whose dependencies must leave them as they are. Then each notebook is copied alone
into an empty folder and run top to bottom in quick mode (its setup cell installs nothing outside
Colab: the wheel stands for what it would install). After its last cell, a driver cell moves
every control of every widget the notebook built and checks that each move redrew its figure
with no error: the widgets' Python code under ipywidgets 7.7.1. No notebook may print that a
reference figure is "not yet measured" because it looked for the repository's benchmarks/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from wheel_support import build_wheel

from tools import site

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = site.course_notebooks(ROOT / "notebooks")
COLAB_WIDGETS = "7.7.1"  # what Colab has shipped and rendered for years
TORCH_PIN = "torch==2.13.0"

pytestmark = [pytest.mark.slow]


def _pip(python: Path, *args: str, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> Path:
    """The python of a fresh environment holding Colab's Jupyter pieces and the course's wheel."""
    tmp = tmp_path_factory.mktemp("colab")
    wheel = build_wheel(tmp)
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, timeout=300)
    python = tmp / "venv" / "bin" / "python"
    # the local CPU torch first where there is one (as `make` does): no multi-GB CUDA build
    local = _pip(python, "--no-index", TORCH_PIN)
    if local.returncode != 0:
        assert _pip(python, TORCH_PIN).returncode == 0
    # Colab's classic notebook server (6.5), its widgets and a kernel
    done = _pip(python, f"ipywidgets=={COLAB_WIDGETS}", "notebook<7", "ipykernel", "nbclient",
                "nbformat")
    assert done.returncode == 0, done.stderr[-3000:]
    before = _distributions(python)
    done = _pip(python, str(wheel))
    assert done.returncode == 0, done.stderr[-3000:]
    (tmp / "before.json").write_text(json.dumps(before))
    return python


def _distributions(python: Path) -> dict[str, str]:
    """{name: version} of what the environment holds."""
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print("
                          "json.dumps({d.metadata['Name'].lower(): d.version "
                          "for d in m.distributions()}))"],
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout)


def test_the_wheel_leaves_colabs_jupyter_as_it_was(colab):
    """Installing the package changes none of Colab's Jupyter pieces (ipywidgets stays 7.7.1)
    and adds no JupyterLab or notebook server; it is what is imported, from site-packages."""
    before = json.loads((colab.parents[2] / "before.json").read_text())
    after = _distributions(colab)
    jupyter = {n for n in before if n.startswith(("jupyter", "notebook", "ipywidgets", "ipykernel",
                                                   "widgetsnbextension", "nbclient"))}
    assert {n: after.get(n) for n in jupyter} == {n: before[n] for n in jupyter}
    added = set(after) - set(before)
    assert "convs2s" in added and not {n for n in added if n.startswith(("jupyter", "notebook"))}
    assert after["ipywidgets"] == COLAB_WIDGETS
    where = subprocess.run([str(colab), "-c", "import convs2s; print(convs2s.__file__)"],
                           capture_output=True, text=True, timeout=300, cwd=colab.parents[2],
                           check=True).stdout
    assert "site-packages" in where and str(ROOT) not in where, where


# Run after a notebook's last cell, in its kernel: move every control of every widget, each to
# another value, and count the figures drawn (shown with plt.show(), or given to an Output
# widget as its state) and the errors shown meanwhile.
DRIVER = textwrap.dedent("""
    import json as _json
    import sys as _sys

    import ipywidgets as _w
    import matplotlib.pyplot as _plt
    from IPython import get_ipython as _ip

    _drawn, _errors, _moved = [], [], []
    _show, _shell = _plt.show, _ip()
    _tb = _shell.showtraceback
    _plt.show = lambda *a, **k: (_drawn.append(1), _plt.close("all"))
    _shell.showtraceback = lambda *a, **k: _errors.append(repr(_sys.exc_info()[1]))
    try:
        _all = (_w.widgets.widget._instances if hasattr(_w.widgets.widget, "_instances")
                else _w.Widget.widgets)  # ipywidgets 8, 7
        _controls = [c for c in list(_all.values())
                     if isinstance(c, (_w.IntSlider, _w.FloatSlider, _w.Dropdown, _w.Text))
                     and getattr(c, "description", "")]
        for _o in [o for o in list(_all.values()) if isinstance(o, _w.Output)]:
            # a figure given to an Output as state (analysis.widget_outputs), not plt.show()
            _o.observe(lambda ch: _drawn.extend(
                1 for o in ch["new"] if "image/png" in o.get("data", {})), names="outputs")
        for _c in _controls:
            _before = len(_drawn)
            try:
                if isinstance(_c, _w.Dropdown):
                    _c.index = (_c.index + 1) % len(_c.options)
                elif isinstance(_c, _w.Text):
                    _c.value = "Zwei Hunde laufen über eine Wiese."
                else:
                    _c.value = _c.max if _c.value != _c.max else _c.min
            except Exception as _e:  # an observer that raised
                _errors.append(repr(_e))
            _moved.append([_c.description, len(_drawn) > _before])
    finally:
        _plt.show, _shell.showtraceback = _show, _tb
    print("WIDGETS " + _json.dumps({"version": _w.__version__, "moved": _moved,
                                     "errors": _errors}))
""")

RUNNER = textwrap.dedent("""
    import asyncio, json, sys
    from datetime import datetime, timezone
    from queue import Empty

    import nbformat
    from nbclient import NotebookClient
    from nbclient.util import ensure_async


    # nbclient sometimes never receives a widget cell's execute_reply on the shell channel (the
    # kernel is idle, iopub said idle: jupyter/nbclient#312), and then waits out its timeout.
    # Poll the shell channel, and accept a cell whose iopub output has ended: 'error' if it
    # printed an error, else 'ok'. The rest is nbclient's own run.
    async def poll_for_reply(self, msg_id, cell, timeout, task_poll_output_msg,
                             task_poll_kernel_alive):
        waited = 0.0
        while True:
            try:
                msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=5))
            except Empty:
                waited += 5
                if task_poll_output_msg.done() or (timeout is not None and waited > timeout):
                    task_poll_kernel_alive.cancel()
                    if not task_poll_output_msg.done():
                        raise TimeoutError(f"cell {cell.get('execution_count')}: no reply")
                    errors = [o for o in cell.outputs if o.get("output_type") == "error"]
                    content = ({"status": "error", "ename": errors[0].ename,
                                "evalue": errors[0].evalue, "traceback": errors[0].traceback}
                               if errors else {"status": "ok"})
                    return {"parent_header": {"msg_id": msg_id}, "content": content,
                            "header": {"date": datetime.now(timezone.utc)}}
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                await asyncio.wait_for(task_poll_output_msg, self.iopub_timeout)
                task_poll_kernel_alive.cancel()
                return msg


    NotebookClient._async_poll_for_reply = poll_for_reply

    path, driver = sys.argv[1], sys.argv[2]
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": "."}})
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        nb.cells.append(nbformat.v4.new_code_cell(open(driver).read()))
        client.execute_cell(nb.cells[-1], len(nb.cells) - 1)
    nbformat.write(nb, path)
""")


def _text(nb: dict) -> str:
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            out.append("".join(o.get("text", "")))
            out.append("".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_runs_alone_from_the_wheel_and_its_widgets_respond(colab, notebook,
                                                                         tmp_path):
    folder = tmp_path / "content"  # Colab's working folder: the notebook and nothing else
    folder.mkdir()
    shutil.copy(notebook, folder / notebook.name)
    (tmp_path / "runner.py").write_text(RUNNER)
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONVS2S_", "PYTHON",
                                                                      "JUPYTER", "VIRTUAL_ENV"))}
    env.update(CONVS2S_QUICK="1", MPLBACKEND="Agg", HOME=str(tmp_path),
               PATH=f"{colab.parent}{os.pathsep}{env.get('PATH', '')}")
    if os.environ.get("CONVS2S_DATA_DIR"):  # Colab downloads the corpus; CI has it on disk
        env["CONVS2S_DATA_DIR"] = os.environ["CONVS2S_DATA_DIR"]
    done = subprocess.run([str(colab), str(tmp_path / "runner.py"), notebook.name,
                           str(tmp_path / "driver.py")], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"{notebook.name}:\n{done.stderr[-4000:]}"
    ran = json.loads((folder / notebook.name).read_text(encoding="utf-8"))
    text = _text(ran)
    # only the GPU figures are not yet measured (no GPU has run them): a CPU one that says so
    # looked for a file the package does not ship
    unmeasured = [line for line in text.splitlines() if "not yet measured" in line]
    assert all("gpu" in line.lower() for line in unmeasured), unmeasured
    assert "benchmarks/" not in text and "is in the course repository" not in text
    report = json.loads(text.split("WIDGETS ", 1)[1].splitlines()[0])
    assert report["version"] == COLAB_WIDGETS
    assert report["errors"] == [], report
    # a notebook that builds widgets had some of them found and moved: an empty list would
    # pass the line after it without moving anything
    code = "".join("".join(c["source"]) for c in json.loads(notebook.read_text(
        encoding="utf-8"))["cells"] if c["cell_type"] == "code")
    if re.search(r"widgets\.(build|IntSlider|FloatSlider|Dropdown|Text)\(", code):
        assert report["moved"], f"{notebook.name} builds widgets, but none was found to move"
    assert all(redrawn for _, redrawn in report["moved"]), report
