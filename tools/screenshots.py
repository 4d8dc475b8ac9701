"""Use the course's widgets as a learner would: a real JupyterLab in a real (headless) browser.

Kernel-side tests cannot see a widget that fails in the browser ("Error displaying widget", a
missing JupyterLab extension that leaves only ``interactive(children=...)`` text, a figure that
never redraws). This module drives the real thing: it starts JupyterLab on a free localhost port
with a token, opens a notebook in headless Chromium through Playwright, runs all cells from the
*Run* menu, finds a widget by its controls' labels (as the package declares them:
``convs2s.course.widgets``) and moves them.

``tests/site_and_tools/test_browser.py`` uses it to check the widgets of notebooks 01, 03 and
06, and

    python -m tools.screenshots --out images/        (``make images``, from the repository root)

saves a PNG screenshot of each of those widgets for the README. Both work on a temporary copy
of the notebooks, so the stored outputs in ``notebooks/`` are never touched, and give the lab
its own state: a fresh runs folder (``CONVS2S_RUNS_DIR``, so notebook 06 translates with the
course's shipped model whatever earlier runs left in ``notebooks/runs/``), and its own Jupyter,
IPython and matplotlib settings. Nothing waits for a fixed time: every step waits for a
condition (the kernel idle, the widget's figure loaded, its box unchanged over two reads), so
the tools work on a busy machine.

Needs the ``playwright`` Python package (a dev dependency) and a Chromium binary: Debian's
``/usr/bin/chromium`` (``apt-get install chromium``), or any Chromium/Chrome named by
``CONVS2S_CHROMIUM``. Playwright's own browser download is not used.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from convs2s.system.arguments import OneLineParser
from convs2s.system.signals import run_command

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
VIEWPORT = {"width": 1280, "height": 1000}
# How long one browser action (a click, a key press) may take: long enough for a machine whose
# every core is busy. A limit, never a wait: each action returns as soon as it is done.
ACTION_TIMEOUT_MS = 180_000

# What a learner must never see in a widget's place.
WIDGET_ERROR_TEXT = "Error displaying widget"
# JupyterLab's plain-text fallback for a widget whose front end did not load.
_TEXT_FALLBACK = re.compile(r"^\s*(interactive|VBox|HBox|IntSlider|Dropdown|Text)\(")


def chromium_path() -> Path:
    """The browser to drive: ``CONVS2S_CHROMIUM`` when set, else Debian's /usr/bin/chromium."""
    return Path(os.environ.get("CONVS2S_CHROMIUM", "").strip() or DEFAULT_CHROMIUM)


def browser_unavailable() -> str | None:
    """Why the browser checks cannot run here (a message saying how to enable them), or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return ("browser tests need the playwright Python package: `make install` "
                "(or pip install -e '.[dev]')")
    path = chromium_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        return (f"browser tests need Chromium at {path}: install it with "
                "`sudo apt-get install chromium` (Debian/Ubuntu), or point CONVS2S_CHROMIUM at "
                "a Chromium or Chrome binary, then rerun")
    return None


# --------------------------------------------------------------------------------------------
# The widgets under test
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WidgetSpec:
    """A declared notebook widget (``convs2s.course.widgets``) to screenshot: its notebook and
    its controls' labels are the declaration's, read when used."""

    widget: str  # the declared widget's name: "dependency-explorer"
    image: str  # screenshot file name

    @property
    def declaration(self):
        from convs2s.course.widgets import declared

        return declared(self.widget)

    @property
    def notebook(self) -> str:
        return f"{self.declaration.notebook}.ipynb"

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels of its controls, all of which its box holds."""
        return self.declaration.labels

    @property
    def box(self) -> str:
        """CSS class of the widget's outer box: an ``interactive`` from the package's builder,
        or the box the notebook's own cell lays out (notebook 06's translator)."""
        return ".widget-vbox" if self.declaration.built_by_notebook else ".widget-interact"


#: The widgets ``make images`` screenshots, by the names the command line and the tests use.
WIDGETS: dict[str, WidgetSpec] = {
    "padding": WidgetSpec("dependency-explorer", "widget_01_padding.png"),
    "decoder": WidgetSpec("decoder-explorer", "widget_03_decoder.png"),
    "attention": WidgetSpec("attention-by-epoch", "widget_05_attention.png"),
    "translator": WidgetSpec("translator", "widget_06_translator.png"),
}


