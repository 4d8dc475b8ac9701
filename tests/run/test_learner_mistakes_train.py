"""The mistakes a learner makes calling train, prepare_data and build_model from a notebook: one
split for the data, None or a dict for the preset (and a preset's name where a Preset was
taken), None for the vocabularies, a max_positions that drops every training pair, a log or an
on_epoch_end that cannot be called as train calls it. Each is one line that names what was given
and what to pass, raised before the run folder is made or training starts (nothing is written),
not a pathlib or attribute error frames down, or a run of 0 steps, or a failure after epoch 1."""

from __future__ import annotations

import pytest
from conftest import TINY_PAIRS

from convs2s.data import Vocab, make_tokenizer
from convs2s.model import ConvS2S, ConvS2SConfig
from convs2s.run.prepare import build_model, prepare_data
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.train import train

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=1,
    patience=100, label_smoothing=0.0, seed=7,
)
DATA = {"train": TINY_PAIRS[:8], "valid": TINY_PAIRS[8:10], "test": TINY_PAIRS[10:]}
NAMES = ", ".join(PRESETS)


def _one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


def _quiet(*_):
    pass


def _train(out, preset=TINY, **kw):
    kw = {"data": DATA, "progress": False, "log": _quiet, **kw}
    return train(preset, out, **kw)


@pytest.fixture(scope="module")
def vocabs():
    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    return (Vocab.build((tok_de(de) for de, _ in TINY_PAIRS), min_freq=1),
            Vocab.build((tok_en(en) for _, en in TINY_PAIRS), min_freq=1))


# ------------------------------------------------------------------ data and preset


@pytest.mark.parametrize("data, given", [(DATA["train"], "list"), (42, "int")])
def test_train_refuses_data_that_is_neither_the_dict_nor_a_folder(tmp_path, data, given):
    """train(preset, out, data=data["train"]) was a pathlib TypeError, after the run folder was
    made."""
    out = tmp_path / "run"
    with pytest.raises(TypeError) as e:
        _train(out, data=data)
    assert _one_line(e) == ("data must be load_multi30k()'s dict (train, valid, test) or a "
                            f"folder holding the Multi30k files, not {given}.")
    assert not out.exists()


@pytest.mark.parametrize("preset, given", [(None, "NoneType"), ({"name": "quick"}, "dict")])
def test_train_refuses_a_preset_that_is_not_one(tmp_path, preset, given):
    """train(None, out) was an AttributeError inside check_model_size."""
    out = tmp_path / "run"
    with pytest.raises(TypeError) as e:
        _train(out, preset)
    assert _one_line(e) == f"preset must be a Preset or a name in PRESETS ({NAMES}), not {given}."
    assert not out.exists()


def test_prepare_data_and_build_model_take_a_preset_name(vocabs):
    """build_model("quick", ...) and prepare_data("quick", ...) were AttributeErrors: a name is
    taken, as train takes one."""
    train_ds, valid_ds, src_vocab, _ = prepare_data("quick", DATA)
    assert len(train_ds) == len(DATA["train"]) and len(valid_ds) == len(DATA["valid"])
    model = build_model("quick", *vocabs)
    assert isinstance(model, ConvS2S)
    assert model.config["emb_dim"] == PRESETS["quick"].model.emb_dim
    for call in (lambda: prepare_data(None, DATA), lambda: build_model(None, *vocabs)):
        with pytest.raises(TypeError) as e:
            call()
        assert _one_line(e).startswith("preset must be a Preset or a name in PRESETS (quick, ")
    with pytest.raises(ValueError, match=r"^Unknown preset 'quik'; choose one of"):
        build_model("quik", *vocabs)


@pytest.mark.parametrize("vocab, given", [(None, "NoneType"), (100, "int")])
def test_build_model_refuses_what_is_not_a_vocabulary(vocabs, vocab, given):
    """build_model(preset, None, None) was an error inside the model's configuration."""
    for args in ((vocab, vocab), (vocabs[0], vocab)):
        with pytest.raises(TypeError) as e:
            build_model(TINY, *args)
        assert _one_line(e) == ("build_model takes the source and target Vocab (vocabularies), "
                                f"not {given}: build_model(preset, src_vocab, trg_vocab).")


# ------------------------------------------------------------------ every pair dropped


def test_train_refuses_when_every_training_pair_is_too_long(tmp_path):
    """PRESETS["quick"].replace(max_positions=5) only warned, then ran 0 steps and wrote
    checkpoints with a loss of 0.0; now nothing is written, and the folder the run made is
    removed."""
    out = tmp_path / "run"
    with pytest.warns(UserWarning, match="dropped"), pytest.raises(ValueError) as e:
        _train(out, TINY.replace(max_positions=5))
    assert _one_line(e) == ("all 8 training pairs are longer than max_positions=5 (source, or "
                            "target with <bos>/<eos>): raise max_positions.")
    assert not out.exists()
    existing = tmp_path / "mine"  # a folder the learner made stays, with no checkpoint
    existing.mkdir()
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="all 8 training pairs"):
        _train(existing, TINY.replace(max_positions=5))
    assert existing.is_dir() and not list(existing.rglob("*.pt"))


def test_prepare_data_refuses_when_every_validation_pair_is_too_long():
    """A validation set of no pair gave a validation loss of 0.0 every epoch."""
    long_valid = {**DATA, "valid": [(" ".join(["Hund"] * 40), "dog")]}
    with pytest.warns(UserWarning), pytest.raises(ValueError) as e:
        prepare_data(TINY, long_valid)
    assert _one_line(e) == ("all 1 validation pairs are longer than max_positions=32 (source, "
                            "or target with <bos>/<eos>): raise max_positions.")


# ------------------------------------------------------------------ log and on_epoch_end


def _one_arg(row):
    pass


@pytest.mark.parametrize("kw, message", [
    ({"on_epoch_end": _one_arg},
     "on_epoch_end must be a function taking (row, model), not _one_arg(row)."),
    ({"on_epoch_end": 3}, "on_epoch_end must be a function taking (row, model), not 3."),
    ({"log": None}, "log must be a function taking one line of text (e.g. print), not None."),
    ({"log": "print"},
     "log must be a function taking one line of text (e.g. print), not 'print'."),
    ({"log": lambda: None},
     "log must be a function taking one line of text (e.g. print), not <lambda>()."),
])
def test_train_checks_its_callbacks_before_the_first_epoch(tmp_path, kw, message):
    """A wrong on_epoch_end or log failed only after epoch 1, with last.pt written (so the same
    call again was refused: the folder holds a run)."""
    out = tmp_path / "run"
    with pytest.raises(TypeError) as e:
        _train(out, **kw)
    assert _one_line(e) == message
    assert not out.exists()


def test_train_still_takes_callbacks_it_can_call(tmp_path):
    """Callables whose signature cannot be read (print, on some Pythons) are taken as they are;
    a row and the model reach on_epoch_end."""
    rows, lines = [], []

    class Keep:
        def __call__(self, row, model, *rest):
            rows.append((row["epoch"], type(model).__name__))

    result = _train(tmp_path / "run", log=lines.append, on_epoch_end=Keep())
    assert rows == [(1, "ConvS2S")] and result.steps > 0 and lines
    _train(tmp_path / "run2", log=print, on_epoch_end=lambda *args: None)
