"""The translators shipped with the package, one per direction the manifest lists: each
present, intact, small enough, recorded honestly (its float16 weights scoring as its float32
ones did), and translating with nothing else installed or downloaded."""

from pathlib import Path

import pytest
import torch

import convs2s
from convs2s.course import reference
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
    # a file the run trained from is named, not where it lay on the machine that trained it
    named = [v for v in (ckpt.preset or {}).values() if isinstance(v, str) and "/" in v]
    assert not named, f"the shipped preset holds a local path: {named}"


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


@pytest.mark.parametrize("direction", SHIPPED)
def test_the_figures_stated_for_the_shipped_model_are_its_record(direction):
    """README.md, RESULTS.md and the settings record (notebook 06) state the shipped file's own
    figures: its float16 weights' scores first, the float32 ones they were rounded from beside
    them, never the two swapped."""
    root = Path(__file__).resolve().parents[2]
    splits = pretrained.record(direction)["scores"]["splits"]

    def bleu(split, weights, beam):
        return f"{splits[split][weights][beam]['sacrebleu']:.2f}"

    results = [line for line in (root / "benchmarks" / "RESULTS.md").read_text("utf-8").splitlines()
               if line.startswith("| the shipped") and f'pretrained("{direction}")' in line
               and "since" in line.split("|")[1][:120]]
    assert len(results) == 1, f"RESULTS.md: {len(results)} rows for the shipped {direction} model"
    assert (f"**{bleu('test', 'float16', 'beam5')}** (float32: {bleu('test', 'float32', 'beam5')}),"
            f" greedy {bleu('test', 'float16', 'beam1')} ({bleu('test', 'float32', 'beam1')}); "
            f"validation beam 5 {bleu('valid', 'float16', 'beam5')} "
            f"({bleu('valid', 'float32', 'beam5')}), greedy {bleu('valid', 'float16', 'beam1')} "
            f"({bleu('valid', 'float32', 'beam1')})") in results[0]
    arrow = direction.replace("-", "→")
    readme = [line for line in (root / "README.md").read_text("utf-8").splitlines()
              if line.startswith(f"| {arrow}, the shipped translator")]
    assert len(readme) == 1, f"README.md: {len(readme)} rows for the shipped {direction} model"
    assert (f"**{bleu('test', 'float16', 'beam5')}** (validation "
            f"{bleu('valid', 'float16', 'beam5')}; greedy {bleu('test', 'float16', 'beam1')})"
            ) in readme[0]
    record = reference.result(f"settings_tried_{direction.replace('-', '_')}.json")
    shipped = [run for run in record["runs"] if run["shipped"]]
    assert len(shipped) == 1
    assert f"{shipped[0]['test2016_beam5']:.2f}" == bleu("test", "float16", "beam5")