def label(widget: str, control: str) -> str:
    """The label of the control ``control`` (its argument's name) of the screenshotted widget
    ``widget`` (a key of :data:`WIDGETS`), as the package declares it."""
    return WIDGETS[widget].declaration.control(control).label


def copy_notebooks(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Copy the notebooks folder without training runs or checkpoints; returns ``dst``.

    Running all cells in the browser re-executes the notebooks, and JupyterLab autosaves: the
    copy keeps the repository's stored outputs untouched. ``runs/`` stays behind so notebook 06
    behaves as on a fresh clone (it trains the quick subword preset itself).
    """
    dst = Path(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(
        "runs", ".ipynb_checkpoints", "__pycache__"))
    return dst


# --------------------------------------------------------------------------------------------
# JupyterLab
# --------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_settings(settings_dir: Path) -> None:
    """User settings for a quiet, predictable lab.

    No news/update toasts over the widgets; and every cell kept in the page (windowing off):
    JupyterLab 4 otherwise detaches cells scrolled out of view, so a widget's box moves under
    the screenshot while the notebook scrolls to it.
    """
    settings = {
        ("apputils-extension", "notification"): {
            "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
        ("notebook-extension", "tracker"): {"windowingMode": "none"},
    }
    for (extension, plugin), values in settings.items():
        path = settings_dir / "@jupyterlab" / extension / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))


def new_token() -> str:
    """A JupyterLab token nobody can guess: 32 random bytes from :mod:`secrets`."""
    return secrets.token_urlsafe(32)


class JupyterLab:
    """JupyterLab from this Python's environment on a free localhost port, with a token.

    The same start as ``make lab`` (``--allow-root`` when root, the token from
    ``JUPYTER_TOKEN``), with the lab's config, data, runtime, settings and workspace folders
    under ``work_dir`` so a learner's own JupyterLab settings or kernels cannot change what runs.
    Kernels inherit ``env`` on top of this process's environment, minus ``MPLBACKEND`` (the
    notebooks need the inline backend to show figures).

    The lab's state is its own: training runs go to ``work_dir/runs`` (``CONVS2S_RUNS_DIR``,
    empty at the start, so a checkpoint a learner's earlier run left in ``notebooks/runs/``
    changes nothing), matplotlib reads no user configuration (``MPLCONFIGDIR``), and a
    relative ``CONVS2S_DATA_DIR`` is made absolute here, before the kernels run elsewhere.
    The token is random (``secrets``), never derived from the pid or port.
    """

    def __init__(self, notebook_dir: str | os.PathLike, work_dir: str | os.PathLike, *,
                 env: dict[str, str] | None = None, start_timeout: float = 300.0):
        self.notebook_dir = Path(notebook_dir)
        self.work_dir = Path(work_dir)
        self.extra_env = dict(env or {})
        self.start_timeout = start_timeout
        self.port = free_port()
        self.token = new_token()
        self.proc: subprocess.Popen | None = None
        self.log_path = self.work_dir / "jupyterlab.log"
        self.runs_dir = Path(self.extra_env.get("CONVS2S_RUNS_DIR") or self.work_dir / "runs")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    @property
    def state_dirs(self) -> dict[str, Path]:
        """The lab's own folders for Jupyter's, IPython's and matplotlib's state."""
        return {name: self.work_dir / name for name in
                ("config", "data", "runtime", "settings", "workspaces", "ipython", "mpl")}

    def environment(self) -> dict[str, str]:
        """The environment the lab (and so every kernel) runs with; see the class docstring."""
        dirs = self.state_dirs
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)
        env.pop("CONVS2S_CHECKPOINT", None)  # notebook 06's model: only what ``env`` names
        data_dir = env.get("CONVS2S_DATA_DIR", "").strip()
        if data_dir:
            env["CONVS2S_DATA_DIR"] = str(Path(data_dir).expanduser().resolve())
        env["CONVS2S_RUNS_DIR"] = str(self.runs_dir)
        env.update(self.extra_env)
        env.update(
            MPLCONFIGDIR=str(dirs["mpl"]),
            JUPYTER_TOKEN=self.token,
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
            JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
            IPYTHONDIR=str(dirs["ipython"]),
        )
        return env

    def start(self) -> JupyterLab:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for d in self.state_dirs.values():
            d.mkdir(exist_ok=True)
        self.runs_dir.mkdir(exist_ok=True)
        _write_settings(self.state_dirs["settings"])
        env = self.environment()
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
               f"--port={self.port}", f"--notebook-dir={self.notebook_dir}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # as `make lab`: containers and CI run as root
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, cwd=self.notebook_dir, env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("lab"), timeout=5) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)  # poll again: the server is still starting
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer on {self.base}/lab within "
                           f"{self.start_timeout:.0f} s:\n{self.log_tail()}")

    def _api(self, method: str, path: str):
        req = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """Stop every kernel the lab started (a closed browser tab leaves its kernel running)."""
        for session in self._api("GET", "api/sessions") or []:
            with contextlib.suppress(urllib.error.URLError):
                self._api("DELETE", f"api/sessions/{session['id']}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
            self.shutdown_kernels()
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def __enter__(self) -> JupyterLab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------------------------
# The browser
# --------------------------------------------------------------------------------------------


class Browser:
    """Headless Chromium (``chromium_path()``) driven by Playwright.

    Several may be open at once in one process (a test worker holds the site's browser for its
    whole run while a test file opens its own): Playwright's synchronous API allows one driver
    per thread, so they share it; the last to close stops it."""

    _driver = None  # the process's Playwright, while any Browser is open
    _users = 0

    def __init__(self):
        self.browser = None

    def __enter__(self) -> Browser:
        from playwright.sync_api import sync_playwright

        if Browser._driver is None:
            Browser._driver = sync_playwright().start()
        Browser._users += 1
        try:
            self.browser = Browser._driver.chromium.launch(
                executable_path=str(chromium_path()), headless=True, args=list(CHROMIUM_FLAGS))
        except Exception:
            self._release()
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
        finally:
            self._release()

    @staticmethod
    def _release() -> None:
        Browser._users -= 1
        if Browser._users == 0 and Browser._driver is not None:
            driver, Browser._driver = Browser._driver, None
            driver.stop()

    @contextlib.contextmanager
    def notebook(self, lab: JupyterLab, name: str) -> Iterator[NotebookPage]:
        """Open ``name`` in a fresh browser tab; on leaving, close it and stop its kernel."""
        context = self.browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        context.set_default_timeout(ACTION_TIMEOUT_MS)
        page = context.new_page()
        nb = NotebookPage(page, name)
        try:
            nb.open(lab)
            yield nb
        finally:
            context.close()
            with contextlib.suppress(urllib.error.URLError, OSError, ValueError):
                lab.shutdown_kernels()


def clip_around(box: dict, margin: int) -> dict:
    """The screenshot clip for ``box`` and ``margin`` pixels around it, on whole pixels.

    A layout can put a widget at a fractional position; a clip on whole pixels makes the
    capture the same whichever way the browser rounds.
    """
    x, y = max(math.floor(box["x"] - margin), 0), max(math.floor(box["y"] - margin), 0)
    right = math.ceil(box["x"] + box["width"] + margin)
    bottom = math.ceil(box["y"] + box["height"] + margin)
    return {"x": x, "y": y, "width": right - x, "height": bottom - y}


def _poll(check: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """Call ``check`` until it returns something truthy; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


