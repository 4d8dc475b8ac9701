"""The widgets as a learner meets them: JupyterLab in headless Chromium.

Kernel-side tests (test_colab_like.py) only see that a widget's Python redraws its figure. These
tests open notebooks 01, 03, 05 and 06 in a real JupyterLab (one server for the module, on a free
localhost port with a token, over a temporary copy of notebooks/ so the stored outputs stay
untouched), run all cells from the Run menu, move each widget's controls and check that its
figure is redrawn and that no "Error displaying widget" (or any other widget failure) shows.

They need Debian's /usr/bin/chromium (or CONVS2S_CHROMIUM) and the playwright package; without
them they skip and say how to enable them. CI sets CONVS2S_REQUIRE_BROWSER=1, which turns that
skip into a failure.

They must not depend on what a learner's earlier runs left behind, nor on an idle machine:
the lab has its own runs folder (notebook 06 trains its quick model
there), its own settings, a random token, and every step waits for a condition (the kernel idle,
the figure redrawn for each slider step, the layout unchanged over two reads), never for a fixed
time.
"""

import math
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from convs2s.course import analysis
from tools import screenshots
from tools.screenshots import WIDGETS, label

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def _require_browser() -> None:
    reason = screenshots.browser_unavailable()
    if reason is None:
        return
    if os.environ.get("CONVS2S_REQUIRE_BROWSER", "").strip() not in ("", "0"):
        pytest.fail(f"CONVS2S_REQUIRE_BROWSER is set but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab (quick mode) and one headless Chromium for all the tests here."""
    _require_browser()
    work = tmp_path_factory.mktemp("browser")
    copy = screenshots.copy_notebooks(NOTEBOOKS, work / "notebooks")
    with screenshots.JupyterLab(copy, work / "lab", env={"CONVS2S_QUICK": "1"}) as server:
        with screenshots.Browser() as browser:
            yield server, browser


def _open(lab, name: str):
    if not (NOTEBOOKS / WIDGETS[name].notebook).exists():
        pytest.skip(f"notebooks/{WIDGETS[name].notebook} does not exist yet")
    server, browser = lab
    return browser.notebook(server, WIDGETS[name].notebook)


def _assert_clean(nb) -> None:
    problems = nb.problems()
    assert not problems, "\n".join(problems) + (
        "\nbrowser console errors:\n" + "\n".join(nb.console_errors[-10:]))


@pytest.mark.browser
@pytest.mark.slow
def test_glu_padding_widget(lab):
    """01: the receptive-field explorer follows its padding dropdown and kernel-size slider."""
    with _open(lab, "padding") as nb:
        nb.run_all()
        _assert_clean(nb)
        w = nb.widget(WIDGETS["padding"])
        assert nb.selected(w, label("padding", "padding")) == "same"
        first = nb.figure_src(w)
        assert first.startswith("data:image/png;base64,")

        nb.mark_figure(w)
        nb.select(w, label("padding", "padding"), "causal")
        causal = nb.wait_redrawn(w)
        assert causal != first, "the figure did not change with padding 'causal'"

        k = int(nb.slider_value(w, label("padding", "kernel_size")))
        nb.mark_figure(w)
        nb.nudge_slider(w, label("padding", "kernel_size"), +2)
        wider = nb.wait_redrawn(w)
        assert int(nb.slider_value(w, label("padding", "kernel_size"))) == k + 2
        assert wider not in (first, causal), "the figure did not change with the kernel size"
        _assert_clean(nb)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("name", ["04_multi_step_attention.ipynb",
                                  "07_convs2s_vs_rnn_attention.ipynb"])
def test_a_figure_that_stores_its_numbers_shows_its_png_in_jupyterlab(lab, name):
    """An attention map's stored output holds its numbers beside the PNG
    (convs2s.course.figure_data): JupyterLab shows the PNG, as for every other figure, and
    nothing for the numbers (no "No renderer could be found" box)."""
    import json

    from convs2s.course import figure_data

    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    carrying = [i for i, c in enumerate(cells) if c["cell_type"] == "code"
                and any(figure_data.MIMETYPE in o.get("data", {}) for o in c.get("outputs", []))]
    assert carrying, f"{name}'s stored run stores no figure's numbers"
    server, browser = lab
    with browser.notebook(server, name) as nb:
        shown = """([index, mime]) => {
          const cell = document.querySelectorAll('.jp-Notebook .jp-Cell')[index];
          const outs = [...cell.querySelectorAll('.jp-OutputArea-output')];
          return {png: outs.filter(o => o.dataset.mimeType === 'image/png'
                                        && o.querySelector('img')).length,
                  vendor: outs.filter(o => o.dataset.mimeType === mime).length,
                  missing: outs.filter(o => /No renderer could be found/.test(o.textContent))
                    .length};
        }"""
        for index in carrying:  # JupyterLab draws a cell's outputs once it is scrolled to
            nb.page.locator(".jp-Notebook .jp-Cell").nth(index).scroll_into_view_if_needed()
            screenshots._poll(lambda i=index: nb.page.evaluate(
                shown, [i, figure_data.MIMETYPE])["png"] >= 1, 120,
                f"cell {index}'s stored figure to show")
            seen = nb.page.evaluate(shown, [index, figure_data.MIMETYPE])
            assert seen == {"png": 1, "vendor": 0, "missing": 0}, (index, seen)


@pytest.mark.browser
@pytest.mark.slow
def test_causal_decoder_widget(lab):
    """03: the visible-positions map and perturbation plot follow padding and kernel size."""
    with _open(lab, "decoder") as nb:
        nb.run_all()
        _assert_clean(nb)
        w = nb.widget(WIDGETS["decoder"])
        assert nb.selected(w, label("decoder", "padding")) == "causal"
        first = nb.figure_src(w)

        nb.mark_figure(w)
        nb.select(w, label("decoder", "padding"), "same")
        same = nb.wait_redrawn(w)
        assert same != first, "the figure did not change with padding 'same'"

        k = int(nb.slider_value(w, label("decoder", "kernel_size")))
        nb.mark_figure(w)
        nb.nudge_slider(w, label("decoder", "kernel_size"), +1)  # step 2: one key press = k + 2
        wider = nb.wait_redrawn(w)
        assert int(nb.slider_value(w, label("decoder", "kernel_size"))) == k + 2
        assert wider not in (first, same), "the figure did not change with the kernel size"
        _assert_clean(nb)


@pytest.mark.browser
@pytest.mark.slow
def test_attention_by_epoch_widget(lab):
    """05 (quick run): the epoch slider redraws every layer's attention on the watched sentence
    as it was after that epoch."""
    with _open(lab, "attention") as nb:
        nb.run_all()
        _assert_clean(nb)
        w = nb.widget(WIDGETS["attention"])
        last = int(nb.slider_value(w, label("attention", "epoch")))
        assert last >= 2, "the quick run should record several epochs"
        assert f"epoch {last}:" in w.inner_text()
        first = nb.figure_src(w)
        nb.mark_figure(w)
        nb.nudge_slider(w, label("attention", "epoch"), -1)
        earlier = nb.wait_redrawn(w)
        assert int(nb.slider_value(w, label("attention", "epoch"))) == last - 1
        assert earlier != first, "the figure did not change with the epoch"
        assert f"epoch {last - 1}:" in w.inner_text()
        _assert_clean(nb)


@pytest.mark.browser
@pytest.mark.slow
def test_translator_widget(lab):
    """06 (quick model): typing a sentence and moving the beam slider retranslate and redraw.
    The widget offers both shipped directions: it starts German → English on the model the
    notebook studies; choosing English → German relabels the box "English", gives it the English
    starting sentence and translates it with the shipped en-de model (the package's translation,
    as the kernel prints it); typed English is translated too; choosing German → English again
    brings the German box and its sentence back. (One test: notebook 06 runs once.)"""
    import convs2s

    server, _ = lab
    with _open(lab, "translator") as nb:
        nb.run_all()
        # notebook 06 studies the lab's own run of notebook 05 where this module's notebook-05
        # test made one, else the shipped model; never notebooks/runs/ (the lab's runs folder is
        # its own: test_lab_has_its_own_runs_folder_and_settings)
        _assert_clean(nb)
        w = nb.widget(WIDGETS["translator"])
        first = nb.figure_src(w)
        assert nb.selected(w, "direction") == _option("German → English")
        assert nb.text_value(w, "German") == analysis.WIDGET_SENTENCES["de-en"]
        assert "English (beam size 5):" in w.inner_text()

        # An invented sentence (not from Multi30k) with a made-up word: the subword model reads
        # it as pieces it knows, so nothing is marked unknown.
        nb.mark_figure(w)
        nb.enter_text(w, "German", "Eine Katze schläft neben dem Blumfelder.")
        other = nb.wait_redrawn(w)
        assert other != first, "the attention figure did not change with the sentence"
        text = w.inner_text()
        assert "English (beam size 5):" in text
        assert "unknown German words:" not in text

        beam = int(nb.slider_value(w, "beam size"))
        nb.mark_figure(w)
        nb.nudge_slider(w, "beam size", -3)
        nb.wait_redrawn(w)  # a new beam may give the same translation: redrawn, not changed
        assert int(nb.slider_value(w, "beam size")) == beam - 3
        assert f"English (beam size {beam - 3}):" in w.inner_text()
        assert nb.text_value(w, "German") == "Eine Katze schläft neben dem Blumfelder."
        _assert_clean(nb)
        _assert_screenshot_shows_figure(nb, w, server.work_dir)

        en_de = convs2s.pretrained("en-de", device="cpu")
        w = nb.widget(BOTH_DIRECTIONS)  # the box's label changes with the direction
        nb.mark_figure(w)
        nb.select(w, "direction", _option("English → German"))
        nb.wait_redrawn(w)
        assert nb.text_value(w, "English") == analysis.WIDGET_SENTENCES["en-de"]
        beam = int(nb.slider_value(w, "beam size"))
        expected = en_de.translate(analysis.WIDGET_SENTENCES["en-de"], beam_size=beam)
        assert f"German (beam size {beam}): {expected}" in w.inner_text()

        typed = "Two dogs are running on the beach."
        nb.mark_figure(w)
        nb.enter_text(w, "English", typed)
        nb.wait_redrawn(w)
        assert f"German (beam size {beam}): {en_de.translate(typed, beam_size=beam)}" in (
            w.inner_text())

        nb.mark_figure(w)
        nb.select(w, "direction", _option("German → English"))
        nb.wait_redrawn(w)
        assert nb.text_value(w, "German") == analysis.WIDGET_SENTENCES["de-en"]
        assert "English (beam size" in w.inner_text() and "German (" not in w.inner_text()
        _assert_clean(nb)


#: Notebook 06's translator, found by the labels that stay whatever the direction.
BOTH_DIRECTIONS = SimpleNamespace(box=".widget-vbox", labels=("direction", "beam size"))
#: ipywidgets shows a dropdown's option labels with non-breaking spaces.
NBSP = "\u00a0"


def _option(label: str) -> str:
    return label.replace(" ", NBSP)


def _png_pixels(data: bytes):
    import io

    import numpy as np
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.int16)


