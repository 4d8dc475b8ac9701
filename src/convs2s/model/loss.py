"""The training loss and the validation loss, shared by training, evaluation and baselines.

``sequence_loss`` is the cross-entropy of the next token over the real (non-pad) target
positions, with optional label smoothing (fairseq's and this course's choice, not the paper's);
``next_token_loss`` runs a model on one batch and returns that loss, asking the model for
logits at the real positions only; ``evaluate_loss`` is its unsmoothed mean over a data loader,
whose exponential is the perplexity.

R-Drop (Liang et al., NeurIPS 2021, "R-Drop: Regularized Dropout for Neural Networks"): with
``rdrop`` > 0, ``next_token_loss`` runs the batch twice in one pass (the batch concatenated with
itself, so each copy draws its own dropout masks, as the paper's code does) and ``rdrop_loss``
adds ``rdrop`` times ``symmetric_kl``, the two passes' disagreement, to the mean of their two
cross-entropies.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F

__all__ = ["evaluate_loss", "next_token_loss", "rdrop_loss", "sequence_loss", "symmetric_kl"]


def sequence_loss(logits: torch.Tensor, trg_out: torch.Tensor, pad_idx: int,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real (non-pad) target tokens."""
    # logits = [batch, trg_len, vocab]; trg_out = [batch, trg_len]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), trg_out.reshape(-1),
                           ignore_index=pad_idx, label_smoothing=label_smoothing)


def symmetric_kl(logits_1: torch.Tensor, logits_2: torch.Tensor) -> torch.Tensor:
    """R-Drop's symmetric KL divergence between two passes' next-token distributions,
    ``(KL(p1 || p2) + KL(p2 || p1)) / 2`` (the paper's L_KL), summed over the vocabulary and
    averaged over the rows: the rows must be real target positions only."""
    # logits_1 = logits_2 = [n_real, vocab]
    log_p1 = F.log_softmax(logits_1.float(), dim=-1)
    log_p2 = F.log_softmax(logits_2.float(), dim=-1)
    # KL(p1 || p2) + KL(p2 || p1) = sum over the vocabulary of (p1 - p2) (log p1 - log p2)
    both = ((log_p1.exp() - log_p2.exp()) * (log_p1 - log_p2)).sum(-1)  # both = [n_real]
    return both.mean() / 2


def rdrop_loss(logits: torch.Tensor, trg_out: torch.Tensor, pad_idx: int,
               label_smoothing: float = 0.0, weight: float = 0.0) -> torch.Tensor:
    """R-Drop's loss of a batch that went through the model twice, concatenated with itself
    along the batch dimension (its first half of rows is the first pass, its second half the
    second): the mean of the two passes' ``sequence_loss`` plus ``weight`` times their
    ``symmetric_kl`` over the real target positions, both per real token.

    The paper (and its fairseq code) adds alpha times the same KL to the *sum* of the two
    cross-entropies, so its alpha is twice ``weight`` here."""
    # logits = [2 * batch, trg_len, vocab] and trg_out = [2 * batch, trg_len], or only the
    # real positions: logits = [2 * n_real, vocab] and trg_out = [2 * n_real]
    if logits.size(0) % 2 or trg_out.shape != logits.shape[:-1]:
        raise ValueError(f"rdrop_loss needs the logits of a batch run twice (an even number "
                         f"of rows) and targets of their shape, not {tuple(logits.shape)} and "
                         f"{tuple(trg_out.shape)}.")
    loss = sequence_loss(logits, trg_out, pad_idx, label_smoothing)  # the mean of the two
    if weight == 0:
        return loss
    half = logits.size(0) // 2
    real = trg_out[:half] != pad_idx  # real = [batch, trg_len] or [n_real]
    return loss + weight * symmetric_kl(logits[:half][real], logits[half:][real])


def next_token_loss(model: torch.nn.Module, src: torch.Tensor, trg: torch.Tensor, pad_idx: int,
                    label_smoothing: float = 0.0, autocast=None,
                    rdrop: float = 0.0) -> torch.Tensor:
    """``sequence_loss`` of ``model`` on one batch, teacher-forced: ``trg[:, :-1]`` in,
    ``trg[:, 1:]`` predicted. ``autocast``: a context manager for the forward pass (mixed
    precision), or None. ``rdrop`` > 0: R-Drop's loss with that weight (``rdrop_loss``), the
    batch run twice in one forward pass; 0: the plain loss, one pass.

    The model is asked for logits only where the next token is real (``output_mask``): the
    loss ignores padding anyway, and the output layer is a model's largest, so skipping it
    there saves its work on every padded target position (``benchmarks/train_step.py``; the
    figures are in ``benchmarks/RESULTS.md``). The loss and its gradients are those of the full
    pass (``tests/model/test_loss.py``).
    """
    if rdrop:  # the batch twice: src = [2 * batch, src_len], trg = [2 * batch, trg_len + 1]
        src, trg = torch.cat([src, src]), torch.cat([trg, trg])
    trg_in, trg_out = trg[:, :-1], trg[:, 1:]
    real = trg_out != pad_idx  # real = [batch, trg_len]
    with autocast if autocast is not None else nullcontext():
        logits, _ = model(src, trg_in, output_mask=real)  # logits = [n_real, vocab]
    if rdrop:  # the first pass's real positions, then the second's, in the same order
        return rdrop_loss(logits, trg_out[real], pad_idx, label_smoothing, rdrop)
    return sequence_loss(logits, trg_out[real], pad_idx, label_smoothing)


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, loader, pad_idx: int, device) -> float:
    """Mean per-token cross-entropy (no smoothing) over a loader: log of the perplexity."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for src, trg in loader:
        src, trg = src.to(device), trg.to(device)
        n = int((trg[:, 1:] != pad_idx).sum())
        total += float(next_token_loss(model, src, trg, pad_idx)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)