_WORKSPACES = itertools.count(1)

# The state of a notebook's cells, read in the page: prompts, stale outputs, tracebacks. A
# cell whose input is hidden (an exercise's collapsed solution) shows no prompt: "hidden".
_CELL_STATE_JS = """() => {
  const cells = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')];
  const prompts = cells.map(c => {
    if (c.querySelector('.jp-InputPlaceholder')) return 'hidden';
    const p = c.querySelector('.jp-InputArea-prompt');
    return p ? p.textContent.trim() : '';
  });
  const status = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const errors = [...document.querySelectorAll('.jp-OutputArea-output')]
    .map(o => o.textContent)
    .filter(t => t.includes('Traceback (most recent call last)'))
    .map(t => t.slice(-1500));
  return {
    prompts,
    status: status ? status.getAttribute('data-status') : null,
    stale: document.querySelectorAll('[data-convs2s-stale]').length,
    errors,
  };
}"""


class NotebookPage:
    """One notebook open in JupyterLab: run it, find its widgets, use them, check for errors."""

    def __init__(self, page, name: str):
        self.page = page
        self.name = name
        self.lab: JupyterLab | None = None
        self.console_errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("pageerror", lambda e: self.console_errors.append(str(e)))

    # -- opening and running -------------------------------------------------------------

    def open(self, lab: JupyterLab, timeout: float = 300.0) -> None:
        # A workspace of its own: JupyterLab would otherwise reopen (and start kernels for)
        # the notebooks an earlier tab had open.
        workspace = f"convs2s-{next(_WORKSPACES)}"
        self.lab = lab
        self.page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{self.name}"),
                       timeout=timeout * 1000)
        self.page.locator(".jp-Notebook .jp-CodeCell").first.wait_for(timeout=timeout * 1000)
        _poll(self.kernel_ready, timeout, f"the kernel of {self.name} to start and connect")

    def kernel_ready(self) -> bool:
        """The notebook's kernel exists, is idle, and this page is connected to it.

        The page's own indicator alone is not enough: it reads "idle" for a moment before
        the session has a kernel, and Run All Cells then asks which kernel to start (a dialog
        that blocks every later click).
        """
        if self.state()["status"] != "idle":
            return False
        try:
            sessions = self.lab._api("GET", "api/sessions") or []
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return any(s.get("name") == Path(self.name).name and s.get("kernel")
                   and s["kernel"].get("execution_state") == "idle"
                   and s["kernel"].get("connections", 0) > 0 for s in sessions)

    def state(self) -> dict:
        return self.page.evaluate(_CELL_STATE_JS)

    def wait_idle(self, timeout: float = 300.0, what: str = "the kernel to go idle") -> None:
        _poll(lambda: self.state()["status"] == "idle", timeout, what)

    def run_all(self, timeout: float = 1200.0) -> float:
        """Run > Run All Cells, as a learner would; wait until every cell ran. Returns seconds.

        Raises AssertionError with the traceback when a cell fails, or when cells still show
        the outputs stored in the file (they never ran).
        """
        # Mark the stored outputs: after the run, none of them may be left.
        marked = self.page.evaluate("""() => {
            const stored = document.querySelectorAll('.jp-CodeCell .jp-OutputArea-child');
            stored.forEach(e => e.setAttribute('data-convs2s-stale', '1'));
            return stored.length;
        }""")
        t0 = time.monotonic()
        self._click_run_all(marked)

        def finished():
            s = self.state()
            if s["errors"]:
                return s
            return s if s["status"] == "idle" and "[*]:" not in s["prompts"] else None

        s = _poll(finished, timeout, f"Run All Cells to finish in {self.name}", interval=0.5)
        if s["errors"]:
            raise AssertionError(f"a cell of {self.name} failed in JupyterLab:\n"
                                 + "\n---\n".join(s["errors"]))
        not_run = [i for i, p in enumerate(s["prompts"])
                   if p != "hidden" and not re.fullmatch(r"\[\d+\]:", p)]
        assert not not_run, f"{self.name}: code cells {not_run} did not run ({s['prompts']})"
        assert s["stale"] == 0, f"{self.name}: {s['stale']} stored outputs were not replaced"
        return time.monotonic() - t0

    def _click_run_all(self, marked: int, attempts: int = 3, timeout: float = 120.0) -> None:
        """Run > Run All Cells, then wait until the run has visibly started.

        Started means a cell shows ``[*]`` (the front end marks every queued cell at once) or,
        for a run faster than one poll, every stored output has been replaced. The kernel's
        busy status alone is no sign: a kernel is busy with other requests too. A click that
        did not take (the menu item still disabled while the lab settles) is retried.
        """
        def started():
            s = self.state()
            return "[*]:" in s["prompts"] or (marked > 0 and s["stale"] == 0)

        for attempt in range(1, attempts + 1):
            self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            label = self.page.locator(".lm-Menu-itemLabel",
                                      has_text=re.compile(r"^Run All Cells$"))
            self.page.locator(".lm-Menu-item:not(.lm-mod-disabled)", has=label).click()
            try:
                _poll(lambda: started() or self._accept_kernel_dialog(), timeout,
                      f"Run All Cells to start in {self.name}")
                _poll(started, timeout, f"Run All Cells to start in {self.name}")
                return
            except TimeoutError:
                if attempt == attempts:
                    raise
                self.page.keyboard.press("Escape")  # close a menu left open, then retry

    def _accept_kernel_dialog(self) -> bool:
        """If JupyterLab asks which kernel to start, answer as a learner would: the default."""
        dialog = self.page.locator(".jp-Dialog", has_text="Select Kernel")
        if dialog.count() == 0:
            return False
        dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
        return True

    # -- widgets ---------------------------------------------------------------------------

    def widget(self, spec: WidgetSpec, timeout: float = 120.0):
        """The widget's outer box: the ``spec.box`` element holding all of ``spec.labels``."""
        loc = self.page.locator(spec.box)
        for label in spec.labels:
            loc = loc.filter(has=self._label(label))
        loc = loc.last  # the innermost match comes last in document order
        loc.wait_for(state="visible", timeout=timeout * 1000)
        return loc

    def _label(self, label: str):
        return self.page.locator(".widget-label", has_text=re.compile(f"^{re.escape(label)}$"))

    def control(self, widget, label: str):
        """The control row (label + input) whose ``description`` is ``label``."""
        return widget.locator(".widget-inline-hbox", has=self._label(label)).first

    def select(self, widget, label: str, option: str) -> None:
        self.control(widget, label).locator("select").select_option(label=option)

    def selected(self, widget, label: str) -> str:
        return self.control(widget, label).locator("select").evaluate(
            "s => s.options[s.selectedIndex].textContent")

    def nudge_slider(self, widget, label: str, steps: int, *, redraws: bool = True,
                     timeout: float = 300.0) -> None:
        """Move a slider by ``steps`` with the arrow keys on its handle, one step at a time.

        Every key press is a new value the kernel draws; with ``redraws`` each step waits until
        the slider shows its new value and the kernel has drawn the figure for it, so no redraw
        of an earlier step can arrive after this returns (on a busy machine they would).
        """
        handle = self.control(widget, label).locator(".noUi-handle")
        for step in range(abs(steps)):
            before = self.slider_value(widget, label)
            if redraws:
                self.mark_figure(widget)
            handle.focus()
            handle.press("ArrowRight" if steps > 0 else "ArrowLeft")
            _poll(lambda before=before: self.slider_value(widget, label) != before, timeout,
                  f"the slider {label!r} in {self.name} to move")
            if redraws:
                try:
                    self.wait_redrawn(widget, timeout)
                except TimeoutError as err:
                    raise TimeoutError(f"step {step + 1} of {abs(steps)} of {label!r} (from "
                                       f"{before}): {err}") from None

    def slider_value(self, widget, label: str) -> str:
        readout = self.control(widget, label).locator(".widget-readout")
        return (readout.text_content() or "").strip()

    def enter_text(self, widget, label: str, text: str) -> None:
        box = self.control(widget, label).locator("input")
        box.fill(text)
        box.press("Enter")

    def text_value(self, widget, label: str) -> str:
        return self.control(widget, label).locator("input").input_value()

    def figure(self, widget):
        return widget.locator(".widget-output img").last

    def figure_src(self, widget, timeout: float = 180.0) -> str:
        """The ``src`` (a data URL) of the widget's figure, once it has one."""
        img = self.figure(widget)
        img.wait_for(state="visible", timeout=timeout * 1000)
        return img.get_attribute("src") or ""

    def mark_figure(self, widget) -> None:
        """Tag the figure's current <img> node: :meth:`wait_redrawn` waits for a new one."""
        self.figure(widget).evaluate("e => e.setAttribute('data-convs2s-old', '1')")

    def wait_redrawn(self, widget, timeout: float = 300.0) -> str:
        """Wait until the kernel drew the figure anew and went idle; returns the new ``src``.

        A figure counts as redrawn when the <img> tagged by :meth:`mark_figure` is gone and a
        new one is shown (even if its pixels happen to be equal).
        """
        new = widget.locator(".widget-output img:not([data-convs2s-old])")
        try:
            _poll(lambda: new.count() > 0
                  and widget.locator("img[data-convs2s-old]").count() == 0,
                  timeout, f"the widget's figure in {self.name} to redraw")
        except TimeoutError as err:
            raise TimeoutError(f"{err}; the widget shows: {self._describe(widget)}") from None
        self.wait_idle(timeout)
        return self.figure_src(widget)

    def _describe(self, widget) -> str:
        """What the widget shows now (its text, controls and images), for error messages."""
        try:
            return widget.evaluate("""e => JSON.stringify({
              text: e.innerText.slice(-600),
              inputs: [...e.querySelectorAll('input, select')].map(i => i.value),
              readouts: [...e.querySelectorAll('.widget-readout')].map(r => r.textContent),
              images: [...e.querySelectorAll('img')].map(
                  i => (i.hasAttribute('data-convs2s-old') ? 'old ' : 'new ') + i.src.length),
              kernel: document.querySelector('.jp-Notebook-ExecutionIndicator')
                  ?.getAttribute('data-status')})""")
        except Exception as err:  # the page itself may be the problem
            return f"(could not read the widget: {err})"

    def problems(self) -> list[str]:
        """What a learner would see go wrong with the notebook's widgets, as messages."""
        found = self.page.evaluate(
            """([errText]) => {
              const out = [];
              document.querySelectorAll('.jp-OutputArea-output').forEach(o => {
                const t = o.textContent;
                if (t.includes(errText)) out.push('widget error: ' + t.trim().slice(0, 300));
                if (t.trim() === 'Loading widget...') out.push('a widget never loaded');
                if (o.closest('.jupyter-widgets') && t.includes('Traceback (most recent'))
                  out.push('error inside a widget: ' + t.slice(-1500));
              });
              document.querySelectorAll(
                '.jp-OutputArea-output[data-mime-type="text/plain"]').forEach(o => {
                  if (!o.closest('.jupyter-widgets')) out.push('TEXT:' + o.textContent);
              });
              return out;
            }""", [WIDGET_ERROR_TEXT])
        messages = []
        for item in found:
            if item.startswith("TEXT:"):
                if _TEXT_FALLBACK.match(item[5:]):
                    messages.append("a widget is shown as plain text (is the ipywidgets "
                                    f"JupyterLab extension missing?): {item[5:200]}")
            else:
                messages.append(item)
        return messages

    def wait_settled(self, widget, timeout: float = 120.0) -> dict:
        """Wait until the widget's layout is final; returns its bounding box.

        Final means: the kernel is idle, every image in the widget has loaded and decoded,
        the page's fonts are loaded, and the widget's box and its figure's box read the same
        twice in a row, one animation frame apart (a busy machine lays out late: a capture
        taken while the figure still moves shows part of it).
        """
        self.wait_idle(timeout)
        last: list = [None]

        def settled():
            now = widget.evaluate("""async e => {
              await document.fonts.ready;
              await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
              const imgs = [...e.querySelectorAll('img')];
              const loaded = imgs.every(i => i.complete && i.naturalWidth > 0);
              const box = r => [r.x, r.y, r.width, r.height].map(v => Math.round(v * 10));
              return loaded ? JSON.stringify([box(e.getBoundingClientRect()),
                  ...imgs.map(i => box(i.getBoundingClientRect()))]) : null;
            }""")
            stable = now is not None and now == last[0]
            last[0] = now
            return stable
        _poll(settled, timeout, f"the widget's layout in {self.name} to settle", interval=0.1)
        box = widget.bounding_box()
        if box is None:
            raise RuntimeError(f"{self.name}: the widget is not visible")
        return box

    def screenshot(self, widget, margin: int = 10) -> bytes:
        """A PNG of the widget (controls and figure) and ``margin`` pixels of page around it.

        A widget taller than the notebook's scrolling area (the window less JupyterLab's bars)
        gets a taller window first: a clip must lie inside what the page shows. The capture
        waits until the layout has settled (:meth:`wait_settled`).
        """
        self.page.mouse.move(0, 0)
        self.wait_settled(widget)
        # [widget height, height of the nearest scrolling ancestor (or the window)]
        height, room = widget.evaluate("""e => {
          let p = e.parentElement;
          while (p && !['auto', 'scroll'].includes(getComputedStyle(p).overflowY)) {
            p = p.parentElement;
          }
          const room = p ? p.getBoundingClientRect().height : window.innerHeight;
          return [e.getBoundingClientRect().height, Math.min(room, window.innerHeight)];
        }""")
        if height + 4 * margin > room:
            extra = math.ceil(height + 8 * margin - room)
            self.page.set_viewport_size({"width": self.page.viewport_size["width"],
                                         "height": self.page.viewport_size["height"] + extra})
        widget.scroll_into_view_if_needed()
        box = self.wait_settled(widget)  # after the resize and the scroll
        for _ in range(3):  # a clip the window does not fully show is cut: grow it and look again
            clip, size = clip_around(box, margin), self.page.viewport_size
            short = max(clip["y"] + clip["height"] - size["height"], -clip["y"], 0)
            if not short:
                break
            self.page.set_viewport_size({"width": size["width"],
                                         "height": size["height"] + math.ceil(short) + 4 * margin})
            widget.scroll_into_view_if_needed()
            box = self.wait_settled(widget)
        return self.page.screenshot(clip=clip_around(box, margin), animations="disabled")


