"""Behavioural tests of the ConvS2S model: causality, padding, incremental decoding, errors,
gradient scaling, initialisation and the parameter count."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch
import torch.nn.functional as F

from convs2s.model import ConvS2S, ConvS2SConfig, count_parameters
from convs2s.model.convs2s import RENAMED_FIELDS, current_names
from convs2s.model.decoder import Decoder
from convs2s.model.encoder import Encoder
from convs2s.model.layers import (
    ConvGLUBlock,
    conv_as_matmul,
    grad_multiply,
    make_conv1d,
    make_linear,
)

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


def tiny_model(seed: int = 0, **overrides) -> ConvS2S:
    torch.manual_seed(seed)
    kwargs = dict(
        emb_dim=16,
        hid_dim=32,
        enc_layers=3,
        dec_layers=3,
        kernel_size=3,
        dropout=0.1,
        max_positions=32,
        src_pad_idx=PAD,
        trg_pad_idx=PAD,
    )
    kwargs.update(overrides)
    return ConvS2S(VOCAB, VOCAB, **kwargs).eval()


def random_tokens(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (batch, length), generator=g)


# ------------------------------------------------------------------------------------------
# ConvGLUBlock and the initialisation helpers
# ------------------------------------------------------------------------------------------


def test_conv_glu_block_matches_its_definition():
    torch.manual_seed(0)
    block = ConvGLUBlock(8, 3, padding="same", residual=True).eval()
    x = torch.randn(2, 8, 5)
    conv = block.conv
    a_b = F.conv1d(F.pad(x, (1, 1)), conv.weight, conv.bias)
    a, b = a_b[:, :8], a_b[:, 8:]
    expected = (a * torch.sigmoid(b) + x) * math.sqrt(0.5)
    torch.testing.assert_close(block(x), expected)


@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("length", [1, 7])
def test_conv_as_matmul_is_conv1d_values_and_gradients(k, length):
    """The block's convolution as one matrix product over windows: conv1d's numbers (up to
    float rounding) and conv1d's gradients for the input, the kernel and the bias."""
    torch.manual_seed(k)
    h = torch.randn(3, 6, length + k - 1, requires_grad=True)
    weight = torch.randn(10, 6, k, requires_grad=True)
    bias = torch.randn(10, requires_grad=True)
    grad = torch.randn(3, 10, length)
    expected = F.conv1d(h, weight, bias)
    got = conv_as_matmul(h, weight, bias)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    want = torch.autograd.grad(expected, (h, weight, bias), grad)
    have = torch.autograd.grad(got, (h, weight, bias), grad)
    for a, b in zip(have, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    shifted = conv_as_matmul(h, weight.roll(1, dims=2), bias)  # the kernel's order matters
    assert not torch.allclose(shifted, expected, atol=1e-3) or k == 1


def test_causal_block_output_depends_only_on_past():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 6)
    y = x.clone()
    y[:, :, 4:] += 1.0  # change positions >= 4
    causal = ConvGLUBlock(4, 3, padding="causal", residual=False).eval()
    same = ConvGLUBlock(4, 3, padding="same", residual=False).eval()
    torch.testing.assert_close(causal(x)[..., :4], causal(y)[..., :4], rtol=0, atol=0)
    assert not torch.allclose(same(x)[..., :4], same(y)[..., :4])  # position 3 sees 4


def test_even_kernel_rejected_for_same_padding_only():
    with pytest.raises(ValueError, match="kernel_size=4 is even"):
        ConvGLUBlock(8, 4, padding="same")
    ConvGLUBlock(8, 4, padding="causal")  # causal padding works for any k
    with pytest.raises(ValueError, match="kernel_size=2 is even"):
        ConvS2S(VOCAB, VOCAB, kernel_size=2, src_pad_idx=PAD, trg_pad_idx=PAD)


