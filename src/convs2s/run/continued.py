"""Continued training (``--init-from``, issue 62): a new run whose first weights are another
checkpoint's.

The run takes the checkpoint's vocabularies and text pipeline (so every id means what it meant)
and its weights (a shipped model's float16 ones become float32); everything else starts afresh:
the optimizer's state, the warm-up, the schedule, the history. A checkpoint of another direction,
tokenizer or architecture is refused with one line. The dropout may differ: it changes no weight.
"""

from __future__ import annotations

from pathlib import Path

from torch import nn

from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.presets import Preset
from convs2s.run.resume import MODEL_OPTIONS_ADDED_LATER, check_same_text

__all__ = ["MAY_DIFFER", "initial_checkpoint", "load_initial_weights"]

#: Model settings a continued run may change: none of them shapes a weight.
MAY_DIFFER = ("dropout",)


def initial_checkpoint(preset: Preset) -> Checkpoint:
    """``preset.init_from``, read and checked: a ConvS2S trained in the preset's direction with
    its tokenizer (else :class:`CheckpointError`, one line)."""
    path = Path(preset.init_from)
    ckpt = Checkpoint.load(path)
    if ckpt.model_class != "ConvS2S":
        raise CheckpointError(f"{path} holds a {ckpt.model_class}, not a ConvS2S: --init-from "
                              "takes a convs2s run's best.pt or final.pt, or a shipped model.")
    check_same_text(ckpt.pipeline, preset, path, fix=(
        "--init-from needs a checkpoint of the run's direction and tokenizer: give one, or "
        "change --src, --trg, --tokenizer, --vocab-size or --joint-vocab to its own."))
    return ckpt


def load_initial_weights(ckpt: Checkpoint, model: nn.Module) -> None:
    """``model`` (built on ``ckpt``'s vocabularies) takes its weights; a checkpoint of another
    architecture (any model setting but :data:`MAY_DIFFER`) is refused with one line."""
    recorded = {**MODEL_OPTIONS_ADDED_LATER, **ckpt.model_config}
    diffs = [f"{k}: checkpoint {recorded.get(k)!r}, now {v!r}"
             for k, v in dict(model.config).items()
             if k not in MAY_DIFFER and recorded.get(k) != v]
    if diffs:
        raise CheckpointError(
            f"{ckpt.path} is another architecture (" + "; ".join(diffs) + "): --init-from "
            "needs the run's own (--preset, --layers, --emb-dim, --hid-dim, --share-embed).")
    model.load_state_dict(ckpt.state_dict)  # copied into the model's float32 parameters
