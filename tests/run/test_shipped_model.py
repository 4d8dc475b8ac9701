"""The translators shipped with the package, one per direction the manifest lists: each
present, intact, small enough, recorded honestly (its float16 weights scoring as its float32
ones did), and translating with nothing else installed or downloaded."""

import pytest
import torch

import convs2s
from convs2s.run import pretrained
from convs2s.run.checkpoint import Checkpoint

#: Per shipped direction: two captions to translate and words their translations must hold
#: (the first sentence is the one notebook 06's widget and the site's translator start with).
#: A direction shipped without an entry here fails its test: add one.
CHECKS = {
    "de-en": (["Ein kleiner Hund spielt im Schnee.", "Zwei Männer stehen vor einem Haus."],
              ["dog", "snow"]),
    "en-de": (["A little dog is playing in the snow.", "Two men are standing in front of a house."],
              ["Hund", "Schnee"]),
}
SHIPPED = pretrained.available()


def test_the_package_ships_both_directions():
    assert {"de-en", "en-de"} <= set(SHIPPED), SHIPPED


@pytest.mark.parametrize("direction", SHIPPED)
def test_the_manifest_records_the_shipped_model_and_how_it_was_made(direction):
    entry = pretrained.record(direction)
    assert entry["direction"] == direction and entry["file"] == f"{direction}.pt"
    path = pretrained.pretrained_path(direction)  # its sha256 checked
    assert path.stat().st_size == entry["bytes"] <= 20_000_000
    training = entry["training"]
    assert training["epochs"] >= training["best_epoch"] >= 1 and training["hours"] > 0
    assert "python -m convs2s.train" in training["command"] and training["machine"]
    assert len(training["valid_loss"]) == training["epochs"]
    # every choice was made on validation; the test set is only reported
    assert entry["choices"]["valid_sentences"] == 1014
    splits = entry["scores"]["splits"]
    for split in ("valid", "test"):
        for beam in ("beam1", "beam5"):
            difference = (splits[split]["float16"][beam]["sacrebleu"]
                          - splits[split]["float32"][beam]["sacrebleu"])
            assert abs(difference) <= 0.1, (split, beam, difference)


@pytest.mark.parametrize("direction", SHIPPED)
def test_the_file_holds_float16_weights_and_no_training_state(direction):
    ckpt = Checkpoint.load(pretrained.pretrained_path(direction))
    assert {t.dtype for t in ckpt.state_dict.values()} == {torch.float16}
    assert ckpt.train_state is None and ckpt.pipeline.kind == "subword"
    assert (ckpt.pipeline.src_lang, ckpt.pipeline.trg_lang) == tuple(direction.split("-"))


@pytest.mark.parametrize("direction", SHIPPED)
def test_pretrained_translates_with_no_data_and_no_training(direction, monkeypatch, tmp_path):
    assert direction in CHECKS, f"no sentences to check the shipped {direction} model with"
    sentences, words = CHECKS[direction]
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no-data-here"))
    translator = convs2s.pretrained(direction, device="cpu")
    assert translator.length_penalty == \
        pretrained.record(direction)["choices"]["length_penalty"]
    out = translator.translate(sentences)
    assert len(out) == 2 and all(t and t[0].isupper() for t in out), out
    assert all(w in out[0] for w in words), out
