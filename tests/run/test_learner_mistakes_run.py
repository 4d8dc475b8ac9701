"""The mistakes a learner makes calling the decoding, translating and scoring functions from a
notebook: the wrong object for the model, a pair or a whole split for sentences, one str for a
list, None for a checkpoint's path. Each is one line that names what was given and what to pass,
raised before any work, not a torch or pathlib error frames down."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from convs2s.model.search import beam_search, beam_search_alphas, greedy_decode
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.evaluate import evaluate
from convs2s.run.translator import Translator


@pytest.fixture
def translator(tiny_ckpt):
    return Translator.from_checkpoint(tiny_ckpt, device="cpu")


def _one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


def _decoding_args(translator):
    v = translator.trg_vocab
    src = translator._batch([translator.source_tokens("ein hund .")])
    return src, dict(max_len=5, bos_idx=v.bos_idx, eos_idx=v.eos_idx)


@pytest.mark.parametrize("decode", [
    greedy_decode, lambda m, s, **k: beam_search(m, s, beam_size=2, **k),
    lambda m, s, **k: beam_search_alphas(m, s, alphas=[1.0], beam_size=2, **k)])
def test_decoding_a_translator_a_list_or_a_token_for_an_id_says_what_to_pass(translator, decode):
    src, kw = _decoding_args(translator)
    with pytest.raises(TypeError) as e:
        decode(translator, src, **kw)
    assert "takes a ConvS2S model, not Translator: pass its .model" in _one_line(e)
    with pytest.raises(TypeError) as e:
        decode(translator.model, src.tolist(), **kw)
    assert "takes src as a tensor of token ids [batch, src_len]" in _one_line(e)
    assert "not list" in str(e.value)
    for bad in (None, "<bos>", True):
        with pytest.raises(TypeError) as e:
            decode(translator.model, src, **{**kw, "bos_idx": bad})
        assert "bos_idx must be a token id (an int, e.g. trg_vocab.bos_idx)" in _one_line(e)
    assert decode(translator.model, src, **kw)  # the right call still decodes


def test_evaluate_names_what_it_takes(translator, tiny_ckpt, tiny_pairs):
    with pytest.raises(TypeError) as e:
        evaluate(tiny_ckpt, tiny_pairs)
    assert "evaluate takes a Translator" in _one_line(e) and "not PosixPath" in str(e.value)
    for pairs, shown in (({"test": tiny_pairs}, "not a dict (keys 'test')"),
                         ("Ein Hund.", "not str"),
                         (["Ein Hund."], "holding str (item 0: 'Ein Hund.')"),
                         ([tiny_pairs[0], ("a", "b", "c")], "(item 1: ('a', 'b', 'c'))")):
        with pytest.raises(TypeError) as e:
            evaluate(translator, pairs, beam_sizes=[1])
        assert "pairs must be a list of (source, target) sentence pairs" in _one_line(e)
        assert shown in str(e.value)
    with pytest.raises(TypeError) as e:
        evaluate(translator, tiny_pairs, beam_sizes=5)
    assert "beam_sizes must be a list of beam sizes such as (1, 5) or [5], not 5" in _one_line(e)


def test_evaluate_with_nothing_it_can_translate_says_so_before_the_perplexity(translator,
                                                                              monkeypatch):
    import convs2s.run.evaluate as module

    monkeypatch.setattr(module, "evaluate_loss", lambda *a, **k: pytest.fail("work began"))
    too_long = " ".join(["hund"] * (translator.max_positions + 5))
    with pytest.raises(ValueError) as e:
        evaluate(translator, [("   ", "a dog"), (too_long, "dogs")], beam_sizes=[1])
    assert "none of the 2 pairs can be translated" in _one_line(e)


def test_translating_a_pair_one_str_for_a_list_or_a_list_for_one_sentence(translator):
    with pytest.raises(TypeError) as e:
        translator.translate(("Ein Hund.", "A dog."))
    assert "a (source, target) pair such as data['test'][0] is translated by translate(pair[0])" \
        in _one_line(e)
    for call in (lambda: translator.translate_tokens("Ein Hund."),
                 lambda: translator.translate_tokens_alphas("Ein Hund.", [1.0])):
        with pytest.raises(TypeError) as e:
            call()
        assert "takes a list of sentences, not one str: pass [sentence]" in _one_line(e)
    with pytest.raises(TypeError) as e:
        translator.translate_token_lists(["ein", "hund"])
    assert "takes a list of token lists" in _one_line(e)
    with pytest.raises(TypeError) as e:
        translator.translate_tokens_alphas(["Ein Hund."], 1.0)
    assert "alphas must be a list of length penalties such as [0.5, 1.0], not 1.0" in \
        _one_line(e)
    with pytest.raises(TypeError) as e:
        translator.translate_with_attention(["Ein Hund."])
    assert "translate_with_attention() takes one sentence (str), not list" in _one_line(e)
    # the right calls still translate
    assert len(translator.translate(["Ein Hund.", "Zwei."], beam_size=1)) == 2
    assert len(translator.translate_tokens(["Ein Hund."], beam_size=1)) == 1


@dataclass
class _Result:  # what train() returns, as far as a learner's mistake goes
    best_path: Path
    final_path: Path | None = None


def test_none_or_a_train_result_for_a_checkpoint_path(tiny_ckpt):
    for load in (Checkpoint.load, Translator.from_checkpoint):
        with pytest.raises(TypeError) as e:
            load(None)
        assert "no checkpoint path (None)" in _one_line(e) and "result.best_path" in str(e.value)
        with pytest.raises(TypeError) as e:
            load(_Result(best_path=tiny_ckpt))
        assert "not _Result: pass its .final_path or .best_path" in _one_line(e)
    assert isinstance(Checkpoint.load(_Result(best_path=tiny_ckpt).best_path), Checkpoint)
    assert torch.is_tensor(next(iter(Checkpoint.load(str(tiny_ckpt)).state_dict.values())))


def test_the_model_where_a_translator_was_given_and_decode_without_the_encoders_output(
        translator):
    from convs2s.course import analysis

    src, kw = _decoding_args(translator)
    for call, who in ((lambda: analysis.parameter_groups(translator), "parameter_groups"),
                      (lambda: analysis.forced_attention(translator, src, [4, 5],
                                                         bos_idx=kw["bos_idx"]),
                       "forced_attention")):
        with pytest.raises(TypeError) as e:
            call()
        assert f"{who} takes the model (a ConvS2S), not Translator: pass its .model" in \
            _one_line(e)
    model = translator.model
    trg_in = torch.full((1, 2), kw["bos_idx"])
    with pytest.raises(TypeError) as e:
        model.decode(trg_in, src)
    assert "the decoder takes the encoder's output, model.encode(src) (an EncoderOut), not " \
        "Tensor" in _one_line(e)
    logits, _ = model.decode(trg_in, model.encode(src))  # the right call
    assert logits.shape[:2] == (1, 2)
    assert sum(analysis.parameter_groups(model).values()) > 0
