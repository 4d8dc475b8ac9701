"""What the tests that need the grading sandbox share: one mark, which skips them where no
sandbox can start, except in CI (``CI`` set), where that is an error: a sandbox test that skips
proves nothing. Imported as ``from sandbox_support import needs_sandbox``."""

from __future__ import annotations

import os

import pytest

from convs2s.system import sandbox

#: Why no sandbox starts here (one line), or None.
WHY = sandbox.unavailable()
if WHY is not None and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the sandbox tests, but no sandbox starts here: {WHY}")

#: Put on a test, or as a module's ``pytestmark``.
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=WHY or "")
