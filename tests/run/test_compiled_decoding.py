"""Greedy decoding with compiled incremental steps (``convs2s.run.compiled_decoding``) on a
CPU: the same tokens and attention as eager decoding, the decoder's one-token ``decoder_step``
(static shapes) the same as its incremental ``forward``, and wrong uses refused in one line.

torch.compile's inductor builds C++ kernels here (it needs g++ or clang++; without one
``compiled_greedy_decode`` refuses in a line, and these tests fail rather than pass). To keep
the file short, the step is compiled once, in the module's fixture, and every test reuses it: a
recompilation is an error in them (``error_on_recompile``), so each batch shape, weight change
and wrong cache below runs the one compiled step.

Tolerances for the attention: compiled kernels add in another order than eager ones, so float32
agrees to rounding: ``rtol=1e-4, atol=1e-5``, as in ``tests/run/test_compiled_training.py``.
Tokens agree exactly (an argmax); a wrong cache or position changes them.
"""

from __future__ import annotations

import pytest
import torch
from conftest import padded_batch

from convs2s.course.baselines import RNNAttentionSeq2Seq
from convs2s.model import ConvS2S
from convs2s.model.search import greedy_decode
from convs2s.run import compiled_decoding
from convs2s.run.compiled_decoding import compiled_greedy_decode, decoder_step, start_histories

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20
MAX_LEN = 12
TOL = dict(rtol=1e-4, atol=1e-5)
KW = dict(max_len=MAX_LEN, bos_idx=BOS, eos_idx=EOS)


def tiny_model(**overrides) -> ConvS2S:
    """Random, in training mode; with this seed and <eos> a little more likely, the sentences
    of SRC end after 9, 12 (none), 2, 1, 12 (none) and 11 tokens."""
    torch.manual_seed(2)
    kwargs = dict(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=2, kernel_size=3,
                  dropout=0.1, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD,
                  init="pytorch")
    model = ConvS2S(VOCAB, VOCAB, **{**kwargs, **overrides}).train()
    with torch.no_grad():
        model.decoder.fc_out.bias[EOS] += 0.5
    return model



SRC = padded_batch([7, 3, 5, 1, 6, 4])


@pytest.fixture(scope="module")
def compiled():
    """The tiny model, and its compiled decoding of SRC (tokens, attentions): the one compile.
    Inductor compiles in this process (a pool of compile workers would outlive the tests)."""
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    model = tiny_model()
    with inductor_config.patch(compile_threads=1):
        out = compiled_greedy_decode(model, SRC, mode="default", return_attention=True, **KW)
        with torch._dynamo.config.patch(error_on_recompile=True):
            yield model, out
    torch._dynamo.reset()


def test_compiled_greedy_gives_the_eager_tokens_and_attention(compiled):
    model, (tokens, attentions) = compiled
    assert model.training  # its mode restored
    want_tokens, want_attentions = greedy_decode(model, SRC, return_attention=True, **KW)
    assert tokens == want_tokens
    assert [len(t) for t in tokens] == [9, 12, 2, 1, 12, 11]  # some end early, some never
    for got, want in zip(attentions, want_attentions, strict=True):
        torch.testing.assert_close(got, want, **TOL)
    # other batch sizes and source lengths: the same compiled step (no recompilation)
    for src in (SRC[:3, :5], SRC[3:].flip(0)):
        assert compiled_greedy_decode(model, src, mode="default", **KW) == greedy_decode(
            model, src, **KW)


def test_the_compiled_step_follows_the_weights_and_leaves_the_model_as_it_was(compiled):
    """Weights changed in place (as training does) reach the compiled step's plain copy of the
    weight-normed weights; <pad> and <bos> stay banned; the model keeps its weight norm."""
    model, _ = compiled
    keys = list(model.state_dict())
    fc_out = model.decoder.fc_out
    old = fc_out.bias.detach().clone()
    try:
        with torch.no_grad():
            fc_out.bias[[PAD, BOS]] += 100.0  # <pad>, <bos>: the argmax everywhere if allowed
            fc_out.parametrizations.weight.original0.mul_(1.5)  # weight norm's g
        tokens = compiled_greedy_decode(model, SRC, mode="default", **KW)
        assert tokens == greedy_decode(model, SRC, **KW)
        assert not any(PAD in t or BOS in t for t in tokens)
        plain = compiled_decoding._PLAIN[model.decoder].fc_out  # the compiled step's fc_out
        torch.testing.assert_close(plain.weight, fc_out.weight, rtol=0, atol=0)
        torch.testing.assert_close(plain.bias, fc_out.bias, rtol=0, atol=0)
    finally:
        with torch.no_grad():
            fc_out.bias.copy_(old)
            fc_out.parametrizations.weight.original0.div_(1.5)
    assert list(model.state_dict()) == keys
    assert torch.nn.utils.parametrize.is_parametrized(fc_out, "weight")


