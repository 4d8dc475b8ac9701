"""convs2s against fairseq's own ConvS2S (``fairseq/models/fconv.py``, the authors' code).

``tests/fixtures/fairseq_fconv_outputs.pt`` (a copy of ``../shared/reference/``; see
``tests/data/README.md``) holds, for two small models, the convs2s weights and what fairseq's
``FConvModel`` computed with the very same weights: encoder outputs, teacher-forced logits,
every decoder layer's attention, logits decoded one position at a time with fairseq's
incremental state, and the gradients of ``(logits * loss_projection).sum()`` with respect to the
two token embeddings. Each model is rebuilt here from its ``convs2s_args`` and ``state_dict``
and must reproduce all of it to atol 1e-5 (it does to about 1e-6).

The negative controls run the same comparison on a model that differs from fairseq in one
detail (no encoder gradient scaling; a decoder that sees the future) and require it to fail,
so a comparison that compares nothing cannot pass unnoticed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import convs2s

DATA = Path(__file__).resolve().parents[1] / "fixtures" / "fairseq_fconv_outputs.pt"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "reference" / DATA.name
CONFIGS = ("wn-k3", "plain-k5")
ATOL = 1e-5


@pytest.fixture(scope="module")
def reference() -> dict:
    return torch.load(DATA, weights_only=True)


def _model(ref: dict, **changes) -> convs2s.ConvS2S:
    """The reference model, rebuilt from its arguments (with ``changes``) and weights."""
    model = convs2s.ConvS2S(**{**ref["convs2s_args"], **changes})
    model.load_state_dict(ref["state_dict"])  # strict: every key named as fairseq's copy was
    return model.eval()


def _step_by_step(model: convs2s.ConvS2S, encoded, trg: torch.Tensor):
    """Logits and attention decoded one target position at a time with the decoder's cache."""
    state: dict = {}
    logits, attention = [], []
    with torch.no_grad():
        for t in range(trg.size(1)):
            step_logits, step_attention = model.decode(trg[:, t:t + 1], encoded, state)
            logits.append(step_logits)
            attention.append(step_attention)
    assert state["steps"] == trg.size(1)
    return torch.cat(logits, dim=1), torch.cat(attention, dim=2)


def mismatches(model: convs2s.ConvS2S, ref: dict) -> dict[str, str]:
    """What ``model`` computes differently from fairseq: {quantity: assert_close's message}.

    Padding positions: fairseq's ``encoder_out[1]`` (combined) is 0 there, where convs2s keeps
    (z + e)·√0.5 (attention never reads it: its weight there is 0), so combined is compared on
    real tokens only; z is 0 at padding in both and is compared everywhere.
    """
    src, trg = ref["src"], ref["trg"]
    found: dict[str, str] = {}

    def compare(name: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
        try:
            torch.testing.assert_close(actual, expected, atol=ATOL, rtol=0)
        except AssertionError as e:
            found[name] = " ".join(line for line in str(e).splitlines() if line)

    model.zero_grad(set_to_none=True)
    encoded = model.encode(src)
    real = encoded.src_mask  # [batch, src_len], True on real tokens
    assert real.sum(dim=1).tolist() == ref["src_lengths"].tolist()
    compare("z", encoded.conved, ref["z"])
    compare("combined (real tokens)", encoded.combined[real], ref["combined"][real])
    logits, attention = model.decode(trg, encoded)
    compare("logits", logits, ref["logits"])
    compare("attention", attention, ref["attention"])  # [batch, dec_layers, trg_len, src_len]
    try:
        step_logits, step_attention = _step_by_step(model, encoded, trg)
    except ValueError as e:  # a decoder that cannot decode incrementally is no fairseq decoder
        found["step logits"] = f"cannot decode incrementally: {e}"
    else:
        compare("step logits", step_logits, ref["step_logits"])
        compare("step attention", step_attention, ref["attention"])
    (logits * ref["loss_projection"]).sum().backward()
    params = dict(model.named_parameters())
    for name, expected in ref["grads"].items():
        compare(f"gradient of {name}", params[name].grad, expected)
    return found


def test_the_reference_file_is_what_it_says(reference):
    assert "fairseq/models/fconv.py" in reference["about"]
    assert sorted(reference["configs"]) == sorted(CONFIGS)
    wn, plain = (reference["configs"][name]["convs2s_args"] for name in CONFIGS)
    assert (wn["weight_norm"], wn["kernel_size"], wn["enc_layers"], wn["dec_layers"]) == (
        True, 3, 3, 2)
    assert (plain["weight_norm"], plain["kernel_size"], plain["enc_layers"],
            plain["dec_layers"], plain["trg_pad_idx"]) == (False, 5, 2, 3, 0)
    for ref in reference["configs"].values():
        assert (ref["src_lengths"] < ref["src"].size(1)).any(), "some source is padded"
        padding = ref["src"] == ref["convs2s_args"]["src_pad_idx"]
        assert bool((ref["combined"][padding] == 0).all())
        assert sorted(ref["grads"]) == ["decoder.tok_embedding.weight",
                                        "encoder.tok_embedding.weight"]


@pytest.mark.skipif(not SHARED.is_file(), reason="../shared/reference is not beside the clone")
def test_the_copy_is_the_shared_reference():
    assert DATA.read_bytes() == SHARED.read_bytes()


@pytest.mark.parametrize("config", CONFIGS)
def test_convs2s_computes_what_fairseq_fconv_computes(reference, config):
    ref = reference["configs"][config]
    assert mismatches(_model(ref), ref) == {}


@pytest.mark.parametrize("config", CONFIGS)
def test_negative_control_without_encoder_gradient_scaling_fails(reference, config):
    """Forward outputs are equal without §3.4's scaling; only the source embedding's gradient
    (which reaches it through z as well as through e) shows it, so the gradients are checked."""
    ref = reference["configs"][config]
    found = mismatches(_model(ref, encoder_grad_scale=False), ref)
    assert sorted(found) == ["gradient of encoder.tok_embedding.weight"], found


@pytest.mark.parametrize("config", CONFIGS)
def test_negative_control_a_decoder_that_sees_the_future_fails(reference, config):
    ref = reference["configs"][config]
    found = mismatches(_model(ref, decoder_padding="same"), ref)
    assert {"logits", "step logits", "gradient of decoder.tok_embedding.weight"} <= set(found)
    assert "z" not in found and "combined (real tokens)" not in found  # the encoder is the same


def test_a_changed_weight_fails(reference):
    """One weight off by 1e-3 is caught: the tolerance is not looser than the test needs."""
    ref = reference["configs"]["wn-k3"]
    model = _model(ref)
    with torch.no_grad():
        model.decoder.fc_out.bias[3] += 1e-3
    found = mismatches(model, ref)
    assert "logits" in found and "z" not in found

