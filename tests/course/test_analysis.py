"""Tests of convs2s.course.analysis: the measuring helpers of notebooks 05 and 06."""

from __future__ import annotations

import json
import math
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course import analysis  # noqa: E402
from convs2s.data import Vocab, make_tokenizer  # noqa: E402
from convs2s.model import ConvS2S, count_parameters  # noqa: E402
from convs2s.model.search import beam_search, greedy_decode  # noqa: E402
from convs2s.run.metrics import tutorial_bleu  # noqa: E402
from convs2s.run.translator import Translator

# Invented sentences (not from Multi30k).
GERMAN = ["ein hund läuft .", "eine katze schläft .", "ein mann liest ein buch ."]
ENGLISH = ["a dog runs .", "a cat sleeps .", "a man reads a book ."]


def tiny_model(seed: int = 0, weight_norm: bool = True, src_vocab: int = 20,
               trg_vocab: int = 20, dec_layers: int = 2) -> ConvS2S:
    torch.manual_seed(seed)
    return ConvS2S(src_vocab, trg_vocab, emb_dim=16, hid_dim=32, enc_layers=2,
                   dec_layers=dec_layers, kernel_size=3, dropout=0.1, max_positions=32,
                   src_pad_idx=1, trg_pad_idx=1, weight_norm=weight_norm)


@pytest.fixture(scope="module")
def translator():
    src_vocab = Vocab.build([s.split() for s in GERMAN], min_freq=1)
    trg_vocab = Vocab.build([s.split() for s in ENGLISH], min_freq=1)
    model = tiny_model(src_vocab=len(src_vocab), trg_vocab=len(trg_vocab), dec_layers=3)
    return Translator(model, src_vocab, trg_vocab, device="cpu")


# -- runs -------------------------------------------------------------------------------------


def test_run_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CONVS2S_RUNS_DIR", raising=False)
    assert analysis.run_dir("quick") == analysis.runs_root() / "05_quick"
    assert analysis.runs_root().name == "runs"
    monkeypatch.setenv("CONVS2S_RUNS_DIR", str(tmp_path))
    assert analysis.run_dir("cpu") == tmp_path / "05_cpu"
    assert analysis.run_dir("gpu", root="elsewhere") == analysis.Path("elsewhere/05_gpu")
    with pytest.raises(ValueError, match="preset's name"):
        analysis.run_dir("")


def test_find_best_checkpoint_prefers_subword_then_gpu_then_cpu(tmp_path):
    assert analysis.checkpoint_search_order(True) == ["quick_subword", "quick"]
    assert analysis.checkpoint_search_order(False) == ["gpu_subword", "cpu_subword", "gpu", "cpu"]
    assert analysis.find_best_checkpoint(False, root=tmp_path) is None

    def make(name):
        (tmp_path / f"05_{name}").mkdir()
        (tmp_path / f"05_{name}" / "best.pt").write_bytes(b"x")

    for name in ("quick", "cpu"):
        make(name)
    assert analysis.find_best_checkpoint(True, root=tmp_path) == tmp_path / "05_quick/best.pt"
    assert analysis.find_best_checkpoint(False, root=tmp_path) == tmp_path / "05_cpu/best.pt"
    (tmp_path / "05_gpu").mkdir()
    assert analysis.find_best_checkpoint(False, root=tmp_path) == tmp_path / "05_cpu/best.pt"
    (tmp_path / "05_gpu" / "best.pt").write_bytes(b"x")
    assert analysis.find_best_checkpoint(False, root=tmp_path) == tmp_path / "05_gpu/best.pt"
    make("cpu_subword")
    make("quick_subword")
    assert (analysis.find_best_checkpoint(False, root=tmp_path)
            == tmp_path / "05_cpu_subword/best.pt")
    assert (analysis.find_best_checkpoint(True, root=tmp_path)
            == tmp_path / "05_quick_subword/best.pt")
    make("gpu_subword")
    assert (analysis.find_best_checkpoint(False, root=tmp_path)
            == tmp_path / "05_gpu_subword/best.pt")


