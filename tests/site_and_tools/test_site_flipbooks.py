"""Notebooks 03, 04 and 05's widgets on the website, with no kernel: tools/site/flipbooks.py and
static/flipbook.js.

Without a browser: the data the build draws from equal what the package and the notebooks
compute (03: the notebook's own tiny_model, typed here again; 04 and 05: the committed JSON
against the notebooks' stored outputs), and bad input stops with one line. With the built site
(conftest.py's ``built``): each frame file is the one rendered for its setting. In Chromium
(``web``, ``tab``): what the page draws for every setting of 03's controls equals the package's
numbers, and moving each control shows the right figure, at 1280 and 375 px. On a 375 px phone
04's and 05's flipbooks show one decoder layer at a time (a layer selector), fit the window's
width, keep the slider and the selector in view, and their text is 11 px or more.
"""

import json
import re
from pathlib import Path

import pytest

from convs2s.course.widgets import declared
from tools import badges, site
from tools.screenshots import WIDGETS
from tools.site import flipbook_data, flipbooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PAGES = {"decoder-explorer": "03_causal_decoder.html",
         "attention-by-sentence": "04_multi_step_attention.html",
         "attention-by-epoch": "05_training_on_multi30k.html"}


def _notebook(name: str) -> dict:
    return json.loads((NOTEBOOKS / f"{name}.ipynb").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def decoder_numbers():
    """Every setting of notebook 03's widget, as the build computes it (a few seconds)."""
    return flipbooks.decoder_numbers(_notebook("03_causal_decoder"))


# --------------------------------------------------------------------------------------------
# The data, without a browser
# --------------------------------------------------------------------------------------------


def _notebooks_tiny_model(padding, kernel_size, layers):
    """Notebook 03's widget_model, typed again from the notebook: tiny_model(padding, seed=0,
    dim=16, ...) with its vocabularies' sizes (its output prints "de 3,257 / en 2,955")."""
    import torch

    from convs2s.model import ConvS2S

    torch.manual_seed(0)
    return ConvS2S(3257, 2955, emb_dim=16, hid_dim=16, enc_layers=layers, dec_layers=layers,
                   kernel_size=kernel_size, dropout=0.1, max_positions=128, src_pad_idx=1,
                   trg_pad_idx=1, decoder_padding=padding).eval()


def _expected_decoder(padding, k, layers, position):
    """Notebook 03's show_decoder: (the visible map as 0/1 rows, the perturbation effect)."""
    import torch

    from convs2s.course import dependency

    w_src = torch.randint(4, 3257, (1, 6), generator=torch.Generator().manual_seed(0))
    w_trg = torch.randint(4, 2955, (1, 16), generator=torch.Generator().manual_seed(1))
    visible = dependency.visible_positions(k, layers, padding, 16)
    effect = dependency.perturbation_effect(_notebooks_tiny_model(padding, k, layers), w_src,
                                            w_trg, position)
    return [[int(v) for v in row] for row in visible.tolist()], effect.tolist()


def _same(got: list[float], expected: list[float]) -> bool:
    """Equal to 4 significant digits (what the page holds); a 0 is exactly 0."""
    return len(got) == len(expected) and all(
        (g == 0) == (e == 0) and g == pytest.approx(e, rel=6e-4)
        for g, e in zip(got, expected, strict=True))


def test_the_decoder_numbers_equal_the_packages_with_the_notebooks_tiny_model(decoder_numbers):
    assert [(c["name"], c["label"]) for c in decoder_numbers["controls"]] == [
        (c.name, c.label) for c in declared("decoder-explorer").controls], "as declared"
    assert [(c["value"], c["min"], c["max"], c["step"], c["options"])
            for c in decoder_numbers["controls"]] == [
        ("causal", None, None, None, ["causal", "same"]), (3, 1, 9, 2, []), (2, 1, 6, 1, []),
        (6, 0, 15, 1, [])], "the notebook's controls: ranges and starting values"
    assert len(decoder_numbers["settings"]) == 2 * 5 * 6
    for padding, k, layers, position in [("causal", 3, 2, 6), ("same", 3, 2, 6),
                                         ("causal", 9, 6, 0), ("same", 1, 1, 15),
                                         ("same", 7, 4, 9), ("causal", 5, 3, 12)]:
        setting = decoder_numbers["settings"][f"{padding},{k},{layers}"]
        visible, effect = _expected_decoder(padding, k, layers, position)
        assert [[int(c) for c in row] for row in setting["visible"]] == visible
        assert _same(setting["effect"][position], effect), (padding, k, layers, position)
    # a "same" decoder reads the token it is asked to predict: earlier positions move
    assert any(e > 0 for e in decoder_numbers["settings"]["same,3,2"]["effect"][6][:6])
    assert all(e == 0 for e in decoder_numbers["settings"]["causal,3,2"]["effect"][6][:6])


def test_the_comparison_fails_on_a_wrong_number(decoder_numbers):
    """The check above can fail: one bar off by 0.1 %, or a 0 that is not one, is caught."""
    _, effect = _expected_decoder("same", 3, 2, 6)
    wrong = list(effect)
    wrong[7] *= 1.001
    assert not _same(wrong, effect)
    wrong = list(effect)
    wrong[15] = 1e-9 if effect[15] == 0 else 0.0
    assert not _same(wrong, effect)


def test_the_rounding_keeps_4_significant_digits_and_zero():
    assert flipbooks.rounded(0.123456) == 0.1235 and flipbooks.rounded(1.23456e-7) == 1.235e-7
    assert flipbooks.rounded(0.0) == 0.0


# The epochs of the run behind notebook 05's stored outputs (its widget starts at the last):
# the committed data's count, which the first test below checks against the notebook.
LAST_EPOCH = flipbooks.read_json(flipbooks.EPOCHS_05)["epochs"]


def _stored_widget_text(name: str) -> str:
    """What notebook ``name``'s widget printed when the notebook was saved."""
    state = _notebook(name)["metadata"]["widgets"][site.WIDGET_STATE]["state"]
    return "".join("".join(out.get("text", "")) for m in state.values()
                   for out in m.get("state", {}).get("outputs", []) or [])


def test_the_05_data_are_the_run_the_notebook_shows():
    """The committed JSON gives what notebook 05 printed: its widget's line for the last epoch
    (the saved widget's output, which the package's analysis.attention_epoch_line writes), the
    watched sentence and the number of epochs."""
    from convs2s.course import analysis

    data = flipbooks.read_json(flipbooks.EPOCHS_05)
    recorded = analysis.attention_by_epoch(data["history"])
    last = len(recorded)
    assert data["epochs"] == last == LAST_EPOCH
    assert [e for e, _ in recorded] == list(range(1, last + 1)), "every epoch recorded"
    assert analysis.attention_epoch_line(recorded, last - 1) == _stored_widget_text(
        "05_training_on_multi30k").strip()
    nb = _notebook("05_training_on_multi30k")
    assert flipbooks.stored_output(nb, r"^watched sentence: (.*)$").group(1) == " ".join(
        data["watched"]["src"])
    assert flipbooks.stored_output(nb, r"^(\d+) epochs recorded").group(1) == str(len(recorded))
    # a wrong record would not give the stored line
    wrong = [(e, a.clone()) for e, a in recorded]
    wrong[-1][1][0, 0, 0] = 0.9
    assert analysis.attention_epoch_line(wrong, last - 1) != _stored_widget_text(
        "05_training_on_multi30k").strip()


def test_the_05_frames_are_the_slider_values_and_name_the_recorded_epochs():
    """One frame per record, at the slider's value (1, 2, ...: the notebook's show_epoch draws
    record value - 1), with the package's line and the epoch that recorded it, in a run that
    recorded only some epochs."""
    from convs2s.course import analysis

    def maps(p):  # [2 layers, 2 target, 3 source tokens]
        return [[[p, 1 - p, 0.0], [0.0, p, 1 - p]]] * 2

    history = [{"epoch": e, "valid_loss": 5.0 - e / 4, **({"attention": maps(p)} if p else {})}
               for e, p in ((1, None), (2, 0.5), (3, None), (5, 0.75), (9, 0.875))]
    data = {"history": history, "watched": {"src": ["▁ein", "▁hund", "."], "trg": ["▁a", "."]}}
    recorded = analysis.attention_by_epoch(history)
    frames = flipbooks.epoch_frames(data)
    assert [f.value for f in frames] == [1, 2, 3]
    assert [f.text for f in frames] == [analysis.attention_epoch_line(recorded, i)
                                        for i in range(3)]
    assert frames[1].text.startswith("epoch 5: ") and "(epoch 2: " in frames[1].text
    assert "after epoch 5 of 9 (validation loss 3.750)" in frames[1].alt
    assert frames[1].caption.startswith("epoch 5 of 9: ")


def test_the_04_figure_is_the_one_the_notebooks_widget_stored():
    """Notebook 04's widget figure is the package's attention_maps.plot_sentence_attention (which
    the site's frames draw too): drawn from the numbers the saved widget's figure carries (its
    attention, to 4 decimals, and tokens) with the translation and reference the notebook
    printed for that sentence, it has the stored figure's layer titles, title and size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from convs2s.course import attention_maps, figure_data
    from convs2s.run.translator import Translation

    nb = _notebook("04_multi_step_attention")
    state = nb["metadata"]["widgets"][site.WIDGET_STATE]["state"]
    [output] = [out for m in state.values() for out in m.get("state", {}).get("outputs", []) or []
                if figure_data.numbers(out, "attention")]
    stored = figure_data.numbers(output, "attention")
    english, text = (flipbooks.stored_output(nb, rf"^{w}:\s+(.*)$").group(1)
                     for w in ("reference", "translation"))
    for attention, same in ((torch.tensor(stored["attention"]), True),
                            (torch.softmax(torch.zeros_like(torch.tensor(stored["attention"])),
                                           dim=-1), False)):  # another attention: not the same
        fig = attention_maps.plot_sentence_attention(
            Translation(stored["src_tokens"], stored["trg_tokens"], text, attention), english)
        try:
            drawn = figure_data.payload(fig)
            assert (drawn["titles"] == stored["titles"]) is same
            assert drawn["title"] == stored["title"]
            assert repr(fig) == "".join(output["data"]["text/plain"])  # <Figure size 1448x342 ...
        finally:
            plt.close(fig)


def test_the_05_data_equal_a_new_export_of_the_run_where_it_exists():
    if not flipbook_data.RUN_05.is_file():
        pytest.skip(f"{flipbook_data.RUN_05} exists only where notebook 05 was run")
    assert flipbook_data.epochs_05(flipbook_data.RUN_05) == flipbooks.read_json(
        flipbooks.EPOCHS_05)


def test_the_04_data_cover_the_notebooks_sentence_and_evenly_spaced_ones():
    data = flipbooks.read_json(flipbooks.SENTENCES_04)
    nb = _notebook("04_multi_step_attention")
    chosen = int(flipbooks.stored_output(nb, r"^validation sentence (\d+) ").group(1))
    control = flipbooks.saved_controls(nb, "attention-by-sentence")["sentence"]
    assert data["notebook_sentence"] == chosen == control.value
    assert data["total"] == control.max + 1
    indices = [s["index"] for s in data["sentences"]]
    assert indices == flipbook_data.spaced_indices(data["total"], chosen)
    german, english = (flipbooks.stored_output(nb, rf"^{w}:\s+(.*)$").group(1)
                       for w in ("source", "reference"))
    assert (data["sentences"][indices.index(chosen)]["german"],
            data["sentences"][indices.index(chosen)]["english"]) == (german, english)


def test_spaced_indices_are_even_and_hold_the_chosen_one():
    assert flipbook_data.spaced_indices(1014, 1) == sorted(
        {0, 1, 44, 88, 132, 176, 220, 264, 308, 352, 396, 440, 484, 529, 573, 617, 661, 705,
         749, 793, 837, 881, 925, 969, 1013})
    assert flipbook_data.spaced_indices(10, 3, n=4) == [0, 3, 6, 9]


def test_bad_notebooks_and_data_stop_with_one_line(tmp_path, monkeypatch, capsys):
    nb = {"cells": [{"cell_type": "code", "source": "%pip install x\n"},
                    {"cell_type": "code", "source": "W_LEN = 16\n"}], "metadata": {}}
    problems = []
    for call in (lambda: flipbooks.notebook_code(nb, {"W_LEN", "tiny_model"}),
                 lambda: flipbooks.saved_controls(nb, "attention-by-epoch"),
                 lambda: flipbooks.stored_output(nb, r"vocabularies"),
                 lambda: flipbooks.read_json(tmp_path / "missing.json")):
        with pytest.raises(flipbooks.FlipbookError) as err:
            call()
        problems.append(str(err.value))
    assert all("\n" not in p for p in problems), problems
    assert "tiny_model" in problems[0] and "'attention-by-epoch'" in problems[1]
    assert "missing.json" in problems[3] and "flipbook_data" in problems[3]
    assert flipbooks.notebook_code(nb, {"W_LEN"}).body[0].targets[0].id == "W_LEN"
    # the site's build: one line, exit 2, no site written
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(flipbooks, "SENTENCES_04", tmp_path / "missing.json")
    assert site.main(["--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "missing.json" in err
    assert not (tmp_path / "site").exists()


def test_the_flipbook_data_tool_refuses_a_missing_run_in_one_line(tmp_path, capsys):
    before = flipbooks.SENTENCES_04.read_bytes()
    assert flipbook_data.main(["--run", str(tmp_path / "none.pt"),
                               "--notebooks", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert flipbooks.SENTENCES_04.read_bytes() == before, "nothing written"


@pytest.mark.parametrize("widget", list(PAGES))
def test_each_widget_is_a_flipbook_on_its_page_not_a_picture(widget):
    name = flipbooks.NOTEBOOKS[widget]
    nb = _notebook(name)
    repo = badges.read_repository_url(ROOT / "pyproject.toml").rstrip("/")
    out = site.site_notebook(nb, site.read_lesson(NOTEBOOKS / f"{name}.ipynb", nb), repo,
                             {spec.image for spec in WIDGETS.values()})
    live = [c["source"] for c in out.notebook["cells"] if f'data-widget="{widget}"' in
            c.get("source", "")]
    assert len(live) == 1 and ":class: widget-live" in live[0]
    assert site.LIVE_NOTE_TITLE in live[0]
    assert f'<script src="{flipbooks.STATIC}/{widget}.js"></script>' in live[0]
    assert not any(Path(spec.notebook).stem == name for spec in WIDGETS.values()
                   if spec.image in out.images)
    if widget == "attention-by-sentence":  # says truthfully where the maps come from
        assert "shipped translator" in live[0] and "not from the 3-epoch model" in live[0]
        assert "25 of the 1,014 validation sentences" in live[0]
    if widget == "attention-by-epoch":
        data = flipbooks.read_json(flipbooks.EPOCHS_05)
        assert data["run_id"] in live[0] and data["preset"] in live[0]


# --------------------------------------------------------------------------------------------
# The built site's files
# --------------------------------------------------------------------------------------------


def _payload(built, widget: str) -> dict:
    text = (built.out / flipbooks.STATIC / f"{widget}.js").read_text(encoding="utf-8")
    found = re.search(rf"window\.convs2sFlipbooks\[{re.escape(json.dumps(widget))}\] = (.*);\n",
                      text)
    return json.loads(found.group(1))


@pytest.mark.slow
def test_the_built_decoder_numbers_are_the_packages(built, decoder_numbers):
    assert _payload(built, "decoder-explorer") == decoder_numbers


@pytest.mark.slow
def test_each_frame_file_is_the_one_rendered_for_its_setting(built):
    import convs2s

    expected = {
        "attention-by-sentence": flipbooks.sentence_frames(
            flipbooks.read_json(flipbooks.SENTENCES_04), convs2s.pretrained("de-en", "cpu")),
        "attention-by-epoch": flipbooks.epoch_frames(flipbooks.read_json(flipbooks.EPOCHS_05))}
    for widget, frames in expected.items():
        payload = _payload(built, widget)
        assert [(f["value"], f["src"], f["alt"], f["text"]) for f in payload["frames"]] == [
            (f.value, f"{flipbooks.STATIC}/{f.file}", f.alt, f.text) for f in frames]
        for f, shown in zip(frames, payload["frames"], strict=True):
            assert (built.out / flipbooks.STATIC / f.file).read_bytes() == f.png, f.file
            assert len(f.layers) == 4 and shown["caption"] == f.caption
            assert [x["src"] for x in shown["layers"]] == [
                f"{flipbooks.STATIC}/{f.layer_file(i)}" for i in range(4)]
            for i, svg in enumerate(f.layers):  # each layer's drawing, made for its setting
                assert (built.out / flipbooks.STATIC / f.layer_file(i)).read_bytes() == svg
    assert _payload(built, "attention-by-sentence")["value"] == 1, "the notebook's sentence"
    assert _payload(built, "attention-by-epoch")["value"] == LAST_EPOCH, \
        "the notebook's last epoch"


# --------------------------------------------------------------------------------------------
# In Chromium
# --------------------------------------------------------------------------------------------


def _move(root, name, value):
    root.locator(f"[name='{name}']").evaluate(
        "(e, v) => { e.value = v; e.dispatchEvent(new Event('input', {bubbles: true})); }",
        str(value))


_DRAWN = """r => ({
  visible: [...r.querySelectorAll('rect[data-code]')].map(e =>
    [+e.dataset.i, +e.dataset.j, +e.dataset.code]),
  effect: [...r.querySelectorAll('rect[data-value]')].map(e => +e.dataset.value),
  highlight: +r.querySelector('rect.highlight').dataset.position,
  titles: [...r.querySelectorAll('.panel-title')].map(e => e.textContent),
})"""


def _expected_drawing(padding, k, layers, position):
    visible, effect = _expected_decoder(padding, k, layers, position)
    codes = [[i, j, (2 if j > i else 1) if on else 0] for i, row in enumerate(visible)
             for j, on in enumerate(row)]
    future = sum(c == 2 for *_, c in codes)
    moved = sum(e > 0 for e in effect[:position])
    return codes, effect, [f"visible inputs ({future} future cells seen)",
                           f"change token {position}: {moved} earlier positions move"]


@pytest.mark.browser
@pytest.mark.slow
def test_the_decoder_explorer_draws_the_packages_numbers_for_every_setting(tab):
    import torch

    from convs2s.course import dependency

    tab.open(PAGES["decoder-explorer"])
    root = tab.page.locator(".convs2s-flipbook[data-widget='decoder-explorer']")
    settings = [(p, k, n, t) for p in ("causal", "same") for k in (1, 3, 5, 7, 9)
                for n in range(1, 7) for t in range(16)]
    drawn = root.evaluate(f"""(r, settings) => settings.map(([p, k, n, t]) => {{
        for (const [name, v] of [['padding', p], ['kernel_size', k], ['n_layers', n],
                                 ['position', t]]) {{
          r.querySelector(`[name='${{name}}']`).value = v;
        }}
        r.querySelector('form').dispatchEvent(new Event('input', {{bubbles: true}}));
        return ({_DRAWN})(r);
      }})""", settings)
    w_src = torch.randint(4, 3257, (1, 6), generator=torch.Generator().manual_seed(0))
    w_trg = torch.randint(4, 2955, (1, 16), generator=torch.Generator().manual_seed(1))
    wrong = []
    for p, k, n in dict.fromkeys(s[:3] for s in settings):
        visible = dependency.visible_positions(k, n, p, 16).tolist()
        codes = [[i, j, (2 if j > i else 1) if on else 0] for i, row in enumerate(visible)
                 for j, on in enumerate(row)]
        model = _notebooks_tiny_model(p, k, n)
        for t in range(16):
            got = drawn[settings.index((p, k, n, t))]
            effect = dependency.perturbation_effect(model, w_src, w_trg, t).tolist()
            if got["visible"] != codes or not _same(got["effect"], effect) or \
                    got["highlight"] != t:
                wrong.append((p, k, n, t))
    assert not wrong, f"{len(wrong)} of {len(settings)} settings differ, e.g. {wrong[:3]}"
    assert tab.problems() == []


def _fits(root) -> bool:
    """The widget's figure lies wholly inside the article's column and the window, or in a box
    inside them that scrolls sideways (a figure at its own size on a phone)."""
    return root.evaluate("""r => {
      const column = r.closest('.bd-article').getBoundingClientRect();
      const right = Math.min(column.right, window.innerWidth) + 0.5;
      const holder = (e) => {
        for (let p = e.parentElement; p && p !== r; p = p.parentElement) {
          if (['auto', 'scroll'].includes(getComputedStyle(p).overflowX)) return p;
        }
        return e;
      };
      return [...r.querySelectorAll('svg, img')].every(e => {
        const b = holder(e).getBoundingClientRect();
        return e.getBoundingClientRect().width > 0 && b.left >= column.left - 0.5 &&
          b.right <= right; });
    }""")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 375])
def test_moving_each_decoder_control_redraws_the_packages_figure(tab, width):
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open(PAGES["decoder-explorer"])
    root = tab.page.locator(".convs2s-flipbook[data-widget='decoder-explorer']")
    assert root.count() == 1 and root.is_visible()
    assert tab.page.locator("img[src$='widget_03_decoder.png']").count() == 0
    labels = root.locator(".live-control span").all_inner_texts()
    assert labels == list(declared("decoder-explorer").labels), "the declared labels"

    def shown():
        d = root.evaluate(_DRAWN)
        return d["visible"], d["effect"], d["titles"]

    def same(got, expected):
        return got[0] == expected[0] and _same(got[1], expected[1]) and got[2] == expected[2]

    state = {"padding": "causal", "kernel_size": 3, "n_layers": 2, "position": 6}
    assert same(shown(), _expected_drawing(*state.values())), "the notebook's start"
    for name, value in [("position", 3), ("padding", "same"), ("kernel_size", 5),
                        ("n_layers", 4), ("position", 15), ("padding", "causal")]:
        before = shown()
        _move(root, name, value)
        state[name] = value
        now = shown()
        assert now != before, f"moving {name} to {value} changed nothing"
        assert same(now, _expected_drawing(*state.values())), (name, value)
    assert _fits(root), f"the figure fits the column at {width} px"
    assert tab.problems() == []


def _frames_loaded(tab) -> list[str]:
    return tab.page.evaluate("""() => performance.getEntriesByType('resource')
        .map(e => e.name).filter(n => n.includes('/_static/flipbooks/') &&
                                      /\\.(png|svg)$/.test(n))
        .map(n => n.split('/').pop())""")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 375])
@pytest.mark.parametrize("widget, name, moves", [
    ("attention-by-sentence", "sentence", [(0, 0), (24, 1013), (12, 484), (1, 1)]),
    ("attention-by-epoch", "epoch",
     [(1, 1), (LAST_EPOCH // 2, LAST_EPOCH // 2), (LAST_EPOCH, LAST_EPOCH)]),
])
def test_moving_the_slider_shows_that_settings_frame(built, tab, width, widget, name, moves):
    payload = _payload(built, widget)
    frames = {f["value"]: f for f in payload["frames"]}
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open(PAGES[widget])
    root = tab.page.locator(f".convs2s-flipbook[data-widget='{widget}']")
    assert root.count() == 1 and root.is_visible()
    assert root.locator(".live-control span").inner_text() == payload["label"]
    img = root.locator("img.flipbook-frame")

    def shown():
        img.evaluate("i => i.decode()")
        return {"src": img.get_attribute("src"), "alt": img.get_attribute("alt"),
                "text": root.locator(".live-text").inner_text(),
                "value": root.locator("output").inner_text(),
                "loaded": img.evaluate("i => i.complete && i.naturalWidth > 0"),
                "link": root.locator("a.site-figure-full").get_attribute("href")}

    def expected(value):  # a phone shows decoder layer 1, a wide screen every layer
        f = frames[value]
        shown = f["layers"][0] if width < 720 else f
        return {"src": shown["src"], "alt": shown["alt"], "text": f["text"], "value": str(value),
                "loaded": True, "link": shown["src"]}

    assert shown() == expected(payload["value"]), "the notebook's starting value"
    assert _frames_loaded(tab) == [Path(expected(payload["value"])["src"]).name], \
        "only the frame shown is downloaded"
    for position, value in moves:
        before = shown()
        _move(root, name, position)
        now = shown()
        assert now == expected(value), (position, value)
        assert now != before, f"moving {name} to {position} changed nothing"
        assert _fits(root), f"the frame fits the column at {width} px"
    assert tab.problems() == []


# --------------------------------------------------------------------------------------------
# 04's and 05's flipbooks on a phone: one layer at a time, the controls in view
# --------------------------------------------------------------------------------------------

PICTURES = {"attention-by-sentence": "sentence", "attention-by-epoch": "epoch"}

_LAYOUT = """r => {
  const inView = (e) => {  // wholly in the window and the topmost element at its centre
    const b = e.getBoundingClientRect();
    const hit = document.elementFromPoint((b.left + b.right) / 2, (b.top + b.bottom) / 2);
    return b.width > 0 && b.left >= -0.5 && b.right <= innerWidth + 0.5 && b.top >= -0.5 &&
      b.bottom <= innerHeight + 0.5 && !!hit && (e.contains(hit) || hit.contains(e));
  };
  const img = r.querySelector('img.flipbook-frame'), box = img.getBoundingClientRect();
  const all = r.querySelector('input[name="layer"][value="all"]');
  return {
    page: document.documentElement.scrollWidth, window: innerWidth,
    root: [r.getBoundingClientRect().left, r.getBoundingClientRect().right,
           r.scrollWidth, r.clientWidth],
    img: [box.left, box.right, box.width, img.naturalWidth], imgBottom: box.bottom,
    src: img.getAttribute('src'), layer: r.dataset.layer,
    slider: inView(r.querySelector('input[type="range"]')),
    selector: inView(r.querySelector('.flipbook-layers')),
    layerOne: inView(r.querySelector('input[name="layer"][value="1"]').closest('label')),
    allOffered: all.checkVisibility(),
    caption: r.querySelector('.flipbook-caption').checkVisibility() ?
      r.querySelector('.flipbook-caption').innerText : null,
  };
}"""


def _scroll_to(tab, root, where: str) -> None:
    """Scroll the window so that the flipbook's top (``"top"``) or its picture's bottom
    (``"bottom"``) is at the window's edge, and wait for the scroll to be done."""
    root.evaluate("""(r, where) => {
      const img = r.querySelector('img.flipbook-frame');
      const y = where === 'top' ? r.getBoundingClientRect().top
        : img.getBoundingClientRect().bottom - innerHeight;
      window.scrollBy(0, y);
    }""", where)
    tab.page.wait_for_function("""([where]) => {
      const r = document.querySelector('.convs2s-flipbook[data-widget^="attention"]');
      const img = r.querySelector('img.flipbook-frame');
      const at = where === 'top' ? r.getBoundingClientRect().top
        : img.getBoundingClientRect().bottom - innerHeight;
      return Math.abs(at) < 2 || (where === 'bottom' && at < 2);
    }""", arg=[where])


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("widget", list(PICTURES))
def test_on_a_phone_the_flipbook_shows_one_layer_fits_and_keeps_its_controls_in_view(
        built, tab, widget, scheme):
    from test_site_phone import SMALLEST_PX, SVG_TEXT_SIZES

    from tools.site_screenshots import PHONE

    payload = _payload(built, widget)
    frames = {f["value"]: f for f in payload["frames"]}
    tab.page.emulate_media(color_scheme=scheme)
    tab.page.set_viewport_size(PHONE)
    tab.open(PAGES[widget])
    assert tab.page.evaluate("document.documentElement.dataset.theme") == scheme
    root = tab.page.locator(f".convs2s-flipbook[data-widget='{widget}']")
    img = root.locator("img.flipbook-frame")
    _scroll_to(tab, root, "top")
    img.evaluate("i => i.decode()")
    start = frames[payload["value"]]
    at = root.evaluate(_LAYOUT)
    # one layer, at its own size, inside the window: nothing scrolls sideways
    assert at["layer"] == "1" and at["src"] == start["layers"][0]["src"], at
    assert not at["allOffered"], "every layer at once is not offered on a phone"
    assert at["page"] <= at["window"], at
    left, right, scroll_width, client_width = at["root"]
    assert left >= 0 and right <= at["window"] and scroll_width <= client_width, at
    assert at["img"][0] >= left - 0.5 and at["img"][1] <= right + 0.5, at
    assert at["img"][2] == pytest.approx(at["img"][3] * 1.0, abs=1) or at["img"][2] <= right
    assert at["caption"] == start["caption"].replace("\n", "\n"), "the figure's title"
    assert at["slider"] and at["selector"] and at["layerOne"], at
    # scrolled down to the picture's bottom: the controls are still in view (sticky)
    _scroll_to(tab, root, "bottom")
    at = root.evaluate(_LAYOUT)
    assert at["imgBottom"] <= PHONE["height"] + 2
    assert at["slider"] and at["selector"], f"the controls left the window: {at}"
    # every text of the layer's drawing as displayed: 11 px or more
    sizes = img.evaluate(f"async i => ({SVG_TEXT_SIZES})([i.currentSrc, "
                         "i.getBoundingClientRect().width])")
    assert len(sizes) > 20
    small = [t for t in sizes if t["px"] < SMALLEST_PX - 0.05]
    assert small == [], small[:10]
    # a tap on another layer shows it; moving the slider shows that setting's same layer
    root.locator(".flipbook-layers label", has_text="3").click()
    assert root.evaluate("r => r.dataset.layer") == "3"
    assert img.get_attribute("src") == start["layers"][2]["src"]
    assert img.get_attribute("alt") == start["layers"][2]["alt"]
    img.evaluate("i => i.decode()")  # the reader sees layer 3 drawn before moving on
    other = payload["frames"][0] if start is not payload["frames"][0] else payload["frames"][-1]
    position = other["value"] if payload["over_values"] else payload["frames"].index(other)
    _move(root, PICTURES[widget], position)
    assert img.get_attribute("src") == other["layers"][2]["src"]
    assert root.locator(".live-text").inner_text() == other["text"]
    assert root.evaluate(_LAYOUT)["caption"] == other["caption"]
    img.evaluate("i => i.decode()")
    assert img.evaluate("i => i.complete && i.naturalWidth > 0")
    if scheme == "dark":  # the controls' words on their own background: 4.5:1 or more
        from test_site_phone import _ratio

        colours = root.evaluate("""r => {
          const c = r.querySelector('.live-controls');
          return [getComputedStyle(c.querySelector('.flipbook-layers-name')).color,
                  getComputedStyle(c).backgroundColor];
        }""")
        ink, ground = ([int(v) / 255 for v in re.findall(r"[\d.]+", c)[:3]] for c in colours)
        assert _ratio(ink, ground) >= 4.5, colours
    assert tab.problems() == []


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("widget", list(PICTURES))
def test_on_a_wide_screen_the_flipbook_starts_with_every_layer_and_offers_each(
        built, tab, widget):
    payload = _payload(built, widget)
    start = next(f for f in payload["frames"] if f["value"] == payload["value"])
    tab.page.set_viewport_size({"width": 1280, "height": 900})
    tab.open(PAGES[widget])
    root = tab.page.locator(f".convs2s-flipbook[data-widget='{widget}']")
    img = root.locator("img.flipbook-frame")
    at = root.evaluate(_LAYOUT)
    assert at["layer"] == "all" and at["src"] == start["src"] and at["allOffered"], at
    assert at["caption"] is None, "the notebook's figure has its own title"
    root.locator(".flipbook-layers label", has_text="2").click()
    assert img.get_attribute("src") == start["layers"][1]["src"]
    assert root.evaluate(_LAYOUT)["caption"] == start["caption"]
    root.locator(".flipbook-layers label", has_text="all").click()
    assert img.get_attribute("src") == start["src"]
    assert tab.problems() == []


def test_a_layers_drawing_is_the_packages_map_of_that_layer_on_every_layers_scale():
    """flipbooks.layer_figure: the package's plot_attention_grid of one layer, 3.3 inches wide,
    the colour scale of all the layers, text 9 pt or more; every other source token labelled
    above the map where the columns are too narrow for a label each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    torch.manual_seed(0)
    for src_len, staggered in ((12, False), (26, True)):
        attention = torch.rand(4, 13, src_len)
        attention[2] *= 3  # layer 3 holds the largest weight
        src = [f"▁tok{i}" for i in range(src_len)]
        trg = [f"▁out{i}" for i in range(13)]
        fig = flipbooks.layer_figure(attention, 0, src, trg, "layer 1")
        try:
            fig.canvas.draw()
            ax = fig.axes[0]
            assert fig.get_size_inches()[0] == pytest.approx(flipbooks.NARROW_INCHES)
            shown = ax.images[0].get_array()
            assert torch.allclose(torch.as_tensor(shown.data), attention[0])
            assert ax.images[0].get_clim() == (0.0, pytest.approx(float(attention.max())))
            labels = [t.get_text() for t in ax.get_xticklabels()]
            tops = [t.get_text() for a in ax.child_axes for t in a.get_xticklabels()]
            if staggered:
                assert labels == src[0::2] and tops == src[1::2]
            else:
                assert labels == src and tops == []
            sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
                     if t.get_visible() and t.get_text().strip()]
            assert min(sizes) >= 9
        finally:
            plt.close(fig)


def test_a_cached_layer_that_is_not_a_plain_drawing_is_refused():
    """A layer's SVG comes from the build's cache, and the flipbook's link opens it as a page
    of its own: anything that would run or fetch there is refused (the entry is made again)."""
    fig_svg = (b'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n<!DOCTYPE svg PUBLIC '
               b'"-//W3C//DTD SVG 1.1//EN" "x">\n<svg xmlns="http://www.w3.org/2000/svg" '
               b'xmlns:xlink="http://www.w3.org/1999/xlink">%s</svg>')
    assert flipbooks._is_svg(fig_svg % b'<g><text style="font-size: 9px">on x</text></g>')
    for bad in (b"<script>alert(1)</script>", b'<g onload="alert(1)"/>',
                b'<image xlink:href="https://example.org/x.png"/>',
                b'<foreignObject><p>x</p></foreignObject>', b'<style>@import "x";</style>',
                b'<use xlink:href="data:image/svg+xml;base64,AA"/>', b"<g>"):
        assert not flipbooks._is_svg(fig_svg % bad), bad
    assert not flipbooks._is_svg(b"<svg onload='alert(1)'/>")
