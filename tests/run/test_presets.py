"""Presets hold their model as a ConvS2SConfig without vocabularies; they keep their values,
complete into a model's configuration from two vocabularies, and read the flat record that
checkpoints store (also one written before the model had a configuration)."""

from __future__ import annotations

import dataclasses

import pytest

from convs2s.data import Vocab
from convs2s.data.subword import TextPipeline
from convs2s.model import ConvS2S, ConvS2SConfig
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.prepare import build_model
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.resume import check_same_run

# Each preset's model fields as PRESETS set them before ConvS2SConfig (Preset.model_kwargs()).
MODEL_FIELDS_BEFORE = {
    "quick": dict(emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, kernel_size=3,
                  dropout=0.1, max_positions=100, init="paper", weight_norm=True,
                  share_input_output_embed=False),
    "quick_subword": dict(emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, kernel_size=3,
                          dropout=0.1, max_positions=100, init="paper", weight_norm=True,
                          share_input_output_embed=True),
    "cpu": dict(emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, kernel_size=3,
                dropout=0.2, max_positions=100, init="paper", weight_norm=True,
                share_input_output_embed=False),
    "cpu_subword": dict(emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, kernel_size=3,
                        dropout=0.2, max_positions=100, init="paper", weight_norm=True,
                        share_input_output_embed=True),
    "gpu": dict(emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10, kernel_size=3,
                dropout=0.25, max_positions=100, init="paper", weight_norm=True,
                share_input_output_embed=False),
    "gpu_subword": dict(emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10, kernel_size=3,
                        dropout=0.25, max_positions=100, init="paper", weight_norm=True,
                        share_input_output_embed=True),
}

# The flat preset dict a checkpoint of the cpu preset recorded before ConvS2SConfig.
CPU_RECORD_BEFORE = {
    "name": "cpu", "emb_dim": 256, "hid_dim": 256, "enc_layers": 4, "dec_layers": 4,
    "kernel_size": 3, "dropout": 0.2, "max_positions": 100, "init": "paper",
    "weight_norm": True, "share_input_output_embed": False, "src_lang": "de", "trg_lang": "en",
    "tokenizer": "word", "lower": True, "min_freq": 2, "vocab_size": 8000, "joint_vocab": True,
    "subword_model": "bpe", "train_pairs": None, "valid_pairs": None, "max_tokens": 3000,
    "optimizer": "adamw", "lr": 2e-3, "weight_decay": 1e-4, "momentum": 0.99,
    "clip_norm": 0.1, "label_smoothing": 0.1, "warmup_steps": 200, "lr_shrink": 0.5,
    "min_lr": 1e-5, "epochs": 15, "max_steps": None, "max_minutes": 25, "patience": 3,
    "seed": 1234, "amp": True, "average_last": 0, "final_beam": 5, "final_pairs": None,
}

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]


def test_every_preset_keeps_its_model_values():
    assert set(PRESETS) == set(MODEL_FIELDS_BEFORE)
    for name, preset in PRESETS.items():
        config = preset.model
        assert {k: getattr(config, k) for k in MODEL_FIELDS_BEFORE[name]} == \
            MODEL_FIELDS_BEFORE[name], name
        # the fields presets could not set keep ConvS2S's defaults; the vocabularies are open
        assert (config.decoder_padding, config.scale_encoder_gradients) == ("causal", True), name
        assert config.missing() == ["src_vocab_size", "trg_vocab_size", "src_pad_idx",
                                    "trg_pad_idx"], name


def test_a_preset_records_the_flat_dict_it_recorded_before():
    record = PRESETS["cpu"].as_dict()
    assert record == CPU_RECORD_BEFORE and list(record) == list(CPU_RECORD_BEFORE)
    for preset in PRESETS.values():
        assert Preset.from_dict(preset.as_dict()) == preset
    # a model field presets could not set before is recorded where it is not the default
    unscaled = PRESETS["cpu"].replace(scale_encoder_gradients=False)
    assert unscaled.as_dict() == {**CPU_RECORD_BEFORE, "scale_encoder_gradients": False}
    assert Preset.from_dict(unscaled.as_dict()) == unscaled


