"""The course website, built once per ``make test``: the tests check the site ``make site`` has
just built instead of building their own copies (one per pytest-xdist worker).

``make test`` runs ``make site``, whose build also writes its record (``python -m tools.site
--record build/site.json``: the pages, the digests of the notebooks it read, Sphinx's
warnings), then the unit tests with ``CONVS2S_TEST_SITE_RECORD`` pointing at that record. The
``built`` fixture (conftest.py) reads it (:func:`recorded`) and checks that the site is still
the one of the notebooks as they are. ``make unit`` alone, or plain ``pytest``, sets nothing:
``built`` builds the site into a temporary folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

RECORD_VARIABLE = "CONVS2S_TEST_SITE_RECORD"


def recorded(notebooks: Path):
    """The :class:`tools.site.BuildResult` ``make test``'s site build recorded, None where make
    set no record; an ``AssertionError`` if the site is not that of ``notebooks`` as they are."""
    from tools import site

    record = os.environ.get(RECORD_VARIABLE)
    if not record:
        return None
    record = Path(__file__).resolve().parents[1] / record  # relative: to the repository
    result = site.BuildResult.from_record(json.loads(record.read_text()))
    assert (result.out / site.MARKER).is_file(), f"no site in {result.out}: run make site"
    now = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
           for p in site.course_notebooks(notebooks)}
    assert result.staged.digests == now, (
        f"the site in {result.out} was built from other notebooks than those in {notebooks}: "
        "run make test again (it builds the site first)")
    return result
