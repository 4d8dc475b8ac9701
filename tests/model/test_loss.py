"""The training loss asks a model for logits only where the next token is real
(``output_mask``): the same loss and the same gradients as the full pass,
the same random dropout draws, and the output layer really sees fewer rows."""

from __future__ import annotations

import pytest
import torch

from convs2s.model import ConvS2S
from convs2s.model.loss import evaluate_loss, next_token_loss, sequence_loss
from convs2s.model.rnn import RNNAttentionSeq2Seq
from convs2s.model.variants import VariantConvS2S

PAD = 0
VOCAB = 23


def _convs2s(**kw):
    return ConvS2S(VOCAB, VOCAB, emb_dim=16, hid_dim=24, enc_layers=2, dec_layers=2,
                   dropout=0.3, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD, **kw)


MODELS = {
    "convs2s": _convs2s,
    "convs2s_tied": lambda: _convs2s(share_input_output_embed=True),
    "variant": lambda: VariantConvS2S(VOCAB, VOCAB, conv="depthwise",
                                      encoder_self_attention=True, emb_dim=16, hid_dim=24,
                                      enc_layers=2, dec_layers=2, dropout=0.3, max_positions=32,
                                      src_pad_idx=PAD, trg_pad_idx=PAD),
    "rnn": lambda: RNNAttentionSeq2Seq(VOCAB, VOCAB, emb_dim=16, enc_hid_dim=12, dec_hid_dim=20,
                                       attn_dim=10, dropout=0.3, max_positions=32,
                                       src_pad_idx=PAD, trg_pad_idx=PAD),
}


def _batch(src_lengths=(7, 4, 6), trg_lengths=(5, 9, 3), seed=1):
    g = torch.Generator().manual_seed(seed)

    def padded(lengths):
        x = torch.full((len(lengths), max(lengths)), PAD)
        for b, n in enumerate(lengths):
            x[b, :n] = torch.randint(3, VOCAB, (n,), generator=g)
        return x

    return padded(src_lengths), padded(trg_lengths)


def _full_loss(model, src, trg, smoothing):
    logits, _ = model(src, trg[:, :-1])  # logits = [batch, trg_len, vocab]
    return sequence_loss(logits, trg[:, 1:], PAD, smoothing)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_masked_logits_are_the_full_passs_at_the_marked_positions(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    src, trg = _batch()
    mask = trg[:, 1:] != PAD
    full, attention = model(src, trg[:, :-1])
    kept, attention_kept = model(src, trg[:, :-1], output_mask=mask)
    assert kept.shape == (int(mask.sum()), VOCAB)
    torch.testing.assert_close(kept, full[mask])
    torch.testing.assert_close(attention_kept, attention)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_loss_and_every_gradient_match_the_full_pass_dropout_included(name):
    """Training mode with dropout 0.3 and the same seed: dropout runs over every position
    before the selection, so both passes draw the same masks and agree."""
    torch.manual_seed(0)
    model = MODELS[name]().train()
    src, trg = _batch()
    grads, losses = [], []
    for masked in (False, True):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(7)
        loss = (next_token_loss(model, src, trg, PAD, 0.1) if masked
                else _full_loss(model, src, trg, 0.1))
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()
                      if p.grad is not None})
    torch.testing.assert_close(losses[1], losses[0])
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], msg=n)


def test_the_output_layer_sees_only_real_positions():
    model = _convs2s().eval()
    src, trg = _batch()
    rows = []
    model.decoder.fc_out.register_forward_hook(lambda m, i, o: rows.append(i[0].shape[:-1]))
    next_token_loss(model, src, trg, PAD)
    model(src, trg[:, :-1])
    real = int((trg[:, 1:] != PAD).sum())
    assert rows == [torch.Size([real]), torch.Size([3, trg.size(1) - 1])]
    assert real < 3 * (trg.size(1) - 1)  # the batch has padding to skip


def test_evaluate_loss_is_the_unsmoothed_mean_over_real_tokens():
    model = _convs2s().eval()
    batches = [_batch(seed=s) for s in (1, 2)]
    total = count = 0
    for src, trg in batches:
        n = int((trg[:, 1:] != PAD).sum())
        with torch.no_grad():
            total += float(_full_loss(model, src, trg, 0.0)) * n
        count += n
    assert evaluate_loss(model, batches, PAD, torch.device("cpu")) == pytest.approx(
        total / count, rel=1e-6)


@pytest.mark.parametrize("mask, error, match", [
    (torch.ones(3, 8, dtype=torch.long), TypeError, "output_mask must be a bool tensor"),
    (torch.ones(3, 7, dtype=torch.bool), ValueError, r"shape \(3, 7\).*decoder input's \(3, 8\)"),
])
def test_a_wrong_mask_is_one_clear_error(mask, error, match):
    model = _convs2s().eval()
    src, trg = _batch()
    with pytest.raises(error, match=match):
        model(src, trg[:, :-1], output_mask=mask)
