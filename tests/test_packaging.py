"""The install story: one dependency set, one repository URL, a working `make` setup."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import convs2s
from convs2s import badges

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# conda-forge names that differ from PyPI names
CONDA_TO_PIP = {"pytorch": "torch"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_version_is_exposed():
    assert re.fullmatch(r"\d+\.\d+\.\d+", convs2s.__version__)


def test_environment_yml_matches_pyproject():
    """environment.yml (conda) must list exactly pyproject's runtime + dev dependencies."""
    project = PYPROJECT["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["dev"]
    wanted = {_name(r): r for r in requirements}
    lines = (ROOT / "environment.yml").read_text().splitlines()
    conda = {}
    in_deps = False
    for line in lines:
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        m = re.match(r"^  - (\S.*)$", line)
        if in_deps and m and not m.group(1).startswith(("python", "pip")):
            req = m.group(1).strip()
            name = _name(req)
            conda[CONDA_TO_PIP.get(name, name)] = req
    assert set(conda) == set(wanted), (
        f"only in environment.yml: {sorted(set(conda) - set(wanted))}; "
        f"only in pyproject.toml: {sorted(set(wanted) - set(conda))}"
    )
    for name, req in wanted.items():
        pin = req[len(name):].strip()
        conda_pin = conda[name].split(None, 1)[0][len(_name(conda[name])):].strip()
        assert pin == conda_pin, f"{name}: pyproject says {pin!r}, environment.yml {conda_pin!r}"
    assert "-e .[dev]" in "\n".join(lines)


def test_makefile_installs_the_local_torch_pin_first():
    makefile = (ROOT / "Makefile").read_text()
    assert "torch==2.13.0" in makefile
    assert re.search(r"pip install -q -e \"\.\[dev\]\"", makefile)


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "CONVS2S_DATA_DIR" in ci
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme


def test_repository_url_is_a_github_repo():
    owner, repo = badges.parse_repository(PYPROJECT["project"]["urls"]["Repository"])
    assert owner and repo


def test_parse_repository_rejects_other_urls():
    with pytest.raises(ValueError, match="not of the form https://github.com/OWNER/REPO"):
        badges.parse_repository("https://gitlab.com/a/b")


def test_rewrite_text_points_everything_at_the_fork():
    old = (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        "(https://colab.research.google.com/github/old/course/blob/main/notebooks/01_x.ipynb)\n"
        '%pip install -q "convs2s @ git+https://github.com/old/course"\n'
    )
    new = badges.rewrite_text(old, "https://github.com/teacher/fork")
    assert "old/course" not in new
    assert "github/teacher/fork/blob/main/notebooks/01_x.ipynb" in new
    assert "convs2s @ git+https://github.com/teacher/fork" in new
    assert badges.rewrite_text(new, "https://github.com/teacher/fork") == new


def test_every_colab_link_uses_the_pyproject_url():
    """What `make badges` guarantees: nothing in README or notebooks points elsewhere."""
    url = PYPROJECT["project"]["urls"]["Repository"]
    files = [ROOT / "README.md", *sorted((ROOT / "notebooks").glob("*.ipynb"))]
    for path in files:
        text = path.read_text()
        assert badges.rewrite_text(text, url) == text, f"{path.name}: run `make badges`"


def test_badges_cli_on_a_copy(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="x"\n[project.urls]\nRepository = "https://github.com/me/mine"\n'
    )
    (tmp_path / "README.md").write_text(badges.colab_badge("https://github.com/a/b", "00.ipynb"))
    out = subprocess.run(
        [sys.executable, "-m", "convs2s.badges", "--root", str(tmp_path)],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "1 file(s) changed" in out
    assert "github/me/mine/blob/main/notebooks/00.ipynb" in (tmp_path / "README.md").read_text()
