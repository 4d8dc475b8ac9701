"""Tests of the ConvS2S variants: depthwise-separable convolutions and encoder self-attention."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import padded_batch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from convs2s.data import Vocab
from convs2s.model import ConvS2S, count_parameters
from convs2s.model.layers import ConvGLUBlock
from convs2s.model.search import beam_search, greedy_decode
from convs2s.model.variants import (
    DepthwiseSeparableConv1d,
    SelfAttentionBlock,
    SeparableConvGLUBlock,
    VariantConvS2S,
    conv1d_flops,
    conv1d_parameters,
    conv_costs,
    make_variant_model,
    separable_conv1d_flops,
    separable_conv1d_parameters,
    sinusoidal_positions,
)
from convs2s.run.checkpoint import Checkpoint

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


def tiny_variant(seed: int = 0, **overrides) -> VariantConvS2S:
    torch.manual_seed(seed)
    kwargs = dict(emb_dim=16, hid_dim=32, enc_layers=3, dec_layers=3, kernel_size=3,
                  dropout=0.1, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD)
    kwargs.update(overrides)
    return VariantConvS2S(VOCAB, VOCAB, **kwargs).eval()



# ------------------------------------------------------------------------------------------
# Counting
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("c_in,c_out,k", [(8, 16, 3), (32, 64, 5), (5, 7, 1), (64, 128, 7)])
@pytest.mark.parametrize("weight_norm", [False, True])
def test_parameter_count_formulas(c_in, c_out, k, weight_norm):
    sep = DepthwiseSeparableConv1d(c_in, c_out, k, weight_norm=weight_norm)
    assert count_parameters(sep) == separable_conv1d_parameters(c_in, c_out, k,
                                                                 weight_norm=weight_norm)
    std = nn.Conv1d(c_in, c_out, k)
    if weight_norm:
        std = nn.utils.parametrizations.weight_norm(std, dim=0)
    assert count_parameters(std) == conv1d_parameters(c_in, c_out, k, weight_norm=weight_norm)
    # the closed forms
    assert conv1d_parameters(c_in, c_out, k) == c_in * c_out * k + c_out
    assert separable_conv1d_parameters(c_in, c_out, k) == c_in * k + c_in * c_out + c_out


def test_parameter_ratio_tends_to_the_kernel_size():
    costs = conv_costs(1024, 2048, 3, length=10)
    assert costs["parameter_ratio"] == pytest.approx(3, rel=0.01)
    assert costs["flop_ratio"] == pytest.approx(1 / (1 / 2048 + 1 / 3), rel=1e-9)


def test_model_parameter_difference_is_one_conv_per_block():
    for weight_norm in (False, True):
        standard = tiny_variant(weight_norm=weight_norm)
        separable = tiny_variant(conv="depthwise", weight_norm=weight_norm)
        per_block = (conv1d_parameters(32, 64, 3, weight_norm=weight_norm)
                     - separable_conv1d_parameters(32, 64, 3, weight_norm=weight_norm))
        assert count_parameters(standard) - count_parameters(separable) == 6 * per_block


def test_measured_flops_match_the_formulas():
    x = torch.randn(2, 16, 11)
    sep = DepthwiseSeparableConv1d(16, 32, 5, padding="same")
    std = nn.Conv1d(16, 32, 5, padding=2)
    for module, formula in ((sep, separable_conv1d_flops), (std, conv1d_flops)):
        counter = FlopCounterMode(display=False)
        with counter:
            module(x)
        assert counter.get_total_flops() == formula(16, 32, 5, 11, batch=2)


# ------------------------------------------------------------------------------------------
# The separable convolution itself
# ------------------------------------------------------------------------------------------


def test_separable_conv_is_depthwise_then_pointwise():
    torch.manual_seed(0)
    conv = DepthwiseSeparableConv1d(4, 6, 3)
    x = torch.randn(2, 4, 7)
    dw = conv.depthwise.weight  # [4, 1, 3]
    by_hand = torch.stack([
        sum(dw[c, 0, j] * x[:, c, j:j + 5] for j in range(3)) for c in range(4)
    ], dim=1)  # [2, 4, 5]
    expected = torch.einsum("oc,bcl->bol", conv.pointwise.weight[:, :, 0], by_hand)
    expected = expected + conv.pointwise.bias[:, None]
    torch.testing.assert_close(conv(x), expected)


@pytest.mark.parametrize("padding", ["same", "causal"])
def test_padding_modes_keep_the_length_and_causal_sees_only_the_past(padding):
    torch.manual_seed(0)
    conv = DepthwiseSeparableConv1d(4, 8, 3, padding=padding)
    x = torch.randn(1, 4, 6)
    assert conv(x).shape == (1, 8, 6)
    y = x.clone()
    y[..., 4:] += 1.0
    same_past = torch.equal(conv(x)[..., :4], conv(y)[..., :4])
    assert same_past == (padding == "causal")


def test_separable_block_is_a_drop_in_for_the_glu_block():
    torch.manual_seed(0)
    block = SeparableConvGLUBlock(8, 3, padding="causal", residual=False).eval()
    assert isinstance(block, ConvGLUBlock)
    x = torch.randn(2, 8, 5)
    full = block(x)
    history = block.empty_history(x)
    steps = []
    for t in range(5):
        steps.append(block(x[..., t:t + 1], history=history))
        history = block.next_history(history, x[..., t:t + 1])
    torch.testing.assert_close(torch.cat(steps, dim=2), full)
    h = F.glu(block.conv(F.pad(x, (2, 0))), dim=1)
    torch.testing.assert_close(full, h)


def test_bad_arguments():
    with pytest.raises(ValueError, match="odd"):
        DepthwiseSeparableConv1d(4, 4, 4, padding="same")
    with pytest.raises(ValueError, match="padding"):
        DepthwiseSeparableConv1d(4, 4, 3, padding="left")
    with pytest.raises(ValueError, match="conv"):
        tiny_variant(conv="dilated")
    with pytest.raises(ValueError, match="positions"):
        SelfAttentionBlock(8, 2, positions="rotary")
    with pytest.raises(ValueError, match="divisible"):
        SelfAttentionBlock(10, 4)


# ------------------------------------------------------------------------------------------
# The variant model
# ------------------------------------------------------------------------------------------


def test_standard_variant_is_exactly_convs2s():
    variant = tiny_variant(seed=3)
    torch.manual_seed(3)
    plain = ConvS2S(VOCAB, VOCAB, emb_dim=16, hid_dim=32, enc_layers=3, dec_layers=3,
                    kernel_size=3, dropout=0.1, max_positions=32, src_pad_idx=PAD,
                    trg_pad_idx=PAD).eval()
    src, trg_in = padded_batch([5, 3]), padded_batch([4, 4], seed=2)
    torch.testing.assert_close(variant(src, trg_in)[0], plain(src, trg_in)[0])


@pytest.mark.parametrize("t", [0, 2, 4])
def test_depthwise_decoder_does_not_see_the_future(t):
    model = tiny_variant(conv="depthwise")
    src = padded_batch([5, 4])
    trg_in = padded_batch([7, 7], seed=2)
    changed = trg_in.clone()
    changed[:, t + 1:] = (changed[:, t + 1:] + 1) % (VOCAB - 3) + 3  # perturb the future
    logits, attention = model(src, trg_in)
    logits2, attention2 = model(src, changed)
    torch.testing.assert_close(logits2[:, :t + 1], logits[:, :t + 1], rtol=0, atol=0)
    torch.testing.assert_close(attention2[:, :, :t + 1], attention[:, :, :t + 1], rtol=0, atol=0)
    assert not torch.allclose(logits2[:, t + 1:], logits[:, t + 1:])


@pytest.mark.parametrize("conv,sa", [("depthwise", False), ("depthwise", True),
                                     ("standard", True)])
def test_incremental_decoding_and_beam_of_one(conv, sa):
    model = tiny_variant(conv=conv, encoder_self_attention=sa)
    src = padded_batch([5, 3, 6])
    trg_in = padded_batch([6, 6, 6], seed=2)
    full, _ = model(src, trg_in)
    encoded = model.encode(src)
    state: dict = {}
    steps = [model.decode(trg_in[:, i:i + 1], encoded, state)[0] for i in range(6)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)
    kw = dict(max_len=8, bos_idx=BOS, eos_idx=EOS)
    assert greedy_decode(model, src, **kw) == beam_search(model, src, beam_size=1, **kw)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "none"])
@pytest.mark.parametrize("conv", ["standard", "depthwise"])
def test_self_attention_encoder_ignores_appended_padding(positions, conv):
    model = tiny_variant(conv=conv, encoder_self_attention=True, attention_positions=positions)
    assert isinstance(model.self_attention, SelfAttentionBlock)
    src = padded_batch([5, 3])
    trg_in = padded_batch([4, 4], seed=2)
    logits, attention = model(src, trg_in)
    longer = torch.cat([src, torch.full((2, 4), PAD)], dim=1)
    logits2, attention2 = model(longer, trg_in)
    torch.testing.assert_close(logits2, logits)
    torch.testing.assert_close(attention2[..., :5], attention)
    # and a sentence alone equals the same sentence inside the padded batch
    alone, _ = model(src[1:, :3], trg_in[1:])
    torch.testing.assert_close(alone, logits[1:])


def test_self_attention_gives_pads_zero_weight_and_mixes_globally():
    torch.manual_seed(0)
    block = SelfAttentionBlock(8, 2, dropout=0.0).eval()
    block.keep_weights = True
    x = torch.randn(2, 8, 9)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    y = block(x, mask=mask)
    assert block.last_weights.shape == (2, 9, 9)
    assert block.last_weights[1, :, 6:].abs().max() == 0
    assert y[1, :, 6:].abs().max() == 0
    # global: the first output moves when the last real input changes (a k=3 conv would not)
    x2 = x.clone()
    x2[0, :, 8] += torch.randn(8)  # (a constant shift would vanish in the LayerNorm)
    assert not torch.allclose(block(x2, mask=mask)[0, :, 0], y[0, :, 0])


def test_sinusoidal_positions_match_the_transformer_formula():
    pe = sinusoidal_positions(10, 6)
    pos, i = 7, 2  # channels 4 (sin) and 5 (cos) of the third frequency
    freq = 1.0 / 10000 ** (2 * i / 6)
    torch.testing.assert_close(pe[pos, 4], torch.tensor(pos * freq).sin())
    torch.testing.assert_close(pe[pos, 5], torch.tensor(pos * freq).cos())


def test_factory_config_rebuild_and_checkpoint(tmp_path):
    vocab = Vocab(["<unk>", "<pad>", "<bos>", "<eos>"] + [f"w{i}" for i in range(16)],
                  ["<unk>", "<pad>", "<bos>", "<eos>"])
    torch.manual_seed(0)
    model = make_variant_model(vocab, vocab, conv="depthwise", encoder_self_attention=True,
                               emb_dim=16, hid_dim=16, enc_layers=2, dec_layers=2,
                               attention_heads=2, attention_positions="learned").eval()
    assert model.config["src_pad_idx"] == vocab.pad_idx
    assert model.config["conv"] == "depthwise" and model.config["encoder_self_attention"]
    src = torch.randint(4, 20, (2, 5))
    trg_in = torch.randint(4, 20, (2, 4))
    rebuilt = VariantConvS2S(**model.config)
    rebuilt.load_state_dict(model.state_dict())
    torch.testing.assert_close(rebuilt.eval()(src, trg_in)[0], model(src, trg_in)[0])
    path = Checkpoint.from_model(model, vocab, vocab).save(tmp_path / "v.pt")
    loaded = Checkpoint.load(path).build_model()
    assert type(loaded) is VariantConvS2S
    torch.testing.assert_close(loaded(src, trg_in)[0], model(src, trg_in)[0])


def test_depthwise_model_trains():
    model = tiny_variant(conv="depthwise", encoder_self_attention=True, dropout=0.0).train()
    g = torch.Generator().manual_seed(0)
    sources = [torch.randint(3, VOCAB, (n,), generator=g) for n in (5, 6, 4)]
    targets = [torch.cat([torch.tensor([BOS]), s.flip(0), torch.tensor([EOS])]) for s in sources]
    src = torch.nn.utils.rnn.pad_sequence(sources, batch_first=True, padding_value=PAD)
    trg = torch.nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=PAD)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        logits, _ = model(src, trg[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), trg[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
