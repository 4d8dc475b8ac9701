"""Can the source word be read back from the encoder's outputs? Notebook 02's key/value demo.

The encoder gives attention two tensors: keys z (the output of its convolution stack) and values
(z + e)·√0.5. The paper adds e to the values because "e_j provides point information about a
specific input element". :func:`word_identity` measures how much of that point information each
tensor still holds, in two ways:

- ``nearest``: is the word embedding closest (cosine) to the vector at position j the word that
  stood there? This compares the vector with the embedding table *as it is*, so it fails as soon
  as anything maps the vectors elsewhere, e.g. two linear maps that are not inverses;
- ``readout``: a linear read-out (least squares from the vector to the word embedding, fitted
  on one batch and scored on another), then the nearest word. It can undo any invertible linear
  map, so it shows what is *linearly* decodable from the vector, no more: a word it misses (one
  mixed with its neighbours, say) may still be there in a form no linear map recovers.

:func:`projection_roundtrip` measures the first effect directly: how far hid2emb(emb2hid(e)) is
from e in a fresh encoder.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

READOUTS = ("nearest", "readout")


def _nearest_word(vectors: Tensor, table: Tensor) -> Tensor:
    """The row of ``table`` closest by cosine to each vector: ``[..., dim]`` -> ``[...]`` ids."""
    return (F.normalize(vectors, dim=-1) @ F.normalize(table, dim=-1).T).argmax(dim=-1)


def _with_bias(x: Tensor) -> Tensor:
    return torch.cat([x, torch.ones(x.size(0), 1, dtype=x.dtype)], dim=1)  # [n, dim + 1]


def word_identity(encoder, fit_src: Tensor, test_src: Tensor) -> dict[str, dict[str, float]]:
    """How often the word at each position can be read back from e, z and (z + e)·√0.5.

    Args:
        encoder: a :class:`convs2s.model.encoder.Encoder` (put it in eval mode first).
        fit_src: ``[batch, src_len]`` token ids (no padding) to fit the linear read-out on.
        test_src: ``[batch, src_len]`` other token ids (no padding) to score on.

    Returns ``{"e": {...}, "z": {...}, "values": {...}}``, each ``{"nearest": accuracy,
    "readout": accuracy}`` on ``test_src`` (fractions of positions, 0..1). For e, the read-out
    is fitted too (it is the identity up to the position vectors).
    """
    for name, src in (("fit_src", fit_src), ("test_src", test_src)):
        if src.dim() != 2 or bool((src == encoder.pad_idx).any()):
            raise ValueError(f"{name} must be [batch, src_len] token ids without padding.")
    table = encoder.tok_embedding.weight.detach()  # table = [vocab, emb_dim]

    def views(src: Tensor) -> dict[str, Tensor]:
        with torch.no_grad():
            out = encoder(src)
            positions = torch.arange(src.size(1), device=src.device)
            e = encoder.tok_embedding(src) + encoder.pos_embedding(positions)
        return {"e": e, "z": out.conved, "values": out.combined}  # each [batch, len, emb]

    fit, test = views(fit_src), views(test_src)
    target = table[fit_src].reshape(-1, table.size(1)).double()  # the words' embeddings
    result = {}
    for name in ("e", "z", "values"):
        x_fit = _with_bias(fit[name].reshape(-1, table.size(1)).double())
        x_test = _with_bias(test[name].reshape(-1, table.size(1)).double())
        weights = torch.linalg.lstsq(x_fit, target).solution  # [emb_dim + 1, emb_dim]
        read = (x_test @ weights).to(table.dtype).reshape(*test_src.shape, -1)
        result[name] = {
            "nearest": float((_nearest_word(test[name], table) == test_src).float().mean()),
            "readout": float((_nearest_word(read, table) == test_src).float().mean()),
        }
    return result


def projection_roundtrip(encoder, src: Tensor) -> dict[str, float]:
    """What emb -> hid -> emb does to e when no block sits in between, in ``encoder``.

    Returns ``cosine``: the mean cosine between e_j and hid2emb(emb2hid(e_j)) (1 if the two maps
    were inverses up to scale), and ``relative_error``: ‖hid2emb(emb2hid(e)) − e‖ / ‖e‖.
    """
    with torch.no_grad():
        positions = torch.arange(src.size(1), device=src.device)
        e = encoder.tok_embedding(src) + encoder.pos_embedding(positions)  # [batch, len, emb]
        back = encoder.hid2emb(encoder.emb2hid(e))  # back = [batch, len, emb]
    return {
        "cosine": float(F.cosine_similarity(back, e, dim=-1).mean()),
        "relative_error": float((back - e).norm() / e.norm()),
    }