def test_paper_initialisation_statistics():
    torch.manual_seed(0)
    p_drop, k, c_in = 0.2, 3, 256
    conv = make_conv1d(c_in, 512, k, dropout=p_drop)
    expected = math.sqrt(4 * (1 - p_drop) / (k * c_in))
    assert conv.weight.std().item() == pytest.approx(expected, rel=0.02)
    assert conv.bias.abs().max().item() == 0.0
    lin = make_linear(400, 300)
    assert lin.weight.std().item() == pytest.approx(math.sqrt(1 / 400), rel=0.02)
    model = tiny_model()
    emb = model.encoder.tok_embedding.weight
    assert emb[PAD].abs().max().item() == 0.0
    assert emb[1:].std().item() == pytest.approx(0.1, rel=0.15)


def test_weight_norm_keeps_initial_weights_and_adds_g():
    torch.manual_seed(0)
    plain = make_linear(10, 6)
    torch.manual_seed(0)
    normed = make_linear(10, 6, weight_norm=True)
    torch.testing.assert_close(normed.weight, plain.weight)
    assert count_parameters(normed) == count_parameters(plain) + 6  # one g per output unit


# ------------------------------------------------------------------------------------------
# The whole model
# ------------------------------------------------------------------------------------------


def test_shapes_and_attention_is_a_distribution_over_real_source_tokens():
    model = tiny_model()
    src = random_tokens(3, 7)
    src[1, 4:] = PAD
    trg = random_tokens(3, 5, seed=2)
    logits, attention = model(src, trg)
    assert logits.shape == (3, 5, VOCAB)
    assert attention.shape == (3, 3, 5, 7)  # [batch, dec_layers, trg_len, src_len]
    torch.testing.assert_close(attention.sum(-1), torch.ones(3, 3, 5))
    assert torch.all(attention[1, :, :, 4:] == 0)  # exactly zero on padding
    assert torch.all(attention[1, :, :, :4] > 0)


@pytest.mark.parametrize("t", [1, 3, 5])
def test_causal_decoder_does_not_see_the_future(t):
    model = tiny_model()
    src = random_tokens(2, 6)
    trg = random_tokens(2, 7, seed=2)
    changed = trg.clone()
    changed[:, t:] = random_tokens(2, 7 - t, seed=3)
    before, _ = model(src, trg)
    after, _ = model(src, changed)
    torch.testing.assert_close(before[:, :t], after[:, :t], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, t:], after[:, t:])


def test_same_padding_decoder_cheats():
    model = tiny_model(decoder_padding="same")
    src = random_tokens(2, 6)
    trg = random_tokens(2, 7, seed=2)
    changed = trg.clone()
    changed[:, 4:] = random_tokens(2, 3, seed=3)
    before, _ = model(src, trg)
    after, _ = model(src, changed)
    # Position 3 sees position 4 in the first layer already: the future leaks into the past.
    assert (before[:, :4] - after[:, :4]).abs().max() > 1e-3


def test_appended_source_padding_changes_nothing():
    model = tiny_model()
    src = random_tokens(1, 5)
    trg = random_tokens(1, 4, seed=2)
    padded = torch.cat([src, torch.full((1, 3), PAD)], dim=1)
    logits, attention = model(src, trg)
    logits_p, attention_p = model(padded, trg)
    torch.testing.assert_close(logits_p, logits)
    torch.testing.assert_close(attention_p[..., :5], attention)
    assert torch.all(attention_p[..., 5:] == 0)
    # The same sentence inside a batch with a longer one.
    other = random_tokens(1, 8, seed=4)
    batch = torch.cat([torch.cat([src, torch.full((1, 3), PAD)], 1), other])
    logits_b, _ = model(batch, torch.cat([trg, trg]))
    torch.testing.assert_close(logits_b[:1], logits)


def test_encoder_real_positions_ignore_appended_pads():
    torch.manual_seed(0)
    encoder = Encoder(
        VOCAB,
        emb_dim=16,
        hid_dim=32,
        n_layers=4,
        kernel_size=5,
        dropout=0.0,
        max_positions=32,
        pad_idx=PAD,
    ).eval()
    src = random_tokens(2, 6)
    src[0, :] = torch.where(torch.arange(6) < 4, src[0], PAD)  # example 0: 4 real tokens
    out = encoder(src)
    longer = encoder(torch.cat([src, torch.full((2, 5), PAD)], dim=1))
    for b, n in ((0, 4), (1, 6)):
        torch.testing.assert_close(longer.conved[b, :n], out.conved[b, :n])
        torch.testing.assert_close(longer.combined[b, :n], out.combined[b, :n])
    assert torch.all(longer.conved[0, 4:] == 0)
    assert longer.src_mask[0].tolist() == [True] * 4 + [False] * 7