def test_an_old_flat_preset_dict_reads_back_and_resumes_as_its_preset():
    """A checkpoint written before ConvS2SConfig (and one from before the tied output layer,
    which lacks that key) gives back its preset, and check_same_run accepts it for a resume."""
    assert Preset.from_dict(CPU_RECORD_BEFORE) == PRESETS["cpu"]
    older = {k: v for k, v in CPU_RECORD_BEFORE.items() if k != "share_input_output_embed"}
    assert Preset.from_dict(older) == PRESETS["cpu"]
    vocab = Vocab(SPECIALS, SPECIALS)
    old = Checkpoint(model_config={}, state_dict={}, src_vocab=vocab, trg_vocab=vocab,
                     pipeline=TextPipeline.word(), preset=older)
    check_same_run(old, PRESETS["cpu"].as_dict())  # the same run: no error
    with pytest.raises(CheckpointError, match=r"hid_dim: checkpoint 256, now 128"):
        check_same_run(old, PRESETS["cpu"].replace(hid_dim=128).as_dict())
    # dataclasses.asdict's nested form reads too
    assert Preset.from_dict(dataclasses.asdict(PRESETS["gpu_subword"])) == PRESETS["gpu_subword"]


def test_a_record_with_an_unknown_field_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^A preset has no field colour, hid_size\.$"):
        Preset.from_dict({**CPU_RECORD_BEFORE, "hid_size": 8, "colour": "red"})


def test_replace_takes_the_models_fields_by_name():
    cpu = PRESETS["cpu"]
    small = cpu.replace(hid_dim=128, dec_layers=2, lr=1e-2)
    assert small.model == dataclasses.replace(cpu.model, hid_dim=128, dec_layers=2)
    assert small.lr == 1e-2 and small.replace() == small
    assert cpu.replace(model=small.model) == small.replace(lr=cpu.lr)
    with pytest.raises(ValueError, match="Give model=... or the model's fields"):
        cpu.replace(model=small.model, hid_dim=64)
    with pytest.raises(TypeError, match="hid_dim=8.0 must be a positive integer"):
        cpu.replace(hid_dim=8.0)  # the model's own checks


def test_a_preset_refuses_a_model_that_is_not_a_config_or_knows_its_vocabularies():
    with pytest.raises(TypeError, match="^model must be a ConvS2SConfig, not a dict"):
        Preset(name="x", model=dict(emb_dim=8))
    with pytest.raises(ValueError, match="^A preset's model leaves src_vocab_size, "
                       "src_pad_idx to the vocabularies"):
        Preset(name="x", model=ConvS2SConfig(src_vocab_size=9, src_pad_idx=1))


def test_build_model_completes_the_presets_config_from_the_vocabularies():
    src_vocab = Vocab(SPECIALS + ["ein", "hund"], SPECIALS)
    trg_vocab = Vocab(SPECIALS + ["a", "dog", "runs"], SPECIALS)
    model = build_model(PRESETS["quick_subword"], src_vocab, trg_vocab)
    expected = PRESETS["quick_subword"].model.with_vocabularies(src_vocab, trg_vocab)
    assert model.config == expected.as_dict()
    assert (model.config["src_vocab_size"], model.config["trg_vocab_size"]) == (6, 7)
    assert model.decoder.fc_out.weight is model.decoder.tok_embedding.weight  # tied
    with pytest.raises(ValueError, match="lacks src_vocab_size"):
        ConvS2S(PRESETS["quick"].model)


def test_a_preset_record_with_the_old_name_of_a_field_loads_directly():
    """A preset recorded before ``encoder_grad_scale`` became ``scale_encoder_gradients`` loads
    through ``Preset.from_dict`` itself (flat and nested), not only through a checkpoint; both
    names at once are one ValueError."""
    from convs2s.run.presets import PRESETS, Preset

    changed = PRESETS["quick"].replace(
        scale_encoder_gradients=not PRESETS["quick"].model.scale_encoder_gradients)
    flat = changed.as_dict()
    value = flat.pop("scale_encoder_gradients")
    old_flat = {**flat, "encoder_grad_scale": value}
    assert Preset.from_dict(old_flat) == changed
    nested = dataclasses.asdict(PRESETS["quick"])
    nested["model"]["encoder_grad_scale"] = nested["model"].pop("scale_encoder_gradients")
    assert Preset.from_dict(nested) == PRESETS["quick"]
    with pytest.raises(ValueError, match="old name"):
        Preset.from_dict({**old_flat, "scale_encoder_gradients": value})
