"""The checkpoint format has one way to record the text pipeline (``src_lang``, ``trg_lang``,
``tokenizer``). The ``tokenizers`` entry convs2s once wrote beside it is no longer written or
read; a file whose ``tokenizers`` entry disagrees with what it records otherwise is refused in
one line rather than read as something it is not (a cased model read as lower-cased)."""

from __future__ import annotations

import pytest
from test_checkpoint import VOCAB, refusal, tiny

from convs2s.data.subword import TextPipeline
from convs2s.run.checkpoint import Checkpoint, save_checkpoint


def test_a_word_checkpoint_records_its_pipeline_once(tmp_path):
    pipeline = TextPipeline.word("en", "de", lower=False)
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB, pipeline).to_dict()
    assert "tokenizers" not in data and data["tokenizer"] == {"kind": "word", "lower": False}
    loaded = Checkpoint.load(save_checkpoint(tmp_path / "w.pt", data)).pipeline
    assert (loaded.src_lang, loaded.trg_lang, loaded.lower) == ("en", "de", False)


@pytest.mark.parametrize("tokenizers, refused", [
    ({"src_lang": "de", "trg_lang": "en", "lower": True}, False),  # what it records: loads
    ({"src_lang": "de", "trg_lang": "en", "lower": False}, True),
    ({"src_lang": "en", "trg_lang": "de", "lower": True}, True),
])
def test_a_tokenizers_entry_that_disagrees_is_refused(tmp_path, tokenizers, refused):
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict()
    for key in ("src_lang", "trg_lang", "tokenizer"):  # as files written before 2026-11-23
        del data[key]
    path = save_checkpoint(tmp_path / "old.pt", {**data, "tokenizers": tokenizers})
    if refused:
        assert "its tokenizers entry" in refusal(path) and "disagrees" in refusal(path)
    else:
        assert Checkpoint.load(path).pipeline.lower is True