def test_forward_equals_decode_of_encode():
    model = tiny_model()
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    logits, attention = model(src, trg)
    logits2, attention2 = model.decode(trg, model.encode(src))
    torch.testing.assert_close(logits2, logits, rtol=0, atol=0)
    torch.testing.assert_close(attention2, attention, rtol=0, atol=0)


def assert_incremental_matches_full(decoder, encoded, trg, chunks):
    full_logits, full_attention = decoder(trg, encoded)
    state: dict = {}
    pieces, attn_pieces, start = [], [], 0
    for n in chunks:
        logits, attention = decoder(trg[:, start : start + n], encoded, state)
        pieces.append(logits)
        attn_pieces.append(attention)
        start += n
    assert state["steps"] == trg.size(1)
    torch.testing.assert_close(torch.cat(pieces, 1), full_logits)
    torch.testing.assert_close(torch.cat(attn_pieces, 2), full_attention)


@pytest.mark.parametrize(
    "kernel_size, weight_norm, chunks",
    [(3, True, [1] * 7), (5, False, [1] * 7), (1, True, [1] * 7), (3, True, [2, 1, 3, 1])],
)
def test_incremental_decoding_equals_full_decoding(kernel_size, weight_norm, chunks):
    model = tiny_model(kernel_size=kernel_size, weight_norm=weight_norm)
    src = random_tokens(3, 6)
    src[2, 3:] = PAD
    trg = random_tokens(3, sum(chunks), seed=2)
    with torch.no_grad():
        assert_incremental_matches_full(model.decoder, model.encode(src), trg, chunks)
        # and through the model's own API
        torch.testing.assert_close(model.decode(trg, model.encode(src))[0], model(src, trg)[0])


def test_incremental_decoding_with_an_even_causal_kernel():
    # An even k is fine in a causal decoder (only the encoder's "same" padding needs odd k).
    model = tiny_model()
    torch.manual_seed(3)
    decoder = Decoder(
        VOCAB,
        emb_dim=16,
        hid_dim=32,
        n_layers=3,
        kernel_size=4,
        dropout=0.1,
        max_positions=32,
        pad_idx=PAD,
    ).eval()
    with torch.no_grad():
        encoded = model.encode(random_tokens(2, 5))
        assert_incremental_matches_full(decoder, encoded, random_tokens(2, 7, seed=2), [3, 1, 3])


def test_reorder_incremental_state_follows_rows():
    model = tiny_model()
    src = random_tokens(3, 6)
    trg = random_tokens(3, 4, seed=2)
    encoded = model.encode(src)
    state: dict = {}
    model.decode(trg[:, :2], encoded, state)
    order = torch.tensor([2, 0, 1])
    model.decoder.reorder_incremental_state(state, order)
    logits, _ = model.decode(trg[order, 2:], encoded.index_select(order), state)
    full, _ = model(src[order], trg[order])
    torch.testing.assert_close(logits, full[:, 2:])


def test_config_rebuilds_the_same_model():
    model = tiny_model(weight_norm=True)
    clone = ConvS2S(**model.config).eval()
    clone.load_state_dict(model.state_dict())
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    torch.testing.assert_close(clone(src, trg)[0], model(src, trg)[0])


def test_dropout_only_in_training_mode():
    model = tiny_model(dropout=0.5)
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    torch.testing.assert_close(model(src, trg)[0], model(src, trg)[0], rtol=0, atol=0)
    model.train()
    assert not torch.allclose(model(src, trg)[0], model(src, trg)[0])


# ------------------------------------------------------------------------------------------
# Clear errors
# ------------------------------------------------------------------------------------------


