"""The training loss and the validation loss, shared by training, evaluation and baselines.

``sequence_loss`` is the cross-entropy of the next token over the real (non-pad) target
positions, with optional label smoothing (fairseq's and this course's choice, not the paper's);
``evaluate_loss`` its unsmoothed mean over a data loader, whose exponential is the perplexity.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["evaluate_loss", "sequence_loss"]


def sequence_loss(logits: torch.Tensor, trg_out: torch.Tensor, pad_idx: int,
                  label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean cross-entropy over the real (non-pad) target tokens."""
    # logits = [batch, trg_len, vocab]; trg_out = [batch, trg_len]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), trg_out.reshape(-1),
                           ignore_index=pad_idx, label_smoothing=label_smoothing)


@torch.no_grad()
def evaluate_loss(model: torch.nn.Module, loader, pad_idx: int, device) -> float:
    """Mean per-token cross-entropy (no smoothing) over a loader: log of the perplexity."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for src, trg in loader:
        src, trg = src.to(device), trg.to(device)
        logits, _ = model(src, trg[:, :-1])
        n = int((trg[:, 1:] != pad_idx).sum())
        total += float(sequence_loss(logits, trg[:, 1:], pad_idx)) * n
        count += n
    model.train(was_training)
    return total / max(count, 1)
