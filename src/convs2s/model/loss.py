"""The training loss and the validation loss, shared by training, evaluation and baselines.

``sequence_loss`` is the cross-entropy of the next token over the real (non-pad) target
positions, with optional label smoothing (fairseq's and this course's choice, not the paper's);
``next_token_loss`` runs a model on one batch and returns that loss, asking the model for
logits at the real positions only; ``evaluate_loss`` is its unsmoothed mean over a data loader,
whose exponential is the perplexity.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F

__all__ = ["evaluate_loss", "next_token_loss", "sequence_loss"]


def sequence_loss(logits: torch.Tensor, trg_out: torch.Tensor, pad_idx: int,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real (non-pad) target tokens."""
    # logits = [batch, trg_len, vocab]; trg_out = [batch, trg_len]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), trg_out.reshape(-1),
                           ignore_index=pad_idx, label_smoothing=label_smoothing)


def next_token_loss(model: torch.nn.Module, src: torch.Tensor, trg: torch.Tensor, pad_idx: int,
                    label_smoothing: float = 0.0, autocast=None) -> torch.Tensor:
    """``sequence_loss`` of ``model`` on one batch, teacher-forced: ``trg[:, :-1]`` in,
    ``trg[:, 1:]`` predicted. ``autocast``: a context manager for the forward pass (mixed
    precision), or None.

    The model is asked for logits only where the next token is real (``output_mask``): the
    loss ignores padding anyway, and the output layer is a model's largest, so skipping it
    there saves real time (about 14% of a Multi30k subword batch's target positions are
    padding). The loss and its gradients are those of the full pass (``tests/model/test_loss.py``).
    """
    trg_in, trg_out = trg[:, :-1], trg[:, 1:]
    real = trg_out != pad_idx  # real = [batch, trg_len]
    with autocast if autocast is not None else nullcontext():
        logits, _ = model(src, trg_in, output_mask=real)  # logits = [n_real, vocab]
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
