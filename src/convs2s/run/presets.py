"""Presets: every value one training run needs, as one frozen dataclass each (:class:`Preset`),
and the course's named presets (:data:`PRESETS`): ``quick`` for tests and quick mode, ``cpu`` and
``cpu_subword`` for a laptop, ``gpu`` and ``gpu_subword`` for one GPU.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from convs2s.data import check_direction
from convs2s.data.subword import KINDS, MODEL_TYPES, SubwordSettings


@dataclass(frozen=True)
class Preset:
    """Every value one training run needs. Copy one with ``dataclasses.replace`` to change it."""

    name: str
    # model (the keyword arguments of ConvS2S)
    emb_dim: int = 256
    hid_dim: int = 512
    enc_layers: int = 10
    dec_layers: int = 10
    kernel_size: int = 3
    dropout: float = 0.25
    max_positions: int = 100
    init: str = "paper"  # "paper" (fairseq's fconv) or "pytorch" (PyTorch's defaults)
    weight_norm: bool = True
    share_input_output_embed: bool = False  # fairseq's option: output layer = token embedding
    # data
    src_lang: str = "de"
    trg_lang: str = "en"
    tokenizer: str = "word"  # "word" (spaCy, lower-cased if lower) or "subword" (cased pieces)
    lower: bool = True  # word only
    min_freq: int = 2  # word only
    vocab_size: int = 8000  # subword only: pieces per vocabulary (specials included)
    joint_vocab: bool = True  # subword only: one vocabulary for both sides, or one per side
    subword_model: str = "bpe"  # subword only: sentencepiece's "bpe" or "unigram"
    train_pairs: int | None = None  # None: the whole training set; n: its first n pairs
    valid_pairs: int | None = None
    max_tokens: int = 4096  # padded tokens per batch (source or target side, the larger)
    # optimisation
    optimizer: str = "adamw"  # "adamw" or "nesterov" (the paper's)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    momentum: float = 0.99  # nesterov only
    clip_norm: float = 0.1  # the paper's gradient clipping
    label_smoothing: float = 0.1
    warmup_steps: int = 200
    lr_shrink: float = 0.5  # multiply the LR by this when validation loss does not improve
    min_lr: float = 1e-5
    epochs: int = 30
    max_steps: int | None = None
    max_minutes: float | None = None
    patience: int = 4  # epochs without improvement before stopping early
    seed: int = 1234
    amp: bool = True  # mixed precision on CUDA (convs2s.run.precision): bf16, or fp16 on a T4
    # the final model (convs2s.run.final_choices): keep the last average_last epochs' weights, then choose
    # on validation between best.pt and their averages, and beam search's length penalty; the
    # time budget keeps room for it. 0: no final.pt (this course's choice, not the paper's)
    average_last: int = 0
    final_beam: int = 5
    final_pairs: int | None = None  # the first n validation pairs decide (None: all of them)

    def __post_init__(self):
        check_direction(self.src_lang, self.trg_lang)
        if self.tokenizer not in KINDS:
            raise ValueError(f"tokenizer must be one of {', '.join(KINDS)}, not "
                             f"{self.tokenizer!r}.")
        if self.tokenizer == "subword":
            self.subword_settings()  # checks vocab_size, joint_vocab, subword_model
        elif self.subword_model not in MODEL_TYPES:
            raise ValueError(f"subword_model must be one of {', '.join(MODEL_TYPES)}.")
        if not (isinstance(self.epochs, numbers.Integral) and self.epochs >= 1):
            raise ValueError(f"epochs must be a whole number >= 1, not {self.epochs!r}.")
        if self.max_steps is not None and not (isinstance(self.max_steps, numbers.Integral)
                                               and self.max_steps >= 1):
            raise ValueError(f"max_steps must be None or a whole number >= 1, not "
                             f"{self.max_steps!r}.")
        if self.max_minutes is not None and not (isinstance(self.max_minutes, numbers.Real)
                                                 and 0 < self.max_minutes < math.inf):
            raise ValueError(f"max_minutes must be None or a number of minutes > 0, not "
                             f"{self.max_minutes!r}.")
        if self.final_pairs is not None and (isinstance(self.final_pairs, bool) or not isinstance(
                self.final_pairs, numbers.Integral) or self.final_pairs < 1):
            raise ValueError(f"final_pairs must be None or a whole number >= 1, not "
                             f"{self.final_pairs!r}.")
        for name in ("average_last", "final_beam"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < (
                    0 if name == "average_last" else 1):
                raise ValueError(f"{name} must be a whole number >= "
                                 f"{0 if name == 'average_last' else 1}, not {value!r}.")

    def subword_settings(self) -> SubwordSettings:
        return SubwordSettings(vocab_size=self.vocab_size, joint=self.joint_vocab,
                               model_type=self.subword_model)

    def model_kwargs(self) -> dict:
        keys = ("emb_dim", "hid_dim", "enc_layers", "dec_layers", "kernel_size", "dropout",
                "max_positions", "init", "weight_norm", "share_input_output_embed")
        return {k: getattr(self, k) for k in keys}


PRESETS: dict[str, Preset] = {
    # CI and quick mode: a tiny model on a slice of the data, seconds on a laptop CPU.
    "quick": Preset(
        name="quick", emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, dropout=0.1,
        train_pairs=2000, valid_pairs=200, max_tokens=1500, lr=3e-3, warmup_steps=10,
        epochs=3, patience=2,
    ),
    # The quick preset with cased subwords (a 1,000-piece joint vocabulary): tests and quick
    # mode of the subword sections. Not tuned.
    "quick_subword": Preset(
        name="quick_subword", emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, dropout=0.1,
        train_pairs=2000, valid_pairs=200, max_tokens=1500, lr=3e-3, warmup_steps=10,
        epochs=3, patience=2, tokenizer="subword", vocab_size=1000,
        share_input_output_embed=True, average_last=3, final_pairs=60,
    ),
    # A laptop without a GPU: a 5M-parameter model, 25 minutes on 2 cores. A 20-minute pilot on
    # ONE core already reached test perplexity 5.5 and tutorial-comparable BLEU 37.9 (greedy).
    "cpu": Preset(
        name="cpu", emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, dropout=0.2,
        max_tokens=3000, lr=2e-3, warmup_steps=200, epochs=15, max_minutes=25, patience=3,
    ),
    # The cpu preset on cased subwords (one joint 8,000-piece sentencepiece BPE vocabulary
    # learned on the training split): the quality benchmark's preset for every direction, with
    # the 30-minute budget on 2 cores. Notebook 05 trains it; 06 evaluates it.
    "cpu_subword": Preset(
        name="cpu_subword", emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, dropout=0.2,
        max_tokens=3000, lr=2e-3, warmup_steps=200, epochs=30, max_minutes=30, patience=3,
        tokenizer="subword", vocab_size=8000, joint_vocab=True, share_input_output_embed=True,
        average_last=5,
    ),
    # One GPU (a free Colab T4 fits it): the classic tutorial's size, 10+10 layers. A 30-minute
    # budget, like the CPU runs: a free Colab session disconnects after about 90 minutes without
    # interaction and its GPU time is rationed, so notebook 05 on Colab must not train for hours
    # (the budget also makes the GPU and CPU figures comparable). Not yet measured on a GPU.
    "gpu": Preset(
        name="gpu", emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10, dropout=0.25,
        max_tokens=8000, lr=1e-3, warmup_steps=400, epochs=40, patience=5, max_minutes=30,
    ),
    # The gpu preset on cpu_subword's vocabulary (what notebook 05 trains on a GPU), with the
    # same 30-minute budget. Not yet measured on a GPU: no GPU was lent to the sessions so far.
    "gpu_subword": Preset(
        name="gpu_subword", emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10,
        dropout=0.25, max_tokens=8000, lr=1e-3, warmup_steps=400, epochs=40, patience=5,
        max_minutes=30,
        tokenizer="subword", vocab_size=8000, joint_vocab=True, share_input_output_embed=True,
        average_last=5,
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.") from None


