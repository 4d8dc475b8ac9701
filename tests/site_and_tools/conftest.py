"""The real course website, built once for the whole test run and shared by the modules that
check it (test_site.py, test_site_flipbooks.py, test_site_translator.py): ``built`` (from
notebooks/ as they are, every network connection refused), ``web`` (served on localhost, one
headless Chromium) and ``tab`` (a fresh page of it)."""

from pathlib import Path

import pytest
from test_browser import _require_browser  # the same skip/require rule as the widget tests

from tools import screenshots, site
from tools import site_screenshots as shots

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    return site.build(out, NOTEBOOKS, ROOT, log=lambda line: None)


@pytest.fixture(scope="session")
def web(built):
    """The built site served on localhost, and one headless Chromium."""
    _require_browser()
    with shots.serve(built.out) as base, screenshots.Browser() as browser:
        yield base, browser


@pytest.fixture
def tab(web):
    base, browser = web
    t = shots.SitePage(browser, base)
    yield t
    t.close()
