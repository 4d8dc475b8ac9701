"""The receptive-field and path-length formulas, and their agreement with what autograd measures
on real stacks and decoders; sequential steps and call counting."""

from __future__ import annotations

import math

import pytest
import torch

from convs2s.course.baselines import RNNAttentionSeq2Seq
from convs2s.course.dependency import dependency_map, dependency_summary, visible_positions
from convs2s.course.receptive_field import (
    conv_path_length,
    count_calls,
    path_lengths,
    receptive_field,
    rnn_path_length,
    sequential_steps,
)
from convs2s.course.stacks import STACK_PADDINGS
from convs2s.model import ConvS2S
from convs2s.model.encoder import Encoder
from convs2s.model.layers import ConvGLUBlock
from convs2s.model.loss import sequence_loss


@pytest.mark.parametrize(
    ("k", "n_layers", "expected"),
    [(3, 1, 3), (3, 2, 5), (5, 3, 13), (2, 4, 5), (1, 7, 1), (3, 0, 1), (3, 4, 9), (5, 2, 9)],
)
def test_receptive_field_formula(k, n_layers, expected):
    assert receptive_field(k, n_layers) == expected
    assert receptive_field(n_layers=n_layers, kernel_size=k) == expected


def test_path_length_formulas_on_small_cases():
    assert conv_path_length(0, 3) == 0
    assert [conv_path_length(n, 3) for n in range(1, 7)] == [1, 1, 2, 2, 3, 3]
    assert [conv_path_length(n, 5) for n in range(1, 10)] == [1, 1, 1, 1, 2, 2, 2, 2, 3]
    assert conv_path_length(50, 2) == 50  # width 2 advances one position per layer
    assert rnn_path_length(17) == 17


STACKS = [(1, 3), (3, 1), (3, 2), (3, 4), (5, 2), (2, 3), (4, 2)]
CASES = [(p, k, n) for p in STACK_PADDINGS for k, n in STACKS if not (p == "same" and k % 2 == 0)]


@pytest.mark.parametrize(("padding", "k", "n_layers"), CASES)
def test_measured_receptive_field_equals_formula(padding, k, n_layers):
    r = receptive_field(k, n_layers)
    dep = dependency_map(k, n_layers, padding, length=r + 5)
    assert dependency_summary(dep)["receptive_field"] == r
    # Every output's dependencies are one contiguous run of inputs.
    for row in dep:
        cols = row.nonzero().flatten()
        assert cols.numel() and int(cols[-1] - cols[0]) + 1 == cols.numel()


@pytest.mark.parametrize("k", [2, 3, 4, 5, 7])
def test_conv_path_length_is_the_fewest_layers_whose_window_holds_both_words(k):
    for n in range(1, 40):
        layers = conv_path_length(n, k)
        assert receptive_field(k, layers) >= n + 1  # both words inside the window
        assert receptive_field(k, layers - 1) < n + 1  # one layer fewer is not enough
        assert layers == math.ceil(n / (k - 1))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_causal_decoder_reach_measured_with_autograd(k):
    # output i of a causal decoder with L layers depends on inputs i - L(k-1) .. i, no further
    length = 14
    for layers in (1, 2, 3):
        visible = visible_positions(k, layers, "causal", length)  # [length, length]
        i = length - 1
        farthest = max(i - j for j in range(length) if visible[i, j])
        reach = receptive_field(k, layers) - 1
        assert farthest == min(reach, i)
        for n in range(1, i + 1):  # words n apart are connected exactly when L >= path length
            assert bool(visible[i, i - n]) == (layers >= conv_path_length(n, k))


def _encoder_dependence(layers: int, k: int, length: int) -> torch.Tensor:
    """[length, length] bool: z_i depends on input word j (measured with autograd)."""
    torch.manual_seed(0)
    encoder = Encoder(20, emb_dim=8, hid_dim=8, n_layers=layers, kernel_size=k, dropout=0.0,
                      max_positions=length, pad_idx=1).double().eval()
    src = torch.randint(2, 20, (1, length), generator=torch.Generator().manual_seed(1))
    leaves = []

    def make_leaf(_module, _inputs, output):
        leaves.append(output.detach().requires_grad_(True))
        return leaves[-1]

    handle = encoder.tok_embedding.register_forward_hook(make_leaf)
    try:
        z = encoder(src).conved  # z = [1, length, emb_dim]
    finally:
        handle.remove()
    rows = []
    for i in range(length):
        (grad,) = torch.autograd.grad(z[0, i].sum(), leaves[0], retain_graph=True)
        rows.append(grad[0].abs().sum(-1) > 0)
    return torch.stack(rows)


