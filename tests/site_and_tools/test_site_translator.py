"""Notebook 06's translator on the website: the shipped models, one per direction, exported to
ONNX by tools/site/translator.py, running in headless Chromium with onnxruntime-web
(tools/site/static/translator.js).

"The package" here is the package computing with the weights the page downloads
(``translator.page_package``): for int8 weights, ``convs2s.pretrained`` with its matrices
replaced by their dequantised int8 values. In the browser, on the site that conftest.py builds
once, for each direction the page offers (German → English and English → German): the page's
subword pieces equal sentencepiece's for every validation sentence (and, for German, for text
that tests the normalizer); its detokenizer equals the package's; its greedy translations equal
the package's for 200 validation sentences, with the same attention, and its beam search's for
50 (beam 5 and 2); its greedy and beam-5 translations equal the package's for the first 100
test2016 sentences; over http the page fetches its gzip files as binary, exactly the bytes the
button announces for the direction chosen and nothing of the other (at most DOWNLOAD_LIMIT from
the click to the first translation). The model loads only when the reader turns to it: pressing
the button (with a progress bar; then it translates typed German, with each beam size the
slider gives, at 1280 and 375 px), or clicking into the box, which starts the download while
the reader types (Enter translates once it is loaded); after it, choosing English → German
offers that model alone (its files, the bytes announced), which then translates typed English,
switching back translates at once with nothing downloaded, and each box keeps the sentence
typed in it. Both directions ship int8 weights, within MAX_BLEU_DROP of float16 on validation
as the build measured, and the page shows those figures. The site opened from disk (file://)
translates too, from base64 chunk scripts; a browser without WebAssembly is told so and shown
pre-translated examples of each direction. Without the browser: the lock file's version is the
one vendored, the export refuses what would make the page compute other numbers than the
package, the build ships int8 only where it measured it within the bound (and float16
otherwise, saying why), the Python mirror of the page's decoding (translator_quality.py) equals
the package's, and the page starts each direction with notebook 06's sentence.
"""

import functools
import json

import pytest

from tools import site
from tools import site_screenshots as shots
from tools.site import translator

PAGE = "06_inference_beam_search_bleu.html"
#: The directions the page offers, the first shown first (translator.py MODELS).
DIRECTIONS = list(translator.MODELS)
#: Text that exercises the tokenizer's normalization: runs of spaces, leading and trailing
#: ones, a non-breaking space, decomposed umlauts (NFD), an emoji the model never saw, a tab,
#: sentencepiece's own "▁", digits and punctuation; then text that is not quite plain, which the
#: page (plainText) and the package (convs2s.data.plain_text) make plain before its pieces are
#: cut (test_site_translator_refuses.py compares those), here cut as it is: a byte order mark,
#: zero-width and other spaces, a soft hyphen, terminal colours, NUL, bidirectional controls.
ODD_TEXT = ["  Ein   Hund  ", "Ein\u00a0Hund", "Ma\u0308dchen fu\u0308ttern", "Ein 😀 Hund.",
            "Ein\tHund", "▁Ein ▁▁Hund", "Um 12:30 Uhr, 3,5 km!", "x", " ", "",
            "Große Straße; „Zitat“ – (Klammer) [eckig] {geschweift} 100 %",
            "  A   dog  ", "A\u00a0dog", "A 😀 dog.", "At 12:30, 3.5 km!",
            "\ufeffEin Hund.", "Ein Hu\u200bnd\u202fläuft\u2009durch den Schnee\u00ad.",
            "\x1b[1;31mEin Hund\x1b[0m läuft \x1b]8;;https://example.org\x07Schnee\x1b]8;;\x07.",
            "Ein Hund lä\x00uft.\x00", "\u202eEin Hund läuft.\u202c", "\u2068A dog\u2069\r\n"]
#: A sentence to type, per direction (invented, caption-like).
TYPED = {"de-en": "Zwei Kinder spielen am Strand mit einem roten Ball und lachen laut.",
         "en-de": "Two children are playing with a red ball on the beach and laughing."}

