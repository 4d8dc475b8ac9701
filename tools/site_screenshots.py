"""Screenshots of two pages of the course's website for the README (``make site-images``).

``python -m tools.site_screenshots --site build/site --out images`` serves a built site (``make
site``) on a free localhost port and captures, in headless Chromium (``tools.screenshots``'s
browser), the landing page and an exercise of notebook 01 with its solution folded, each at
1280 x 900 and on a 375 x 812 phone, in the light theme and in the dark one (a reader whose
system prefers it): ``images/site_home.png``, ``images/site_exercise.png``,
``images/site_home_phone.png`` and ``images/site_exercise_phone.png``, and the same names
ending in ``_dark``.
``tests/site_and_tools/test_site.py`` uses the same server and the same offline browser page to
test the site.

Pages get nothing from other sites: every request that leaves localhost is refused and
recorded (:attr:`SitePage.external`), so a page that needs the network shows it.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from convs2s.system.arguments import OneLineParser
from convs2s.system.signals import run_command
from tools import screenshots

VIEWPORT = {"width": 1280, "height": 900}
#: A phone's window (the site tests' too).
PHONE = {"width": 375, "height": 812}
#: (file written into --out, page of the site, the heading to scroll to the top or None,
#: the window's size, the system's colour scheme the page follows)
SHOTS = tuple(
    (f"{stem}{'_dark' if scheme == 'dark' else ''}.png", page, heading, size, scheme)
    for scheme in ("light", "dark")
    for stem, page, heading, size in (
        ("site_home", "index.html", r"^The notebooks", VIEWPORT),
        ("site_exercise", "01_glu_and_padding.html", r"^Exercise 1\b", VIEWPORT),
        ("site_home_phone", "index.html", None, PHONE),
        ("site_exercise_phone", "01_glu_and_padding.html", r"^Exercise 1\b", PHONE)))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve the folder ``site`` on 127.0.0.1 at a free port; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class SitePage:
    """One browser tab on the served site; records console errors and outside requests."""

    def __init__(self, browser: screenshots.Browser, base: str):
        self.base = base
        self.context = browser.browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        self.context.set_default_timeout(screenshots.ACTION_TIMEOUT_MS)
        self.external: list[str] = []
        self.console_errors: list[str] = []
        self.failed: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(
            f"{self.page.url}: {m.text}"))
        self.page.on("pageerror", lambda e: self.console_errors.append(f"{self.page.url}: {e}"))
        self.cancelled: list[str] = []
        self.page.on("requestfailed", self._request_failed)
        self.page.on("response", lambda r: r.status >= 400 and self.failed.append(
            f"{r.url} (HTTP {r.status})"))

    def _request_failed(self, request) -> None:
        # A request the page itself gave up (net::ERR_ABORTED: an image whose src was switched
        # again before it arrived, as a reader moving a slider does) is no fault; a file that is
        # missing answers HTTP 404 (the response handler), another site is refused in _route.
        if request.failure == "net::ERR_ABORTED":
            self.cancelled.append(request.url)
        else:
            self.failed.append(f"{request.url} ({request.failure})")

    def _route(self, route) -> None:
        if route.request.url.startswith(self.base):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def open(self, path: str) -> None:
        """Go to ``path`` of the site and wait until it is loaded, fonts and maths included."""
        self.page.goto(self.base + path, wait_until="load")
        self.wait_typeset()

    def wait_typeset(self) -> None:
        """Wait until the fonts are in and MathJax (where the page has it) has typeset."""
        self.page.wait_for_function("""async () => {
          await document.fonts.ready;
          const mj = window.MathJax;
          if (document.querySelector('script[src*="mathjax"]')) {
            if (!mj || !mj.startup || !mj.startup.promise) return false;
            await mj.startup.promise;
          }
          return true;
        }""")

    def problems(self) -> list[str]:
        """Everything that went wrong in this tab so far, as messages."""
        return ([f"console: {e}" for e in self.console_errors]
                + [f"failed to load: {f}" for f in self.failed]
                + [f"request to another site: {u}" for u in self.external])

    def close(self) -> None:
        self.context.close()


def shoot(browser: screenshots.Browser, base: str, log=print) -> dict[str, bytes]:
    """The README's screenshots of the site served at ``base``: {file name: PNG}."""
    shots: dict[str, bytes] = {}
    for name, path, heading, viewport, scheme in SHOTS:
        tab = SitePage(browser, base)
        try:
            tab.page.emulate_media(color_scheme=scheme)
            tab.page.set_viewport_size(viewport)
            tab.open(path)
            if heading:
                tab.page.locator("h1, h2, h3", has_text=re.compile(heading)).first.evaluate(
                    "e => e.scrollIntoView({block: 'start'})")
                # two animation frames: the scrolled page is laid out and painted
                tab.page.wait_for_function("() => new Promise(r => requestAnimationFrame("
                                           "() => requestAnimationFrame(() => r(true))))")
            problems = tab.problems()
            if problems:
                raise RuntimeError(f"{path}: " + "; ".join(problems))
            theme = tab.page.evaluate("document.documentElement.dataset.theme")
            if theme != scheme:
                raise RuntimeError(f"{path}: the page is in the {theme} theme, not the "
                                   f"{scheme} one the system asks for")
            shots[name] = tab.page.screenshot(animations="disabled")
            log(f"captured {path} -> {name}")
        finally:
            tab.close()
    return shots


def capture(site: Path, log=print) -> dict[str, bytes]:
    """Serve the built ``site`` and take the README's screenshots of it: {file name: PNG}."""
    with serve(site) as base, screenshots.Browser() as browser:
        return shoot(browser, base, log)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m tools.site_screenshots",
        description="Screenshot two pages of the built course website (make site) for the "
                    "README, at desktop and phone widths, in headless Chromium.")
    parser.add_argument("--site", default="build/site", help="the built site (make site)")
    parser.add_argument("--out", default="images", help="folder for the PNGs (default: images)")
    args = parser.parse_args(argv)
    site, out = Path(args.site), Path(args.out)
    problem = screenshots._out_problem(out) or screenshots.browser_unavailable()
    if not problem and not (site / "index.html").is_file():
        problem = f"{site} holds no built site (no index.html): run `make site` first"
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    shots = capture(site)
    out.mkdir(parents=True, exist_ok=True)  # only now: an interrupted run leaves no folder
    for name, png in shots.items():  # only now, with every screenshot taken
        screenshots.write_atomically(out / name, png)
        print(f"wrote {out / name}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback (the images are written only once all are taken, each replaced whole)."""
    return run_command(lambda: main(argv), ": each image is the old or the new one, never "
                       "half-written; run it again")


if __name__ == "__main__":
    sys.exit(cli())