@pytest.mark.parametrize("k", [3, 5])
def test_centred_encoder_connects_two_words_at_the_same_depth(k):
    # in the encoder the shared output is a position between the two words
    length = 13
    for layers in (1, 2, 3):
        dep = _encoder_dependence(layers, k, length)
        for n in range(1, 9):
            j1, j2 = 2, 2 + n
            connected = bool((dep[:, j1] & dep[:, j2]).any())
            assert connected == (layers >= conv_path_length(n, k)), (layers, n)


def test_path_lengths_table():
    table = path_lengths(6, kernel_sizes=(3, 5))
    assert list(table) == ["distance", "RNN", "conv k=3", "conv k=5"]
    assert table["distance"] == [1, 2, 3, 4, 5, 6]
    assert table["RNN"] == [1, 2, 3, 4, 5, 6]
    assert table["conv k=3"] == [1, 1, 2, 2, 3, 3]
    assert table["conv k=5"] == [1, 1, 1, 1, 2, 2]


def test_sequential_steps():
    assert sequential_steps("rnn", 12, 15) == 27
    assert sequential_steps("conv", 12, 15, enc_layers=4, dec_layers=3) == 7
    assert sequential_steps("conv", 120, 150, enc_layers=4, dec_layers=3) == 7


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: conv_path_length(5, 1), "kernel_size=1 never connects"),
        (lambda: conv_path_length(-1, 3), "distance=-1 must be a whole number >= 0"),
        (lambda: receptive_field(0, 2), "kernel_size=0 must be a positive integer"),
        (lambda: receptive_field(3, -1), "n_layers=-1 must be a whole number >= 0"),
        (lambda: path_lengths(0), "max_distance=0 must be a positive integer"),
        (lambda: sequential_steps("lstm", 3, 3), "architecture='lstm' is not known"),
        (lambda: sequential_steps("conv", 3, 3, enc_layers=0),
         "enc_layers=0 must be a positive integer"),
    ],
)
def test_bad_arguments_say_what_is_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_non_integers_are_refused():
    with pytest.raises(TypeError, match=r"distance=2.5 must be a whole number >= 0 \(an int\), "
                                        "not a float"):
        conv_path_length(2.5, 3)
    with pytest.raises(TypeError, match="kernel_size='3' must be a positive integer"):
        receptive_field("3", 2)
    with pytest.raises(TypeError, match="kernel_size=2.0 must be a positive integer"):
        receptive_field(2.0, 1)
    with pytest.raises(TypeError, match=r"kernel_size=True must be a positive integer \(an "
                                        r"int\), not a bool"):
        receptive_field(True, 1)  # a bool is an int to Python, not a kernel size


def _training_step(model, trg_len: int):
    g = torch.Generator().manual_seed(trg_len)
    src = torch.randint(2, 30, (2, 7), generator=g)
    trg = torch.randint(2, 30, (2, trg_len + 1), generator=g)

    def run():
        logits, _ = model(src, trg[:, :-1])
        sequence_loss(logits, trg[:, 1:], 1, 0.0).backward()

    return run


def test_count_calls_measures_the_sequential_steps_of_a_training_step():
    torch.manual_seed(0)
    rnn = RNNAttentionSeq2Seq(30, 30, emb_dim=8, enc_hid_dim=8, dec_hid_dim=8, dropout=0.0,
                              src_pad_idx=1, trg_pad_idx=1)
    conv = ConvS2S(30, 30, emb_dim=8, hid_dim=8, enc_layers=2, dec_layers=3, dropout=0.0,
                   max_positions=64, src_pad_idx=1, trg_pad_idx=1)
    for n in (5, 12, 30):
        rnn_calls = count_calls(rnn.decoder, torch.nn.GRUCell, _training_step(rnn, n))
        conv_calls = count_calls(conv.decoder, ConvGLUBlock, _training_step(conv, n))
        assert rnn_calls == {"forward": n, "backward": n}  # one GRU step per target word
        assert conv_calls == {"forward": 3, "backward": 3}  # one convolution per layer
        steps = sequential_steps("conv", 7, n, enc_layers=2, dec_layers=3)
        assert count_calls(conv, ConvGLUBlock, _training_step(conv, n))["forward"] == steps


def test_count_calls_removes_its_hooks_also_on_error():
    layer = torch.nn.Linear(2, 2)

    def boom():
        layer(torch.ones(1, 2))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        count_calls(layer, torch.nn.Linear, boom)
    assert not layer._forward_hooks and not layer._backward_hooks
    assert count_calls(layer, torch.nn.Linear, lambda: layer(torch.ones(1, 2))) == {
        "forward": 1, "backward": 0}