@pytest.mark.parametrize("wrong", ["cache not shifted", "position 0"])
def test_a_wrong_cache_or_position_changes_the_tokens(compiled, monkeypatch, wrong):
    """Negative controls, through the same compiled step: keeping the first cache at every step
    (no shift), or telling every step it is at position 0, does not give the eager tokens."""
    model, (tokens, _) = compiled
    step = compiled_decoding._COMPILED["default"]
    first = {}

    def wrong_step(decoder, new, position, histories, encoded, banned):
        if wrong == "position 0":
            position = torch.zeros_like(position)
        next_token, attention, new_histories = step(decoder, new, position, histories,
                                                    encoded, banned)
        if wrong == "cache not shifted":
            new_histories = first.setdefault("histories", new_histories)
        return next_token, attention, new_histories

    monkeypatch.setitem(compiled_decoding._COMPILED, "default", wrong_step)
    assert compiled_greedy_decode(model, SRC, mode="default", **KW) != tokens


def test_the_decoder_step_is_its_incremental_forward():
    """Eager: ``decoder_step`` (static shapes) gives the logits, attention and cache that
    ``forward`` with an incremental state gives, token by token, whatever the kernel width."""
    for k in (1, 3, 5):
        model = tiny_model(kernel_size=k, dec_layers=3).eval()
        trg = padded_batch([6, 6, 6], seed=k)
        with torch.no_grad():
            encoded = model.encode(SRC[:3])
            state: dict = {}
            histories = start_histories(model.decoder, 3, encoded.conved)
            assert histories.shape == (3, 3, 16, k - 1) and not histories.any()
            for t in range(trg.size(1)):
                logits, attention = model.decode(trg[:, t : t + 1], encoded, state)
                s_logits, s_attention, histories = decoder_step(
                    model.decoder, trg[:, t : t + 1], torch.tensor([t]), histories, encoded)
                torch.testing.assert_close(s_logits, logits[:, 0], rtol=0, atol=0)
                torch.testing.assert_close(s_attention, attention[:, :, 0], rtol=0, atol=0)
                torch.testing.assert_close(histories, torch.stack(state["conv_inputs"]),
                                           rtol=0, atol=0)


def test_wrong_compile_uses_are_refused_in_one_line(monkeypatch):
    model = tiny_model()
    rnn = RNNAttentionSeq2Seq(VOCAB, VOCAB, emb_dim=8, enc_hid_dim=8, dec_hid_dim=8,
                              attn_dim=8, dropout=0.0, max_positions=32, src_pad_idx=PAD,
                              trg_pad_idx=PAD)
    cheat = tiny_model(decoder_padding="same")
    cases = [
        (model, "fast", r"compile must be None or one of default, "
                        r"reduce-overhead, max-autotune, not 'fast'\.$"),
        (model, True, r"^compile must be None or one of .*, not True\.$"),
        (model, None, r"^mode must be one of default, .*: for eager steps, use .*greedy_decode"),
        (rnn, "default", r"^compile needs a ConvS2S decoder .* RNN"),
        (cheat, "default", r"^compile needs a decoder that decodes incremen"),
    ]
    for m, mode, message in cases:
        with pytest.raises(ValueError, match=message) as e:
            compiled_greedy_decode(m, SRC, mode=mode, **KW)
        assert len(str(e.value).splitlines()) == 1
    assert model.training  # refused before anything ran

    import torch._inductor.cpp_builder as cpp_builder

    def no_compiler():
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    with pytest.raises(ValueError, match=r"^compile on a CPU needs a C\+\+ compiler"):
        compiled_greedy_decode(model, SRC, mode="default", **KW)
