"""convs2s.run.translate_cli: checkpoint validation, the command line reading files or stdin line by
line, and argument checks, on a tiny random model."""

from __future__ import annotations

import io
import math
import select
import subprocess
import sys
import time

import pytest
import torch

from convs2s.course.baselines import RNNAttentionSeq2Seq
from convs2s.data import Vocab, make_tokenizer
from convs2s.model import ConvS2S
from convs2s.run import translate_cli as translate
from convs2s.run.checkpoint import (
    Checkpoint,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    vocab_to_dict,
)
from convs2s.run.translate_cli import main
from convs2s.run.translator import Translator

GOOD = ["Ein Hund läuft.", "Eine Katze schläft.", "Zwei Kinder spielen im Park."]


def vocabs(tiny_pairs):
    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src = Vocab.build((tok_de(de) for de, _ in tiny_pairs), min_freq=1)
    trg = Vocab.build((tok_en(en) for _, en in tiny_pairs), min_freq=1)
    return src, trg


def payload(model, src_vocab, trg_vocab) -> dict:
    return {"model_config": dict(model.config), "model": model.state_dict(),
            "src_vocab": vocab_to_dict(src_vocab), "trg_vocab": vocab_to_dict(trg_vocab),
            "tokenizers": {"src_lang": "de", "trg_lang": "en", "lower": True}}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from conftest import TINY_PAIRS

    src_vocab, trg_vocab = vocabs(TINY_PAIRS)
    torch.manual_seed(0)
    model = ConvS2S(len(src_vocab), len(trg_vocab), emb_dim=16, hid_dim=32, enc_layers=2,
                    dec_layers=2, max_positions=24, src_pad_idx=src_vocab.pad_idx,
                    trg_pad_idx=trg_vocab.pad_idx)
    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "best.pt",
                           payload(model, src_vocab, trg_vocab))


@pytest.fixture(scope="module")
def translator(checkpoint):
    return Translator.from_checkpoint(checkpoint, device="cpu")


def run(argv, stdin: bytes | None = None, monkeypatch=None, capsys=None):
    """``main(argv)`` with ``stdin`` as standard input: (exit code, stdout, stderr lines)."""
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


# ------------------------------------------------------------------------------------------
# a checkpoint's parts are checked before use
# ------------------------------------------------------------------------------------------


def broken(checkpoint, tmp_path, edit) -> str:
    data = load_checkpoint(checkpoint)
    edit(data)
    path = tmp_path / "broken.pt"
    save_checkpoint(path, {k: v for k, v in data.items() if k not in ("format", "version")})
    return path


def nan_weight(data):
    data["model"]["decoder.fc_out.bias"][3] = math.nan


def inf_weight(data):
    data["model"]["encoder.tok_embedding.weight"][5, 0] = math.inf


