"""make test's workers start with the slowest test files (tests/conftest.py's SLOWEST_FIRST), so
that no long file runs alone at the end: every file named there exists, the collection puts
them first in that order (make hands them to pytest-xdist in that order: test_packaging.py)."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import SLOWEST_FIRST, TESTS, pytest_collection_modifyitems

ROOT = TESTS.parent


def test_every_slow_file_named_exists():
    missing = [name for name in SLOWEST_FIRST if not (TESTS / name).is_file()]
    assert missing == [], f"renamed or removed (update tests/conftest.py): {missing}"


def test_the_collection_puts_the_slowest_files_first_and_keeps_the_others_order():
    others = ["model/test_loss.py", "data/test_subword.py", "course/test_gates.py"]
    items = [SimpleNamespace(path=TESTS / name, name=f"{name}::{i}")
             for name in [others[0], *reversed(SLOWEST_FIRST), others[1], others[2]]
             for i in range(2)]
    items.append(SimpleNamespace(path=ROOT / "notebooks" / "01.ipynb", name="notebook"))
    pytest_collection_modifyitems(None, items)
    names = [item.name for item in items]
    expected = [f"{name}::{i}" for name in [*SLOWEST_FIRST, *others] for i in range(2)]
    assert names == [*expected, "notebook"]
