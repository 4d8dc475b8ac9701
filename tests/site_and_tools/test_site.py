"""The course as a website: `make site` (tools/site/) and its pages in Chromium.

The first tests check, without Sphinx, what a notebook's site copy and the landing page are
made of (on small notebooks written here). The others build the real site once for the module
(from notebooks/ as they are, with every network connection refused) and check it: the files it
holds, then every page in headless Chromium (tools.site_screenshots serves it on localhost and
refuses any request to another site), at 1280 px and at a phone's 375 px: no console error,
every image loaded and wholly visible, with alt text that is no file name, no page wider than
the window, every maths formula typeset and no raw TeX in the text, the sidebar menus on a
phone, no internal link broken, search, the folded solutions, the widgets' pictures,
previous/next links and the links to each notebook's source and Colab.

The browser tests need Debian's /usr/bin/chromium (or CONVS2S_CHROMIUM) and playwright, and skip
without them, saying how to enable them; CI sets CONVS2S_REQUIRE_BROWSER=1, which turns that
skip into a failure (as tests/site_and_tools/test_browser.py).
"""

import base64
import html
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest
import shared_site
from signal_support import default_signals

from tools import badges, site
from tools import site_screenshots as shots
from tools.screenshots import WIDGETS
from tools.site.png import notebook_with_smaller_figures

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REPO = badges.read_repository_url(ROOT / "pyproject.toml").rstrip("/")
PNG_1x1 = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000005000170d8b1f70000000049454e44ae426082")).decode()


# --------------------------------------------------------------------------------------------
# Small notebooks
# --------------------------------------------------------------------------------------------

FIRST_CELL = """# 01 · Gated linear units and padding

[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/a/b/blob/main/notebooks/01_glu_and_padding.ipynb)

Some text.

**What you will learn**
- what a GLU computes, $v([A\\,B]) = A \\otimes \\sigma(B)$, and why
  it doubles the channels;
- how to pad.

**Prerequisites:** notebook 00.

**Estimated time:** 40 minutes of reading
and 30 for the exercises.
"""


def _md(text, **meta):
    return {"cell_type": "markdown", "id": f"m{abs(hash(text)) % 10**8}", "metadata": meta,
            "source": text}


def _code(text, outputs=(), **meta):
    return {"cell_type": "code", "id": f"c{abs(hash(text)) % 10**8}", "metadata": meta,
            "execution_count": 1, "outputs": list(outputs), "source": text}


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


HIDDEN = {"cellView": "form", "jupyter": {"source_hidden": True}}


def _widget_state(labels, figure=PNG_1x1):
    """A saved widget state: an interactive box with controls labelled ``labels`` and an
    output area holding ``figure``."""
    state = {"out": {"model_name": "OutputModel", "state": {"outputs": [
        {"output_type": "display_data", "data": {"image/png": figure, "text/plain": "fig"}}]}}}
    children = []
    for i, label in enumerate(labels):
        state[f"w{i}"] = {"model_name": "IntSliderModel", "state": {"description": label,
                                                                    "style": "IPY_MODEL_s"}}
        children.append(f"IPY_MODEL_w{i}")
    state["s"] = {"model_name": "SliderStyleModel", "state": {}}
    state["box"] = {"model_name": "VBoxModel",
                    "state": {"children": [*children, "IPY_MODEL_out"]}}
    return {site.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}


def _widget_output():
    return {"output_type": "display_data", "metadata": {}, "data": {
        site.WIDGET_VIEW: {"model_id": "box", "version_major": 2, "version_minor": 0},
        "text/plain": "interactive(children=(IntSlider(value=3, description='padding'"}}


def _notebook(cells, widgets=None):
    meta = {"kernelspec": {"name": "python3"}}
    if widgets:
        meta["widgets"] = widgets
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def _lesson(name="01_glu_and_padding"):
    return site.Lesson(name, "01 · Gated linear units and padding", "45 minutes.", ("x",))


def test_lesson_is_read_from_the_first_cell(tmp_path):
    lesson = site.read_lesson(tmp_path / "01_glu_and_padding.ipynb",
                              _notebook([_md(FIRST_CELL), _md("# Another title")]))
    assert lesson.name == "01_glu_and_padding"
    assert lesson.heading == "01 · Gated linear units and padding"
    assert lesson.time == "40 minutes of reading and 30 for the exercises."
    assert lesson.learn == ("what a GLU computes, $v([A\\,B]) = A \\otimes \\sigma(B)$, and why "
                            "it doubles the channels;", "how to pad.")