def _assert_screenshot_shows_figure(nb, w, keep_in: Path, margin: int = 10) -> None:
    """`make images` captures the widget itself: its figure's pixels sit where the page has them.

    (A screenshot of the wrong part of the page, which JupyterLab's scrolling once caused for
    this tall widget, has the right size but other pixels.) On a mismatch the screenshot and
    the figure are kept in ``keep_in`` to look at.
    """
    import base64

    png = nb.screenshot(w, margin=margin)
    shot = _png_pixels(png)
    box, img = w.bounding_box(), nb.figure(w)  # the screenshot leaves the page as it was
    figure = _png_pixels(base64.b64decode(img.get_attribute("src").split(",", 1)[1]))
    shown = img.evaluate("e => [e.clientWidth, e.clientHeight]")
    assert list(shown) == [figure.shape[1], figure.shape[0]], "figure drawn scaled"
    clip = screenshots.clip_around(box, margin)
    assert (shot.shape[1], shot.shape[0]) == (clip["width"], clip["height"])
    ib = img.bounding_box()
    # where the page has the figure, give or take the browser's rounding of a fractional
    # position to whole pixels
    top, left = ib["y"] - clip["y"], ib["x"] - clip["x"]
    fits = []
    for t in {math.floor(top), math.ceil(top)}:
        for col in {math.floor(left), math.ceil(left)}:
            crop = shot[t:t + figure.shape[0], col:col + figure.shape[1]]
            if t >= 0 and col >= 0 and crop.shape == figure.shape:
                fits.append(float(abs(crop - figure).mean()))
    if not fits or min(fits) >= 2.0:
        (keep_in / "screenshot.png").write_bytes(png)
        (keep_in / "figure.png").write_bytes(base64.b64decode(img.get_attribute("src")
                                                              .split(",", 1)[1]))
    assert fits, f"the figure is cut off in the screenshot (see {keep_in})"
    assert min(fits) < 2.0, f"the screenshot does not show the widget's figure (see {keep_in})"


