"""Every size a caller chooses is bounded where the command line bounds it, in one place
(convs2s.system.arguments), and no message echoes an argument of 100,000 characters.

The searches are replaced by stand-ins that fail the test if reached: a size that should have
been refused never starts the work it asks for (beam_size=10**6 once grew to 22.8 GB).
"""

from __future__ import annotations

import re

import pytest
import torch

import convs2s
from convs2s.data import Vocab
from convs2s.model import ConvS2S
from convs2s.model.search import beam_search, greedy_decode
from convs2s.run import train as train_mod
from convs2s.run import translate_cli as translate
from convs2s.run import translator
from convs2s.run.prepare import MAX_MODEL_PARAMETERS, build_model, check_model_size
from convs2s.run.presets import PRESETS
from convs2s.system.arguments import MAX_BATCH_SIZE, MAX_BEAM_SIZE, MAX_SENTENCES, MAX_VOCAB_SIZE

HUGE = "x" * 100_000

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]
VOCAB = Vocab(SPECIALS + [f"w{i}" for i in range(8)], SPECIALS)


@pytest.fixture(scope="module")
def shipped():
    return convs2s.pretrained("de-en")


@pytest.fixture
def no_search(monkeypatch):
    """The translator's searches fail the test if a call gets as far as searching."""
    def reached(*args, **kwargs):
        raise AssertionError("the search started: the size was not refused first")

    monkeypatch.setattr(translator, "beam_search", reached)
    monkeypatch.setattr(translator, "greedy_decode", reached)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"beam_size": 10**6}, "beam_size=1000000 is too large: at most 1,000"),
    ({"beam_size": MAX_BEAM_SIZE + 1}, "beam_size=1001 is too large"),
    ({"beam_size": True}, "beam_size must be a positive integer, got True"),
    ({"max_len": True}, "max_len must be a positive integer, got True"),
    ({"max_len": 10**6}, "max_len=1000000 is too large: at most 100"),
    ({"max_len": 0}, "max_len must be a positive integer, got 0"),
], ids=["beam 10**6", "beam 1001", "beam True", "max_len True", "max_len 10**6", "max_len 0"])
def test_the_api_refuses_the_sizes_the_command_line_refuses_before_any_work(
        shipped, no_search, kwargs, words):
    with pytest.raises(ValueError) as e:
        shipped.translate("Ein Hund.", **kwargs)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_every_translate_method_bounds_batch_size_and_beam_size(shipped, no_search):
    calls = [lambda **kw: shipped.translate_tokens(["Ein Hund."], **kw),
             lambda **kw: shipped.translate_token_lists([["▁Ein", "▁Hund", "."]], **kw),
             lambda **kw: shipped.translate_tokens_alphas(["Ein Hund."], [1.0], **kw)]
    for call in calls:
        with pytest.raises(ValueError, match="batch_size=10001 is too large: at most 10,000"):
            call(batch_size=MAX_BATCH_SIZE + 1)
        with pytest.raises(ValueError, match="beam_size=1001 is too large"):
            call(beam_size=MAX_BEAM_SIZE + 1)


def test_the_command_line_and_the_api_share_the_bounds():
    assert translate.MAX_BEAM_SIZE == MAX_BEAM_SIZE and translate.MAX_BATCH_SIZE == MAX_BATCH_SIZE
    parse = translate.bounded_int_arg(MAX_BEAM_SIZE)
    assert parse(str(MAX_BEAM_SIZE)) == MAX_BEAM_SIZE
    with pytest.raises(Exception, match="at most 1,000"):
        parse(str(MAX_BEAM_SIZE + 1))


def test_beam_search_and_greedy_decoding_refuse_bools_and_sizes_over_the_bound():
    torch.manual_seed(0)
    model = ConvS2S(len(VOCAB), len(VOCAB), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                    src_pad_idx=VOCAB.pad_idx, trg_pad_idx=VOCAB.pad_idx, max_positions=8)
    src = torch.tensor([[4, 5, 6]])
    ids = dict(bos_idx=VOCAB.bos_idx, eos_idx=VOCAB.eos_idx)
    for bad, words in ((True, "beam_size must be a positive integer"),
                       (MAX_BEAM_SIZE + 1, "beam_size=1001 is too large")):
        with pytest.raises(ValueError, match=words):
            beam_search(model, src, beam_size=bad, max_len=4, **ids)
    for bad in (True, 9):
        with pytest.raises(ValueError, match="max_len"):
            greedy_decode(model, src, max_len=bad, **ids)
    assert len(beam_search(model, src, beam_size=2, max_len=4, **ids)) == 1


def test_a_vocab_size_over_the_bound_is_refused_before_the_data_loads(monkeypatch, capsys):
    def no_data(*args, **kwargs):
        raise AssertionError("the data was loaded before the argument was checked")

    monkeypatch.setattr(train_mod, "load_multi30k", no_data)
    for size in ("2147483648", str(MAX_VOCAB_SIZE + 1)):
        with pytest.raises(SystemExit) as e:
            train_mod.main(["--preset", "quick_subword", "--out", "unused", "--vocab-size", size])
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.count("\n") == 1, err
        assert f"at most {MAX_VOCAB_SIZE:,}" in err
    with pytest.raises(ValueError, match="vocab_size=2147483648 is too large"):
        convs2s.data.subword.SubwordSettings(vocab_size=2**31)