def test_a_notebook_without_its_header_is_refused_in_one_line(tmp_path):
    path = tmp_path / "03_x.ipynb"
    path.write_text(json.dumps(_notebook([_md("# 03 · X\n\n**What you will learn**\n- a\n")])))
    with pytest.raises(site.SiteError) as err:
        site.read_lesson(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert "Estimated time" in message and "What you will learn" not in message.split(";")[0]
    path.write_text("{not json")
    with pytest.raises(site.SiteError, match="cannot read it as a notebook"):
        site.read_lesson(path)


def test_every_course_notebook_has_what_the_landing_page_lists():
    lessons = [site.read_lesson(p) for p in site.course_notebooks(NOTEBOOKS)]
    assert [lesson.name[:2] for lesson in lessons] == [f"{i:02d}" for i in range(len(lessons))]
    for lesson in lessons:
        assert lesson.heading.startswith(lesson.name[:2]) and lesson.time and lesson.learn


def test_a_measurement_that_answers_an_exercise_is_folded_with_its_output_kept():
    figure = {"output_type": "display_data", "metadata": {},
              "data": {"image/png": PNG_1x1, "text/plain": "fig"}}
    cells = [_md(FIRST_CELL),
             _code("measure()", [_stream("measured 4.3e+03"), figure],
                   convs2s={"role": "reveal"}, jupyter={"outputs_hidden": True}),
             _code("plain()", [_stream("plain")])]
    got = site.site_notebook(_notebook(cells), _lesson(), REPO, set(), hints={}).notebook["cells"]
    reveal, plain = got[1], got[2]
    assert "hide-output" in reveal["metadata"]["tags"]
    assert reveal["metadata"]["mystnb"]["code_prompt_show"] == "Show the measurement"
    assert reveal["source"] == "measure()" and len(reveal["outputs"]) == 2, "kept, only folded"
    assert "tags" not in plain["metadata"]


def test_solutions_are_folded_without_outputs_and_the_rest_is_kept():
    cells = [
        _md(FIRST_CELL),
        _md("### Exercise 1 (implement): f", convs2s={"exercise": "f", "role": "task"}),
        _code("def f():\n    raise NotImplementedError()", convs2s={"role": "answer"}),
        _code("checks.f(f)", [_stream("… f: not implemented yet")],
              convs2s={"exercise": "f", "role": "check"}),
        _code("#@title Solution\ndef f():\n    return 1\n\nchecks.f(f)", [_stream("✓ f")],
              convs2s={"exercise": "f", "role": "solution"}, **HIDDEN),
        # notebook 00's form: no convs2s metadata, only the title line, or only the metadata
        _code("#@title Solution\nx = 2", [_stream("2")]),
        _code("y = 3", [_stream("3")], **HIDDEN),
        _md("The GLU keeps it.", convs2s={"exercise": "e", "role": "solution"}),
        _md("<details><summary>Solution</summary>\n\nBecause.\n\n</details>",
            convs2s={"exercise": "g", "role": "solution"}),
    ]
    nb = _notebook(cells)
    before = json.dumps(nb)
    out = site.site_notebook(nb, _lesson(), REPO, set(), hints={"f": ("NUDGE", "CLOSER")})
    assert json.dumps(nb) == before, "the notebook itself is not changed"
    assert out.solutions == 5
    got = out.notebook["cells"]
    help_cell = got.pop(4)  # what the site adds under the check: asserted below
    for i in (4, 5, 6):
        assert "hide-input" in got[i]["metadata"]["tags"], i
        assert got[i]["metadata"]["mystnb"]["code_prompt_show"] == "Show the solution"
        assert got[i]["outputs"] == [], "no solution output on the site"
        assert not got[i]["source"].startswith("#@title")
    assert got[4]["source"].startswith("def f():")
    assert got[3]["outputs"] == [], "a check cell shows no output where nothing runs"
    assert got[3]["source"] == "checks.f(f)" and "tags" not in got[3]["metadata"]
    assert "tags" not in got[2]["metadata"], "the task's answer cell stays visible"
    assert got[7]["source"].startswith("<details><summary>Solution</summary>")
    assert "The GLU keeps it." in got[7]["source"]
    assert got[8]["source"] == cells[8]["source"]
    text = help_cell["source"]
    assert help_cell["cell_type"] == "markdown" and "run the cell above" in text
    assert badges.colab_url(REPO, "01_glu_and_padding.ipynb") in text and "make lab" in text
    assert text.index("<summary>Hint</summary>") < text.index("NUDGE") < \
        text.index("<summary>A closer hint</summary>") < text.index("CLOSER")


def test_every_checked_exercise_has_both_hints_for_the_site():
    """The site shows the package's hints under each check: every check cell of the course
    names an exercise that has a nudge and a closer hint."""
    hints = site.course_hints()
    for path in site.course_notebooks(NOTEBOOKS):
        for cell in site.load_notebook(path)["cells"]:
            exercise = site.check_role(cell)
            if exercise is not None:
                assert exercise in hints and all(hints[exercise]), f"{path.name}: {exercise}"


def test_the_first_cell_gets_source_links_instead_of_the_badge():
    out = site.site_notebook(_notebook([_md(FIRST_CELL)]), _lesson(), REPO, set())
    text = out.notebook["cells"][0]["source"]
    assert "colab-badge.svg" not in text and "![" not in text
    title, links = text.split("\n")[0], text.split("\n")[2]
    assert title == "# 01 · Gated linear units and padding"
    assert f"[Open in Colab]({badges.colab_url(REPO, '01_glu_and_padding.ipynb')})" in links
    assert f"({REPO}/blob/main/notebooks/01_glu_and_padding.ipynb)" in links
    assert "{download}`Download 01_glu_and_padding.ipynb <_notebooks/01_glu_and_padding.ipynb>`" \
        in links
    assert "**Estimated time:** 40 minutes" in text


def _raw_widget_cell(labels) -> str:
    """A cell that lays out its own widget with ipywidgets (as notebook 06's translator)."""
    made = [f"c{i} = widgets.IntSlider(description={label!r})" for i, label in enumerate(labels)]
    return "\n".join(["import ipywidgets as widgets", *made,
                      f"display(widgets.VBox([{', '.join(f'c{i}' for i in range(len(made)))}]))"])


def test_a_widget_becomes_its_screenshot_with_where_to_run_it():
    # the translator, when the site has not its files (translator_bytes): its screenshot
    spec = WIDGETS["translator"]
    nb = _notebook([_md(FIRST_CELL), _code(_raw_widget_cell(spec.labels), [_widget_output()]),
                    _md("After.")], widgets=_widget_state(spec.labels))
    out = site.site_notebook(nb, _lesson(Path(spec.notebook).stem), REPO, {spec.image})
    cells = out.notebook["cells"]
    assert out.widgets == 1 and out.images == [spec.image]
    assert "widgets" not in out.notebook["metadata"], "no widget state: no widget JavaScript"
    assert cells[1]["outputs"] == []
    note = cells[2]["source"]
    picture = re.search(r"!\[([^\]]+)\]\(images/" + re.escape(spec.image) + r"\)", note)
    assert picture, note
    assert "JupyterLab" in note and badges.colab_url(REPO, spec.notebook) in note
    assert "not interactive here" in note
    assert note.index("JupyterLab") < picture.start(), "the note comes before the picture"
    alt = picture.group(1).replace("\\", "")
    assert all(label in alt for label in spec.labels), alt
    assert ":class: widget-static" in note and cells[3]["source"] == "After."


def test_a_widget_without_a_screenshot_shows_its_saved_figure():
    nb = _notebook([_md(FIRST_CELL), _code("widgets.interactive(draw)", [_widget_output()])],
                   widgets=_widget_state(["channels d", "kernel k"]))
    # (notebook 04: in notebook 08 these controls are computed live in the page, tested below)
    out = site.site_notebook(nb, _lesson("04_multi_step_attention"), REPO,
                             {"widget_01_padding.png"})
    cells = out.notebook["cells"]
    assert out.widgets == 1 and out.images == []
    # the note, then the code whose output is the figure
    assert "saved" in cells[1]["source"] and "JupyterLab" in cells[1]["source"]
    assert "not interactive here" in cells[1]["source"]
    assert [o["data"].get("image/png") for o in cells[2]["outputs"]] == [PNG_1x1]
    assert cells[2]["metadata"]["mystnb"]["image"]["alt"] == site.widget_alt(
        "01 · Gated linear units and padding", {"channels d", "kernel k"})
    assert site.WIDGET_VIEW not in json.dumps(cells)
    # a screenshot is found by the declared widget's name
    assert site.screenshot_for("dependency-explorer") == WIDGETS["padding"].image
    assert site.screenshot_for("conv-costs") is None


def test_offline_markdown_links_instead_of_remote_images_and_out_of_site_paths():
    text = ("[![Open In Colab](https://x.org/badge.svg)](https://colab.example/nb) "
            "![plot](https://x.org/p.png) [code](../src/convs2s/model.py#L3) "
            "[next](02_x.ipynb) ![local](images/a.png)")
    out = site.offline_markdown(text, REPO, "notebooks")
    assert "](https://x.org" not in out.replace("[plot](https://x.org/p.png)", "")
    assert "[Open In Colab](https://colab.example/nb)" in out
    assert "[plot](https://x.org/p.png)" in out
    assert f"[code]({REPO}/blob/main/src/convs2s/model.py#L3)" in out
    assert "[next](02_x.ipynb)" in out and "![local](images/a.png)" in out


def test_landing_page_lists_the_notebooks_in_order():
    readme = ("# The Course\n\n[![Open In Colab](https://b.svg)](https://c)\n\nIntro **text**."
              "\n\n## Two commands\n\nnot on the landing page\n")
    lessons = [site.Lesson("00_a", "00 · A", "15 minutes.", ("one", "two")),
               site.Lesson("01_b", "01 · B", "1 hour.", ("three",))]
    page = site.landing_page(readme, lessons, REPO)
    assert page.startswith("# The Course\n")
    assert "Intro **text**." in page and "not on the landing page" not in page
    assert "b.svg" not in page
    assert 'class="site-figure site-figure-architecture"' in page  # figures.py
    assert page.index("### [00 · A](00_a.ipynb)") < page.index("### [01 · B](01_b.ipynb)")
    assert "**Estimated time:** 1 hour." in page and "- three" in page
    assert re.search(r"```\{toctree\}\n:hidden:\n:maxdepth: 1\n\n00_a\n01_b\n```", page)


def test_the_cli_refuses_a_folder_it_did_not_build(tmp_path, capsys, monkeypatch):
    """--out that is a file, or a folder of someone else's files: one line, exit 2, untouched."""
    monkeypatch.chdir(ROOT)
    a_file = tmp_path / "site"
    a_file.write_text("mine")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    for out, words in ((a_file, "is a file"), (mine, "did not build"),
                       (a_file / "sub", "which is a file")):
        assert site.main(["--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and words in err, err
    assert a_file.read_text() == "mine" and (mine / "notes.txt").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "site"], "nothing left over"


def test_a_record_in_a_missing_folder_is_refused_before_building(tmp_path, capsys):
    out = tmp_path / "site"
    assert site.main(["--out", str(out), "--record", str(tmp_path / "no" / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: --record") and "folder" in err, err
    assert list(tmp_path.iterdir()) == [], "nothing built"


def test_a_record_beside_a_site_in_a_new_folder_is_written(tmp_path, capsys, monkeypatch):
    """A fresh clone has no build/: `make site` writes build/site and build/site.json there."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(site, "sphinx_build", _fake_sphinx())
    out, record = tmp_path / "build" / "site", tmp_path / "build" / "site.json"
    assert site.main(["--out", str(out), "--record", str(record)]) == 0, capsys.readouterr().err
    assert json.loads(record.read_text())["staged"]["lessons"], "the record lists the pages"
    assert (out / site.MARKER).is_file()


def _fake_sphinx(fail=False):
    def sphinx_build(src, html, doctrees):
        if fail:
            raise site.SiteError("Sphinx failed (status 1): something")
        html.mkdir(parents=True)
        (html / "index.html").write_text((src / "index.md").read_text())
        return []
    return sphinx_build


def test_a_rebuild_replaces_only_its_own_site(tmp_path, capsys, monkeypatch):
    """An earlier build (the marker) is replaced whole, and only once the new one is built."""
    monkeypatch.chdir(ROOT)
    out = tmp_path / "build" / "site"
    out.mkdir(parents=True)
    (out / site.MARKER).write_text("x")
    (out / "stale.html").write_text("old")
    monkeypatch.setattr(site, "sphinx_build", _fake_sphinx(fail=True))
    assert site.main(["--out", str(out)]) == 2
    assert "Sphinx failed" in capsys.readouterr().err
    assert (out / "stale.html").read_text() == "old", "a failed build leaves the old site"
    monkeypatch.setattr(site, "sphinx_build", _fake_sphinx())
    assert site.main(["--out", str(out)]) == 0
    lessons = site.course_notebooks(NOTEBOOKS)
    assert f"built {len(lessons)} notebook pages" in capsys.readouterr().out
    assert not (out / "stale.html").exists() and (out / site.MARKER).is_file()
    assert "## The notebooks" in (out / "index.html").read_text()
    assert [p.name for p in out.parent.iterdir()] == ["site"], "no temporary folder left"


@pytest.mark.slow
def test_sigterm_mid_build_leaves_the_earlier_site_and_no_temporary_folder(tmp_path):
    """A real SIGTERM while Sphinx works: one line, exit 143, the old site whole."""
    out = tmp_path / "site"
    out.mkdir()
    (out / site.MARKER).write_text("x")
    (out / "index.html").write_text("the earlier site")
    proc = subprocess.Popen([sys.executable, "-m", "tools.site", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 300
        # the build has started once Sphinx writes into the temporary folder's doctrees
        while not list(tmp_path.glob(".site-build-*/doctrees/*")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the build did not start"
            time.sleep(0.05)  # poll for the condition
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.count("\n") == 1 and err.startswith("stopped by SIGTERM"), err
    assert (out / "index.html").read_text() == "the earlier site"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"], "no temporary folder left"


def test_make_site_builds_into_an_ignored_folder_and_make_test_builds_it():
    def make_n(target):
        return subprocess.run(["make", "-n", target, "VENV=/none/dev", "LAB_VENV=/none/lab"],
                              cwd=ROOT, capture_output=True, text=True, check=True).stdout

    assert re.search(r"^/none/dev/bin/python -m tools\.site --out build/site "
                     r"--record build/site\.json$", make_n("site"), re.M)
    # make test builds the site first, then its tests read that build (tests/shared_site.py);
    # make unit alone builds its own
    test = make_n("test")
    assert test.index("-m tools.site --out build/site") < test.index("-m pytest tests")
    assert re.search(r"^CONVS2S_QUICK=1 CONVS2S_TEST_SITE_RECORD=build/site\.json .*-m pytest "
                     r"tests", test, re.M)
    assert "CONVS2S_TEST_SITE_RECORD" not in make_n("unit")
    assert re.search(r"-m tools\.site_screenshots --site build/site --out images$",
                     make_n("site-images"), re.M)
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/site/index.html"], cwd=ROOT)
    assert ignored.returncode == 0, "build/site must be ignored by git"


def test_site_screenshots_cli_needs_a_built_site(tmp_path, capsys):
    assert shots.main(["--site", str(tmp_path / "none"), "--out", str(tmp_path / "img")]) == 2
    err = capsys.readouterr().err
    if "make install" in err or "Chromium" in err:
        pytest.skip(err.strip())
    assert err.count("\n") == 1 and "make site" in err
    assert not (tmp_path / "img").exists()


# --------------------------------------------------------------------------------------------
# What a page loads from another site; a small site built from a made-up notebook
# --------------------------------------------------------------------------------------------

# Attributes whose URL a browser loads by itself, on any element (href only where it loads).
_LOADING_ATTRIBUTES = {"src", "data", "poster", "background", "lowsrc", "dynsrc", "srcset",
                       "imagesrcset"}
_LOADING_HREF = {"link", "base", "image", "use", "feimage", "script"}  # SVG's too
_NAVIGATION_RELS = {"index", "search", "next", "prev", "canonical", "alternate", "author",
                    "help", "license"}
_CSS_URL = re.compile(r"""url\(\s*(['"]?)(.*?)\1\s*\)|@import\s+(['"])(.*?)\3""", re.I | re.S)


def _is_remote(url: str) -> bool:
    """Whether a browser would fetch ``url`` from another host: read as a browser reads it
    (spaces and control characters dropped, backslashes as slashes)."""
    u = re.sub(r"[\x00-\x20]", "", url).replace("\\", "/")
    return bool(re.match(r"(?:[a-z][a-z0-9+.-]*:)?//|(?:https?|ftp|wss?):", u, re.I))


def _css_urls(css: str) -> list[str]:
    return [m.group(2) if m.group(2) is not None else m.group(4) for m in _CSS_URL.finditer(css)]


class _Loads(HTMLParser):
    """Every URL an HTML document makes a browser load (its own and its frames' srcdoc)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = [(name.lower(), value or "") for name, value in attrs]
        names = dict(attrs)
        for name, value in attrs:
            if name in ("srcset", "imagesrcset"):
                self.urls += [c.strip().split()[0] for c in value.split(",") if c.strip()]
            elif name in _LOADING_ATTRIBUTES or name == "xlink:href" or (
                    name == "href" and tag in _LOADING_HREF):
                if tag == "link" and name == "href" and \
                        set(names.get("rel", "").lower().split()) <= _NAVIGATION_RELS:
                    continue  # a link to another page, not something loaded
                self.urls.append(value)
            elif name == "style":
                self.urls += _css_urls(value)
            elif name == "srcdoc":
                inner = _Loads()
                inner.feed(value)
                self.urls += inner.urls
            elif name == "content" and names.get("http-equiv", "").lower() == "refresh":
                self.urls += re.findall(r"url\s*=\s*['\"]?([^'\";]+)", value, re.I)
        self._in_style = tag == "style"

    handle_startendtag = handle_starttag

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.urls += _css_urls(data)


def remote_loads(site_dir: Path) -> list[str]:
    """"page: url" for everything a page or style sheet of the site loads from another site."""
    found = []
    for page in sorted(site_dir.rglob("*.html")):
        parser = _Loads()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        found += [f"{page.relative_to(site_dir)}: {u}" for u in parser.urls if _is_remote(u)]
    for css in sorted(site_dir.rglob("*.css")):
        found += [f"{css.relative_to(site_dir)}: {u}"
                  for u in _css_urls(css.read_text(encoding="utf-8", errors="replace"))
                  if _is_remote(u)]
    return found


# Raw HTML in a notebook's markdown and in a stored HTML output, each loading from elsewhere.
RAW_REMOTE = {
    "img": "<img src='https://example.org/img.png' alt='x'>",
    "iframe": "<iframe src=https://example.org/frame></iframe>",
    "srcset": '<img src="images/ok.png" srcset="https://example.org/srcset.png 2x">',
    "style": '<div style="background: url(//example.org/style.png)">x</div>',
    "video": '<video poster="https://example.org/poster.png"></video>',
    "object": '<object data="https://example.org/object.svg"></object>',
    "svg": '<svg><image href="https://example.org/svg.png"/></svg>',
    "css": "<style>@import 'https://example.org/import.css';</style>",
    "backslash": '<img src="https:\\\\example.org\\backslash.png">',
    "entity": '<img src="&#104;ttps://example.org/entity.png">',
}
RAW_REMOTE_OUTPUT = {"link": '<link rel="stylesheet" href="https://example.org/output.css">',
                     "script": '<script src="https://example.org/output.js"></script>'}
HOSTILE_TITLE = "01 · A <script>alert(1)</script> & <b>bold</b> *title*"


def _small_site_notebook(title: str, cells: list[dict]) -> dict:
    first = (f"# {title}\n\n**What you will learn**\n- a thing\n\n"
             "**Estimated time:** 5 minutes.\n")
    return _notebook([_md(first), *cells])


@pytest.fixture(scope="module")
def small_site(tmp_path_factory):
    """The folder of a site of two made-up notebooks (seconds to build): 01's title holds
    HTML, and its cells raw HTML that loads from another site. Built by ``python -m tools.site``
    in its own process: a second Sphinx in this one would warn about the first one's nodes."""
    root = tmp_path_factory.mktemp("small")
    (root / "notebooks").mkdir()
    (root / "images").mkdir()
    (root / "images" / "architecture.png").write_bytes(base64.b64decode(PNG_1x1))
    (root / "pyproject.toml").write_text('[project.urls]\nRepository = "https://github.com/a/b"\n')
    (root / "README.md").write_text("# The small course\n\nIntro.\n")
    raw = "\n\n".join(RAW_REMOTE.values())
    html_output = {"output_type": "display_data", "metadata": {}, "data": {
        "text/html": "".join(RAW_REMOTE_OUTPUT.values()), "text/plain": "<the html>"}}
    notebooks = {"00_first": _small_site_notebook("00 · First", []),
                 "01_hostile": _small_site_notebook(HOSTILE_TITLE, [
                     _md(f"Raw HTML:\n\n{raw}\n"), _code("show()", [html_output])])}
    for name, nb in notebooks.items():
        (root / "notebooks" / f"{name}.ipynb").write_text(json.dumps(nb))
    done = subprocess.run([sys.executable, "-m", "tools.site", "--out", str(root / "site")],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "site"


def test_the_offline_check_finds_every_remote_resource_in_raw_html(small_site):
    """The negative control of test_no_page_loads_anything_from_another_site: raw HTML from a
    notebook reaches the page as written (notebooks are trusted input), and every form of it
    that loads from another site is found."""
    found = {line.split(": ", 1)[1] for line in remote_loads(small_site)
             if line.startswith("01_hostile.html: ")}
    wanted = {re.search(r"example\.org[\\/]+([\w.]+)", h).group(1)
              for h in [*RAW_REMOTE.values(), *RAW_REMOTE_OUTPUT.values()]}
    assert {re.search(r"example\.org[\\/]+([\w.]+)", u).group(1) for u in found} == wanted, found
    assert not any(line.startswith("00_first.html") for line in remote_loads(small_site))


def test_a_title_is_plain_text_on_every_page_that_repeats_it(small_site):
    """A notebook's title reaches every page's navigation, the landing page and the page's own
    heading as the characters it holds: no tag, no emphasis."""
    shown = html.escape(HOSTILE_TITLE, quote=False)
    for page in ("index.html", "00_first.html", "01_hostile.html"):
        text = (small_site / page).read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<b>bold" not in text, page
        assert "<em>title</em>" not in text, page
        assert shown in text, page


def test_a_readme_title_with_html_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """The README's title is the site's name on every page, written by the theme as it is."""
    root = tmp_path / "course"
    shutil.copytree(ROOT / "notebooks", root / "notebooks",
                    ignore=shutil.ignore_patterns("runs", "data", ".ipynb_checkpoints"))
    (root / "images").mkdir()
    (root / "images" / "architecture.png").write_bytes(base64.b64decode(PNG_1x1))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    (root / "README.md").write_text('# The <i>course</i>\n\nIntro.\n')
    monkeypatch.chdir(root)
    assert site.main(["--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "README.md's title holds < and >" in err, err
    assert not (tmp_path / "site").exists()


# --------------------------------------------------------------------------------------------
# The real site, built once for the tests below
# --------------------------------------------------------------------------------------------


# ``built``, ``web`` and ``tab``: tests/conftest.py (one site for every module that checks it)


def _pages(site_dir: Path) -> list[Path]:
    return sorted(p for p in site_dir.glob("*.html"))


@pytest.mark.slow
def test_the_site_builds_with_every_notebook_and_no_warning(built):
    names = [p.stem for p in site.course_notebooks(NOTEBOOKS)]
    assert built.warnings == [], "\n".join(built.warnings)
    assert [lesson.name for lesson in built.staged.lessons] == names
    for name in names:
        assert (built.out / f"{name}.html").is_file()
    assert (built.out / "index.html").is_file() and (built.out / "search.html").is_file()
    assert (built.out / site.MARKER).is_file()
    if os.environ.get(shared_site.RECORD_VARIABLE):  # make test: make site's build, just made
        assert built.out == (ROOT / "build" / "site").resolve()
    # the maths is MathML in the pages: no maths library, no source maps, no translations
    static = built.out / "_static"
    assert not (static / "mathjax").exists() and not (static / "locales").exists()
    assert not list(static.rglob("*.map"))
    # the build's temporary folders are gone
    # (beside it: nothing, or under make test build/'s other folders, such as build/cache)
    assert not [p.name for p in built.out.parent.iterdir() if p.name.startswith(".site-build-")]


@pytest.mark.slow
def test_no_page_loads_anything_from_another_site(built):
    """Scripts, styles, fonts, images and frames all come from the site itself (links may leave
    it), in the HTML that Sphinx writes and in the raw HTML that notebooks hold."""
    assert remote_loads(built.out) == []


# --------------------------------------------------------------------------------------------
# In the browser
# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------


# What the tests check about a page, read in the browser once it is loaded (fonts in, maths
# typeset). Links are absolute (a.href); prev/next are as written (getAttribute).
_PAGE_FACTS = """() => {
  const article = document.querySelector('.bd-article');
  const imgs = [...document.querySelectorAll('img')];
  const attr = (sel, name) => document.querySelector(sel)?.getAttribute(name) ?? null;
  return {
    ids: [...document.querySelectorAll('[id]')].map(e => e.id),
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    article_links: [...(article ? article.querySelectorAll('a[href]') : [])].map(a => a.href),
    prev: attr('a.left-prev', 'href'),
    next: attr('a.right-next', 'href'),
    // the images a reader sees (the other theme's drawing is hidden, lazy and never loads)
    broken: imgs.filter(i => i.checkVisibility() && !(i.complete && i.naturalWidth > 0))
      .map(i => i.src),
    cut: (() => {
      if (!article) return [];
      const column = article.getBoundingClientRect();
      const right = Math.min(column.right, window.innerWidth) + 0.5;
      // a figure wider than the column may be in a box that scrolls sideways (a flipbook's
      // picture at its own size on a phone): then that box must lie in the column
      const holder = (i) => {
        for (let e = i.parentElement; e && e !== article; e = e.parentElement) {
          if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) return e;
        }
        return i;
      };
      return [...article.querySelectorAll('img')]
        .filter(i => i.getClientRects().length > 0)
        .filter(i => {
          const box = holder(i).getBoundingClientRect();
          return i.getBoundingClientRect().width === 0 || box.left < column.left - 0.5 ||
            box.right > right;
        })
        .map(i => `${i.src}: ${i.naturalWidth}x${i.naturalHeight} shown at ` +
                  `${JSON.stringify(i.getBoundingClientRect())} in ${JSON.stringify(column)}`);
    })(),
    raw_maths: (() => {
      if (!article) return [];
      const copy = article.cloneNode(true);
      copy.querySelectorAll('code, pre, kbd, samp, script, style, .math, math')
        .forEach(e => e.remove());
      return [...copy.textContent.matchAll(/.{0,40}(\\$|\\\\[A-Za-z]+).{0,40}/g)]
        .map(m => m[0].replace(/\\s+/g, ' '));
    })(),
    width: {page: document.scrollingElement.scrollWidth, window: window.innerWidth},
    images: imgs.map(i => {
      // a widget's picture: its note says it is not interactive, and why, before it
      const note = i.closest('.widget-static');
      const before = p => p.compareDocumentPosition(i) & Node.DOCUMENT_POSITION_FOLLOWING;
      return {src: i.getAttribute('src'), alt: i.getAttribute('alt'), widget: !!note,
              note_first: !!note && /not interactive here/.test(note.textContent) &&
                [...note.querySelectorAll('p')].some(p =>
                  /running Python kernel/.test(p.textContent) && before(p))};
    }),
    figures: article ? article.querySelectorAll('img').length : 0,
    figure_links: article ? [...article.querySelectorAll('img')]
      .filter(i => i.closest('a')?.getAttribute('href') === i.getAttribute('src')).length : 0,
    maths: document.querySelectorAll('.math').length,
    // a formula is MathML that the browser lays out as maths, with no error in it
    untypeset: [...document.querySelectorAll('.math')]
      .filter(m => { const math = m.querySelector('math');
                     return !math || m.querySelector('merror, code') ||
                       !getComputedStyle(math).display.includes('math') ||
                       (m.checkVisibility() && math.getBoundingClientRect().height === 0); })
      .map(m => m.textContent.slice(0, 80)),
    // every icon the page shows is drawn: its ::before has a size and a shape
    blank_icons: [...document.querySelectorAll('[class*="fa-"]')]
      .filter(e => e.getClientRects().length > 0)
      .filter(e => { const b = getComputedStyle(e, '::before');
                     if (e.tagName.toLowerCase() === 'svg')  // drawn by a script as SVG
                       return e.getBoundingClientRect().width === 0;
                     return b.content === 'none' || parseFloat(b.width) === 0 ||
                       !(b.maskImage || b.webkitMaskImage || '').includes('data:image/svg'); })
      .map(e => e.className),
    favicon: document.querySelector('link[rel~="icon"]')?.href ?? null,
    text: document.body.innerText,
  };
}"""


# What a reader downloads to read a page to its end: the page and everything it loaded (styles,
# scripts, fonts, figures), read from the browser's resource timing once every figure is in.
_PAGE_BYTES = """async () => {
  performance.setResourceTimingBufferSize(1000);
  for (let y = 0; y < document.body.scrollHeight; y += window.innerHeight) {
    window.scrollTo(0, y);
    await new Promise(r => requestAnimationFrame(r));
  }
  // the figures a reader sees (a hidden one, e.g. the other theme's drawing, is lazy and never
  // loads: waiting for it would never end)
  await Promise.all([...document.images].filter(i => i.checkVisibility())
    .map(i => i.decode().catch(() => null)));
  const nav = performance.getEntriesByType('navigation')[0];
  const files = [nav, ...performance.getEntriesByType('resource')];
  return {total: files.reduce((sum, f) => sum + f.decodedBodySize, 0),
          largest: files.map(f => [f.name.split('/').pop().split('?')[0].slice(0, 40),
                                   f.decodedBodySize])
                        .sort((a, b) => b[1] - a[1]).slice(0, 5)};
}"""


def _visit(built, web, viewport=None):
    """Every page of the site opened once (in a window of ``viewport``, or the screenshots'
    1280 x 900): {page file: its facts, problems included}."""
    base, browser = web
    facts = {}
    for page in sorted(p.name for p in built.out.glob("*.html")):
        t = shots.SitePage(browser, base)
        try:
            if viewport:
                t.page.set_viewport_size(viewport)
            t.open(page)
            # the page read to its end first (what a reader downloads), so that its lazy
            # figures are in when the facts ask whether every image loaded
            read = t.page.evaluate(_PAGE_BYTES)
            t.page.evaluate("() => window.scrollTo(0, 0)")
            facts[page] = t.page.evaluate(_PAGE_FACTS)
            facts[page]["bytes"] = read
            facts[page]["problems"] = t.problems()
        finally:
            t.close()
    return facts


#: A phone's window.
PHONE = shots.PHONE


@pytest.fixture(scope="module")
def visited(built, web):
    """Every page at 1280 px."""
    return _visit(built, web)


@pytest.fixture(scope="module")
def visited_phone(built, web):
    """Every page at a phone's 375 px."""
    return _visit(built, web, PHONE)


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_loads_with_no_error_nothing_from_outside_and_every_image(built, visited):
    names = [p.stem for p in site.course_notebooks(NOTEBOOKS)]
    assert {"index.html", "search.html", *(f"{n}.html" for n in names)} <= set(visited)
    for page, f in visited.items():
        assert f["problems"] == [], f"{page}:\n" + "\n".join(f["problems"])
        assert f["broken"] == [], f"{page}: images that did not load: {f['broken']}"
        for fallback in ("interactive(children=", "Loading widget", "Error displaying widget"):
            assert fallback not in f["text"], f"{page} shows {fallback!r}"


@pytest.mark.browser
@pytest.mark.slow
def test_every_figure_is_wholly_visible_at_1280_and_375_px(built, visited, visited_phone):
    """A figure scales to the article's column (a click opens it at full size), or, too wide
    for it at its own size on a phone (a flipbook's picture), scrolls sideways in a box that
    fits the column: no part of it is outside the column or the window, or out of reach."""
    names = [f"{p.stem}.html" for p in site.course_notebooks(NOTEBOOKS)]
    for facts, width in ((visited, 1280), (visited_phone, PHONE["width"])):
        for page in names:
            assert facts[page]["cut"] == [], f"{page} at {width} px: {facts[page]['cut']}"
    link = visited["01_glu_and_padding.html"]
    assert link["figures"] > 0 and link["figures"] == link["figure_links"], \
        "every figure is a link to its image"


#: Alt text that names a file instead of saying what the image shows.
_FILE_NAME_ALT = re.compile(r"\.(png|svg|jpe?g|gif)\b|^\S*/\S*$|[0-9a-f]{16}", re.I)


def _in_page(spec) -> bool:
    """Whether the site shows this screenshotted widget as one that responds in the page (a
    live widget, a flipbook or the translator) rather than as its picture."""
    return bool(site.live_widget_for(spec.declaration)) or \
        spec.declaration.notebook == site.TRANSLATOR_WIDGET[0]


@pytest.mark.browser
@pytest.mark.slow
def test_every_image_has_alt_text_from_its_title_not_its_file(built, visited):
    """An image's alt text says what it shows (a figure: its heading and its title; a widget's
    picture: its controls), never empty nor a path or a file name; no two widget pictures share
    one, and each widget picture's note, saying it is not interactive, comes before it."""
    bad, widget_alts = [], []
    for page, f in visited.items():
        for img in f["images"]:
            alt = (img["alt"] or "").strip()
            if not alt or _FILE_NAME_ALT.search(alt):
                bad.append(f"{page}: {img['src']} has alt {img['alt']!r}")
            if img["widget"]:
                widget_alts.append(alt)
                if not img["note_first"]:
                    bad.append(f"{page}: the note on {img['src']} does not come before it")
    assert bad == [], "\n".join(bad)
    live = [spec for spec in WIDGETS.values()
            if _in_page(spec)]
    assert len(widget_alts) >= len(WIDGETS) - len(live), \
        "a picture for every widget that the page does not compute live"
    assert len(set(widget_alts)) == len(widget_alts), f"widget pictures share alt text: " \
        f"{widget_alts}"


_CODE_OR_SCRIPT = re.compile(r"<(pre|code|script|style|textarea)\b.*?</\1>", re.S | re.I)


@pytest.mark.slow
def test_no_file_of_the_site_holds_raw_jinja(built):
    """The themes' Jinja templates among their static files (``webpack-macros.html``) are not
    copied into the site: no HTML file shows ``{%`` or ``{{ `` outside code."""
    raw = []
    for page in sorted(built.out.rglob("*.html")):
        text = _CODE_OR_SCRIPT.sub("", page.read_text(encoding="utf-8", errors="replace"))
        if "{%" in text or "{{ " in text:
            raw.append(str(page.relative_to(built.out)))
    assert raw == [], f"raw Jinja in {raw}"


@pytest.mark.browser
@pytest.mark.slow
def test_no_page_is_wider_than_a_phone(visited_phone):
    """Code blocks scroll inside their cells and long inline code wraps: the page itself never
    scrolls sideways at 375 px."""
    wide = {page: f["width"] for page, f in visited_phone.items()
            if f["width"]["page"] > f["width"]["window"]}
    assert wide == {}, f"pages wider than the window: {wide}"
    for page, f in visited_phone.items():
        assert f["problems"] == [], f"{page}:\n" + "\n".join(f["problems"])


@pytest.mark.browser
@pytest.mark.slow
def test_no_raw_tex_in_the_text(visited):
    """Outside code and typeset maths no page shows a ``$`` or a ``\\command``: every formula
    became MathML."""
    raw = {page: f["raw_maths"] for page, f in visited.items() if f["raw_maths"]}
    assert raw == {}, f"raw TeX in the page text: {raw}"


@pytest.mark.browser
@pytest.mark.slow
def test_the_sidebar_menus_open_on_a_phone(web):
    """At 375 px the article header's buttons open the chapter list and the page's contents,
    and a chapter link in the list goes to that chapter."""
    base, browser = web
    t = shots.SitePage(browser, base)
    try:
        t.page.set_viewport_size(PHONE)
        t.open("01_glu_and_padding.html")
        contents = t.page.locator("#pst-secondary-sidebar-modal")
        t.page.locator(".secondary-toggle:visible").first.click()
        contents.locator("a[href^='#']").first.wait_for(state="visible")
        t.page.keyboard.press("Escape")
        t.page.wait_for_function(
            "() => !document.querySelector('#pst-secondary-sidebar-modal').open")
        menu = t.page.locator("#pst-primary-sidebar-modal")
        assert not menu.is_visible()
        t.page.locator(".primary-toggle:visible").first.click()
        chapter = menu.locator("a[href='03_causal_decoder.html']")
        chapter.wait_for(state="visible")
        chapter.click()
        t.page.wait_for_url(base + "03_causal_decoder.html")
        t.wait_typeset()
        assert "03" in t.page.locator(".bd-article h1").first.inner_text()
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_maths_is_typeset(visited, visited_phone):
    """Every formula is MathML that Chromium lays out as maths, at both widths."""
    for facts in (visited, visited_phone):
        for page, f in facts.items():
            assert f["untypeset"] == [], f"{page}: maths not typeset: {f['untypeset']}"
    assert visited["01_glu_and_padding.html"]["maths"] > 10, "notebook 01's equations"


#: The most a page may weigh with everything it loads, figures included (pages once weighed
#: many times their content), and the whole site.
PAGE_BYTES = 1_200_000
SITE_BYTES = 12_000_000


@pytest.mark.browser
@pytest.mark.slow
def test_every_page_weighs_at_most_1_2_mb_and_the_site_12_mb(built, visited, visited_phone):
    """What a reader downloads to read a page to its end, at 1280 and 375 px: the page, its
    styles, scripts, fonts and every figure. And the site as a whole, the notebooks offered
    for download included, less the translator that notebook 06's page downloads when the
    reader asks for it (test_site_translator.py: nothing of it loads before)."""
    for facts, width in ((visited, 1280), (visited_phone, PHONE["width"])):
        heavy = {page: f["bytes"] for page, f in facts.items()
                 if f["bytes"]["total"] > PAGE_BYTES}
        assert heavy == {}, f"pages over {PAGE_BYTES:,} bytes at {width} px: {heavy}"
    on_request = built.out / "_static" / "translator"
    assert on_request.is_dir()
    site_bytes = sum(f.stat().st_size for f in built.out.rglob("*")
                     if f.is_file() and on_request not in f.parents)
    assert site_bytes <= SITE_BYTES, f"the site weighs {site_bytes:,} bytes"


@pytest.mark.browser
@pytest.mark.slow
def test_every_icon_is_drawn_and_every_page_has_a_favicon(built, visited, visited_phone):
    """The theme's buttons show their icons (drawn from the site's small icon sheet, not Font
    Awesome's 1.5 MB script) at both widths, and each page names a favicon that the site
    holds."""
    for facts, width in ((visited, 1280), (visited_phone, PHONE["width"])):
        blank = {page: f["blank_icons"] for page, f in facts.items() if f["blank_icons"]}
        assert blank == {}, f"icons drawn as nothing at {width} px: {blank}"
    for page, f in visited.items():
        assert f["favicon"], f"{page} names no favicon"
        icon = urllib.parse.urlsplit(f["favicon"]).path.lstrip("/")
        assert (built.out / urllib.parse.unquote(icon)).is_file(), f"{page}: {f['favicon']}"


@pytest.mark.browser
@pytest.mark.slow
def test_no_internal_link_is_broken(built, web, visited):
    base, _ = web
    broken = []
    for page, f in visited.items():
        for link in f["links"]:
            if not link.startswith(base):
                continue
            parts = urllib.parse.urlsplit(link[len(base):])
            target = urllib.parse.unquote(parts.path) or "index.html"
            if not (built.out / target).is_file():
                broken.append(f"{page} -> {link}")
            elif parts.fragment and target in visited and \
                    urllib.parse.unquote(parts.fragment) not in visited[target]["ids"]:
                broken.append(f"{page} -> {link} (no such anchor)")
    assert broken == [], "broken internal links:\n" + "\n".join(broken)


@pytest.mark.browser
@pytest.mark.slow
def test_each_page_links_its_notebook_colab_and_neighbours(built, web, visited):
    base, _ = web
    lessons = built.staged.lessons
    for i, lesson in enumerate(lessons):
        file = f"{lesson.name}.ipynb"
        f = visited[f"{lesson.name}.html"]
        assert badges.colab_url(REPO, file) in f["article_links"], lesson.name
        assert f"{REPO}/blob/main/notebooks/{file}" in f["article_links"], lesson.name
        download = [h for h in f["article_links"] if h.startswith(base + "_downloads/")
                    and h.endswith("/" + file)]
        assert len(download) == 1, lesson.name
        local = built.out / urllib.parse.unquote(download[0][len(base):])
        # the committed notebook, its figures as the page shows them (the ``built`` fixture
        # has checked that the notebooks are those the site was built from)
        assert local.read_bytes() == notebook_with_smaller_figures(
            (ROOT / "notebooks" / file).read_bytes()), lesson.name
        assert f["prev"] == ("index.html" if i == 0 else f"{lessons[i - 1].name}.html")
        assert f["next"] == (f"{lessons[i + 1].name}.html" if i + 1 < len(lessons) else None)


@pytest.mark.browser
@pytest.mark.slow
def test_landing_page_lists_every_notebook_with_time_and_what_you_learn(built, tab):
    tab.open("index.html")
    article = tab.page.locator(".bd-article")
    text = article.inner_text()
    readme_title = site.readme_intro((ROOT / "README.md").read_text())[0]
    assert article.locator("h1").inner_text().strip() == readme_title
    # the architecture picture the reader sees (the site draws it per theme and width)
    shown = article.evaluate("a => [...a.querySelectorAll('img')].filter(i => i.checkVisibility()"
                             " && /architecture/.test(i.currentSrc))"
                             ".map(i => i.complete && i.naturalWidth > 0)")
    assert shown == [True]
    positions = []
    for lesson in built.staged.lessons:
        link = article.locator(f"h3 a[href='{lesson.name}.html']")
        assert link.count() == 1, lesson.name
        assert link.inner_text().strip() == lesson.heading
        positions.append(text.index(lesson.heading))
        assert " ".join(lesson.time.split()[:3]) in text
    assert positions == sorted(positions), "the notebooks in course order"
    assert text.count("What you will learn") == len(built.staged.lessons)
    assert tab.problems() == []


def test_the_course_time_adds_up_the_notebooks_estimates():
    assert site.lesson_minutes("40 minutes of reading and 30 for the exercises. Running it "
                               "takes 5 minutes.") == 70
    assert site.lesson_minutes("50 minutes: about 25 to read and run, 25 for the four.") == 50
    assert site.lesson_minutes("20 minutes (about 1,600 words to read).") == 20
    assert site.lesson_minutes("an afternoon.") is None
    lessons = [site.Lesson(f"0{i}_x", f"0{i} · X", t, ("x",)) for i, t in
               enumerate(["20 minutes.", "40 minutes of reading and 30 for the exercises.",
                          "about 55 minutes of reading and 30 for the exercises."])]
    assert site.course_time(lessons) == ("about 2 h 55 min in all, by the notebooks' own "
                                         "estimates (20–85 minutes each)")
    lessons[0] = site.Lesson("00_x", "00 · X", "a while.", ("x",))
    assert "the estimates of 2 of the 3 notebooks" in site.course_time(lessons)


# The landing page's first screen: every line of the glance and the start link inside it.
_FIRST_SCREEN = """() => {
  const glance = document.querySelector('.course-glance');
  if (!glance) return null;
  const inside = e => { const r = e.getBoundingClientRect();
                        return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight; };
  const start = glance.querySelector('a.start-here');
  return {
    lines: [...glance.querySelectorAll('p')].map(p => ({text: p.textContent.slice(0, 30),
                                                        inside: inside(p)})),
    start: start && {href: start.getAttribute('href'), text: start.textContent,
                     inside: inside(start)},
    paper: [...glance.querySelectorAll('a')].map(a => a.href).filter(h => /arxiv/.test(h)),
  };
}"""


@pytest.mark.browser
@pytest.mark.slow
def test_the_landing_page_says_what_for_whom_how_long_and_where_to_start_in_one_screen(
        built, web, visited):
    """At 1280 x 900 and on a 375 x 812 phone the first screen of the landing page holds what
    the course is (with the paper's link), whom it is for, how long it takes, and a "Start with
    00" link to notebook 00; no page's footer says "Author name not set"."""
    base, browser = web
    for viewport in (shots.VIEWPORT, PHONE):
        t = shots.SitePage(browser, base)
        try:
            t.page.set_viewport_size(viewport)
            t.open("index.html")
            f = t.page.evaluate(_FIRST_SCREEN)
        finally:
            t.close()
        assert f is not None, "a glance at the top of the landing page"
        first = {line["text"].split(":")[0]: line["inside"] for line in f["lines"]}
        for what in ("What", "For", "Time"):
            assert first.get(what), f"{what} not in the first screen at {viewport}: {f}"
        assert f["start"] and f["start"]["inside"], f"no start link in the first screen: {f}"
        assert f["start"]["href"] == "00_start_here.html"
        assert f["start"]["text"].startswith("Start with 00")
        assert f["paper"] == ["https://arxiv.org/abs/1705.03122"]
    for page, facts in visited.items():
        assert "Author name not set" not in facts["text"], page


@pytest.mark.browser
@pytest.mark.slow
def test_search_finds_causal_padding(tab):
    tab.open("search.html?q=causal+padding")
    results = tab.page.locator("#search-results ul.search li")
    results.first.wait_for(state="visible")
    tab.page.wait_for_function(
        "() => /Search finished/.test(document.querySelector('#search-results').innerText)")
    found = results.locator("a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
    pages = {urllib.parse.urlsplit(h).path for h in found}
    assert "03_causal_decoder.html" in pages, pages
    assert tab.problems() == []


@pytest.mark.browser
@pytest.mark.slow
def test_a_solution_stays_hidden_until_its_toggle_is_clicked(tab):
    tab.open("01_glu_and_padding.html")
    code = tab.page.locator("details.hide.above-input").first
    summary = code.locator("summary")
    body = code.locator(".cell_input")
    assert summary.inner_text().strip() == "Show the solution"
    assert not body.is_visible() and code.evaluate("d => !d.open")
    # no output of a solution cell: its cell holds only the folded source
    assert code.locator("xpath=..").locator(".cell_output").count() == 0
    summary.click()
    body.wait_for(state="visible")
    assert "def my_glu" in body.inner_text()
    assert summary.inner_text().strip() == "Hide the solution"

    # an explain exercise's model answer: a closed <details> block
    explain = tab.page.locator("details", has=tab.page.locator(
        "summary", has_text=re.compile(r"^\s*Solution\s*$"))).first
    answer = explain.locator("p").first
    assert not answer.is_visible()
    explain.locator("summary").click()
    answer.wait_for(state="visible")
    assert tab.problems() == []


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 375])
def test_a_measurement_below_a_predict_exercise_stays_folded_until_asked_for(tab, width):
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open("02_convolutional_encoder.html")
    folded = tab.page.locator("details.hide.below-input")
    assert folded.count() >= 2, "notebook 02 has two measurements after its predict exercises"
    first = folded.first
    summary, output = first.locator("summary"), first.locator(".cell_output")
    assert summary.inner_text().strip() == "Show the measurement"
    assert first.evaluate("d => !d.open") and not output.is_visible()
    cell = first.locator("xpath=ancestor::div[contains(@class, 'cell')][1]")
    assert cell.locator(".cell_input").first.is_visible(), "its code stays in view"
    summary.click()
    output.wait_for(state="visible")
    assert summary.inner_text().strip() == "Hide the measurement"
    assert tab.problems() == []


# Each check cell of a page, read in the browser: the cell, then what follows it up to the
# exercise's solution. ``sources``: the check cells' code, from the notebooks.
_CHECKS = """sources => sources.map(source => {
  const cell = [...document.querySelectorAll('.bd-article .cell')].find(c =>
    c.querySelector('.cell_input')?.textContent.trim() === source.trim());
  if (!cell) return {source, found: false};
  const after = [];
  for (let e = cell.nextElementSibling; e; e = e.nextElementSibling) {
    const solution = e.matches('.cell') ? e.querySelector('details.hide') : null;
    if (solution) {
      after.push({kind: 'solution', open: solution.open,
                  visible: solution.querySelector('.cell_input').checkVisibility()});
      break;
    }
    if (e.matches('.cell')) { after.push({kind: 'other cell'}); break; }
    if (e.matches('details.exercise-hint'))
      after.push({kind: 'hint', open: e.open, title: e.querySelector('summary').textContent.trim(),
                  text: e.textContent.replace(e.querySelector('summary').textContent, '').trim(),
                  shown: e.querySelector(':scope > :not(summary)')?.checkVisibility() ?? false});
    else if (e.textContent.trim())
      after.push({kind: 'text', text: e.textContent.trim(),
                  links: [...e.querySelectorAll('a')].map(a => a.href)});
  }
  return {source, found: true, outputs: cell.querySelectorAll('.cell_output').length, after};
})"""


#: The project's exercise id (notebook 09): its check has hints but no solution.
PROJECT_EXERCISE = "translator"


@pytest.mark.browser
@pytest.mark.slow
def test_check_cells_show_no_output_and_then_where_to_run_hints_and_solution(built, web):
    """Where nothing runs, a check cell shows no output (no "not implemented yet", no
    ``False``); under it one line says where to run it, then its two hints, folded, the nudge
    first, then the folded solution. A hint opens on a click. At 1280 and 375 px."""
    base, browser = web
    hints = site.course_hints()
    seen = 0
    for viewport in (None, PHONE):
        for path in site.course_notebooks(NOTEBOOKS):
            checks_here = [(site.check_role(c), site.cell_source(c))
                           for c in site.load_notebook(path)["cells"] if site.check_role(c)]
            if not checks_here:
                continue
            t = shots.SitePage(browser, base)
            try:
                if viewport:
                    t.page.set_viewport_size(viewport)
                t.open(f"{path.stem}.html")
                found = t.page.evaluate(_CHECKS, [src for _, src in checks_here])
                assert "not implemented yet" not in t.page.locator(".bd-article").inner_text()
                for (exercise, _), f in zip(checks_here, found, strict=True):
                    where = f"{path.stem}: {exercise}"
                    assert f["found"] and f["outputs"] == 0, where
                    kinds = [a["kind"] for a in f["after"]]
                    # the project (notebook 09) is the learner's own work: no solution to fold
                    project = exercise == PROJECT_EXERCISE
                    assert kinds == ["text", "hint", "hint"] + ([] if project else ["solution"]), \
                        f"{where}: {kinds}"
                    line, nudge, closer = f["after"][:3]
                    solution = f["after"][3] if not project else {"open": False, "visible": False}
                    assert "run the cell above" in line["text"] and any(
                        "colab.research.google.com" in h for h in line["links"]), where
                    assert (nudge["title"], closer["title"]) == ("Hint", "A closer hint")
                    assert not (nudge["open"] or closer["open"] or solution["open"]), where
                    assert not (nudge["shown"] or closer["shown"] or solution["visible"])
                    # the hint's words as the package has them (markup and quotes aside)
                    for got, want in ((nudge, hints[exercise][0]), (closer, hints[exercise][1])):
                        assert re.findall(r"[A-Za-z0-9]+", got["text"])[:6] == \
                            re.findall(r"[A-Za-z0-9]+", want)[:6], f"{where}: {got['text']!r}"
                    seen += 1
                hint = t.page.locator("details.exercise-hint > summary").first
                hint.click()
                t.page.locator("details.exercise-hint[open]").first.wait_for()
                assert t.problems() == []
            finally:
                t.close()
    assert seen == 2 * len(hints), "every checked exercise, at both widths"


@pytest.mark.browser
@pytest.mark.slow
def test_check_cells_are_code_and_widgets_are_their_screenshots(tab):
    for spec in WIDGETS.values():
        if _in_page(spec):  # tests of their own
            continue
        page = Path(spec.notebook).stem + ".html"
        tab.open(page)
        note = tab.page.locator(".widget-static", has=tab.page.locator(
            f"img[src$='{spec.image}']"))
        assert note.count() == 1, f"{page}: no picture of its widget {spec.image}"
        assert note.locator("img").evaluate("i => i.complete && i.naturalWidth > 0")
        assert "JupyterLab" in note.inner_text() and "Colab" in note.inner_text()
    tab.open("01_glu_and_padding.html")
    check = tab.page.locator(".cell_input pre", has_text="checks.my_glu(my_glu)").first
    assert check.is_visible()
    assert tab.problems() == []


@pytest.mark.browser
@pytest.mark.slow
def test_readme_screenshots_are_taken_from_the_site(web):
    import numpy as np
    from PIL import Image

    base, browser = web
    taken = shots.shoot(browser, base, log=lambda line: None)
    assert sorted(taken) == sorted(name for name, *_ in shots.SHOTS)
    sizes = {name: (viewport["width"], viewport["height"])
             for name, _, _, viewport, _ in shots.SHOTS}
    assert {w for w, _ in sizes.values()} == {1280, PHONE["width"]}, "desktop and phone"
    for name, png in taken.items():
        with Image.open(io.BytesIO(png)) as im:
            assert im.size == sizes[name]
            assert len(np.unique(np.asarray(im.convert("L")))) > 10, f"{name} is blank"


# --------------------------------------------------------------------------------------------
# Widgets computed in the page (static/live.js): the same as the package's, across the settings
# --------------------------------------------------------------------------------------------


def test_notebook_01s_explorer_is_live_on_the_site_not_a_picture():
    nb = json.loads((NOTEBOOKS / "01_glu_and_padding.ipynb").read_text(encoding="utf-8"))
    out = site.site_notebook(nb, site.read_lesson(NOTEBOOKS / "01_glu_and_padding.ipynb"), REPO,
                             {spec.image for spec in WIDGETS.values()})
    live = [c for c in out.notebook["cells"] if c.get("id", "").startswith("site-live-")]
    assert len(live) == 1 and 'data-widget="dependency-explorer"' in live[0]["source"]
    assert "widget_01_padding.png" not in out.images
    # a screen reader hears what it is: a widget with its controls, not a picture
    label = re.search(r'aria-label="([^"]*)"', live[0]["source"]).group(1)
    assert label.startswith("Interactive widget under the heading") and "kernel size k" in label


def _package_map(k, layers, padding, length):
    from convs2s.course import dependency

    try:
        return dependency.dependency_map(k, layers, padding, length=length).tolist()
    except ValueError as e:
        return str(e)


@pytest.mark.browser
@pytest.mark.slow
def test_the_pages_dependency_maps_equal_the_packages_measured_ones(tab):
    """Every setting of the kernel, layers and padding at three lengths, and every length the
    control offers (4 to 32) with every kernel and padding, its layers varying with both."""
    from convs2s.course import widgets

    control = {c.name: c for c in widgets.declared("dependency-explorer").controls}["length"]
    lengths = range(control.min, control.max + 1, control.step)
    assert len(lengths) == 29
    tab.open("01_glu_and_padding.html")
    settings = [(k, layers, padding, length) for k in range(1, 10) for layers in range(1, 7)
                for padding in ("none", "same", "causal") for length in (4, 11, 32)]
    settings += [(k, 1 + (k + length) % 6, padding, length) for length in lengths
                 if length not in (4, 11, 32) for k in range(1, 10)
                 for padding in ("none", "same", "causal")]
    page = tab.page.evaluate("""settings => settings.map(([k, l, p, n]) => {
        const m = window.convs2sLive.dependencyMap(k, l, p, n);
        return m.error ?? m.rows; })""", settings)
    wrong = [s for s, got in zip(settings, page, strict=True) if got != _package_map(*s)]
    assert not wrong, f"{len(wrong)} of {len(settings)} settings differ, e.g. {wrong[:3]}"


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 375])
def test_moving_each_control_redraws_the_packages_map_and_line(tab, width):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from convs2s.course import dependency

    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open("01_glu_and_padding.html")
    root = tab.page.locator(".convs2s-live[data-widget='dependency-explorer']")
    assert root.count() == 1 and root.is_visible()
    assert tab.page.locator("img[src$='widget_01_padding.png']").count() == 0

    def shown():
        codes = root.evaluate("""r => [...r.querySelectorAll('rect[data-code]')].map(e =>
            [+e.dataset.i, +e.dataset.j, +e.dataset.code])""")
        return codes, root.locator(".live-text").inner_text()

    def expected(k, layers, padding, length):
        fig, ax = plt.subplots()
        line = dependency.draw_dependency_explorer(ax, k, layers, padding, length=length)
        plt.close(fig)
        dep = _package_map(k, layers, padding, length)
        if isinstance(dep, str):
            return [], line
        return [[i, j, (2 if j > i else 1) if on else 0] for i, row in enumerate(dep)
                for j, on in enumerate(row)], line

    def move(name, value):
        root.locator(f"[name='{name}']").evaluate(
            "(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }",
            str(value))

    state = {"kernel_size": 3, "n_layers": 2, "padding": "same", "length": 16}
    assert shown() == expected(3, 2, "same", 16), "the notebook's starting settings"
    for name, value in [("kernel_size", 5), ("n_layers", 3), ("padding", "causal"),
                        ("length", 9), ("padding", "none"), ("kernel_size", 4),
                        ("padding", "same")]:
        before = shown()
        move(name, value)
        state[name] = value
        now = shown()
        assert now != before, f"moving {name} to {value} changed nothing"
        assert now == expected(*state.values()), (name, value)
    assert root.evaluate("r => r.scrollWidth <= r.clientWidth + 1"), "fits the column"
    assert tab.problems() == []


def _title(d, k):
    """The title notebook 08's chart has (analysis.plot_conv_costs) for ``d`` channels and width
    ``k``: the package's, not typed here again."""
    from convs2s.model.variants import conv_costs, costs_title

    return costs_title(conv_costs(d, 2 * d, k), k)


@pytest.mark.browser
@pytest.mark.slow
def test_the_pages_convolution_costs_equal_the_packages_for_every_setting(tab):
    from convs2s.model.variants import conv_costs

    tab.open("08_beyond_convs2s.html")
    settings = [(d, k) for d in range(32, 1025, 32) for k in range(1, 16, 2)]
    page = tab.page.evaluate("""s => s.map(([d, k]) => [window.convs2sLive.convCosts(d, k),
                                                         window.convs2sLive.costsTitle(d, k)])""",
                             settings)
    for (d, k), (costs, title) in zip(settings, page, strict=True):
        assert costs == pytest.approx(conv_costs(d, 2 * d, k)), (d, k)
        assert title == _title(d, k)


@pytest.mark.browser
@pytest.mark.slow
def test_moving_the_cost_widgets_controls_redraws_the_packages_numbers(tab):
    from convs2s.model.variants import conv_costs

    tab.open("08_beyond_convs2s.html")
    root = tab.page.locator(".convs2s-live[data-widget='conv-costs']")
    assert root.count() == 1 and root.is_visible()

    def shown():
        bars = root.evaluate("r => [...r.querySelectorAll('rect[data-name]')].map(b => "
                             "[b.dataset.name, +b.dataset.value])")
        return bars, root.locator(".live-title").text_content()  # an SVG <text>

    def expected(d, k):
        c = conv_costs(d, 2 * d, k)
        return ([["standard", c["standard_parameters"]],
                 ["depthwise-separable", c["separable_parameters"]]], _title(d, k))

    assert shown() == expected(256, 3), "the notebook's starting settings"
    state = {"channels": 256, "kernel_size": 3}
    for name, value in [("channels", 512), ("kernel_size", 7), ("channels", 32),
                        ("kernel_size", 1)]:
        before = shown()
        root.locator(f"[name='{name}']").evaluate(
            "(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }",
            str(value))
        state[name] = value
        assert shown() != before and shown() == expected(state["channels"],
                                                         state["kernel_size"]), (name, value)
    assert tab.problems() == []