#: test2016 sentences whose page translations (greedy and beam 5) are compared with the
#: package's (benchmarks/browser_translator.py compares all 1,000 of German → English by default).
TEST_SENTENCES = 100
#: The most bytes a reader may download from turning to the translator to the first
#: translation, by how the weights are stored (translator.py MODELS, chosen_weights). The
#: target is 12 MB (issue 63); float16 weights (the package's own numbers) cannot get there:
#: gzip leaves them at 12.7 MB, onnxruntime-web's WebAssembly at 3.7 MB (see
#: benchmarks/RESULTS.md); a site built where the int8 weights could not be measured ships them.
DOWNLOAD_LIMIT = {"float16": 16_700_000, "int8": 12_000_000}


@pytest.fixture(scope="module")
def packages(built):
    """The package's translator of a direction computing with the weights the built page
    downloads (each loaded once)."""
    weights = {name: entry["weights"] for name, entry in _manifest(built)["models"].items()}
    return functools.cache(lambda name: translator.page_package(name, weights[name]))


@pytest.fixture(scope="module")
def package(packages):
    return packages("de-en")


@functools.cache
def _sources(direction: str, split: str) -> list[str]:
    from convs2s.data.multi30k import load_multi30k

    src, trg = direction.split("-")
    return [s for s, _ in load_multi30k(download=False, src=src, trg=trg)[split]]


@pytest.fixture(scope="module")
def sources():
    """The source sentences of a direction's split (Multi30k, where its files are)."""
    from convs2s.data.multi30k import DataError

    def get(direction: str, split: str) -> list[str]:
        try:
            return _sources(direction, split)
        except DataError as e:
            pytest.skip(f"needs the Multi30k files (CONVS2S_DATA_DIR): {e}")

    return get


def _translator_tab(web, viewport=None, direction=None):
    """A tab on notebook 06's page, with ``direction`` chosen in the translator's menu (which
    downloads nothing by itself)."""
    base, browser = web
    t = shots.SitePage(browser, base)
    if viewport:
        t.page.set_viewport_size(viewport)
    t.open(PAGE)
    if direction and direction != DIRECTIONS[0]:
        t.page.locator(".convs2s-translator select[name=direction]").select_option(direction)
    return t


def _loaded(t):
    """Press the page's button and wait until the model has translated the starting sentence."""
    t.page.locator(".convs2s-translator .translator-load").click()
    t.page.wait_for_function("['translated', 'failed'].includes("
                             "document.querySelector('.convs2s-translator').dataset.state)",
                             timeout=180_000)
    assert t.page.locator(".convs2s-translator").get_attribute("data-state") == "translated"


# --------------------------------------------------------------------------------------------
# Without the browser
# --------------------------------------------------------------------------------------------


def test_the_vendored_onnxruntime_web_is_the_locked_version(tmp_path):
    lock = json.loads(translator.PACKAGE_LOCK.read_text(encoding="utf-8"))
    assert lock["packages"][""]["dependencies"] == {"onnxruntime-web": translator.locked_version()}
    # a tools/site/node_modules with another version is refused in one line that says what to do
    fake = tmp_path / "onnxruntime-web"
    fake.mkdir()
    (fake / "package.json").write_text('{"version": "0.0.1"}', encoding="utf-8")
    with pytest.raises(translator.TranslatorAssetError) as e:
        translator.ort_files(tmp_path)
    assert "version 0.0.1 is installed" in str(e.value) and "make site" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(translator.TranslatorAssetError, match="it is not installed"):
        translator.ort_files(tmp_path / "nothing")


def test_a_weight_that_float16_would_change_is_refused():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def graph(weight):
        init = numpy_helper.from_array(np.array(weight, dtype=np.float32), "w")
        node = helper.make_node("Add", ["x", "w"], ["y"])
        return helper.make_model(helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [init]))

    exact = graph([0.5, -2.0])
    translator._float16_weights(exact)
    assert [i.data_type for i in exact.graph.initializer] == [TensorProto.FLOAT16]
    assert exact.graph.node[0].op_type == "Cast"
    with pytest.raises(translator.TranslatorAssetError, match="not float16-exact"):
        translator._float16_weights(graph([0.1, 1.0]))