BROKEN = {
    "trg vocab larger than the model's": (
        lambda d: d["trg_vocab"]["itos"].append("extra"),
        r"built for a trg_vocab of \d+ tokens, but its trg_vocab has \d+"),
    "src vocab smaller than the model's": (
        lambda d: d["src_vocab"]["itos"].pop(),
        r"built for a src_vocab of \d+ tokens, but its src_vocab has \d+"),
    "vocab without itos": (
        lambda d: d["src_vocab"].pop("itos"),
        "its src_vocab has no list of token strings under 'itos'"),
    "vocab of the wrong type": (
        lambda d: d.update(trg_vocab="not a vocabulary"),
        "its trg_vocab is a str, not a vocabulary"),
    "vocab with non-string tokens": (
        lambda d: d["trg_vocab"]["itos"].__setitem__(7, 7),
        "its trg_vocab has no list of token strings under 'itos'"),
    "vocab with three specials": (
        lambda d: d["trg_vocab"].update(specials=["<unk>", "<pad>", "<bos>"]),
        "its trg_vocab is malformed: Vocab needs at least four specials"),
    "pad ids differ": (
        lambda d: d["model_config"].update(trg_pad_idx=0),
        "the model pads the trg with id 0, but its trg_vocab pads with id 1"),
    "NaN weights": (nan_weight, r"1 of its weight tensors hold NaN or infinite values "
                                r"\(decoder.fc_out.bias\): training diverged"),
    "infinite weights": (inf_weight, "hold NaN or infinite values"),
    "weights of another shape": (
        lambda d: d["model_config"].update(hid_dim=48),
        "its weights do not fit its model_config"),
    "unknown config entry": (
        lambda d: d["model_config"].update(colour="blue"),
        "its model_config does not fit the model"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_checkpoint_parts_are_refused_in_one_line(case, checkpoint, tmp_path, capsys):
    edit, message = BROKEN[case]
    path = broken(checkpoint, tmp_path, edit)
    with pytest.raises(CheckpointError, match=message) as err:
        Translator.from_checkpoint(path, device="cpu")
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    code, out, err_lines = run(["--checkpoint", path, "Ein Hund läuft."], capsys=capsys)
    assert code == 1 and out == ""
    assert len(err_lines) == 1 and err_lines[0].startswith("error: ")
    assert "Traceback" not in err_lines[0]


def test_a_translator_built_from_parts_checks_them_too(checkpoint):
    data = load_checkpoint(checkpoint)
    model = ConvS2S(**data["model_config"])
    model.load_state_dict(data["model"])
    src = Vocab(data["src_vocab"]["itos"], data["src_vocab"]["specials"])
    trg = Vocab(data["trg_vocab"]["itos"], data["trg_vocab"]["specials"])
    with pytest.raises(ValueError, match="built for a src_vocab"):
        Translator(model, trg, trg, device="cpu")
    with torch.no_grad():
        model.decoder.fc_out.bias[0] = math.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        Translator(model, src, trg, device="cpu")


def test_a_baseline_checkpoint_translates_too(tmp_path, tiny_pairs, capsys):
    src_vocab, trg_vocab = vocabs(tiny_pairs)
    torch.manual_seed(0)
    rnn = RNNAttentionSeq2Seq(len(src_vocab), len(trg_vocab), emb_dim=8, enc_hid_dim=8,
                              dec_hid_dim=8, max_positions=16, src_pad_idx=src_vocab.pad_idx,
                              trg_pad_idx=trg_vocab.pad_idx)
    path = Checkpoint.from_model(rnn, src_vocab, trg_vocab).save(tmp_path / "rnn.pt")
    code, out, err = run(["--checkpoint", path, "--beam-size", 2, *GOOD], capsys=capsys)
    assert code == 0 and err == []
    expected = Translator.from_checkpoint(path, device="cpu").translate(GOOD, beam_size=2)
    assert out.splitlines() == expected


# ------------------------------------------------------------------------------------------
# files and stdin, line by line; bad lines reported by number, the rest translated
# ------------------------------------------------------------------------------------------


def test_stdin_one_line_in_one_line_out(checkpoint, translator, monkeypatch, capsys):
    text = "".join(f"{s}\n" for s in GOOD * 3).encode()
    code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1, "--batch-size", 4],
                         stdin=text, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and err == []
    assert out.splitlines() == translator.translate(GOOD * 3, beam_size=1)


def test_bad_lines_are_reported_by_number_and_the_rest_translated(checkpoint, translator,
                                                                  tmp_path, monkeypatch,
                                                                  capsys):
    too_long = " ".join(["Hund"] * 30)  # 30 tokens, the model has 24 positions
    lines = [GOOD[0].encode(), b"", b"Ein \xff Hund.", GOOD[1].encode(), too_long.encode(),
             b"   ", GOOD[2].encode() + b"\r"]
    raw = b"\n".join(lines)  # no newline after the last line
    expected = translator.translate(GOOD, beam_size=2)
    for source in ("stdin", "file"):
        if source == "file":
            (tmp_path / "in.de").write_bytes(raw)
            argv, stdin = ["--input", tmp_path / "in.de"], None
        else:
            argv, stdin = [], raw
        code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 2, "--batch-size", 3,
                              *argv], stdin=stdin, monkeypatch=monkeypatch, capsys=capsys)
        assert out.split("\n") == [expected[0], "", "", expected[1], "", "", expected[2], ""]
        assert err[0] == "warning: line 2 is empty; wrote an empty line."
        assert err[1].startswith("error: line 3: not valid UTF-8 (byte b'\\xff' at column 5")
        assert err[2].startswith("error: line 5: The source sentence is 30 positions long")
        assert err[3] == "warning: line 6 is empty; wrote an empty line."
        assert err[4] == ("error: 2 of 7 lines could not be translated (line 3, 5); each got an "
                          "empty output line.")
        assert len(err) == 5 and code == 1


def test_an_empty_sentence_among_arguments_does_not_stop_the_others(checkpoint, translator,
                                                                    capsys):
    code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1, GOOD[0], "", *GOOD[1:]],
                         capsys=capsys)
    expected = translator.translate(GOOD, beam_size=1)
    assert out.splitlines() == [expected[0], "", *expected[1:]]
    assert err == ["warning: line 2 is empty; wrote an empty line."] and code == 0