def test_too_long_inputs_raise_clear_errors():
    model = tiny_model(max_positions=8)
    with pytest.raises(ValueError, match=r"source sentence needs 9 positions.*max_positions=8"):
        model(random_tokens(1, 9), random_tokens(1, 3))
    with pytest.raises(ValueError, match=r"target sequence needs 9 positions.*max_positions=8"):
        model(random_tokens(1, 4), random_tokens(1, 9))
    encoded = model.encode(random_tokens(1, 4))
    state: dict = {}
    model.decode(random_tokens(1, 8), encoded, state)  # positions 0..7: fine
    with pytest.raises(ValueError, match=r"target sequence needs 9 positions.*max_positions >= 9"):
        model.decode(random_tokens(1, 1), encoded, state)


def test_incremental_with_same_padding_raises():
    model = tiny_model(decoder_padding="same")
    encoded = model.encode(random_tokens(1, 4))
    with pytest.raises(ValueError, match="Incremental decoding needs padding='causal'"):
        model.decode(random_tokens(1, 1), encoded, {})


def test_bad_inputs_raise_clear_errors():
    model = tiny_model()
    src, trg = random_tokens(2, 5), random_tokens(2, 4, seed=2)
    with pytest.raises(TypeError, match="integer token ids"):
        model(src.float(), trg)
    with pytest.raises(ValueError, match=r"2-D \[batch, seq_len\]"):
        model(src[0], trg)
    with pytest.raises(ValueError, match="vocabulary has 20 entries"):
        model(src, trg + 100)
    with pytest.raises(ValueError, match="batch size"):
        model(src, trg[:1])
    with pytest.raises(ValueError, match="at least one non-pad token"):
        model(torch.full((1, 3), PAD), trg[:1])
    with pytest.raises(ValueError, match="decoder_padding='sideways'"):
        tiny_model(decoder_padding="sideways")
    with pytest.raises(ValueError, match="init='xavier'"):
        tiny_model(init="xavier")


# ------------------------------------------------------------------------------------------
# Gradient scaling
# ------------------------------------------------------------------------------------------


def test_grad_multiply_is_identity_forward_and_scales_backward():
    x = torch.randn(3, requires_grad=True)
    y = grad_multiply(x, 0.25)
    torch.testing.assert_close(y, x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 0.25))


def test_encoder_gradient_scaling_scales_encoder_gradients():
    dec_layers = 3
    scaled = tiny_model(scale_encoder_gradients=True, dec_layers=dec_layers).train()
    plain = tiny_model(scale_encoder_gradients=False, dec_layers=dec_layers).train()
    plain.load_state_dict(scaled.state_dict())
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    for model in (scaled, plain):
        torch.manual_seed(7)  # the same dropout masks in both
        logits, _ = model(src, trg)
        F.cross_entropy(logits.reshape(-1, VOCAB), trg.reshape(-1)).backward()
    scale = 1.0 / (2 * dec_layers)
    grads_s = dict(scaled.named_parameters())
    grads_p = dict(plain.named_parameters())
    for name, p in grads_p.items():
        g_s, g_p = grads_s[name].grad, p.grad
        if name.startswith("encoder.") and "embedding" not in name:
            # everything between the embeddings and z only gets gradient through z
            torch.testing.assert_close(g_s, g_p * scale)
        elif name.startswith("decoder."):
            torch.testing.assert_close(g_s, g_p)
    # Embeddings also get the unscaled gradient through e in (z + e): neither equal nor scaled.
    g_s = grads_s["encoder.tok_embedding.weight"].grad
    g_p = grads_p["encoder.tok_embedding.weight"].grad
    assert not torch.allclose(g_s, g_p) and not torch.allclose(g_s, g_p * scale)


# ------------------------------------------------------------------------------------------
# Parameter count
# ------------------------------------------------------------------------------------------


def expected_parameter_count(
    src_vocab, trg_vocab, emb, hid, enc_layers, dec_layers, k, max_positions, weight_norm
) -> int:
    """The parameter count derived from the architecture, layer by layer.

    linear(a, b) has a·b weights + b biases (+ b weight-norm gains g);
    a conv block's Conv1d(hid -> 2·hid, k) has hid·2hid·k weights + 2hid biases (+ 2hid g).
    """
    g = 1 if weight_norm else 0

    def linear(a, b):
        return a * b + b + g * b

    conv_block = hid * 2 * hid * k + 2 * hid + g * 2 * hid
    encoder = (
        src_vocab * emb
        + max_positions * emb  # token + position embeddings
        + linear(emb, hid)
        + enc_layers * conv_block
        + linear(hid, emb)
    )
    attention = linear(hid, emb) + linear(emb, hid)  # one per decoder layer
    decoder = (
        trg_vocab * emb
        + max_positions * emb
        + linear(emb, hid)
        + dec_layers * (conv_block + attention)
        + linear(hid, emb)
        + linear(emb, trg_vocab)
    )
    return encoder + decoder