def test_the_build_ships_int8_weights_only_where_it_measured_them_within_the_bound(
        monkeypatch, tmp_path):
    """chosen_weights: int8 where its validation BLEU (greedy and beam 5, as measured) is at most
    MAX_BLEU_DROP below float16's, float16 where it loses more or cannot be measured (no
    validation files), each with a record that says why; other weights refused in one line."""
    from tools.site.translator_quality import MAX_BLEU_DROP

    monkeypatch.setenv("CONVS2S_SITE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(translator, "_validation_pairs", lambda name: (("Ein Hund.", "A dog."),))

    def measured(int8):
        scores = {"float16": {"beam1": 40.0, "beam5": 42.0}, "int8": int8}
        return lambda name, sha, pairs: {"length_penalty": 1.0, "scores": {
            w: {**s, "seconds": 1.0} for w, s in scores.items()}}

    lines = []
    monkeypatch.setattr(translator, "_measure", measured({"beam1": 39.85, "beam5": 42.1}))
    shipped, record = translator.chosen_weights("de-en", "a" * 64, "int8", lines.append)
    assert shipped == "int8" and record["measured"] and record["drop"] == 0.15
    assert record["int8"] == {"beam1": 39.85, "beam5": 42.1} and record["sentences"] == 1
    assert record["max_drop"] == MAX_BLEU_DROP == 0.2
    assert "int8 ships" in lines[-1] and "greedy 40.00 / 39.85" in lines[-1]
    # measured once: the next build reads the record from the cache
    monkeypatch.setattr(translator, "_measure", None)
    assert translator.chosen_weights("de-en", "a" * 64, "int8", lines.append)[1] == record
    monkeypatch.setattr(translator, "_measure", measured({"beam1": 40.1, "beam5": 41.75}))
    shipped, record = translator.chosen_weights("de-en", "b" * 64, "int8", lines.append)
    assert shipped == "float16" and record["drop"] == 0.25
    assert record["why"] == "int8 scores 0.25 below float16, more than 0.2"
    monkeypatch.setattr(translator, "_validation_pairs", lambda name: ())
    shipped, record = translator.chosen_weights("de-en", "c" * 64, "int8", lines.append)
    assert shipped == "float16" and not record["measured"] and "not measured" in record["why"]
    assert translator.chosen_weights("de-en", "c" * 64, "float16", lines.append)[0] == "float16"
    with pytest.raises(translator.TranslatorAssetError, match="give one of float16, int8"):
        translator.chosen_weights("de-en", "c" * 64, "int4")


@pytest.mark.slow
@pytest.mark.parametrize("weights", translator.WEIGHTS)
def test_the_python_mirror_of_the_pages_decoding_equals_the_packages(sources, weights):
    """translator_quality (which measures the BLEU the build decides by) decodes the graphs the
    page runs as the page does: greedy and beam 5 equal the package's with the same weights."""
    from convs2s.run.pretrained import record
    from tools.site import translator_quality as quality

    name = "de-en"
    package = translator.page_package(name, weights, device="cpu")
    v = package.trg_vocab
    graphs = quality.PageGraphs(translator._exported(name, record(name)["sha256"], weights),
                                translator.decoder_spec(package.model), bos=v.bos_idx,
                                eos=v.eos_idx, pad=v.pad_idx, max_positions=package.max_positions)
    sentences = sources(name, "valid")[300:360]
    ids = [package.src_vocab.encode(package.source_tokens(s)) for s in sentences]
    greedy = [v.decode(x) for x in quality.greedy(graphs, ids)]
    assert greedy == package.translate_tokens(sentences, beam_size=1)
    beam = [v.decode(x) for x in quality.beam_search(graphs, ids, 5, package.length_penalty)]
    assert beam == package.translate_tokens(sentences, beam_size=5)
    assert beam != greedy  # the premise: beam search finds other translations for some


def test_the_page_offers_every_shipped_direction_starting_with_notebook_06s_sentences():
    from convs2s.course import analysis
    from convs2s.run import pretrained

    assert DIRECTIONS[0] == "de-en" and set(DIRECTIONS) == set(pretrained.available())
    assert {d: s["sentence"] for d, s in translator.MODELS.items()} == analysis.WIDGET_SENTENCES


def test_the_translator_note_replaces_notebook_06s_widget_only_when_the_site_has_its_files():
    nb = site.load_notebook(site.ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb")
    lesson = site.read_lesson(site.ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb", nb)
    sizes = {"de-en": 42_000_000, "en-de": 41_000_000}
    live = site.site_notebook(nb, lesson, "https://github.com/a/b", set(), hints={},
                              translator_bytes=sizes).notebook["cells"]
    text = "\n".join(site.cell_source(c) for c in live if c["cell_type"] == "markdown")
    assert text.count('class="convs2s-translator"') == 1
    assert 'data-download-bytes="42000000"' in text  # the first direction's, from nothing
    listed = site.translator_directions(sizes)
    assert [(d["name"], d["source"], d["target"], d["bytes"]) for d in listed] == [
        ("de-en", "German", "English", 42_000_000), ("en-de", "English", "German", 41_000_000)]
    assert 'convs2s.pretrained("en-de")' in text and "German → English" in text
    without = site.site_notebook(nb, lesson, "https://github.com/a/b", set(),
                                 hints={}).notebook["cells"]
    assert "convs2s-translator" not in json.dumps(without)


# --------------------------------------------------------------------------------------------
# In the browser
# --------------------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_pages_pieces_equal_sentencepieces_for_every_validation_sentence(
        web, packages, sources, direction):
    package, valid = packages(direction), sources(direction, "valid")
    t = _translator_tab(web)
    try:
        texts = valid + ODD_TEXT
        page = t.page.evaluate("""async ([texts, name]) => {
            const tok = await window.convs2sTranslator.loadTokenizer(name);
            return texts.map(s => window.convs2sTranslator.encodePieces(s, tok)); }""",
                               [texts, direction])
        expected = [package.pipeline.src_tokenizer(s) for s in texts]
        wrong = [(s, p, e) for s, p, e in zip(texts, page, expected, strict=True) if p != e]
        assert wrong == [], f"{len(wrong)} of {len(texts)} differ, first: {wrong[:3]}"
        assert len(valid) == 1014
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_pages_detokenizer_equals_the_packages(web, packages, direction):
    package = packages(direction)
    lists = [["▁A", "▁dog", "."], ["<unk>", "▁dog"], ["▁", "▁dog"], ["▁", "dog"], ["▁▁a"],
             ["😀", "▁a"], ["<unk>"], ["▁", "<unk>", "▁x"], ["▁A", "<pad>", "<eos>", "▁b"], [],
             ["▁A", "<bos>", "▁dog"], ["▁"], ["▁Ein", "▁Hund", "."]]
    t = _translator_tab(web)
    try:
        page = t.page.evaluate("""async ([lists, name]) => {
            const tok = await window.convs2sTranslator.loadTokenizer(name);
            return lists.map(p => window.convs2sTranslator.decodePieces(p, tok)); }""",
                               [lists, direction])
        assert page == [package.detokenize(p) for p in lists]
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_pages_greedy_translations_equal_the_packages_for_200_validation_sentences(
        web, packages, sources, direction):
    import torch

    package, sentences = packages(direction), sources(direction, "valid")[:200]
    t = _translator_tab(web, direction=direction)
    try:
        _loaded(t)
        page = t.page.evaluate("""async ([sentences, name]) => {
            const out = [];
            for (const s of sentences) {
              const r = await window.convs2sTranslator.translate(s, 1, name);
              out.push([r.ok, r.tokens, r.text]);
            }
            return out; }""", [sentences, direction])
        tokens = package.translate_tokens(sentences, beam_size=1)
        wrong = [(s, p[1], e) for s, p, e in zip(sentences, page, tokens, strict=True)
                 if p[1] != e]
        assert wrong == [], f"{len(wrong)} of 200 differ, first: {wrong[:2]}"
        assert all(ok for ok, _, _ in page)
        assert [text for _, _, text in page] == [package.detokenize(e) for e in tokens]
        # the attention the page draws is the package's, for a few of them
        for s in sentences[:5]:
            r = t.page.evaluate("([s, name]) => window.convs2sTranslator.translate(s, 1, name)",
                                [s, direction])
            expected = package.translate_with_attention(s)
            assert r["sourcePieces"] == expected.source_tokens
            torch.testing.assert_close(torch.tensor(r["attention"]), expected.attention.float(),
                                       rtol=0, atol=1e-4)
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_pages_beam_search_equals_the_packages_for_50_validation_sentences(
        web, packages, sources, direction):
    package, sentences = packages(direction), sources(direction, "valid")[200:250]
    t = _translator_tab(web, direction=direction)
    try:
        _loaded(t)
        for k in (5, 2):
            expected = _page_equals_package(t, package, sentences, k, direction)
        # beam search finds other translations than greedy for some of them (the test can fail)
        assert expected != package.translate_tokens(sentences, beam_size=1)
    finally:
        t.close()


def _page_equals_package(t, package, sentences: list[str], k: int,
                         direction: str) -> list[list[str]]:
    """Asserts that the page's output tokens with beam ``k`` equal the package's for every one of
    ``sentences``; returns the package's."""
    page = t.page.evaluate("""async ([sentences, k, name]) => {
        const out = [];
        for (const s of sentences)
          out.push((await window.convs2sTranslator.translate(s, k, name)).tokens);
        return out; }""", [sentences, k, direction])
    expected = package.translate_tokens(sentences, beam_size=k)
    wrong = [(s, p, e) for s, p, e in zip(sentences, page, expected, strict=True) if p != e]
    assert wrong == [], f"beam {k}: {len(wrong)} of {len(sentences)} differ, first: {wrong[:2]}"
    return expected


def _manifest(built) -> dict:
    text = (built.out / "_static" / "translator" / "manifest.js").read_text(encoding="utf-8")
    return json.loads(text.split("=", 1)[1].strip().rstrip(";"))


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_the_pages_translations_equal_the_packages_for_the_first_test2016_sentences(
        web, packages, sources, direction):
    """Greedy and beam 5 (the notebook's), on the first TEST_SENTENCES sentences of test2016."""
    package, sentences = packages(direction), sources(direction, "test")[:TEST_SENTENCES]
    t = _translator_tab(web, direction=direction)
    try:
        _loaded(t)
        for k in (1, 5):
            _page_equals_package(t, package, sentences, k, direction)
        assert t.problems() == []
    finally:
        t.close()


_TRANSLATOR_REQUESTS = ("() => performance.getEntriesByType('resource').map(e => e.name)"
                        ".filter(n => n.includes('/_static/translator/'))")


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_from_the_click_to_the_first_translation_the_page_fetches_its_files_as_binary(
        built, web, direction):
    """Over http the page fetches manifest.js and the gzip files of onnxruntime-web and of the
    model of the direction chosen, as binary (fetch, no base64 chunk script), and nothing of
    another model; the bytes of every response from the click to the first translation,
    counted from the network, are the files' bytes, which the button announces, and at most
    DOWNLOAD_LIMIT."""
    manifest = _manifest(built)
    entry = manifest["models"][direction]
    expected = {"manifest.js", *manifest["runtime"].values(), *entry["files"].values()}
    others = {p for other, e in manifest["models"].items() if other != direction
              for p in e["files"].values()}
    assert others and not others & expected  # the premise: the other model's files are apart
    folder = built.out / "_static" / "translator"
    t = _translator_tab(web, direction=direction)
    try:
        assert t.page.evaluate(_TRANSLATOR_REQUESTS) == [], "choosing downloads nothing"
        responses = []
        t.page.on("requestfinished", lambda r: responses.append(r))
        _loaded(t)
        mine = [r for r in responses if "/_static/translator/" in r.url]
        assert sorted(r.url.split("/_static/translator/", 1)[1] for r in mine) == \
            sorted(expected)
        assert {r.resource_type for r in mine if r.url.endswith(".gz")} == {"fetch"}
        body = sum(r.sizes()["responseBodySize"] for r in mine)
        assert body == sum((folder / name).stat().st_size for name in expected)
        assert body == int(t.page.locator(".convs2s-translator")
                           .get_attribute("data-download-bytes"))
        # everything, the page's own late requests (its favicon) and the headers included
        sizes = [r.sizes() for r in responses]
        transferred = sum(s["responseBodySize"] + s["responseHeadersSize"] for s in sizes)
        limit = DOWNLOAD_LIMIT[entry["weights"]]
        assert transferred <= limit, f"{transferred:,} bytes from the click (limit {limit:,})"
        assert t.page.evaluate("typeof window.convs2sTranslatorChunk") == "undefined"
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
def test_both_directions_ship_int8_weights_and_the_page_shows_their_measured_bleu(built, web):
    """The build measured each direction's int8 weights within MAX_BLEU_DROP of float16 on the
    validation split (greedy and beam 5), so both ship int8; the page prints the record's
    figures for the direction chosen, before anything is downloaded."""
    from tools.site.translator_quality import MAX_BLEU_DROP

    manifest = _manifest(built)
    t = _translator_tab(web)
    try:
        root = t.page.locator(".convs2s-translator")
        for direction in DIRECTIONS:
            entry = manifest["models"][direction]
            q = entry["quality"]
            if not q["measured"] and "no Multi30k" in q["why"]:
                pytest.skip(f"the site was built without the Multi30k files: {q['why']}")
            assert entry["weights"] == q["shipped"] == "int8", q
            assert q["measured"] and q["split"] == "valid" and q["sentences"] > 1000
            for k in (1, 5):
                assert q["int8"][f"beam{k}"] >= q["float16"][f"beam{k}"] - MAX_BLEU_DROP
            root.get_by_role("combobox", name="direction").select_option(direction)
            note = root.locator(".translator-weights").inner_text()
            assert note.startswith("Weights: int8, one scale per output channel"), note
            for w in ("int8", "float16"):
                assert f"greedy {q[w]['beam1']:.2f}, beam 5 {q[w]['beam5']:.2f}" in note, note
            assert f"onnxruntime {q['onnxruntime']}" in note
        assert t.page.evaluate(_TRANSLATOR_REQUESTS) == [], "nothing downloaded to show them"
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
def test_clicking_into_the_box_downloads_the_model_while_the_reader_types(built, web,
                                                                           packages):
    """Clicking into the box starts the download of the direction chosen (and nothing of the
    other); the reader types a sentence and presses Enter, which translates it once the model
    is loaded (at once if it already is): the package's translation, the bytes from the click
    into the box at most DOWNLOAD_LIMIT."""
    manifest = _manifest(built)
    t = _translator_tab(web)
    try:
        root = t.page.locator(".convs2s-translator")
        responses = []
        t.page.on("requestfinished", lambda r: responses.append(r))
        box = root.get_by_role("textbox", name="German")
        box.click()
        t.page.wait_for_function(f"() => ({_TRANSLATOR_REQUESTS})().length > 0")
        assert root.get_attribute("data-state") in ("loading", "ready")
        box.press("Control+a")
        box.press_sequentially(TYPED["de-en"], delay=5)
        box.press("Enter")
        expected = packages("de-en").translate(TYPED["de-en"], beam_size=5)
        t.page.wait_for_function("t => document.querySelector('.translator-output')"
                                 ".textContent === t", arg=f"English: {expected}",
                                 timeout=180_000)
        assert root.get_attribute("data-state") == "translated"
        loaded = t.page.evaluate(_TRANSLATOR_REQUESTS)
        assert not any("/en-de/" in name for name in loaded), "nothing of the other direction"
        sizes = [r.sizes() for r in responses]
        transferred = sum(s["responseBodySize"] + s["responseHeadersSize"] for s in sizes)
        limit = DOWNLOAD_LIMIT[manifest["models"]["de-en"]["weights"]]
        assert transferred <= limit, f"{transferred:,} bytes from the click (limit {limit:,})"
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, shots.PHONE["width"]])
def test_the_model_loads_on_request_with_a_progress_bar_then_translates_typed_german(
        web, package, width):
    t = _translator_tab(web, {"width": width, "height": 900})
    try:
        root = t.page.locator(".convs2s-translator")
        assert root.is_visible()
        assert t.page.evaluate(_TRANSLATOR_REQUESTS) == [], "nothing of the model before the button"
        menu = root.get_by_role("combobox", name="direction")
        assert menu.is_visible() and menu.input_value() == "de-en"
        assert menu.locator("option").all_inner_texts() == ["German → English",
                                                            "English → German"]
        button = root.locator(".translator-load")
        assert "MB" in button.inner_text() and "German → English" in button.inner_text()
        # the progress bar's values as the chunks arrive
        t.page.evaluate("""() => {
            const bar = document.querySelector('.convs2s-translator progress');
            window.seen = []; new MutationObserver(() => window.seen.push([+bar.value, +bar.max,
              !bar.hidden])).observe(bar, {attributes: true}); }""")
        _loaded(t)
        seen = t.page.evaluate("window.seen")
        values = [v for v, _, shown in seen if shown]
        total = seen[-1][1]
        # the bar moves while the files arrive: values between the start and the end (how many
        # depends on how the browser batches the chunks, fewer on a busy machine), never back
        during = {v for v in values if 0 < v < total}
        assert len(during) >= 3 and values == sorted(values) and max(values) == total, seen
        loaded = t.page.evaluate(_TRANSLATOR_REQUESTS)
        assert all(name.endswith((".gz", "manifest.js")) for name in loaded)
        assert not any("/en-de/" in name for name in loaded), "nothing of the other direction"
        # the notebook's starting sentence, with its starting beam size (5)
        first = package.translate(translator.MODELS["de-en"]["sentence"], beam_size=5)
        assert root.locator(".translator-output").inner_text() == f"English: {first}"
        sentence = TYPED["de-en"]
        box = root.get_by_role("textbox", name="German")
        box.fill(sentence)
        box.press("Enter")
        shown = "t => document.querySelector('.translator-output').textContent === t"
        t.page.wait_for_function(shown, arg=f"English: {package.translate(sentence)}")
        slider = root.get_by_role("slider", name="beam size")
        for k in (1, 3):  # moving the slider translates again with that beam size
            slider.evaluate("(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); "
                            "e.dispatchEvent(new Event('change')); }", str(k))
            expected = package.translate(sentence, beam_size=k)
            t.page.wait_for_function(shown, arg=f"English: {expected}")
            assert (f"beam size {k}" if k > 1 else "greedy") in root.inner_text()
        assert root.locator("svg.translator-map").count() == 4  # one per decoder layer
        assert root.evaluate("r => r.scrollWidth <= r.clientWidth + 1"), "fits the column"
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, shots.PHONE["width"]])
def test_choosing_english_to_german_loads_that_model_once_and_translates_typed_english(
        built, web, packages, width):
    """After German → English: choosing English → German relabels the box and offers that
    model's files alone (the runtime is loaded), whose bytes, counted from the network, the
    button announces; then typed English translates as the package's; switching back and forth
    translates at once, with nothing downloaded again, each box with the sentence typed in it
    (German typed before the first switch, English after)."""
    manifest = _manifest(built)
    en_de = set(manifest["models"]["en-de"]["files"].values())
    folder = built.out / "_static" / "translator"
    t = _translator_tab(web, {"width": width, "height": 900})
    try:
        root = t.page.locator(".convs2s-translator")
        _loaded(t)  # German → English
        german_box = root.get_by_role("textbox", name="German")
        german_box.fill(TYPED["de-en"])  # typed, not translated, before choosing English
        responses = []
        t.page.on("requestfinished", lambda r: responses.append(r))
        menu = root.get_by_role("combobox", name="direction")
        menu.select_option("en-de")
        assert root.get_attribute("data-state") == "idle"
        box = root.get_by_role("textbox", name="English")
        assert box.input_value() == translator.MODELS["en-de"]["sentence"]
        assert box.get_attribute("lang") == "en"
        assert root.locator(".translator-output").inner_text() == ""
        button = root.locator(".translator-load")
        assert button.is_visible() and "English → German" in button.inner_text()
        assert responses == [], "choosing the direction downloads nothing"
        _loaded(t)
        mine = [r for r in responses if "/_static/translator/" in r.url]
        assert sorted(r.url.split("/_static/translator/", 1)[1] for r in mine) == sorted(en_de)
        body = sum(r.sizes()["responseBodySize"] for r in mine)
        assert body == sum((folder / name).stat().st_size for name in en_de)
        assert body == int(root.get_attribute("data-download-bytes"))
        assert f"({body / 1e6:.0f} MB)" in button.inner_text()
        package = packages("en-de")
        first = package.translate(translator.MODELS["en-de"]["sentence"], beam_size=5)
        assert root.locator(".translator-output").inner_text() == f"German: {first}"
        box.fill(TYPED["en-de"])
        box.press("Enter")
        shown = "t => document.querySelector('.translator-output').textContent === t"
        t.page.wait_for_function(shown, arg=f"German: {package.translate(TYPED['en-de'])}")
        assert root.locator("svg.translator-map").count() == 4
        assert root.evaluate("r => r.scrollWidth <= r.clientWidth + 1"), "fits the column"
        # back and forth: each model was loaded once
        before = len(responses)
        menu.select_option("de-en")
        german = packages("de-en").translate(TYPED["de-en"], beam_size=5)
        t.page.wait_for_function(shown, arg=f"English: {german}")
        assert german_box.is_visible() and german_box.input_value() == TYPED["de-en"]
        menu.select_option("en-de")
        t.page.wait_for_function(shown, arg=f"German: {package.translate(TYPED['en-de'])}")
        assert box.input_value() == TYPED["en-de"]
        assert len(responses) == before, "nothing downloaded again"
        assert not button.is_visible()
        assert t.problems() == []
    finally:
        t.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_site_opened_from_disk_translates_typed_german(built, web, package):
    _, browser = web
    context = browser.browser.new_context()
    try:
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto((built.out / PAGE).as_uri(), wait_until="load")
        assert page.url.startswith("file://")
        page.locator(".convs2s-translator .translator-load").click()
        page.wait_for_function("document.querySelector('.convs2s-translator').dataset.state "
                               "=== 'translated'", timeout=180_000)
        sentence = "Ein Mann fährt mit dem Fahrrad über eine Brücke."
        box = page.get_by_role("textbox", name="German")
        box.fill(sentence)
        page.locator(".translator-go").click()
        expected = package.translate(sentence, beam_size=5)  # the slider starts at 5
        page.wait_for_function("t => document.querySelector('.translator-output')"
                               ".textContent === t", arg=f"English: {expected}")
        assert errors == []
        # from disk the files came as base64 chunk scripts (fetch is not allowed there)
        assert page.evaluate("typeof window.convs2sTranslatorChunk") == "function"
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.slow
def test_without_webassembly_the_page_says_so_and_shows_pretranslated_examples(web, packages):
    base, browser = web
    t = shots.SitePage(browser, base)
    try:
        t.context.add_init_script("delete window.WebAssembly;")
        t.open(PAGE)
        root = t.page.locator(".convs2s-translator")
        t.page.wait_for_selector(".convs2s-translator table.translator-examples")
        assert "cannot run WebAssembly" in root.inner_text()
        assert root.locator(".translator-load").count() == 0
        tables = root.locator("table.translator-examples")
        assert tables.evaluate_all("ts => ts.map(t => t.dataset.model)") == DIRECTIONS
        for i, direction in enumerate(DIRECTIONS):
            rows = tables.nth(i).locator("tr").evaluate_all(
                "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
            assert rows[0][0] == translator.MODELS[direction]["sentence"] and len(rows) >= 1
            package = packages(direction)
            assert rows == [[s, package.translate(s, beam_size=1)] for s, _ in rows]
        assert t.problems() == []
    finally:
        t.close()
