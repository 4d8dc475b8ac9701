"""What the site tests count as a fault of a page (tools.site_screenshots.SitePage.problems).

A file the page asks for and the server does not have is a fault. A request the page itself gave
up is not: a reader who taps a decoder layer and then moves a flipbook's slider before the layer's
drawing has arrived switches the image's src again, and the browser cancels the first download
(net::ERR_ABORTED). On CI's busy two cores that happened inside a phone test; it must not pass
for a missing file, and a missing file must not pass for it.
"""

from pathlib import Path

import pytest

PAGE = """<!doctype html><html><body>
<img id="missing" src="missing.svg"><img id="shown" src="first.svg">
<script>function switchShown() { document.getElementById('shown').src = 'second.svg'; }</script>
</body></html>
"""
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>'


@pytest.mark.browser
def test_a_missing_file_is_a_problem_and_a_download_the_page_switched_away_from_is_not(
        tmp_path: Path):
    from test_browser import _require_browser

    from tools import screenshots
    from tools import site_screenshots as shots

    _require_browser()
    (tmp_path / "index.html").write_text(PAGE, encoding="utf-8")
    for name in ("first.svg", "second.svg"):
        (tmp_path / name).write_text(SVG, encoding="utf-8")
    held = []
    with shots.serve(tmp_path) as base, screenshots.Browser() as browser:
        tab = shots.SitePage(browser, base)
        try:
            # first.svg is held back (as a slow network would) until the page has switched away
            tab.page.route("**/first.svg", lambda route: held.append(route))
            tab.page.goto(base + "index.html", wait_until="domcontentloaded")
            while not held:
                tab.page.wait_for_timeout(20)
            tab.page.evaluate("switchShown()")
            tab.page.wait_for_function("() => { const i = document.getElementById('shown');"
                                       " return i.complete && i.naturalWidth > 0; }")
            while not tab.cancelled:
                tab.page.wait_for_timeout(20)
            assert tab.cancelled == [base + "first.svg"]
            problems = tab.problems()
            assert any(p == f"failed to load: {base}missing.svg (HTTP 404)" for p in problems), \
                problems
            assert not any("first.svg" in p or "second.svg" in p for p in problems), problems
        finally:
            tab.close()