# The PyTorch tutorial (bentrevett/pytorch-seq2seq, "5 - Convolutional Sequence to Sequence
# Learning") reports 37,351,173 parameters for src/trg vocabularies 7,853/5,893, emb 256,
# hid 512, 10+10 layers, kernel 3, 100 positions, no weight norm. Its decoder shares ONE pair of
# attention projections (attn_hid2emb, attn_emb2hid) across all 10 layers; the paper and
# fairseq give every layer its own. With weight_norm=False, max_positions=100 this model has
# exactly 9 more pairs, 9·(512·256+256 + 256·512+512) = 2,366,208 parameters more:
# 39,717,381. max_positions=128 adds 2·28·256 = 14,336 (39,731,717) and weight norm adds one
# g per output unit of every linear/conv layer: 35,589 more (39,767,306 with the defaults).
TUTORIAL_CONFIG = dict(
    emb_dim=256,
    hid_dim=512,
    enc_layers=10,
    dec_layers=10,
    kernel_size=3,
    src_pad_idx=1,
    trg_pad_idx=1,
)
TUTORIAL_REPORTED = 37_351_173


@pytest.mark.parametrize("weight_norm, max_positions", [(True, 128), (False, 100)])
def test_parameter_count_matches_the_architecture(weight_norm, max_positions):
    with torch.device("meta"):  # no memory, no init cost: only shapes matter here
        model = ConvS2S(
            7853, 5893, weight_norm=weight_norm, max_positions=max_positions, **TUTORIAL_CONFIG
        )
    n = count_parameters(model)
    print(f"weight_norm={weight_norm}, max_positions={max_positions}: {n:,} parameters")
    assert n == expected_parameter_count(
        7853, 5893, 256, 512, 10, 10, 3, max_positions, weight_norm
    )
    if not weight_norm and max_positions == 100:
        shared_attention_pair = (512 * 256 + 256) + (256 * 512 + 512)
        assert n - 9 * shared_attention_pair == TUTORIAL_REPORTED


# ------------------------------------------------------------------------------------------
# Tied output layer (fairseq's --share-input-output-embed; off by default)
# ------------------------------------------------------------------------------------------


def test_shared_output_embedding_is_one_matrix_and_computes_embedding_dot_products():
    untied, tied = tiny_model(seed=5), tiny_model(seed=5, share_input_output_embed=True)
    dec = tied.decoder
    assert dec.fc_out.weight is dec.tok_embedding.weight
    # one [vocab, emb_dim] matrix fewer, and no weight norm's gains on the output layer
    assert count_parameters(untied) - count_parameters(tied) == VOCAB * 16 + VOCAB
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    with torch.no_grad():
        logits, _ = tied(src, trg)
        # the logit of token i is <output vector, embedding of i> + bias_i
        outputs = []
        dec.fc_out.register_forward_hook(lambda m, args, out: outputs.append(args[0]))
        tied(src, trg)
        expected = outputs[0] @ dec.tok_embedding.weight.T + dec.fc_out.bias
    torch.testing.assert_close(logits, expected)
    # the encoder is untouched by the option: same seed, same encoder weights and outputs
    torch.testing.assert_close(tied.encode(src).conved, untied.encode(src).conved)


def test_shared_output_embedding_gets_both_gradients_and_survives_a_checkpoint_round_trip():
    tied = tiny_model(seed=6, share_input_output_embed=True).train()
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    logits, _ = tied(src, trg)
    logits.sum().backward()
    emb = tied.decoder.tok_embedding.weight
    # rows of tokens never fed to the decoder still get a gradient: the output layer's
    unused = sorted(set(range(3, VOCAB)) - set(trg.flatten().tolist()))
    assert unused and emb.grad[unused].abs().sum() > 0
    clone = ConvS2S(**tied.config).eval()
    clone.load_state_dict(tied.state_dict())
    assert clone.decoder.fc_out.weight is clone.decoder.tok_embedding.weight
    tied.eval()
    with torch.no_grad():
        torch.testing.assert_close(clone(src, trg)[0], tied(src, trg)[0])
        assert_incremental_matches_full(clone.decoder, clone.encode(src), trg, [1] * 5)