def test_missing_browser_says_how_to_enable_it(monkeypatch, tmp_path):
    """Without Chromium the skip message tells the learner what to install or set."""
    monkeypatch.setenv("CONVS2S_CHROMIUM", str(tmp_path / "no-such-chromium"))
    reason = screenshots.browser_unavailable()
    if reason and "playwright" in reason:
        pytest.skip(reason)
    assert reason is not None
    assert "apt-get install chromium" in reason and "CONVS2S_CHROMIUM" in reason


# --------------------------------------------------------------------------------------------
# The lab's own state (no browser needed)
# --------------------------------------------------------------------------------------------


def test_lab_token_is_random(tmp_path):
    """13: the token comes from `secrets`: long, different every time, not the pid or port."""
    labs = [screenshots.JupyterLab(tmp_path, tmp_path / f"lab{i}") for i in range(3)]
    tokens = [lab.token for lab in labs]
    assert len(set(tokens)) == 3
    for lab in labs:
        assert len(lab.token) >= 32
        assert str(os.getpid()) not in lab.token and str(lab.port) not in lab.token
        assert re.fullmatch(r"[A-Za-z0-9_-]+", lab.token)
        assert lab.environment()["JUPYTER_TOKEN"] == lab.token


def test_lab_has_its_own_runs_folder_and_settings(tmp_path, monkeypatch):
    """14: the kernels train into the lab's own runs folder whatever the caller's environment
    says, read no user matplotlib settings, and get the data folder as an absolute path."""
    monkeypatch.setenv("CONVS2S_RUNS_DIR", str(tmp_path / "learners_runs"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVS2S_DATA_DIR", "data/multi30k")
    lab = screenshots.JupyterLab(tmp_path / "notebooks", tmp_path / "lab",
                                 env={"CONVS2S_QUICK": "1"})
    env = lab.environment()
    assert env["CONVS2S_RUNS_DIR"] == str(tmp_path / "lab" / "runs") == str(lab.runs_dir)
    assert env["CONVS2S_DATA_DIR"] == str((tmp_path / "data" / "multi30k").resolve())
    assert env["MPLCONFIGDIR"].startswith(str(tmp_path / "lab"))
    assert env["CONVS2S_QUICK"] == "1" and "MPLBACKEND" not in env
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTERLAB_SETTINGS_DIR",
                 "JUPYTERLAB_WORKSPACES_DIR", "IPYTHONDIR"):
        assert env[name].startswith(str(tmp_path / "lab")), name
    assert not (tmp_path / "lab").exists(), "environment() must not create anything"
    # a caller can still choose the runs folder explicitly
    chosen = screenshots.JupyterLab(tmp_path, tmp_path / "lab2",
                                    env={"CONVS2S_RUNS_DIR": str(tmp_path / "mine")})
    assert chosen.environment()["CONVS2S_RUNS_DIR"] == str(tmp_path / "mine")
    assert chosen.runs_dir == tmp_path / "mine"


def test_copy_leaves_runs_behind(tmp_path):
    """The lab's notebooks are a copy without runs/ or checkpoints of earlier runs."""
    src = tmp_path / "notebooks"
    (src / "runs" / "05_quick").mkdir(parents=True)
    (src / "runs" / "05_quick" / "best.pt").write_bytes(b"x")
    (src / "01_x.ipynb").write_text("{}")
    copy = screenshots.copy_notebooks(src, tmp_path / "copy")
    assert sorted(p.name for p in copy.iterdir()) == ["01_x.ipynb"]



def test_screenshot_clip_is_on_whole_pixels_around_the_box():
    box = {"x": 20.5, "y": 110.25, "width": 640.5, "height": 433.6}
    clip = screenshots.clip_around(box, 10)
    assert all(isinstance(v, int) for v in clip.values())
    assert clip["x"] <= box["x"] - 10 and clip["y"] <= box["y"] - 10
    assert clip["x"] + clip["width"] >= box["x"] + box["width"] + 10
    assert clip["y"] + clip["height"] >= box["y"] + box["height"] + 10
    assert screenshots.clip_around({"x": 3, "y": 0, "width": 5, "height": 5}, 10)["x"] == 0


def test_screenshots_cli_refuses_a_bad_out_in_one_line(tmp_path, capsys):
    """A file given as --out is refused before any work: one line, exit 2, nothing touched."""
    a_file = tmp_path / "images"
    a_file.write_text("not a folder")
    for out in (a_file, a_file / "sub"):
        assert screenshots.main(["--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and "not a folder" in err[0]
    assert a_file.read_text() == "not a folder"



@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
@pytest.mark.parametrize("tool", ["screenshots", "site_screenshots", "site"])
def test_an_out_where_nothing_can_be_made_is_one_line_before_any_work(tool, tmp_path, capsys):
    """/proc takes no folder, though os.access says root may write there: each tool that makes
    an --out folder finds it out first (by trying), in one line, not as a traceback after."""
    from tools import site, site_screenshots

    mains = {"screenshots": screenshots.main, "site_screenshots": site_screenshots.main,
             "site": site.main}
    args = ["--out", "/proc/convs2s-no/such"]
    if tool == "site_screenshots":
        (tmp_path / "index.html").write_text("<html></html>")
        args += ["--site", str(tmp_path)]
    assert mains[tool](args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: cannot write into /proc"), err


def test_screenshots_cli_refuses_a_checkpoint_that_is_not_a_file(tmp_path, capsys):
    """--checkpoint (notebook 06's trained model for the README picture) is checked first."""
    if screenshots.browser_unavailable():
        pytest.skip("the browser check comes first; covered where a browser exists")
    for wrong, said in ((tmp_path / "missing.pt", "is not a file"), (tmp_path, "is a folder")):
        assert screenshots.main(["--out", str(tmp_path / "images"),
                                 "--checkpoint", str(wrong)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{said}: name a checkpoint" in err[0]
    assert not (tmp_path / "images").exists()  # nothing made


def test_the_lab_drops_a_checkpoint_the_caller_did_not_give(tmp_path, monkeypatch):
    """A CONVS2S_CHECKPOINT in the developer's shell does not leak into the tests' lab."""
    monkeypatch.setenv("CONVS2S_CHECKPOINT", "/somewhere/final.pt")
    assert "CONVS2S_CHECKPOINT" not in screenshots.JupyterLab(tmp_path, tmp_path).environment()
    lab = screenshots.JupyterLab(tmp_path, tmp_path, env={"CONVS2S_CHECKPOINT": "/m/final.pt"})
    assert lab.environment()["CONVS2S_CHECKPOINT"] == "/m/final.pt"


def test_every_widget_has_a_screenshot_stage():
    """`make images` knows how to pose every widget it finds (a new widget needs its stage)."""
    assert set(screenshots.STAGES) == set(WIDGETS)


def test_a_second_browser_opens_while_the_first_is_open_and_each_closes_alone():
    """In a test worker the site's browser stays open for the whole run while a test file opens
    its own (parallel `make test`): Playwright's synchronous API refuses a second driver in one
    thread, so the browsers share one, stopped when the last closes."""
    _require_browser()
    with screenshots.Browser() as first:
        with screenshots.Browser() as second:
            page = second.browser.new_page()
            page.set_content("<p>second</p>")
            assert page.inner_text("p") == "second"
        page = first.browser.new_page()  # the first still works after the second closed
        page.set_content("<p>first</p>")
        assert page.inner_text("p") == "first"
    with screenshots.Browser() as again:  # and a new one starts after all closed
        page = again.browser.new_page()
        page.set_content("<p>again</p>")
        assert page.inner_text("p") == "again"