def test_translations_stream_batch_by_batch(checkpoint, translator):
    """The first batch's lines come out while stdin is still open (flushed per batch)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "convs2s.translate", "--checkpoint", str(checkpoint),
         "--device", "cpu", "--beam-size", "1", "--batch-size", "2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(f"{GOOD[0]}\n{GOOD[1]}\n{GOOD[2]}\n".encode())
        proc.stdin.flush()
        received = b""
        deadline = time.monotonic() + 120  # generous: the interpreter imports torch first
        while received.count(b"\n") < 2:
            assert time.monotonic() < deadline, "the first batch was not written in time"
            if select.select([proc.stdout], [], [], 1.0)[0]:
                chunk = proc.stdout.read1(4096)
                assert chunk, proc.stderr.read().decode()
                received += chunk
        # the first batch (two lines) is out; the third line waits for its batch to fill
        first = received.decode().splitlines()
        rest, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert first == translator.translate(GOOD[:2], beam_size=1)
    assert rest.decode().splitlines() == translator.translate(GOOD[2:], beam_size=1)
    assert proc.returncode == 0 and err == b""


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:1", "gpu"])
def test_a_device_this_machine_lacks_is_one_line_exit_2(checkpoint, capsys, device):
    code, out, err = run(["--checkpoint", checkpoint, "--device", device, GOOD[0]],
                         capsys=capsys)
    assert code == 2 and out == "" and len(err) == 1
    assert err[0].startswith("python -m convs2s.translate: error: argument --device: ")
    assert ("CUDA is not available" in err[0]) if device != "gpu" else "not a device" in err[0]


def test_usage_mistakes_are_one_line_exit_2(checkpoint, tmp_path, capsys):
    for argv in (["--batch-size", 0], ["--beam-size", -1], ["--beam-size", "x"],
                 ["--input", tmp_path / "missing.de"], ["--input", "-", GOOD[0]]):
        code, out, err = run(["--checkpoint", checkpoint, *argv], capsys=capsys)
        assert code == 2 and out == "" and len(err) == 1, (argv, err)
        assert err[0].startswith("python -m convs2s.translate: error: ")


# ------------------------------------------------------------------------------------------
# the batching function checks its arguments
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -3, 1.5, True, None])
def test_translate_tokens_needs_a_positive_batch_size(translator, bad):
    with pytest.raises(ValueError, match=f"batch_size must be a positive integer, got {bad!r}"):
        translator.translate_tokens(GOOD, batch_size=bad)
    with pytest.raises(ValueError, match=f"beam_size must be a positive integer, got {bad!r}"):
        translator.translate_tokens(GOOD, beam_size=bad)


def test_batches_give_the_same_translations_as_one_batch(translator):
    one = translator.translate_tokens(GOOD * 2, beam_size=1, batch_size=64)
    assert translator.translate_tokens(GOOD * 2, beam_size=1, batch_size=1) == one
    assert translator.translate_tokens(GOOD * 2, beam_size=1, batch_size=4) == one


def test_check_device():
    assert translate.check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not a device"):
        translate.check_device("quantum")


# ------------------------------------------------------------------------------------------
# the languages and the tokenizer come from the checkpoint
# ------------------------------------------------------------------------------------------


def _subword_parts(vocab_size=80):
    from conftest import TINY_PAIRS

    from convs2s.data.subword import SubwordSettings, TextPipeline

    pipeline = TextPipeline.learn(TINY_PAIRS, "de", "en", SubwordSettings(vocab_size=vocab_size),
                                  cache=False)
    src_vocab, trg_vocab = pipeline.vocabs()
    torch.manual_seed(0)
    model = ConvS2S(len(src_vocab), len(trg_vocab), emb_dim=16, hid_dim=32, enc_layers=2,
                    dec_layers=2, max_positions=40, src_pad_idx=src_vocab.pad_idx,
                    trg_pad_idx=trg_vocab.pad_idx)
    return pipeline, model, src_vocab, trg_vocab


@pytest.fixture(scope="module")
def subword_checkpoint(tmp_path_factory):
    pipeline, model, src_vocab, trg_vocab = _subword_parts()
    data = payload(model, src_vocab, trg_vocab)
    data.pop("tokenizers")
    return save_checkpoint(tmp_path_factory.mktemp("sw") / "best.pt",
                           {**data, **pipeline.record()})


def test_a_subword_checkpoint_translates_into_decoded_cased_text(subword_checkpoint, capsys):
    t = Translator.from_checkpoint(subword_checkpoint, device="cpu")
    assert (t.src_lang, t.trg_lang, t.pipeline.kind, t.pipeline.cased) == \
        ("de", "en", "subword", True)
    pieces = t.src_tokenizer(GOOD[2])
    assert t.src_tokenizer.decode(pieces) == GOOD[2]  # cased, exact
    assert t.src_vocab.unk_idx not in t.src_vocab.encode(pieces)
    tokens = t.translate_tokens(GOOD, beam_size=2)
    assert all(p in t.trg_vocab for out in tokens for p in out)
    assert t.translate(GOOD, beam_size=2) == [t.trg_tokenizer.decode(out) for out in tokens]
    code, out, err = run(["--checkpoint", subword_checkpoint, "--beam-size", 2, *GOOD],
                         capsys=capsys)
    assert code == 0 and err == [] and out.splitlines() == t.translate(GOOD, beam_size=2)


def _other_trg_model(d):
    other, *_ = _subword_parts(vocab_size=70)
    d["tokenizer"].update(trg_model=other.trg_tokenizer.model,
                          trg_sha256=other.trg_tokenizer.sha256)


TEXT_BROKEN = {
    "unknown language": (lambda d: d.update(src_lang="xx"),
                         "its src_lang 'xx' is not one of en, de, fr, cs"),
    "unknown tokenizer kind": (lambda d: d["tokenizer"].update(kind="chars"),
                               "its tokenizer entry is not one of the kinds word, subword"),
    "model bytes that are no model": (lambda d: d["tokenizer"].update(src_model=b"junk"),
                                      "its subword tokenizer is malformed"),
    "model that does not match its sha256": (
        lambda d: d["tokenizer"].update(trg_sha256="0" * 64), "does not match its sha256"),
    "model of another vocabulary": (_other_trg_model,
                                    "its trg_vocab .* is not the pieces of its trg subword model"),
}


@pytest.mark.parametrize("case", list(TEXT_BROKEN))
def test_broken_language_or_tokenizer_records_are_refused_in_one_line(case, subword_checkpoint,
                                                                      tmp_path, capsys):
    edit, message = TEXT_BROKEN[case]
    path = broken(subword_checkpoint, tmp_path, edit)
    with pytest.raises(CheckpointError, match=message) as err:
        Translator.from_checkpoint(path, device="cpu")
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    code, out, err_lines = run(["--checkpoint", path, "Ein Hund läuft."], capsys=capsys)
    assert code == 1 and out == "" and len(err_lines) == 1


def test_a_translator_built_from_parts_checks_its_pipeline():
    pipeline, model, src_vocab, trg_vocab = _subword_parts()
    other, *_ = _subword_parts(vocab_size=70)
    with pytest.raises(ValueError, match="not the pieces of its src subword model"):
        Translator(model, src_vocab, trg_vocab, pipeline=other, device="cpu")
    t = Translator(model, src_vocab, trg_vocab, pipeline=pipeline, device="cpu")
    assert t.pipeline is pipeline and t.src_tokenizer is pipeline.src_tokenizer


def test_word_checkpoints_of_other_directions_tokenize_the_source_language(checkpoint,
                                                                          tmp_path):
    path = broken(checkpoint, tmp_path, lambda d: d.update(
        src_lang="fr", trg_lang="cs", tokenizer={"kind": "word", "lower": True}))
    t = Translator.from_checkpoint(path, device="cpu")
    assert (t.src_lang, t.trg_lang) == ("fr", "cs")
    assert t.src_tokenizer.lang == "fr" and t.src_tokenizer("L'homme")[0] == "l'"
    with pytest.raises(TypeError, match="takes a French sentence"):
        t.translate([3])


def test_translate_for_display_decodes_a_subword_model_s_pieces(subword_checkpoint):
    from convs2s.course import analysis

    t = Translator.from_checkpoint(subword_checkpoint, device="cpu")
    result = analysis.translate_for_display(t, GOOD[2], beam_size=2)
    assert result["ok"] and result["source_tokens"] == t.src_tokenizer(GOOD[2])
    assert result["unknown"] == []  # pieces: no source token is unknown
    assert result["text"] == t.translate(GOOD[2], beam_size=2)  # decoded pieces, not joined


def test_length_penalty_reaches_beam_search(translator):
    from convs2s.model.search import beam_search

    sentences = GOOD * 3
    token_lists = [translator._tokens(s) for s in sentences]
    src = translator._batch(token_lists)
    v = translator.trg_vocab
    for alpha in (0.0, 1.0, 2.0):
        ids = beam_search(translator.model, src, beam_size=4, max_len=translator.max_positions,
                          bos_idx=v.bos_idx, eos_idx=v.eos_idx, pad_idx=v.pad_idx,
                          length_penalty=alpha)
        assert translator.translate_tokens(sentences, beam_size=4, length_penalty=alpha) == \
            [v.decode(x) for x in ids]
    for bad in (float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="length_penalty must be a finite number"):
            translator.translate_tokens(GOOD, beam_size=2, length_penalty=bad)
    # None: the translator's own length penalty (1.0 here; a final.pt records its choice)
    assert translator.length_penalty == 1.0
    assert translator.translate_tokens(sentences, beam_size=4, length_penalty=None) == \
        translator.translate_tokens(sentences, beam_size=4, length_penalty=1.0)


def test_the_translators_own_length_penalty_is_the_one_beam_search_gets(translator,
                                                                         monkeypatch):
    """What reaches beam search, not what comes out: an untrained model may translate alike
    under every α, which would let the comparisons above pass with α ignored."""
    import convs2s.run.translator as module

    seen = []

    def spy(*args, length_penalty, **kwargs):
        seen.append(length_penalty)
        return module_beam_search(*args, length_penalty=length_penalty, **kwargs)

    module_beam_search = module.beam_search
    monkeypatch.setattr(module, "beam_search", spy)
    translator.translate_tokens(GOOD[:1], beam_size=2, length_penalty=0.25)
    translator.translate_tokens(GOOD[:1], beam_size=2)
    monkeypatch.setattr(translator, "length_penalty", 1.75)  # as a final.pt records its choice
    translator.translate_tokens(GOOD[:1], beam_size=2)
    translator.translate_tokens(GOOD[:1], beam_size=2, length_penalty=0.0)
    assert seen == [0.25, 1.0, 1.75, 0.0]


def test_cli_length_penalty_is_used_and_checked(checkpoint, translator, capsys):
    code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 3, "--length-penalty", 0,
                          *GOOD], capsys=capsys)
    assert code == 0 and err == []
    assert out.splitlines() == translator.translate(GOOD, beam_size=3, length_penalty=0.0)
    for bad in ("nan", "inf", "x"):
        code, out, err = run(["--checkpoint", checkpoint, "--length-penalty", bad, *GOOD],
                             capsys=capsys)
        assert code == 2 and len(err) == 1 and "--length-penalty" in err[0]
        assert "finite number" in err[0]


# ------------------------------------------------------------------------------------------
# length penalty bounds, line length and Unicode, messages
# ------------------------------------------------------------------------------------------


def test_length_penalty_is_bounded_at_parse_time_and_in_the_api(checkpoint, translator, capsys):
    from convs2s.model.search import beam_search
    from convs2s.run.evaluate import evaluate

    for bad in ("400", "-400", "10.5", "-0.1", "1e308"):
        code, out, err = run(["--checkpoint", checkpoint, "--length-penalty", bad, *GOOD],
                             capsys=capsys)
        assert code == 2 and out == "" and len(err) == 1, (bad, err)
        assert err[0].startswith("python -m convs2s.translate: error: argument "
                                 "--length-penalty: must be between 0 and 10"), err
    code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 3, "--length-penalty", 10,
                          *GOOD], capsys=capsys)  # the bounds themselves are allowed
    assert code == 0 and err == [] and len(out.splitlines()) == len(GOOD)
    v = translator.trg_vocab
    src = translator._batch([translator._tokens(s) for s in GOOD])
    for bad in (400, -400, 10.5, -0.1):
        match = rf"length_penalty must be between 0 and 10, not {bad!r}"
        with pytest.raises(ValueError, match=match):
            translator.translate(GOOD[0], beam_size=2, length_penalty=bad)
        with pytest.raises(ValueError, match=match):
            translator.translate_tokens(GOOD, beam_size=2, length_penalty=bad)
        with pytest.raises(ValueError, match=match):
            translate.translate_lines(translator, GOOD, io.StringIO(), io.StringIO(),
                                      length_penalty=bad)
        with pytest.raises(ValueError, match=match):
            beam_search(translator.model, src, beam_size=2, max_len=translator.max_positions,
                        bos_idx=v.bos_idx, eos_idx=v.eos_idx, length_penalty=bad)
        with pytest.raises(ValueError, match=match):
            evaluate(translator, [(GOOD[0], "A dog runs.")], length_penalty=bad)
    for bad in (float("nan"), "1", True, None):
        with pytest.raises(ValueError, match="length_penalty must be a finite number"):
            beam_search(translator.model, src, beam_size=2, max_len=translator.max_positions,
                        bos_idx=v.bos_idx, eos_idx=v.eos_idx, length_penalty=bad)


def test_a_line_over_the_limit_is_reported_and_skipped_unread(translator):
    """The reader holds at most ``max_bytes + 1`` bytes of a line: a longer one is reported by
    number with an empty output line (the lines before it first), and its rest is skipped in
    pieces, never held; the next line is translated."""
    import itertools
    import tracemalloc

    class Zeros(io.RawIOBase):  # `n` zero bytes (one long line), then b"\n" and a sentence
        def __init__(self, n, tail):
            self.left, self.tail = n, tail

        def readable(self):
            return True

        def readinto(self, b):
            if self.left > 0:
                k = min(len(b), self.left)
                b[:k] = bytes(k)
                self.left -= k
                return k
            k = min(len(b), len(self.tail))
            b[:k], self.tail = self.tail[:k], self.tail[k:]
            return k

    limit = 1000
    f = io.BufferedReader(Zeros(50 << 20, f"\n{GOOD[1]}\n".encode()))
    head = io.BytesIO(f"{GOOD[0]}\n".encode())
    lines = itertools.chain(translate.read_lines(head, max_bytes=limit),
                            translate.read_lines(f, max_bytes=limit))
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    try:
        n, failed = translate.translate_lines(translator, lines, out, err, beam_size=1,
                                              max_line_bytes=limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 << 20, f"{peak} bytes traced: the 50 MiB line was held"
    assert n == 3 and [lineno for lineno, _ in failed] == [2]
    assert out.getvalue().split("\n") == [translator.translate(GOOD[0], beam_size=1), "",
                                          translator.translate(GOOD[1], beam_size=1), ""]
    assert err.getvalue().splitlines()[0] == (
        f"error: line 2: longer than {limit} bytes, so not one sentence (is the input one "
        "sentence per line?); skipped it unread. Wrote an empty line.")
    # the bound holds for a line exactly at the limit, and for lines given as str or bytes
    exact = io.BytesIO(b"a" * limit + b"\n" + b"b" * (limit + 1) + b"\n" + b"c" * limit)
    got = list(translate.read_lines(exact, max_bytes=limit))
    assert got[0] == b"a" * limit + b"\n" and got[2] == b"c" * limit
    assert isinstance(got[1], translate.LineTooLong) and len(got) == 3
    out, err = io.StringIO(), io.StringIO()
    n, failed = translate.translate_lines(translator, ["x" * 2000, b"y" * 2000], out, err,
                                          max_line_bytes=limit)
    assert [lineno for lineno, _ in failed] == [1, 2] and out.getvalue() == "\n\n"


def test_text_that_is_not_valid_unicode_is_one_clear_valueerror(translator, subword_checkpoint):
    """A lone surrogate (half a UTF-16 pair) made the subword model's sentencepiece fail with a
    cast error and the word model with a UnicodeEncodeError; both now say what is wrong."""
    subword = Translator.from_checkpoint(subword_checkpoint, device="cpu")
    calls = [("translate", "Ein \ud800 Mann"),
             ("translate", ["Ein Hund.", "Ein \udcff Mann"]),
             ("translate_with_attention", "Ein \ud800 Mann")]
    for t in (translator, subword):
        for method, text in calls:
            with pytest.raises(ValueError) as e:
                getattr(t, method)(text)
            assert type(e.value) is ValueError  # not UnicodeEncodeError, nor a RuntimeError
            assert "not valid Unicode" in str(e.value) and "\n" not in str(e.value)
            assert "character 5" in str(e.value) and "surrogate" in str(e.value)


def test_the_too_long_message_is_grammatical(translator):
    from convs2s.data import check_length

    with pytest.raises(ValueError) as e:
        check_length(["Hund"] * 3000, 24)
    assert str(e.value) == ("The source sentence is 3000 positions long (3000 tokens), but the "
                            "model handles at most 24. Shorten it or split it into several "
                            "sentences.")
    with pytest.raises(ValueError, match=r"26 positions long \(24 tokens \+ 2 for <bos>/<eos>\)"):
        check_length(["Hund"] * 24, 24, extra=2)
    with pytest.raises(ValueError, match=r"is 30 positions long \(30 tokens\), but"):
        translator.translate(" ".join(["Hund"] * 30))


def test_translate_of_a_folder_says_did_you_mean_best_pt(checkpoint, tmp_path, capsys):
    folder = tmp_path / "q"
    folder.mkdir()
    (folder / "best.pt").write_bytes(checkpoint.read_bytes())
    code, out, err = run(["--checkpoint", folder, GOOD[0]], capsys=capsys)
    assert code == 1 and out == ""
    assert err == [f"error: {folder} is a folder, not a checkpoint file. Did you mean "
                   f"{folder / 'best.pt'}?"]


# ------------------------------------------------------------------------------------------
# input in another encoding, line endings of every kind, output one line per input line
# ------------------------------------------------------------------------------------------

WIDE = {  # Python's codec: (what the error names, the name iconv -f is told)
    "utf-16": ("UTF-16 (little-endian: it starts with a UTF-16 byte order mark)", "UTF-16"),
    "utf-16-le": ("UTF-16LE (line 1 holds NUL bytes", "UTF-16LE"),
    "utf-16-be": ("UTF-16BE (line 1 holds NUL bytes", "UTF-16BE"),
    "utf-32": ("UTF-32 (little-endian: it starts with a UTF-32 byte order mark)", "UTF-32"),
    "utf-32-le": ("UTF-32LE (line 1 holds NUL bytes", "UTF-32LE"),
    "utf-32-be": ("UTF-32BE (line 1 holds NUL bytes", "UTF-32BE"),
}


@pytest.mark.parametrize("codec", list(WIDE))
def test_utf16_or_utf32_input_is_refused_in_one_line_naming_encoding_and_iconv(
        codec, checkpoint, tmp_path, monkeypatch, capsys):
    import shutil

    text = "".join(f"{s}\n" for s in GOOD)
    path = tmp_path / "in.de"
    path.write_bytes(text.encode(codec))
    what, iconv = WIDE[codec]
    for source in ("file", "stdin"):
        argv, stdin = (["--input", path], None) if source == "file" else ([], path.read_bytes())
        code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1, *argv], stdin=stdin,
                             monkeypatch=monkeypatch, capsys=capsys)
        assert code == 1 and out == "" and len(err) == 1, (source, err)
        name = str(path) if source == "file" else "standard input"
        assert err[0].startswith(f"error: {name} is {what}"), err[0]
        assert f"not UTF-8 text: convert it first, e.g. iconv -f {iconv} -t UTF-8 " in err[0]
    if shutil.which("iconv"):  # the command it suggests gives the UTF-8 text back
        command = err[0].split("e.g. ")[-1].replace("FILE", str(path)).split(" | ")[0]
        converted = subprocess.run(command.split()[:6], capture_output=True, check=True).stdout
        assert converted.decode("utf-8") == text


@pytest.mark.parametrize("kind", ["gzip", "checkpoint"])
def test_a_compressed_file_or_a_checkpoint_as_input_is_one_line_saying_what_it_is(
        kind, checkpoint, tmp_path, monkeypatch, capsys):
    """Multi30k's files are gzip-compressed, and a checkpoint is a zip archive: either given as
    the text to translate is named for what it is, before a line is translated (they were read
    as lines of text: dozens of warnings and lines of garbage)."""
    import gzip
    import shutil

    path = tmp_path / ("in.de.gz" if kind == "gzip" else "in.pt")
    if kind == "gzip":
        path.write_bytes(gzip.compress("".join(f"{s}\n" for s in GOOD).encode()))
    else:
        shutil.copyfile(checkpoint, path)
    for source in ("file", "stdin"):
        argv, stdin = (["--input", path], None) if source == "file" else ([], path.read_bytes())
        code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1, *argv], stdin=stdin,
                             monkeypatch=monkeypatch, capsys=capsys)
        name = str(path) if source == "file" else "standard input"
        assert code == 1 and out == "" and len(err) == 1, (source, err)
        if kind == "gzip":
            assert err[0].startswith(f"error: {name} is gzip-compressed, not UTF-8 text: "
                                     "decompress it first, e.g. gunzip -c "), err[0]
        else:
            assert err[0] == (f"error: {name} is a zip archive (a PyTorch checkpoint is one), "
                              "not text: give a text file, one sentence a line"), err[0]


def test_nul_bytes_after_the_first_line_are_refused_too(checkpoint, monkeypatch, capsys):
    # UTF-16LE whose first line is empty: line 1 is b"\n", the NULs start on line 2
    stdin = "\nEin Hund läuft.\n".encode("utf-16-le")
    code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1], stdin=stdin,
                         monkeypatch=monkeypatch, capsys=capsys)
    assert code == 1 and out == ""
    assert err == ["error: standard input is UTF-16LE (line 2 holds NUL bytes, as UTF-16 text "
                   "does), not UTF-8 text: convert it first, e.g. iconv -f UTF-16LE -t UTF-8 "
                   "FILE | python -m convs2s.translate ..."]


def test_a_classic_mac_file_of_three_lines_gives_three_output_lines(checkpoint, translator,
                                                                    tmp_path, capsys):
    expected = translator.translate(GOOD, beam_size=1)
    for ending in ("\r", "\r\n", "\n"):
        path = tmp_path / "in.de"
        path.write_bytes("".join(f"{s}{ending}" for s in GOOD).encode())
        code, out, err = run(["--checkpoint", checkpoint, "--beam-size", 1, "--input", path],
                             capsys=capsys)
        assert code == 0 and err == [] and out.split("\n") == [*expected, ""], repr(ending)
    mixed = f"{GOOD[0]}\r{GOOD[1]}\r\n{GOOD[2]}\n".encode()
    assert list(translate.read_lines(io.BytesIO(mixed))) == [
        GOOD[0].encode() + b"\r", GOOD[1].encode() + b"\r\n", GOOD[2].encode() + b"\n"]


def test_line_endings_split_between_two_reads_end_one_line(translator):
    class OneByteAtATime(io.RawIOBase):  # a pipe that delivers one byte per read
        def __init__(self, data):
            self.data = data

        def readable(self):
            return True

        def readinto(self, b):
            if not self.data:
                return 0
            b[:1], self.data = self.data[:1], self.data[1:]
            return 1

    data = b"a\r\nb\rc\n\rd\r"
    lines = list(translate.read_lines(io.BufferedReader(OneByteAtATime(data), buffer_size=1)))
    assert lines == [b"a\r\n", b"b\r", b"c\n", b"\r", b"d\r"]
    # and after a line too long to hold, whose \r\n is split between two reads
    data = b"x" * 50 + b"\r" + b"\ny\r\nz"
    lines = list(translate.read_lines(io.BufferedReader(OneByteAtATime(data), buffer_size=1),
                                      max_bytes=10))
    assert isinstance(lines[0], translate.LineTooLong) and lines[1:] == [b"y\r\n", b"z"]


def _checkpoint_with_one_output_token(token: str, tmp_path):
    """A checkpoint whose target vocabulary holds ``token`` and whose model always says it."""
    from conftest import TINY_PAIRS

    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src = Vocab.build((tok_de(de) for de, _ in TINY_PAIRS), min_freq=1)
    trg = Vocab.build([*(tok_en(en) for _, en in TINY_PAIRS), [token]], min_freq=1)
    torch.manual_seed(0)
    model = ConvS2S(len(src), len(trg), emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=2,
                    max_positions=8, src_pad_idx=src.pad_idx, trg_pad_idx=trg.pad_idx)
    with torch.no_grad():
        model.decoder.fc_out.bias.fill_(-100.0)
        model.decoder.fc_out.bias[trg.stoi[token]] = 100.0
    return save_checkpoint(tmp_path / "best.pt", payload(model, src, trg))


def test_control_characters_in_a_translation_are_written_as_spaces(tmp_path, capsys):
    token = "\x1b[31mred\nline\rx\u2028y\x85z"  # ANSI colour, line breaks of every kind
    path = _checkpoint_with_one_output_token(token, tmp_path)
    assert token in Translator.from_checkpoint(path, device="cpu").translate(GOOD[0], beam_size=1)
    code, out, err = run(["--checkpoint", path, "--beam-size", 1, *GOOD], capsys=capsys)
    assert code == 0 and err == []
    lines = out.split("\n")
    assert len(lines) == len(GOOD) + 1 and lines[-1] == ""
    for line in lines[:-1]:
        assert "[31mred line x y z" in line
        assert not any(c in line for c in "\x1b\r\x85\u2028")
    assert translate.one_line("a\tb\x00c\x7fd") == "a b c d"


def test_beam_and_batch_sizes_are_bounded_at_parse_time(checkpoint, capsys):
    for option, limit in (("--beam-size", translate.MAX_BEAM_SIZE),
                          ("--batch-size", translate.MAX_BATCH_SIZE)):
        for value in (limit + 1, 10**23):
            code, out, err = run(["--checkpoint", checkpoint, option, value, GOOD[0]],
                                 capsys=capsys)
            assert code == 2 and out == "" and err == [
                f"python -m convs2s.translate: error: argument {option}: must be at most "
                f"{limit:,}, got {value} (see --help)"]