def test_shared_output_embedding_still_causal():
    model = tiny_model(seed=7, share_input_output_embed=True)
    src, trg = random_tokens(1, 6), random_tokens(1, 8, seed=2)
    changed = trg.clone()
    changed[0, 5:] = (changed[0, 5:] + 1 - 3) % (VOCAB - 3) + 3  # change tokens 5, 6, 7
    with torch.no_grad():
        a, b = model(src, trg)[0], model(src, changed)[0]
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=0)
    assert not torch.allclose(a[:, 5:], b[:, 5:])


# ------------------------------------------------------------------------------------------
# options of the wrong type are refused in one line, naming the option,
# the value and what is expected (ConvS2S, the RNN baseline and the variants alike)
# ------------------------------------------------------------------------------------------

SMALL_CONVS2S = dict(emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1, max_positions=16,
                     src_pad_idx=PAD, trg_pad_idx=PAD)
SMALL_RNN = dict(emb_dim=8, enc_hid_dim=8, dec_hid_dim=8, max_positions=16, src_pad_idx=PAD,
                 trg_pad_idx=PAD)

# (option, bad value, error type, what the message must say after "option=value")
CONVS2S_BAD_OPTIONS = [
    ("share_input_output_embed", "False", TypeError, "must be True or False"),
    ("share_input_output_embed", 0, TypeError, "must be True or False"),
    ("weight_norm", "no", TypeError, "must be True or False"),
    ("weight_norm", None, TypeError, "must be True or False"),
    ("scale_encoder_gradients", 1, TypeError, "must be True or False"),
    ("dropout", "0.1", TypeError, r"must be a number in \[0, 1\)"),
    ("dropout", True, TypeError, r"must be a number in \[0, 1\)"),
    ("dropout", 1.0, ValueError, r"must be in \[0, 1\)"),
    ("dropout", -0.1, ValueError, r"must be in \[0, 1\)"),
    ("dropout", math.nan, ValueError, r"must be in \[0, 1\)"),
    ("emb_dim", "8", TypeError, "must be a positive integer"),
    ("emb_dim", 8.0, TypeError, "must be a positive integer"),
    ("enc_layers", True, TypeError, "must be a positive integer"),
    ("kernel_size", 0, ValueError, "must be a positive integer"),
    ("src_pad_idx", "0", TypeError, "must be a token id"),
    ("trg_pad_idx", False, TypeError, "must be a token id"),
    ("decoder_padding", None, ValueError, "is not known; choose one of"),
    ("init", 1, ValueError, "is not known; choose one of"),
]


def _refused_in_one_line(build, option, value, error, expected):
    with pytest.raises(error, match=rf"^{option}={re.escape(repr(value))} {expected}") as e:
        build(**{option: value})
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("option, value, error, expected", CONVS2S_BAD_OPTIONS)
def test_convs2s_refuses_options_of_the_wrong_type(option, value, error, expected):
    _refused_in_one_line(lambda **kw: ConvS2S(VOCAB, VOCAB, **{**SMALL_CONVS2S, **kw}),
                         option, value, error, expected)


@pytest.mark.parametrize("option, value, error, expected", [
    ("src_vocab_size", 20.0, TypeError, "must be a positive integer"),
    ("trg_vocab_size", True, TypeError, "must be a positive integer"),
])
def test_convs2s_refuses_vocabulary_sizes_of_the_wrong_type(option, value, error, expected):
    def build(**kw):
        sizes = {"src_vocab_size": VOCAB, "trg_vocab_size": VOCAB, **kw}
        return ConvS2S(sizes.pop("src_vocab_size"), sizes.pop("trg_vocab_size"), **sizes,
                       **SMALL_CONVS2S)

    _refused_in_one_line(build, option, value, error, expected)


