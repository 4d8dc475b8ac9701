"""The de-en translator shipped with the package: present, intact, small enough,
recorded honestly, and translating with nothing else installed or downloaded."""

import torch

import convs2s
from convs2s.run import pretrained
from convs2s.run.checkpoint import Checkpoint


def test_the_manifest_records_the_shipped_model_and_how_it_was_made():
    entry = pretrained.record("de-en")
    path = pretrained.pretrained_path("de-en")  # its sha256 checked
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


def test_the_file_holds_float16_weights_and_no_training_state():
    ckpt = Checkpoint.load(pretrained.pretrained_path("de-en"))
    assert {t.dtype for t in ckpt.state_dict.values()} == {torch.float16}
    assert ckpt.train_state is None and ckpt.pipeline.kind == "subword"
    assert (ckpt.pipeline.src_lang, ckpt.pipeline.trg_lang) == ("de", "en")


def test_pretrained_translates_with_no_data_and_no_training(monkeypatch, tmp_path):
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no-data-here"))
    translator = convs2s.pretrained("de-en", device="cpu")
    assert translator.length_penalty == pretrained.record("de-en")["choices"]["length_penalty"]
    english = translator.translate(["Ein kleiner Hund spielt im Schnee.",
                                    "Zwei Männer stehen vor einem Haus."])
    assert len(english) == 2 and all(e and e[0].isupper() for e in english), english
    assert "dog" in english[0] and "snow" in english[0], english
