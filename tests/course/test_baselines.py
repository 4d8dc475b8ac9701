"""Tests of the recurrent baseline (Bahdanau attention) and the equal-conditions helpers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import padded_batch

from convs2s.course.baselines import (
    AdditiveAttention,
    RNNAttentionSeq2Seq,
    RNNEncoderOut,
    decoding_speed,
    matched_rnn_config,
    rnn_parameter_count,
    train_side_by_side,
    training_flops,
)
from convs2s.model import ConvS2S, count_parameters
from convs2s.model.loss import evaluate_loss, sequence_loss
from convs2s.model.search import beam_search, greedy_decode

PAD, BOS, EOS = 0, 1, 2
VOCAB = 20


def tiny_rnn(seed: int = 0, vocab: int = VOCAB, **overrides) -> RNNAttentionSeq2Seq:
    torch.manual_seed(seed)
    kwargs = dict(emb_dim=16, enc_hid_dim=24, dec_hid_dim=32, attn_dim=20, dropout=0.1,
                  max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD)
    kwargs.update(overrides)
    return RNNAttentionSeq2Seq(vocab, vocab, **kwargs).eval()



def test_shapes_and_attention_is_a_distribution_over_real_source_tokens():
    model = tiny_rnn()
    src = padded_batch([5, 3, 7])
    trg_in = padded_batch([4, 6, 6], seed=2)
    logits, attention = model(src, trg_in)
    assert logits.shape == (3, 6, VOCAB)
    assert attention.shape == (3, 1, 6, 7)  # one "layer": one attention per output step
    torch.testing.assert_close(attention.sum(-1), torch.ones(3, 1, 6))
    pads = (src == PAD)[:, None, None, :].expand_as(attention)
    assert attention[pads].abs().max() == 0  # exactly zero on source padding
    encoded = model.encode(src)
    assert isinstance(encoded, RNNEncoderOut)
    assert encoded.annotations.shape == (3, 7, 2 * 24)
    assert encoded.keys.shape == (3, 7, 20)
    assert encoded.hidden.shape == (3, 32)
    assert encoded.annotations[src == PAD].abs().max() == 0


def test_appended_source_padding_changes_nothing():
    model = tiny_rnn()
    src = padded_batch([5, 3])
    trg_in = padded_batch([4, 4], seed=2)
    logits, attention = model(src, trg_in)
    longer = torch.cat([src, torch.full((2, 6), PAD)], dim=1)
    logits2, attention2 = model(longer, trg_in)
    torch.testing.assert_close(logits2, logits)
    torch.testing.assert_close(attention2[..., :5], attention)
    assert attention2[..., 5:].abs().max() == 0


def test_a_sentence_alone_equals_the_same_sentence_in_a_padded_batch():
    model = tiny_rnn()
    src = padded_batch([6, 2])
    trg_in = padded_batch([5, 5], seed=3)
    logits, _ = model(src, trg_in)
    alone, _ = model(src[1:, :2], trg_in[1:])
    torch.testing.assert_close(alone, logits[1:])


def test_forward_equals_decode_of_encode_and_config_rebuilds():
    model = tiny_rnn()
    src, trg_in = padded_batch([5, 4]), padded_batch([3, 3], seed=2)
    logits, attention = model(src, trg_in)
    logits2, attention2 = model.decode(trg_in, model.encode(src))
    torch.testing.assert_close(logits2, logits)
    rebuilt = RNNAttentionSeq2Seq(**model.config)
    rebuilt.load_state_dict(model.state_dict())
    torch.testing.assert_close(rebuilt.eval()(src, trg_in)[0], logits)


@pytest.mark.parametrize("chunks", [(1,) * 6, (2, 3, 1), (6,)])
def test_incremental_decoding_equals_full_decoding(chunks):
    model = tiny_rnn()
    src = padded_batch([5, 3, 7])
    trg_in = padded_batch([6, 6, 6], seed=2)
    full_logits, full_attention = model(src, trg_in)
    encoded = model.encode(src)
    state: dict = {}
    pieces, attentions, start = [], [], 0
    for n in chunks:
        logits, attention = model.decode(trg_in[:, start:start + n], encoded, state)
        pieces.append(logits)
        attentions.append(attention)
        start += n
        assert state["steps"] == start
    torch.testing.assert_close(torch.cat(pieces, dim=1), full_logits)
    torch.testing.assert_close(torch.cat(attentions, dim=2), full_attention)


def test_reorder_incremental_state_follows_rows():
    model = tiny_rnn()
    src = padded_batch([4, 5, 3])
    encoded = model.encode(src)
    state: dict = {}
    model.decode(torch.tensor([[BOS], [BOS], [BOS]]), encoded, state)
    model.decode(torch.tensor([[5], [6], [7]]), encoded, state)
    order = torch.tensor([2, 0, 0])
    before = state["hidden"].clone()
    model.decoder.reorder_incremental_state(state, order)
    torch.testing.assert_close(state["hidden"], before[order])


def test_encoder_out_index_select_repeats_rows():
    model = tiny_rnn()
    encoded = model.encode(padded_batch([4, 2]))
    picked = encoded.index_select(torch.tensor([1, 1, 0]))
    assert isinstance(picked, RNNEncoderOut)
    for a, b in zip(picked, encoded, strict=True):
        torch.testing.assert_close(a, b[[1, 1, 0]])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_equals_beam_of_one_and_full_recompute(seed):
    model = tiny_rnn(seed)
    src = padded_batch([5, 3, 6], seed=seed + 10)
    kw = dict(max_len=8, bos_idx=BOS, eos_idx=EOS)
    greedy = greedy_decode(model, src, **kw)
    assert greedy == greedy_decode(model, src, incremental=False, **kw)
    assert greedy == beam_search(model, src, beam_size=1, **kw)
    beams = beam_search(model, src, beam_size=4, return_all=True, **kw)
    assert all(len(b) >= 1 for b in beams)


def test_greedy_returns_one_attention_layer_over_real_tokens():
    model = tiny_rnn()
    src = padded_batch([5, 3])
    tokens, attentions = greedy_decode(model, src, max_len=6, bos_idx=BOS, eos_idx=EOS,
                                       return_attention=True)
    for toks, a, n in zip(tokens, attentions, (5, 3), strict=True):
        assert a.shape == (1, len(toks), n)


def test_dropout_only_in_training_mode():
    model = tiny_rnn(dropout=0.5)
    src, trg_in = padded_batch([5, 4]), padded_batch([3, 3], seed=2)
    torch.testing.assert_close(model(src, trg_in)[0], model(src, trg_in)[0])
    model.train()
    assert not torch.allclose(model(src, trg_in)[0], model(src, trg_in)[0])


def test_bad_inputs_raise_clear_errors():
    model = tiny_rnn()
    with pytest.raises(ValueError, match="non-pad"):
        model(torch.full((1, 3), PAD), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="max_positions"):
        model(padded_batch([40]), torch.tensor([[BOS]]))
    with pytest.raises(TypeError, match="integer"):
        model(padded_batch([3]).float(), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="batch size"):
        model(padded_batch([3, 3]), torch.tensor([[BOS]]))
    with pytest.raises(ValueError, match="dropout"):
        tiny_rnn(dropout=1.0)


def test_additive_attention_matches_its_equation():
    torch.manual_seed(0)
    attn = AdditiveAttention(6, 5, 4)
    s = torch.randn(2, 5)
    h = torch.randn(2, 3, 6)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    context, weights = attn(s, attn.keys(h), h, mask)
    query = (s @ attn.W.weight.T).unsqueeze(1)  # [2, 1, 4]
    energy = torch.tanh(query + h @ attn.U.weight.T + attn.U.bias) @ attn.v.weight[0]
    energy = energy.masked_fill(~mask, float("-inf"))
    expected = torch.softmax(energy, dim=-1)
    torch.testing.assert_close(weights, expected)
    torch.testing.assert_close(context, (expected.unsqueeze(-1) * h).sum(1))


# ------------------------------------------------------------------------------------------
# Parameter counts
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [(16, 24, 32, 20, 10), (8, 8, 8, None, None),
                                   (32, 16, 48, 12, 64)])
def test_parameter_count_formula(sizes):
    emb, enc, dec, attn, out = sizes
    model = RNNAttentionSeq2Seq(37, 29, emb_dim=emb, enc_hid_dim=enc, dec_hid_dim=dec,
                                attn_dim=attn, out_dim=out, src_pad_idx=PAD, trg_pad_idx=PAD)
    assert count_parameters(model) == rnn_parameter_count(**model.config)


def test_matched_config_is_the_closest_hidden_size():
    conv = ConvS2S(300, 250, emb_dim=32, hid_dim=64, enc_layers=3, dec_layers=3,
                   src_pad_idx=PAD, trg_pad_idx=PAD)
    target = count_parameters(conv)
    config = matched_rnn_config(target, 300, 250, src_pad_idx=PAD, trg_pad_idx=PAD, emb_dim=32,
                                multiple_of=4)
    rnn = RNNAttentionSeq2Seq(**config)
    assert rnn.config == config  # complete: a config that rebuilds the model as it is
    hid = config["dec_hid_dim"]
    count = count_parameters(rnn)
    for other in (hid - 4, hid + 4):
        other_count = rnn_parameter_count(**{**config, "enc_hid_dim": other,
                                             "dec_hid_dim": other, "attn_dim": other})
        assert abs(count - target) <= abs(other_count - target)
    assert abs(count - target) / target < 0.05


# ------------------------------------------------------------------------------------------
# Training, the trainer's loss, equal-conditions helper, checkpoints
# ------------------------------------------------------------------------------------------


def reversal_task(vocab: int, lengths=(5, 6, 4, 6)):
    g = torch.Generator().manual_seed(0)
    sources = [torch.randint(3, vocab, (n,), generator=g) for n in lengths]
    targets = [torch.cat([torch.tensor([BOS]), s.flip(0), torch.tensor([EOS])]) for s in sources]
    src = torch.nn.utils.rnn.pad_sequence(sources, batch_first=True, padding_value=PAD)
    trg = torch.nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=PAD)
    return sources, src, trg


def test_overfits_a_tiny_batch_with_the_trainers_loss():
    vocab = 12
    model = tiny_rnn(0, vocab=vocab, emb_dim=32, enc_hid_dim=32, dec_hid_dim=64, attn_dim=32,
                     dropout=0.0, max_positions=16).train()
    sources, src, trg = reversal_task(vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(300):
        logits, _ = model(src, trg[:, :-1])
        loss = sequence_loss(logits, trg[:, 1:], PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.02:
            break
    assert loss.item() < 0.02
    expected = [s.flip(0).tolist() for s in sources]
    assert greedy_decode(model, src, max_len=10, bos_idx=BOS, eos_idx=EOS) == expected
    assert beam_search(model, src, beam_size=3, max_len=10, bos_idx=BOS, eos_idx=EOS) == expected
    assert evaluate_loss(model, [(src, trg)], PAD, torch.device("cpu")) < 0.05


def test_every_parameter_gets_a_gradient():
    model = tiny_rnn().train()
    src, trg = padded_batch([5, 4]), padded_batch([6, 6], seed=2)
    logits, _ = model(src, trg[:, :-1])
    F.cross_entropy(logits.reshape(-1, VOCAB), trg[:, 1:].reshape(-1)).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    # the padding rows of the embeddings get no gradient, the rest of each matrix does
    assert missing == []


def test_train_side_by_side_steps_and_equal_time():
    _, src, trg = reversal_task(VOCAB)
    batches = [(src, trg), (src[:2], trg[:2])]
    models = {"rnn": tiny_rnn(), "conv": ConvS2S(VOCAB, VOCAB, emb_dim=16, hid_dim=16,
                                                 enc_layers=2, dec_layers=2, src_pad_idx=PAD,
                                                 trg_pad_idx=PAD)}
    logs = train_side_by_side(models, batches, pad_idx=PAD, steps=5, valid_batches=batches)
    for name, run in logs.items():
        assert run.steps == 5 and run.seconds > 0 and run.parameters == count_parameters(
            models[name])
        assert run.tokens == 3 * int((trg[:, 1:] != PAD).sum()) + 2 * int(
            (trg[:2, 1:] != PAD).sum())
        assert len(run.history) == 1 and run.tokens_per_s > 0
        assert not models[name].training
    logs = train_side_by_side(models, lambda epoch: batches, pad_idx=PAD, seconds=0.2)
    for run in logs.values():
        assert run.seconds >= 0.2
    with pytest.raises(ValueError, match="steps"):
        train_side_by_side(models, batches, pad_idx=PAD)
    # one stream per model: each counts its own batches' tokens
    logs = train_side_by_side(models, {"rnn": batches[:1], "conv": batches[1:]}, pad_idx=PAD,
                              steps=2)
    assert logs["rnn"].tokens == 2 * int((trg[:, 1:] != PAD).sum())
    assert logs["conv"].tokens == 2 * int((trg[:2, 1:] != PAD).sum())
    with pytest.raises(ValueError, match="streams"):
        train_side_by_side(models, {"rnn": batches}, pad_idx=PAD, steps=1)


def test_maxout_readout_takes_the_larger_of_each_pair():
    model = tiny_rnn(out_dim=5)
    src, trg_in = padded_batch([4, 3]), padded_batch([3, 3], seed=2)
    captured = {}
    model.decoder.readout.register_forward_hook(lambda m, i, o: captured.update(o=o))
    logits, _ = model(src, trg_in)
    pairs = captured["o"].view(2, 3, 5, 2)
    expected = model.decoder.fc_out(torch.maximum(pairs[..., 0], pairs[..., 1]))
    torch.testing.assert_close(logits, expected)


def test_decoding_speed_reports_outputs_in_order():
    model = tiny_rnn()
    batches = [padded_batch([4, 3]), padded_batch([5], seed=4)]
    result = decoding_speed(model, batches, bos_idx=BOS, eos_idx=EOS, max_len=6)
    assert result["sentences"] == 3 and result["sentences_per_s"] > 0
    expected = [*greedy_decode(model, batches[0], max_len=6, bos_idx=BOS, eos_idx=EOS),
                *greedy_decode(model, batches[1], max_len=6, bos_idx=BOS, eos_idx=EOS)]
    assert result["outputs"] == expected
    beam = decoding_speed(model, batches, bos_idx=BOS, eos_idx=EOS, max_len=6, beam_size=3)
    assert beam["sentences"] == 3
    for beam_size in (1, 3):  # <eos> switched off: exactly max_len tokens for every sentence
        fixed = decoding_speed(model, batches, bos_idx=BOS, eos_idx=None, max_len=7,
                               beam_size=beam_size)
        assert [len(o) for o in fixed["outputs"]] == [7, 7, 7]
        assert fixed["output_tokens"] == 21


class _LinearLM(torch.nn.Module):
    """logits = W·emb(trg_in): its training arithmetic is known in closed form."""

    def __init__(self, emb: int, vocab: int):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, emb)
        self.out = torch.nn.Linear(emb, vocab, bias=False)

    def forward(self, src, trg_in):
        return self.out(self.emb(trg_in)), None


def test_training_flops_counts_a_known_model_exactly_per_real_token():
    emb, vocab = 8, VOCAB
    model = _LinearLM(emb, vocab)
    trg = padded_batch([6, 4, 3])  # 3 sentences, 5 positions after the shift, 10 real targets
    counted = training_flops(model, trg, trg, pad_idx=PAD)
    positions = trg.size(0) * (trg.size(1) - 1)  # padding positions are computed too
    # forward W·x, backward dL/dW and dL/dx: three [positions, emb] x [emb, vocab] products
    assert counted["flops"] == 3 * 2 * positions * emb * vocab
    assert counted["tokens"] == int((trg[:, 1:] != PAD).sum()) == 10
    assert counted["flops_per_token"] == counted["flops"] / 10


def test_training_flops_leaves_the_model_alone_and_is_per_token():
    model = tiny_rnn().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    src, trg = padded_batch([5, 3], seed=2), padded_batch([6, 6], seed=3)
    one = training_flops(model, src, trg, pad_idx=PAD)
    assert one["flops"] > 0
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k])
    # the same sentences twice: twice the arithmetic, twice the tokens, the same per token
    two = training_flops(model, src.repeat(2, 1), trg.repeat(2, 1), pad_idx=PAD)
    assert two["flops"] == 2 * one["flops"] and two["tokens"] == 2 * one["tokens"]
    assert two["flops_per_token"] == one["flops_per_token"]

    with pytest.raises(ValueError, match="no real target tokens"):
        training_flops(model, src, torch.full_like(trg, PAD), pad_idx=PAD)


class _GRULM(_LinearLM):
    """logits = W·GRU(emb(trg_in)): to check that the counter sees the GRU's arithmetic."""

    def __init__(self, emb: int, vocab: int):
        super().__init__(emb, vocab)
        self.rnn = torch.nn.GRU(emb, emb, batch_first=True)

    def forward(self, src, trg_in):
        return self.out(self.rnn(self.emb(trg_in))[0]), None


def test_training_flops_sees_the_gru():
    emb, vocab = 8, VOCAB
    trg = padded_batch([6, 4, 3])
    torch.manual_seed(0)
    without = training_flops(_LinearLM(emb, vocab), trg, trg, pad_idx=PAD)["flops"]
    with_gru = training_flops(_GRULM(emb, vocab), trg, trg, pad_idx=PAD)["flops"]
    positions = trg.size(0) * (trg.size(1) - 1)
    gru_forward = 2 * 3 * emb * (emb + emb) * positions  # 3 gates, input and hidden products
    assert with_gru - without >= gru_forward