# --------------------------------------------------------------------------------------------
# Screenshots for the README
# --------------------------------------------------------------------------------------------


def _stage_padding(nb: NotebookPage, w) -> None:
    """Causal padding with k = 3 over 2 layers: the one-sided cone the decoder needs."""
    nb.mark_figure(w)
    nb.select(w, label("padding", "padding"), "causal")
    nb.wait_redrawn(w)


def _stage_decoder(nb: NotebookPage, w) -> None:
    """As the notebook leaves it: causal padding, no look at future tokens."""


def _stage_translator(nb: NotebookPage, w) -> None:
    """As the notebook leaves it: its example sentence, beam size 5."""


def _stage_attention(nb: NotebookPage, w) -> None:
    """As the notebook leaves it: the last recorded epoch."""


STAGES: dict[str, Callable[[NotebookPage, object], None]] = {
    "padding": _stage_padding, "decoder": _stage_decoder, "attention": _stage_attention,
    "translator": _stage_translator,
}


def capture(names: list[str], notebooks: Path, work_dir: Path,
            log: Callable[[str], None] = print,
            checkpoint: Path | None = None) -> dict[str, bytes]:
    """Run each named widget's notebook in JupyterLab and screenshot the widget: {name: PNG}.

    ``checkpoint``: the model notebook 06 translates with (``CONVS2S_CHECKPOINT``, copied into
    ``work_dir``); None: the course's trained model shipped with the package, which the
    notebook uses when it finds no run of notebook 05 (``convs2s.pretrained``)."""
    shots: dict[str, bytes] = {}
    copy = copy_notebooks(notebooks, work_dir / "notebooks")
    env = {}
    if checkpoint is not None:
        model = work_dir / "model" / Path(checkpoint).name
        model.parent.mkdir()
        shutil.copyfile(checkpoint, model)
        env["CONVS2S_CHECKPOINT"] = str(model)
    with JupyterLab(copy, work_dir / "lab", env=env) as lab, Browser() as browser:
        for name in names:
            spec = WIDGETS[name]
            with browser.notebook(lab, spec.notebook) as nb:
                seconds = nb.run_all()
                w = nb.widget(spec)
                nb.figure_src(w)
                STAGES[name](nb, w)
                problems = nb.problems()
                if problems:
                    raise RuntimeError(f"{spec.notebook}: " + "; ".join(problems))
                shots[name] = nb.screenshot(w)
                log(f"{spec.notebook}: ran in {seconds:.0f} s, captured {spec.image}")
    return shots


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` over ``path`` atomically (the package's writer: the file's mode kept)."""
    from convs2s.system.atomic_files import atomic_write

    atomic_write(path, lambda f: f.write(data))


def _checkpoint_problem(checkpoint: Path) -> str | None:
    """Why ``--checkpoint`` is no checkpoint notebook 06 can translate with (one line naming it),
    or None: read and checked as the notebook will (``Checkpoint.load``), before JupyterLab
    starts. Creates nothing."""
    from convs2s.system.arguments import shown

    example = "name a checkpoint such as notebooks/runs/05_cpu_subword/final.pt"
    if not checkpoint.is_file():
        what = "a folder" if checkpoint.is_dir() else "not a file"
        return f"--checkpoint {shown(str(checkpoint))} is {what}: {example}"
    try:
        with open(checkpoint, "rb") as f:
            f.read(1)
    except OSError as e:
        return (f"--checkpoint {shown(str(checkpoint))} cannot be read "
                f"({e.strerror or e}): {example}")
    from convs2s.run.checkpoint import Checkpoint, CheckpointError

    try:
        Checkpoint.load(checkpoint)
    except (CheckpointError, OSError, ValueError) as e:
        return (f"--checkpoint {shown(str(checkpoint))} is no checkpoint notebook 06 can use "
                f"({' '.join(str(e).split()).rstrip('.')}); {example}")
    return None


def _out_problem(out: Path) -> str | None:
    """Why the PNGs cannot go into the folder ``out`` (one line), or None. Leaves nothing behind
    (whether it can be written is found by making a file, removed at once)."""
    from convs2s.system.arguments import dangling_link_problem
    from convs2s.system.atomic_files import cannot_write_in

    dangling = dangling_link_problem(out, "--out")
    if dangling:  # never make a folder at a link's missing target
        return dangling
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a folder: give a folder for the PNGs"
    existing = out
    while not existing.exists():  # the folder will be made inside the nearest existing one
        existing = existing.parent
    if not existing.is_dir():
        return f"--out {out} is inside {existing}, which is a file, not a folder"
    why = cannot_write_in(existing)
    if why:
        return f"cannot write into {existing} (for --out {out}: {why}); choose another folder"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m tools.screenshots",
        description="Screenshot the course's widgets (notebooks 01, 03, 06) in JupyterLab in "
                    "headless Chromium, for the README. Set CONVS2S_QUICK=1 for the quick "
                    "models (what `make images` does).")
    parser.add_argument("--out", default="images", help="folder for the PNGs (default: images)")
    parser.add_argument("--notebooks", default="notebooks", help="the course's notebooks folder")
    parser.add_argument("--only", action="append", choices=sorted(WIDGETS),
                        help="capture only this widget (repeatable)")
    parser.add_argument("--checkpoint", default=None,
                        help="the trained model notebook 06's translator uses (e.g. "
                             "notebooks/runs/05_cpu_subword/final.pt); default: the course's "
                             "trained model shipped with the package (convs2s.pretrained)")
    args = parser.parse_args(argv)
    names = args.only or list(WIDGETS)
    notebooks, out = Path(args.notebooks), Path(args.out)
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    # Every mistake is reported before minutes of work: one line, exit status 2.
    problem = (_out_problem(out) or browser_unavailable()
               or (checkpoint is not None and _checkpoint_problem(checkpoint)))
    missing = [WIDGETS[n].notebook for n in names if not (notebooks / WIDGETS[n].notebook).exists()]
    if not problem and missing:
        problem = f"not in {notebooks}: {', '.join(missing)}"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="convs2s-screenshots-") as tmp:
        shots = capture(names, notebooks, Path(tmp), checkpoint=checkpoint)
    # Only now, with every screenshot taken, make --out and replace the old images (each
    # atomically): an interrupted run leaves no folder it made.
    out.mkdir(parents=True, exist_ok=True)
    for name, png in shots.items():
        write_atomically(out / WIDGETS[name].image, png)
        print(f"wrote {out / WIDGETS[name].image}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback."""
    return run_command(lambda: main(argv),
                       ": JupyterLab stopped, no image half-written; run it again")


if __name__ == "__main__":
    sys.exit(cli())
