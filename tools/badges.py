"""Keep every "Open in Colab" link pointing at one repository URL.

The URL lives in one place, ``[project.urls] Repository`` in ``pyproject.toml``. An instructor
who forks the course changes that line and runs ``make badges`` (``python -m tools.badges``):
every Colab badge in ``README.md`` and ``notebooks/*.ipynb``, and every Colab setup cell's
``pip install git+...`` line, is rewritten to the fork.

Files are replaced atomically and keep their mode (``convs2s.system.atomic_files``); a notebook
is rewritten string by string and written back with a JSON writer, so no ``--branch`` can break
its JSON.

``--branch`` takes what ``git check-ref-format --branch`` accepts (anything else is refused in one
line, before any file is read). In a link the branch is percent-encoded (its slashes kept), so
no character of a branch name can end a Markdown link or an HTML attribute early; the matcher
finds every link this tool writes, slashes included, so a later run can point them elsewhere.
"""

from __future__ import annotations

import json
import re
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from convs2s.system.arguments import OneLineParser, cut
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.signals import run_command

COLAB_BADGE_SVG = "https://colab.research.google.com/assets/colab-badge.svg"

# What a branch name becomes in a link (link_branch): letters, digits, "_.-~", "/" and "%XX".
_LINK_BRANCH = r"[A-Za-z0-9_.~%/-]+"
# A Colab link to a notebook on GitHub: .../github/OWNER/REPO/blob/BRANCH/notebooks/...; BRANCH
# is everything up to the last "/notebooks/" (a branch name may hold slashes), or, in a link to
# something outside notebooks/, one path segment.
_COLAB_LINK = re.compile(
    r"https://colab\.research\.google\.com/github/[^/\s\"')]+/[^/\s\"')]+/blob/"
    rf"(?:{_LINK_BRANCH}(?=/notebooks/)|[^/\s\"')]+)/"
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


# Characters git refuses in any ref name (besides control characters and DEL).
_NOT_IN_REFS = frozenset(" ~^:?*[\\")


def branch_problem(name: str) -> str | None:
    """Why git would refuse ``name`` as a branch name (the rules of ``git check-ref-format
    --branch``), or None. Whitespace and other unprintable characters are refused too."""
    if not name:
        return "it is empty"
    if name.startswith("-"):
        return "it starts with '-'"
    if name == "HEAD":
        return "HEAD names the current commit"
    odd = sorted({c for c in name if c in _NOT_IN_REFS or c.isspace() or not c.isprintable()})
    if odd:
        return f"it contains {' and '.join(repr(c) for c in odd)}"
    for part in ("..", "@{", "//"):
        if part in name:
            return f"it contains {part!r}"
    if name.startswith("/") or name.endswith(("/", ".")):
        return f"it starts or ends with {'/' if '/' in (name[0], name[-1]) else '.'!r}"
    for part in name.split("/"):
        if part.startswith(".") or part.endswith(".lock"):
            return f"its part {part!r} starts with '.' or ends with '.lock'"
    return None


def link_branch(branch: str) -> str:
    """``branch`` as it stands in a link: percent-encoded, its slashes kept (``fix)x`` ->
    ``fix%29x``), so that no character of it ends a Markdown link or an HTML attribute."""
    return urllib.parse.quote(branch, safe="/")


def colab_url(repo_url: str, notebook: str, branch: str = "main") -> str:
    """The Colab address that opens ``notebooks/<notebook>`` of the repository."""
    owner, repo = parse_repository(repo_url)
    return (f"https://colab.research.google.com/github/{owner}/{repo}/blob/"
            f"{link_branch(branch)}/notebooks/{notebook}")


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
    link = f"https://colab.research.google.com/github/{owner}/{repo}/blob/{link_branch(branch)}/"
    spec = install_spec(repo_url)
    text = _COLAB_LINK.sub(lambda _m: link, text)
    return _GIT_INSTALL.sub(lambda _m: spec, text)


def read_repository_url(pyproject: Path) -> str:
    """``[project.urls] Repository`` from a pyproject.toml."""
    import tomllib

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{pyproject} is not readable TOML ({' '.join(str(e).split())})"
                         ) from None
    except FileNotFoundError:
        raise ValueError(f"{pyproject} does not exist: run this from the repository's top "
                         "folder (where pyproject.toml is)") from None
    try:
        return data["project"]["urls"]["Repository"]
    except KeyError as e:
        raise ValueError(f"{pyproject} has no [project.urls] Repository entry") from e