def test_display_path_never_shows_the_machine_s_folders(monkeypatch, tmp_path):
    monkeypatch.delenv("CONVS2S_RUNS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert analysis.display_path("runs/05_cpu/best.pt") == "runs/05_cpu/best.pt"
    assert analysis.display_path(tmp_path / "runs" / "05_cpu") == "runs/05_cpu"
    assert analysis.display_path(tmp_path) == "."
    elsewhere = tmp_path.parent / "elsewhere" / "05_gpu" / "best.pt"
    assert analysis.display_path(elsewhere) == "best.pt"
    assert analysis.display_path(elsewhere, start=tmp_path.parent) == "elsewhere/05_gpu/best.pt"
    monkeypatch.setenv("CONVS2S_RUNS_DIR", str(tmp_path.parent / "elsewhere"))
    assert analysis.display_path(elsewhere) == "$CONVS2S_RUNS_DIR/05_gpu/best.pt"
    shown = analysis.display_path(analysis.find_best_checkpoint(True) or elsewhere)
    assert str(tmp_path) not in shown and not shown.startswith("/")


# -- parameters -------------------------------------------------------------------------------


@pytest.mark.parametrize("weight_norm", [True, False])
def test_parameter_groups_add_up_and_match_the_modules(weight_norm):
    model = tiny_model(weight_norm=weight_norm)
    groups = analysis.parameter_groups(model)
    assert "other" not in groups
    assert list(groups) == [g for g, _ in analysis.PARAMETER_GROUPS]
    assert sum(groups.values()) == count_parameters(model)
    assert groups["attention"] == count_parameters(model.decoder.attentions)
    assert groups["output projection"] == count_parameters(model.decoder.fc_out)
    assert groups["encoder convolutions"] == count_parameters(model.encoder.blocks)
    assert groups["decoder embeddings"] == count_parameters(model.decoder.tok_embedding) + \
        count_parameters(model.decoder.pos_embedding)


def test_parameter_groups_report_unknown_parameters_as_other():
    model = tiny_model()
    model.extra = torch.nn.Linear(3, 2)
    groups = analysis.parameter_groups(model)
    assert groups["other"] == 8
    assert sum(groups.values()) == count_parameters(model)
    assert analysis.parameter_group("decoder.fc_out.bias") == "output projection"


def test_plot_parameter_groups_draws_one_bar_per_group():
    groups = analysis.parameter_groups(tiny_model())
    ax = analysis.plot_parameter_groups(groups)
    assert len(ax.patches) == len(groups)
    assert ax.get_xlabel().startswith("parameters")
    plt.close("all")


# -- training curves --------------------------------------------------------------------------


def test_perplexity():
    assert analysis.perplexity(0.0) == 1.0
    assert analysis.perplexity(math.log(10)) == pytest.approx(10.0)
    assert math.isfinite(analysis.perplexity(1e9))


def test_plot_history_marks_the_best_epoch():
    history = [{"epoch": e, "train_loss": 5 - e, "valid_loss": v, "valid_ppl": math.exp(v)}
               for e, v in [(1, 4.0), (2, 3.0), (3, 3.5)]]
    ax_loss, ax_ppl = analysis.plot_history(history)
    assert len(ax_loss.lines) == 3 and len(ax_ppl.lines) == 2
    for ax in (ax_loss, ax_ppl):  # a legend on every plot, readable at 100% zoom
        assert ax.get_legend() is not None
        assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 9
    assert ax_loss.lines[-1].get_xdata()[0] == 2  # the best-epoch marker
    with pytest.raises(ValueError, match="empty"):
        analysis.plot_history([])
    plt.close("all")


# -- timing -----------------------------------------------------------------------------------


def test_time_call_calls_warmup_plus_repeat_times():
    calls = []
    timing = analysis.time_call(lambda: calls.append(1), repeat=4, warmup=2)
    assert len(calls) == 6 and len(timing.runs) == 4
    assert 0 <= timing.best <= timing.median
    assert "median of 4" in str(timing)
    with pytest.raises(ValueError):
        analysis.time_call(lambda: None, repeat=0)


# -- error analysis ---------------------------------------------------------------------------


def test_unknown_rate():
    vocab = Vocab.build([["a", "b"]], min_freq=1)
    assert analysis.unknown_rate(["a", "b", "c", "d"], vocab) == 0.5
    assert analysis.unknown_rate([], vocab) == 0.0
    with pytest.raises(TypeError, match="tokenize"):
        analysis.unknown_rate("a b", vocab)


def test_sentence_bleu():
    ref = "a man reads a book in the park .".split()
    assert analysis.sentence_bleu(ref, ref) == pytest.approx(100.0)
    partial = analysis.sentence_bleu("a man reads a newspaper .".split(), ref)
    assert 0 < partial < 100
    assert analysis.sentence_bleu(["zebra"], ref) < partial
    with pytest.raises(TypeError):
        analysis.sentence_bleu("a b", ref)


def test_length_bucket():
    edges = (10, 15, 20)
    assert [analysis.length_bucket(n, edges) for n in (1, 10, 11, 15, 16, 20, 21, 99)] == [
        "≤10", "≤10", "11-15", "11-15", "16-20", "16-20", ">20", ">20"]
    assert analysis.length_bucket(11, (10, 11)) == "11"
    assert analysis.length_bucket(3, ()) == "all"


def test_bleu_by_group_is_corpus_bleu_of_each_group():
    hyps = [s.split() for s in ["a dog runs .", "a cat runs .", "the man reads a book ."]]
    refs = [s.split() for s in ENGLISH]
    rows = analysis.bleu_by_group(hyps, refs, ["x", "y", "x"], order=["y", "x", "z"])
    assert [r["group"] for r in rows] == ["y", "x"]
    assert [r["n"] for r in rows] == [1, 2]
    expected = tutorial_bleu([hyps[0], hyps[2]], [refs[0], refs[2]])
    assert rows[1]["bleu"] == pytest.approx(expected)
    single = analysis.bleu_by_group(hyps, refs, [0, 0, 0])
    assert single[0]["bleu"] == pytest.approx(tutorial_bleu(hyps, refs))
    with pytest.raises(ValueError, match="one group"):
        analysis.bleu_by_group(hyps, refs, ["x"])


def test_bleu_by_length_orders_the_buckets():
    refs = [s.split() for s in ENGLISH]
    rows = analysis.bleu_by_length(refs, refs, [12, 3, 30], edges=(10, 20))
    assert [r["group"] for r in rows] == ["≤10", "11-20", ">20"]
    assert all(r["bleu"] == pytest.approx(100.0) for r in rows)
    ax = analysis.plot_bleu_groups(rows, xlabel="source length")
    assert len(ax.patches) == 3 and ax.get_xlabel() == "source length"
    plt.close("all")


# -- scores and attention of a given output ---------------------------------------------------


def test_sequence_logprob_explains_beam_search_scores():
    model = tiny_model(seed=3)
    src = torch.tensor([[5, 6, 7, 8]])
    max_len = 6
    hyps = beam_search(model, src, beam_size=4, max_len=max_len, bos_idx=2, eos_idx=3,
                       return_all=True, length_penalty=1.0)[0]
    assert hyps
    for tokens, score in hyps:
        ended = len(tokens) < max_len  # finished with <eos>, which counts in its length
        total = analysis.sequence_logprob(model, src, tokens, bos_idx=2, eos_idx=3,
                                          include_eos=ended)
        assert score * (len(tokens) + ended) == pytest.approx(total, abs=1e-4)
    assert model.training  # the model's mode is restored


def test_forced_attention_equals_the_attention_recorded_while_decoding():
    model = tiny_model(seed=4, dec_layers=3)
    src = torch.tensor([[5, 6, 7, 8, 9]])
    tokens, attentions = greedy_decode(model, src, max_len=8, bos_idx=2, eos_idx=3,
                                       return_attention=True)
    forced = analysis.forced_attention(model, src, tokens[0], bos_idx=2)
    assert forced.shape == (3, len(tokens[0]), 5)
    torch.testing.assert_close(forced, attentions[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="one sentence"):
        analysis.forced_attention(model, src.repeat(2, 1), tokens[0], bos_idx=2)


def test_forced_attention_of_an_output_as_long_as_the_model_allows():
    model = tiny_model(seed=4, dec_layers=2)  # max_positions=32
    src = torch.tensor([[5, 6, 7]])
    tokens, attentions = greedy_decode(model, src, max_len=32, bos_idx=2, eos_idx=-1,
                                       return_attention=True)
    assert len(tokens[0]) == 32  # eos_idx=-1: never ends early
    forced = analysis.forced_attention(model, src, tokens[0], bos_idx=2)
    torch.testing.assert_close(forced, attentions[0], rtol=1e-4, atol=1e-5)
    assert analysis.forced_attention(model, src, [], bos_idx=2).shape == (2, 0, 3)


def test_translate_for_display(translator):
    result = analysis.translate_for_display(translator, "Ein Hund schläft heute.", beam_size=3)
    assert result["ok"] and result["message"] == "" and result["beam_size"] == 3
    assert result["source_tokens"] == make_tokenizer("de")("Ein Hund schläft heute.")
    assert result["unknown"] == ["heute"]
    assert result["attention"].shape == (3, len(result["tokens"]), len(result["source_tokens"]))
    assert result["text"] == translator.translate("Ein Hund schläft heute.", beam_size=3)
    if result["tokens"]:
        torch.testing.assert_close(result["attention"].sum(-1),
                                   torch.ones(3, len(result["tokens"])))
    fig = analysis.plot_translation(result)
    assert "heute*" in [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert min(t.get_fontsize() for t in fig.axes[0].get_xticklabels()) >= 9
    plt.close("all")


@pytest.mark.parametrize("bad", ["", "   ", 42, "Hund " * 40])
def test_translate_for_display_explains_bad_input(translator, bad):
    result = analysis.translate_for_display(translator, bad)
    assert not result["ok"] and result["message"]
    assert result["text"] == "" and result["tokens"] == []
    fig = analysis.plot_translation(result)
    assert fig.axes[0].texts[0].get_text() == result["message"]
    plt.close("all")


def test_a_word_level_translator_translates_as_typed(translator):
    """A model that reads lower-cased words loses the case anyway: nothing is restored."""
    assert analysis.input_casing(translator) is None
    result = analysis.translate_for_display(translator, "EIN HUND SCHLÄFT.")
    assert result["source"] == "EIN HUND SCHLÄFT." and not result["recased"]


@pytest.fixture(scope="module")
def shipped():
    import convs2s

    return convs2s.pretrained("de-en", device="cpu")


#: Casing seen in invented "training" sentences (not Multi30k).
CASED = ["Ein kleiner Hund spielt im Schnee.", "Der Hund spielt im Park.",
         "Zwei Kinder spielen im Schnee."]


@pytest.mark.parametrize("typed", ["ein kleiner hund spielt im schnee.",
                                   "EIN KLEINER HUND SPIELT IM SCHNEE."])
def test_lower_case_or_all_caps_input_is_translated_with_the_case_the_model_knows(shipped,
                                                                                   typed):
    from convs2s.data.truecase import casing_table

    result = analysis.translate_for_display(shipped, typed, casing=casing_table(CASED))
    assert result["ok"] and result["recased"]
    assert result["source"] == "Ein kleiner Hund spielt im Schnee."
    assert result["source_tokens"] == shipped.source_tokens(result["source"])
    assert result["text"] == shipped.translate(result["source"], beam_size=1)
    fig = analysis.plot_translation(result)
    assert "(read as: Ein kleiner Hund spielt im Schnee.)" in fig._suptitle.get_text()
    plt.close("all")


@pytest.mark.parametrize("typed", ["Ein kleiner hund spielt im Schnee.", "ein Hund", "42"])
def test_mixed_case_input_is_translated_as_typed(shipped, typed):
    from convs2s.data.truecase import casing_table

    result = analysis.translate_for_display(shipped, typed, casing=casing_table(CASED))
    assert result["source"] == typed and not result["recased"]
    assert result["text"] == shipped.translate(typed, beam_size=1)
    # casing=None: every sentence as typed
    lower = analysis.translate_for_display(shipped, "ein hund", casing=None)
    assert lower["source"] == "ein hund" and not lower["recased"]


def test_the_default_casing_is_multi30ks_else_the_vocabularys(shipped, monkeypatch):
    from convs2s.data import truecase

    monkeypatch.setattr(truecase, "multi30k_casing", lambda lang: {"hund": "Hund"})
    assert analysis.input_casing(shipped) == {"hund": "Hund"}
    result = analysis.translate_for_display(shipped, "ein hund läuft.")
    assert result["source"] == "Ein Hund läuft." and result["recased"]
    monkeypatch.setattr(truecase, "multi30k_casing", lambda lang: None)  # no data: the pieces
    by_pieces = analysis.input_casing(shipped)
    assert callable(by_pieces) and by_pieces("schnee") == "Schnee"
    assert by_pieces("spielt") == "spielt"


@pytest.mark.parametrize("n_src", [3, 9, 14, 30])
def test_plot_translation_fits_a_notebook_output_area(n_src):
    """The widget's figure is drawn at its own size: at most 800 px wide at 100 dpi, which a
    notebook's output area in a 1280 px browser window holds without scaling it down."""
    import io

    layers, n_trg = 4, 12
    attention = torch.softmax(torch.randn(layers, n_trg, n_src), dim=-1)
    result = {"ok": True, "message": "", "text": "a b c", "tokens": [f"t{i}" for i in range(n_trg)],
              "source_tokens": [f"▁piece{i}" for i in range(n_src)], "unknown": [],
              "attention": attention}
    fig = analysis.plot_translation(result)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")  # as the inline backend does
    width = int.from_bytes(buffer.getvalue()[16:20], "big")
    assert width <= 800, f"{n_src} source tokens: a {width} px wide figure"
    # every layer is drawn, and short sentences keep several heatmaps per row
    heatmaps = [ax for ax in fig.axes if ax.get_title().startswith("layer")]
    assert len(heatmaps) == layers
    if n_src <= 9:
        assert len({round(ax.get_position().y0, 3) for ax in heatmaps}) < layers
    plt.close("all")


def test_find_checkpoint_takes_a_runs_final_model_before_its_best_pt(tmp_path):
    assert analysis.find_checkpoint(False, root=tmp_path) is None
    run = tmp_path / "05_cpu_subword"
    run.mkdir()
    (run / "best.pt").write_bytes(b"x")
    assert analysis.find_checkpoint(False, root=tmp_path) == run / "best.pt"
    (run / "final.pt").write_bytes(b"x")
    assert analysis.find_checkpoint(False, root=tmp_path) == run / "final.pt"
    (tmp_path / "05_gpu_subword").mkdir()
    (tmp_path / "05_gpu_subword" / "best.pt").write_bytes(b"x")  # the search order still rules
    assert analysis.find_checkpoint(False, root=tmp_path) == tmp_path / "05_gpu_subword/best.pt"


def test_convs2s_checkpoint_names_the_model_instead_of_the_search(tmp_path, monkeypatch):
    own = tmp_path / "mine.pt"
    own.write_bytes(b"x")
    (tmp_path / "05_quick_subword").mkdir()
    (tmp_path / "05_quick_subword" / "final.pt").write_bytes(b"x")
    monkeypatch.setenv("CONVS2S_CHECKPOINT", str(own))
    assert analysis.find_checkpoint(True, root=tmp_path) == own
    for wrong, what in ((tmp_path / "missing.pt", "not a file"), (tmp_path, "a folder")):
        monkeypatch.setenv("CONVS2S_CHECKPOINT", str(wrong))
        with pytest.raises(ValueError, match=f"CONVS2S_CHECKPOINT=.* is {what}: name a "
                                             "checkpoint file"):
            analysis.find_checkpoint(True, root=tmp_path)
    monkeypatch.setenv("CONVS2S_CHECKPOINT", "  ")  # blank: the search as before
    assert analysis.find_checkpoint(True, root=tmp_path) == tmp_path / "05_quick_subword/final.pt"


def _maps(*peaks: float) -> list:
    """One recorded epoch's attention, [layers, 2, 3], whose largest weight in layer i is
    ``peaks[i]`` (each row sums to 1)."""
    return [[[p, (1 - p) / 2, (1 - p) / 2], [(1 - p) / 2, p, (1 - p) / 2]] for p in peaks]


def test_the_attention_epoch_line_names_each_records_epoch():
    """Notebook 05's widget line under the figure: each layer's largest weight after the
    chosen record and after the first, labelled with the epochs that recorded them; a run that
    recorded every epoch gives the notebook's line (epoch n is record n - 1)."""
    history = [{"epoch": e, "valid_loss": 5.0 - e, "attention": _maps(*peaks)}
               for e, peaks in ((1, (0.5, 0.6)), (2, (0.7, 0.8)), (3, (0.9, 0.95)))]
    recorded = analysis.attention_by_epoch(history)
    assert analysis.attention_epoch_line(recorded, 2) == (
        "epoch 3: largest weight per layer 0.90, 0.95 (epoch 1: 0.50, 0.60)")
    assert analysis.attention_epoch_line(recorded, 0) == (
        "epoch 1: largest weight per layer 0.50, 0.60 (epoch 1: 0.50, 0.60)")
    # a run that recorded epochs 2, 5 and 9 only: the line says 5 and 2, not 2 and 1, as the
    # figure's title does
    gaps = [{"epoch": e, "valid_loss": 4.0, **({"attention": _maps(p, p)} if p else {})}
            for e, p in ((1, None), (2, 0.5), (3, None), (5, 0.75), (9, 0.875))]
    recorded = analysis.attention_by_epoch(gaps)
    assert [e for e, _ in recorded] == [2, 5, 9]
    assert analysis.attention_epoch_line(recorded, 1) == (
        "epoch 5: largest weight per layer 0.75, 0.75 (epoch 2: 0.50, 0.50)")
    fig = analysis.plot_attention_epoch(gaps, {"src": list("abc"), "trg": list("xy")}, 1)
    assert fig.get_suptitle().startswith("epoch 5 of 9:")
    plt.close(fig)
    for index in (-1, 3):
        with pytest.raises(ValueError, match="index must be from 0 to 2"):
            analysis.attention_epoch_line(recorded, index)
    with pytest.raises(ValueError, match="records no attention"):
        analysis.attention_epoch_line([], 0)


def test_the_conv_costs_chart_draws_the_packages_numbers_and_title():
    """Notebook 08's widget: conv_costs for d -> 2d channels as two bars, titled with
    costs_title (which live.js writes too: tests/site_and_tools/test_site.py)."""
    from convs2s.model.variants import conv_costs, costs_title

    assert costs_title(conv_costs(256, 512, 3), 3) == (
        "k = 3: 2.97x fewer parameters, 2.98x fewer FLOPs")
    assert costs_title({"parameter_ratio": 7.004, "flop_ratio": 7.0}, 7) == (
        "k = 7: 7.00x fewer parameters, 7.00x fewer FLOPs")
    for channels, k in ((256, 3), (32, 15)):
        costs = conv_costs(channels, 2 * channels, k)
        fig = analysis.plot_conv_costs(channels, k)
        try:
            [ax] = fig.axes
            assert ax.get_title() == costs_title(costs, k)
            assert [t.get_text() for t in ax.get_yticklabels()] == ["standard",
                                                                    "depthwise-separable"]
            assert [bar.get_width() for bar in ax.patches] == [
                costs["standard_parameters"], costs["separable_parameters"]]
            assert ax.get_xlabel() == (f"parameters of one conv, {channels} -> "
                                       f"{2 * channels} channels")
            assert tuple(fig.get_size_inches()) == (5.5, 2.6) and fig.dpi == 100
        finally:
            plt.close(fig)


def test_attention_by_epoch_figure_keeps_titles_clear_of_the_labels_above():
    """Notebook 05's widget with a long sentence stacks one heatmap per row: each layer's
    title must not overlap the x labels of the heatmap above, however small the figure the
    widget passes in (the README's picture once showed "layer 2" over "source token")."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    src = [f"▁wort{i}" for i in range(20)]
    trg = [f"▁word{i}" for i in range(18)] + ["<eos>"]
    maps = torch.softmax(torch.randn(3, len(trg), len(src)), dim=-1)
    history = [{"epoch": 1, "valid_loss": 4.2, "attention": maps.tolist()}]
    fig = plt.figure(figsize=(4, 3))  # what a widget might hand in
    fig = analysis.plot_attention_epoch(history, {"src": src, "trg": trg}, 0, fig=fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    heatmaps = sorted((ax for ax in fig.axes if ax.get_title().startswith("layer")),
                      key=lambda ax: -ax.get_position().y0)
    assert len(heatmaps) == 3 and len({round(ax.get_position().y0, 3) for ax in heatmaps}) == 3
    for above, below in zip(heatmaps, heatmaps[1:], strict=False):
        title = below.title.get_window_extent(renderer)
        label = above.xaxis.label.get_window_extent(renderer)
        ticks = above.xaxis.get_tightbbox(renderer)
        assert title.y1 <= min(label.y0, ticks.y0) + 1, (title, label, ticks)
    plt.close(fig)


def test_runs_go_to_google_drive_only_on_colab_and_only_when_asked(tmp_path, monkeypatch):
    """Notebook 05's Drive cell, off by default: on Colab, asked, it mounts Drive and points
    CONVS2S_RUNS_DIR into it (notebook 06, in another runtime, then finds the run there);
    anywhere else, or not asked, it changes nothing and says where runs stay."""
    from convs2s.course import analysis

    monkeypatch.delenv("CONVS2S_RUNS_DIR", raising=False)
    mounted = []
    line = analysis.keep_runs_on_drive(False, colab=True, mount=mounted.append)
    assert mounted == [] and "gone when the runtime ends" in line
    line = analysis.keep_runs_on_drive(True, colab=False, mount=mounted.append)
    assert mounted == [] and "is for Colab" in line and "CONVS2S_RUNS_DIR" not in os.environ
    line = analysis.keep_runs_on_drive(True, colab=True, mount=mounted.append,
                                       mount_point=tmp_path / "drive")
    folder = tmp_path / "drive" / "MyDrive" / "convs2s" / "runs"
    assert mounted == [str(tmp_path / "drive")] and folder.is_dir()
    assert os.environ["CONVS2S_RUNS_DIR"] == str(folder) and str(folder) in line
    assert analysis.run_dir("cpu_subword") == folder / "05_cpu_subword"


# -- the translator widget's directions (notebook 06) -----------------------------------------


def test_the_widget_offers_the_studied_direction_then_every_other_shipped_one():
    assert analysis.widget_directions("de-en", ["de-en", "en-de"]) == [
        ("German → English", "de-en"), ("English → German", "en-de")]
    assert analysis.widget_directions("de-en", ["en-de"]) == [
        ("German → English", "de-en"), ("English → German", "en-de")]
    assert analysis.widget_directions("de-en", []) == [("German → English", "de-en")]
    assert analysis.direction_name("fr-xx") == "French → xx"
    assert analysis.widget_inputs("de-en") == ("German", "Ein kleiner Hund spielt im Schnee.")
    assert analysis.widget_inputs("en-de") == ("English", "A little dog is playing in the snow.")
    assert analysis.widget_inputs("cs-en") == ("Czech", "")


def test_the_widget_reads_another_direction_only_when_it_is_chosen_and_once(translator):
    calls = []

    def load(direction, device=None):
        calls.append((direction, device))
        return f"the {direction} model"

    translators = analysis.WidgetTranslators(translator, load=load)
    assert translators.first == "de-en" and translators("de-en") is translator
    assert calls == [] and translators.loaded == ["de-en"]
    assert translators("en-de") == "the en-de model"
    assert translators("en-de") == "the en-de model"
    assert calls == [("en-de", translator.device)] and translators.loaded == ["de-en", "en-de"]


def test_the_widget_names_the_languages_of_its_direction():
    ok = {"ok": True, "message": "", "text": "Ein Hund läuft.", "unknown": ["▁Zorg"]}
    assert analysis.translation_lines(ok, "en-de") == ["German: Ein Hund läuft.",
                                                       "unknown English words: ▁Zorg"]
    # the beam size translate_for_display used, when the result records it
    assert analysis.translation_lines({**ok, "beam_size": 4}, "en-de")[0] == (
        "German (beam size 4): Ein Hund läuft.")
    assert analysis.translation_lines({**ok, "unknown": []}, "de-en") == [
        "English: Ein Hund läuft."]
    refused = {"ok": False, "message": "Nothing to translate.", "text": "", "unknown": []}
    assert analysis.translation_lines(refused, "de-en") == ["(Nothing to translate.)"]


def test_the_widget_shows_its_text_and_figure_as_one_state_update():
    """Notebook 06's translator assigns these to its Output's ``outputs`` (no kernel needed):
    the printed lines, then the figure as the PNG a reader sees."""
    import base64
    import io

    import ipywidgets
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    result = {"ok": True, "message": "", "text": "A dog runs.", "unknown": [], "recased": False,
              "source_tokens": ["▁Ein", "▁Hund", "▁läuft", "."],
              "tokens": ["▁A", "▁dog", "▁runs", "."], "attention": torch.rand(2, 4, 4)}
    fig = analysis.plot_translation(result)
    text, figure = analysis.widget_outputs(analysis.translation_lines(result, "de-en"), fig)
    assert text == {"output_type": "stream", "name": "stdout", "text": "English: A dog runs.\n"}
    assert json.loads(json.dumps(figure)) == figure  # what a notebook stores, as it is
    assert figure["output_type"] == "display_data"
    with Image.open(io.BytesIO(base64.b64decode(figure["data"]["image/png"]))) as png:
        assert png.format == "PNG"
        width, height = png.size  # the tight box: no wider than the figure, most of it drawn
    figure_width = fig.get_size_inches()[0] * fig.dpi
    assert 0.5 * figure_width < width <= figure_width + 30
    assert height > 50
    plt.close(fig)
    out = ipywidgets.Output()
    out.outputs = (text, figure)  # what the notebook does: the trait takes them as they are
    assert out.outputs[0]["text"] == "English: A dog runs.\n"


def _record(epochs, valid, test):
    def split(greedy, beam):
        return {"float16": {"beam1": {"sacrebleu": greedy}, "beam5": {"sacrebleu": beam}},
                "float32": {"beam1": {"sacrebleu": 0.0}, "beam5": {"sacrebleu": 0.0}}}

    return {"preset": "cpu_subword",
            "training": {"epochs": epochs, "hours": 1.5, "machine": "a test machine"},
            "scores": {"splits": {"valid": split(*valid), "test": split(*test)}}}


def test_the_shipped_models_table_holds_each_records_figures_and_no_other():
    table = analysis.shipped_models_table({"de-en": _record(36, (41.917, 44.181), (42.1, 43.6)),
                                           "en-de": {"preset": "cpu_subword"}})
    rows = table.splitlines()
    assert len(rows) == 4 and rows[0].startswith("| direction |")
    assert rows[2] == ('| German → English (`convs2s.pretrained("de-en")`) | preset '
                       '`cpu_subword`, 36 epochs, 1.5 h, on a test machine | 41.92 / 44.18 | '
                       '42.10 / 43.60 |')
    # a record without scores (exported without --scores) says so, with no figure
    assert rows[3] == ('| English → German (`convs2s.pretrained("en-de")`) | preset '
                       '`cpu_subword` | not recorded | not recorded |')


@pytest.fixture(scope="module")
def shipped_en_de():
    import convs2s

    return convs2s.pretrained("en-de", device="cpu")


def test_english_input_for_the_english_to_german_model_gets_english_case(shipped_en_de,
                                                                         monkeypatch):
    from convs2s.data import truecase

    asked = []
    monkeypatch.setattr(truecase, "multi30k_casing",
                        lambda lang: asked.append(lang) or {"york": "York", "new": "New"})
    assert analysis.input_casing(shipped_en_de) == {"york": "York", "new": "New"}
    assert asked == ["en"], "the English captions, the model's source side"
    result = analysis.translate_for_display(shipped_en_de, "A DOG RUNS IN NEW YORK.")
    assert result["ok"] and result["recased"] and result["source"] == "A dog runs in New York."
    assert result["text"] == shipped_en_de.translate(result["source"], beam_size=1)
    assert analysis.translation_lines(result, "en-de")[0] == (
        f"German (beam size 1): {result['text']}")
    monkeypatch.setattr(truecase, "multi30k_casing", lambda lang: None)  # no data: the pieces
    by_pieces = analysis.input_casing(shipped_en_de)
    assert callable(by_pieces) and by_pieces("dog") == "dog"