@pytest.mark.parametrize("option, value, error, expected", [
    ("dropout", "0.1", TypeError, r"must be a number in \[0, 1\)"),
    ("dropout", None, TypeError, r"must be a number in \[0, 1\)"),
    ("emb_dim", True, TypeError, "must be a positive integer"),
    ("attn_dim", "8", TypeError, "must be a positive integer"),
    ("out_dim", 8.0, TypeError, "must be a positive integer"),
    ("src_pad_idx", 0.0, TypeError, "must be a token id"),
])
def test_rnn_baseline_refuses_options_of_the_wrong_type(option, value, error, expected):
    from convs2s.model.rnn import RNNAttentionSeq2Seq

    _refused_in_one_line(lambda **kw: RNNAttentionSeq2Seq(VOCAB, VOCAB, **{**SMALL_RNN, **kw}),
                         option, value, error, expected)


@pytest.mark.parametrize("option, value, error, expected", [
    ("encoder_self_attention", "False", TypeError, "must be True or False"),
    ("attention_feed_forward", "no", TypeError, "must be True or False"),
    ("attention_heads", True, TypeError, "must be a positive integer"),
    ("attention_heads", 2.0, TypeError, "must be a positive integer"),
    ("attention_positions", 1, ValueError, "is not known; choose one of"),
    ("conv", None, ValueError, "is not known; choose one of"),
    ("weight_norm", "no", TypeError, "must be True or False"),  # ConvS2S's, through the variant
    ("dropout", "0.1", TypeError, r"must be a number in \[0, 1\)"),
])
def test_variants_refuse_options_of_the_wrong_type(option, value, error, expected):
    from convs2s.model.variants import VariantConvS2S

    _refused_in_one_line(lambda **kw: VariantConvS2S(VOCAB, VOCAB, **{**SMALL_CONVS2S, **kw}),
                         option, value, error, expected)


def test_an_int_dropout_builds_the_same_model_as_the_float():
    """The checks only refuse: valid arguments (ints for dropout included) give the same
    weights and outputs as the same arguments given as the usual floats."""
    a = tiny_model(seed=3, dropout=0)
    b = tiny_model(seed=3, dropout=0.0)
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(a(src, trg)[0], b(src, trg)[0], rtol=0, atol=0)
    assert a.config["dropout"] == 0 and ConvS2S(**a.config).config == a.config


# ------------------------------------------------------------------------------------------
# ConvS2SConfig: the model's options in one frozen dataclass
# ------------------------------------------------------------------------------------------


def test_config_form_builds_the_model_of_the_keyword_form():
    """``ConvS2S(config)`` and ``ConvS2S(sizes, **fields)``: the same parameters (names, shapes,
    values for one seed), the same outputs and the same ``config`` dict."""
    fields = dict(emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=3, kernel_size=5,
                  dropout=0.1, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD,
                  share_input_output_embed=True)
    torch.manual_seed(4)
    by_fields = ConvS2S(VOCAB, VOCAB + 3, **fields).eval()
    torch.manual_seed(4)
    by_config = ConvS2S(ConvS2SConfig(VOCAB, VOCAB + 3, **fields)).eval()
    a, b = by_fields.state_dict(), by_config.state_dict()
    assert {k: v.shape for k, v in a.items()} == {k: v.shape for k, v in b.items()}
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
    src, trg = random_tokens(2, 6), random_tokens(2, 5, seed=2)
    with torch.no_grad():
        torch.testing.assert_close(by_config(src, trg)[0], by_fields(src, trg)[0], rtol=0, atol=0)
    assert by_config.config == by_fields.config == ConvS2SConfig(VOCAB, VOCAB + 3,
                                                                 **fields).as_dict()
    assert type(by_config.config) is dict and ConvS2S(**by_config.config).config == by_config.config


def test_config_holds_every_keyword_the_model_records():
    """The dict a checkpoint stores: every field of the configuration, in the same order."""
    model = tiny_model()
    assert list(model.config) == [f.name for f in dataclasses.fields(ConvS2SConfig)]
    assert list(model.config) == [
        "src_vocab_size", "trg_vocab_size", "emb_dim", "hid_dim", "enc_layers", "dec_layers",
        "kernel_size", "dropout", "max_positions", "src_pad_idx", "trg_pad_idx",
        "decoder_padding", "weight_norm", "init", "scale_encoder_gradients",
        "share_input_output_embed"]


