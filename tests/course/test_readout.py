"""Tests of convs2s.course.readout: reading the source word back from e, z and z + e."""

from __future__ import annotations

import pytest
import torch

from convs2s.course import readout
from convs2s.model.encoder import Encoder


def _encoder(n_layers: int, seed: int = 0, weight_norm: bool = True) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(60, emb_dim=16, hid_dim=32, n_layers=n_layers, kernel_size=3, dropout=0.0,
                   max_positions=16, pad_idx=1, weight_norm=weight_norm).eval()


def _tokens(batch: int, seed: int) -> torch.Tensor:
    return torch.randint(4, 60, (batch, 10), generator=torch.Generator().manual_seed(seed))


def test_without_blocks_the_read_out_undoes_the_projections_that_nearest_word_cannot():
    result = readout.word_identity(_encoder(0), _tokens(128, 1), _tokens(32, 2))
    assert result["e"]["nearest"] > 0.8
    assert result["z"]["nearest"] < 0.3  # two random projections that are not inverses ...
    assert result["z"]["readout"] > 0.95  # ... lose nothing a linear read-out cannot undo
    assert result["values"]["nearest"] > result["z"]["nearest"]


def test_mixing_blocks_lose_word_identity_in_z_but_not_in_the_values():
    result = readout.word_identity(_encoder(6), _tokens(128, 1), _tokens(32, 2))
    assert result["z"]["readout"] < 0.5
    assert result["values"]["readout"] > 0.8


def test_word_identity_refuses_padding():
    src = _tokens(4, 3)
    src[0, -1] = 1
    with pytest.raises(ValueError, match="without padding"):
        readout.word_identity(_encoder(1), src, _tokens(4, 4))


def test_projection_roundtrip_is_exact_for_inverse_maps_and_not_for_random_ones():
    enc = _encoder(0, weight_norm=False)
    random_maps = readout.projection_roundtrip(enc, _tokens(8, 5))
    assert abs(random_maps["cosine"]) < 0.3 and random_maps["relative_error"] > 0.5
    with torch.no_grad():  # make hid2emb the left inverse of emb2hid
        pinv = torch.linalg.pinv(enc.emb2hid.weight)  # pinv = [emb, hid]
        enc.hid2emb.weight.copy_(pinv)
        enc.hid2emb.bias.copy_(-pinv @ enc.emb2hid.bias)
    inverse_maps = readout.projection_roundtrip(enc, _tokens(8, 5))
    assert inverse_maps["cosine"] == pytest.approx(1.0, abs=1e-4)
    assert inverse_maps["relative_error"] < 1e-3
