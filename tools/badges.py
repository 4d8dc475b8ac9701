"""Keep every "Open in Colab" link pointing at one repository URL.

The URL lives in one place, ``[project.urls] Repository`` in ``pyproject.toml``. An instructor
who forks the course changes that line and runs ``make badges`` (``python -m convs2s.badges``):
every Colab badge in ``README.md`` and ``notebooks/*.ipynb``, and every Colab setup cell's
``pip install git+...`` line, is rewritten to the fork.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

COLAB_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"

# A Colab link to a notebook on GitHub: .../github/OWNER/REPO/blob/BRANCH/notebooks/...
_COLAB_LINK = re.compile(
    r"https://colab\.research\.google\.com/github/[^/\s\"')]+/[^/\s\"')]+/blob/[^/\s\"')]+/"
)
# The package install line of the Colab setup cell: convs2s @ git+https://github.com/OWNER/REPO
_GIT_INSTALL = re.compile(r"convs2s @ git\+https://github\.com/[^\s\"'\\]+")


def parse_repository(url: str) -> tuple[str, str]:
    """``https://github.com/OWNER/REPO`` -> ``(OWNER, REPO)``; a clear error for anything else."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url.strip())
    if not m:
        raise ValueError(
            f"Repository URL {url!r} is not of the form https://github.com/OWNER/REPO; "
            "fix [project.urls] Repository in pyproject.toml."
        )
    return m.group(1), m.group(2)


def colab_url(repo_url: str, notebook: str, branch: str = "main") -> str:
    """The Colab address that opens ``notebooks/<notebook>`` of the repository."""
    owner, repo = parse_repository(repo_url)
    return f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/notebooks/{notebook}"


def colab_badge(repo_url: str, notebook: str, branch: str = "main") -> str:
    """Markdown for an "Open in Colab" badge."""
    return f"[![Open In Colab]({COLAB_BADGE_SVG})]({colab_url(repo_url, notebook, branch)})"


def install_spec(repo_url: str) -> str:
    """What the Colab setup cell gives to pip: the package straight from the repository."""
    owner, repo = parse_repository(repo_url)
    return f"convs2s @ git+https://github.com/{owner}/{repo}"


def rewrite_text(text: str, repo_url: str, branch: str = "main") -> str:
    """Point every Colab link and Colab install line in ``text`` at ``repo_url``. Pure."""
    owner, repo = parse_repository(repo_url)
    text = _COLAB_LINK.sub(
        f"https://colab.research.google.com/github/{owner}/{repo}/blob/{branch}/", text
    )
    return _GIT_INSTALL.sub(install_spec(repo_url), text)


def read_repository_url(pyproject: Path) -> str:
    """``[project.urls] Repository`` from a pyproject.toml."""
    import tomllib

    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    try:
        return data["project"]["urls"]["Repository"]
    except KeyError as e:
        raise ValueError(f"{pyproject} has no [project.urls] Repository entry") from e


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def rewrite_tree(root: Path, branch: str = "main") -> list[Path]:
    """Rewrite README.md and notebooks/**/*.ipynb under ``root``; returns the files changed."""
    url = read_repository_url(root / "pyproject.toml")
    changed = []
    files = [root / "README.md", *sorted((root / "notebooks").glob("**/*.ipynb"))]
    for path in files:
        if not path.exists() or ".ipynb_checkpoints" in path.parts:
            continue
        old = path.read_text(encoding="utf-8")
        new = rewrite_text(old, url, branch)
        if new != old:
            _write_atomic(path, new)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository's root")
    parser.add_argument("--branch", default="main")
    args = parser.parse_args(argv)
    changed = rewrite_tree(args.root, args.branch)
    url = read_repository_url(args.root / "pyproject.toml")
    print(f"Colab links now point at {url} ({len(changed)} file(s) changed)")
    for path in changed:
        print(f"  {path.relative_to(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