def test_an_old_option_name_still_builds_the_model():
    """``encoder_grad_scale`` (what saved configurations may hold) reads as
    ``scale_encoder_gradients``; giving both is refused in one line."""
    assert RENAMED_FIELDS == {"encoder_grad_scale": "scale_encoder_gradients"}
    model = tiny_model(encoder_grad_scale=False)
    assert model.config["scale_encoder_gradients"] is False and "encoder_grad_scale" not in \
        model.config
    assert current_names({"encoder_grad_scale": True, "emb_dim": 8}) == {
        "scale_encoder_gradients": True, "emb_dim": 8}
    with pytest.raises(TypeError, match="old name of scale_encoder_gradients") as e:
        tiny_model(encoder_grad_scale=False, scale_encoder_gradients=True)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("option, value, error, expected", CONVS2S_BAD_OPTIONS + [
    ("src_vocab_size", 20.0, TypeError, "must be a positive integer"),
    ("trg_pad_idx", VOCAB, ValueError, "is not a token id below 20"),
])
def test_config_refuses_a_bad_field_in_one_line(option, value, error, expected):
    _refused_in_one_line(
        lambda **kw: ConvS2SConfig(**{"src_vocab_size": VOCAB, "trg_vocab_size": VOCAB,
                                      **SMALL_CONVS2S, **kw}),
        option, value, error, expected)


def test_config_without_vocabularies_still_checks_the_padding_ids():
    ConvS2SConfig(src_pad_idx=1, trg_pad_idx=0)  # no size to compare with: any id >= 0
    _refused_in_one_line(lambda **kw: ConvS2SConfig(**kw), "src_pad_idx", -1, ValueError,
                         r"is not a token id \(an id is 0 or more\)")


def test_an_incomplete_config_is_refused_in_one_line():
    preset_like = ConvS2SConfig(**{k: v for k, v in SMALL_CONVS2S.items() if "pad" not in k})
    assert preset_like.missing() == ["src_vocab_size", "trg_vocab_size", "src_pad_idx",
                                     "trg_pad_idx"]
    with pytest.raises(ValueError, match=r"^The model configuration lacks src_vocab_size, "
                       r"trg_vocab_size, src_pad_idx, trg_pad_idx: complete it with "
                       r"config.with_vocabularies\(src_vocab, trg_vocab\)\.$"):
        ConvS2S(preset_like)
    with pytest.raises(ValueError, match=r"^The model configuration lacks src_pad_idx, "
                       r"trg_pad_idx: complete it"):
        ConvS2S(VOCAB, VOCAB, emb_dim=8, hid_dim=8)


def test_with_vocabularies_completes_a_config_from_two_vocabularies():
    from convs2s.data import Vocab

    specials = ["<unk>", "<pad>", "<bos>", "<eos>"]
    src_vocab, trg_vocab = Vocab(specials + ["a", "b"], specials), Vocab(specials + ["c"], specials)
    preset_like = ConvS2SConfig(emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1)
    config = preset_like.with_vocabularies(src_vocab, trg_vocab)
    assert (config.src_vocab_size, config.trg_vocab_size) == (6, 5)
    assert (config.src_pad_idx, config.trg_pad_idx) == (src_vocab.pad_idx, trg_vocab.pad_idx)
    assert config == dataclasses.replace(preset_like, src_vocab_size=6, trg_vocab_size=5,
                                         src_pad_idx=1, trg_pad_idx=1)
    assert config.missing() == [] and preset_like.src_vocab_size is None  # frozen: a new one
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.emb_dim = 16
    assert ConvS2S(config).encoder.tok_embedding.num_embeddings == 6


def test_config_and_fields_together_are_refused():
    config = ConvS2SConfig(VOCAB, VOCAB, **SMALL_CONVS2S)
    with pytest.raises(TypeError, match="a ConvS2SConfig or its fields, not both"):
        ConvS2S(config, emb_dim=16)