def _rewrite_strings(obj: Any, repo_url: str, branch: str) -> Any:
    """Every string inside a notebook's JSON (cell sources, outputs, metadata) rewritten."""
    if isinstance(obj, str):
        return rewrite_text(obj, repo_url, branch)
    if isinstance(obj, list):
        return [_rewrite_strings(x, repo_url, branch) for x in obj]
    if isinstance(obj, dict):
        return {k: _rewrite_strings(v, repo_url, branch) for k, v in obj.items()}
    return obj


def notebook_json(nb: dict) -> str:
    """A notebook as nbformat writes it (1-space indent, sorted keys, a final newline)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def rewrite_notebook(text: str, repo_url: str, branch: str = "main") -> str:
    """A notebook's JSON text with every Colab link and install line pointing at ``repo_url``;
    ``text`` itself when nothing changes. Raises ValueError for text that is not JSON."""
    nb = json.loads(text)
    new = _rewrite_strings(nb, repo_url, branch)
    return text if new == nb else notebook_json(new)


def rewrite_tree(root: Path, branch: str = "main") -> list[Path]:
    """Rewrite README.md and notebooks/**/*.ipynb under ``root``; returns the files changed.

    Every file is read and rewritten in memory first, so a file that is not valid JSON stops
    the run before anything is written. ValueError for a branch git would refuse."""
    problem = branch_problem(branch)
    if problem:
        raise ValueError(f"--branch {branch!r} is not a branch name git accepts: {problem} "
                         "(see `git check-ref-format --branch`)")
    url = read_repository_url(root / "pyproject.toml")
    changes = []
    files = [root / "README.md", *sorted((root / "notebooks").glob("**/*.ipynb"))]
    for path in files:
        if not path.exists() or ".ipynb_checkpoints" in path.parts:
            continue
        old = path.read_text(encoding="utf-8")
        if path.suffix == ".ipynb":
            try:
                new = rewrite_notebook(old, url, branch)
            except ValueError as e:
                raise ValueError(f"{path} is not a valid notebook (JSON): {e}") from None
        else:
            new = rewrite_text(old, url, branch)
        if new != old:
            changes.append((path, new))
    for path, new in changes:
        write_text_atomic(path, new)  # keeps the file's mode
    return [path for path, _ in changes]


def _root_problem(root: Path) -> str | None:
    """Why ``--root`` is no repository's root (one line naming it), or None."""
    fix = "give the repository's root, the folder that holds pyproject.toml"
    if not root.exists():
        return f"--root {root}: no such folder; {fix}"
    if not root.is_dir():
        return f"--root {root} is a file, not a folder; {fix}"
    if not (root / "pyproject.toml").is_file():
        return f"--root {root} has no pyproject.toml, so it is no repository's root; {fix}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository's root")
    parser.add_argument("--branch", default="main",
                        help="the branch the links open (default: main); a name git accepts")
    args = parser.parse_args(argv)
    problem = _root_problem(args.root)
    if problem:
        print(f"error: {cut(problem)}", file=sys.stderr)
        return 2
    try:
        changed = rewrite_tree(args.root, args.branch)
        url = read_repository_url(args.root / "pyproject.toml")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Colab links now point at {url} ({len(changed)} file(s) changed)")
    for path in changed:
        print(f"  {path.relative_to(args.root)}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback."""
    return run_command(lambda: main(argv), ": each file is replaced whole (old or new, never "
                       "half-written); run it again")


if __name__ == "__main__":
    sys.exit(cli())