def test_the_size_flags_together_are_bounded_by_the_parameters_before_the_data_loads(
        tmp_path, monkeypatch, capsys):
    """--layers 64 --emb-dim 4096 --hid-dim 4096 is within each flag's bound, but together they
    ask for 15 billion parameters: one line naming the limit, exit 2, before any data is read or
    the run's folder made (it loaded the data for 26 s, then died in the allocator). train()
    refuses it alike, and the model is counted again with the vocabularies once they are made."""
    def no_data(*args, **kwargs):
        raise AssertionError("the data was loaded before the model's size was checked")

    monkeypatch.setattr(train_mod, "load_multi30k", no_data)
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no such folder"))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        train_mod.main(["--preset", "quick", "--out", str(out), "--layers", "64", "--emb-dim",
                        "4096", "--hid-dim", "4096"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert f"at most {MAX_MODEL_PARAMETERS:,} (convs2s.run.prepare.MAX_MODEL_PARAMETERS)" in err
    assert "64 + 64 layers" in err and not out.exists()
    huge = PRESETS["quick"].replace(enc_layers=64, dec_layers=64, emb_dim=4096, hid_dim=4096)
    with pytest.raises(ValueError, match=r"^The model is too large: .* at most 1,000,000,000 "):
        train_mod.train(huge, out, progress=False)
    assert not out.exists()
    # each preset is well within it; the vocabularies count once known (a word model's)
    assert all(check_model_size(p) < MAX_MODEL_PARAMETERS // 20 for p in PRESETS.values())
    wide = PRESETS["quick"].replace(emb_dim=4096)
    words = Vocab(SPECIALS + [f"w{i}" for i in range(150_000)], SPECIALS)
    assert check_model_size(wide) < MAX_MODEL_PARAMETERS
    with pytest.raises(ValueError, match=r"make 1,\d{3},\d{3},\d{3} parameters"):
        build_model(wide, words, words)


def test_translate_refuses_more_sentences_than_the_limit_at_once(shipped, no_search,
                                                                 monkeypatch):
    """translate([...] * 10**6) was tokenized and decoded for hours: at most MAX_SENTENCES a
    call, refused before any sentence is tokenized."""
    def no_tokens(sentence):
        raise AssertionError("a sentence was tokenized before the list's length was checked")

    monkeypatch.setattr(shipped, "source_tokens", no_tokens)
    monkeypatch.setattr(shipped, "_tokens", no_tokens)
    for too_many in (["Ein Hund."] * (MAX_SENTENCES + 1), ("a",) * 10**6):
        with pytest.raises(ValueError) as e:
            shipped.translate(too_many)
        message = str(e.value)
        assert message.startswith(f"translate() takes at most {MAX_SENTENCES:,} sentences a "
                                  f"call, not {len(too_many):,}") and "\n" not in message
        assert "python -m convs2s.translate" in message
    assert MAX_SENTENCES == 100_000


@pytest.mark.parametrize("argv", [
    ["--checkpoint", HUGE, "Ein Hund."],
    ["--checkpoint", "x.pt", "--beam-size", "1" * 100_000, "Ein Hund."],
    ["--checkpoint", "x.pt", "--device", HUGE, "Ein Hund."],
    ["--pretrained", HUGE, "Ein Hund."],
], ids=["checkpoint", "beam size", "device", "pretrained"])
def test_translate_errors_cut_a_100000_character_argument(argv, capsys):
    try:
        code = translate.main(argv)
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code in (1, 2) and err.count("\n") == 1, err[:300]
    # (a number of 100,000 digits is "too large", issue 64, its length said so)
    assert len(err) < 1000 and re.search(r"\(100,00\d characters\)|a number of 100,000 "
                                         r"digits is too large", err), err[:300]


@pytest.mark.parametrize("argv", [
    ["--preset", HUGE, "--out", "x"],
    ["--preset", "quick", "--out", "x", "--epochs", HUGE],
    ["--preset", "quick", "--out", "x", "--device", HUGE],
], ids=["preset", "epochs", "device"])
def test_train_errors_cut_a_100000_character_argument(argv, capsys):
    with pytest.raises(SystemExit) as e:
        train_mod.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err[:300]
    assert len(err) < 1000 and re.search(r"\(100,00\d characters\)", err), err[:300]


def test_api_errors_cut_a_huge_argument(shipped):
    with pytest.raises(ValueError) as e:
        shipped.translate("Ein Hund.", beam_size=HUGE)
    assert len(str(e.value)) < 300 and "100,002 characters" in str(e.value)
    with pytest.raises(convs2s.run.pretrained.PretrainedError) as e:
        convs2s.pretrained(HUGE)
    assert len(str(e.value)) < 300
