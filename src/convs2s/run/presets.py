"""Presets: every value one training run needs, as one frozen dataclass each (:class:`Preset`),
and the course's named presets (:data:`PRESETS`): ``quick`` for tests and quick mode, ``cpu`` and
``cpu_subword`` for a laptop, ``gpu`` and ``gpu_subword`` for one GPU.

A preset's model is a :class:`convs2s.model.convs2s.ConvS2SConfig` without its vocabulary
fields (the vocabularies are made from the data when the run starts):
``preset.model.with_vocabularies(src_vocab, trg_vocab)`` completes it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from dataclasses import dataclass

from convs2s.data import LANGUAGE_NAMES, LANGUAGES, check_direction
from convs2s.data.subword import MODEL_TYPES, TOKENIZER_KINDS, SubwordSettings
from convs2s.model.convs2s import VOCABULARY_FIELDS, ConvS2SConfig, current_names
from convs2s.system.arguments import brief
from convs2s.system.compiling import check_mode

#: The model fields a preset sets (every ConvS2SConfig field but the vocabulary ones).
MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ConvS2SConfig)
                     if f.name not in VOCABULARY_FIELDS)

#: A preset's model unless it says otherwise: ConvS2S's defaults, but 100 positions (not 128).
DEFAULT_MODEL = ConvS2SConfig(max_positions=100)

#: The model fields a preset's record always holds, in its order (those a preset had before the
#: model had a configuration); the others are recorded only where they differ from the default.
RECORDED_MODEL_FIELDS = ("emb_dim", "hid_dim", "enc_layers", "dec_layers", "kernel_size",
                         "dropout", "max_positions", "init", "weight_norm",
                         "share_input_output_embed")

#: Training fields added after checkpoints first recorded presets, with the value every run
#: trained with before them: a preset's record holds one only where it differs (so a record at
#: these values is the one recorded before), and a record without it was trained with this value.
FIELDS_ADDED_LATER = {"rdrop": 0.0, "subword_sampling": 0.0, "distilled": None,
                      "distilled_mix": "replace", "extra_sources": (), "init_from": None}

#: How a run trains on a distilled file (``distilled_mix``, ``--distilled-mix``): the teacher's
#: outputs instead of the references, or beside them.
DISTILLED_MIXES = ("replace", "add")

#: The one target extra sources apply to: Multi30k's captions were written in English, and its
#: German, French and Czech lines translate them, so only into English do the other languages
#: give more sources of the same targets (issue 62).
EXTRA_SOURCES_TARGET = "en"

#: The largest R-Drop weight a preset takes (issue 62's bound).
MAX_RDROP = 10.0


@dataclass(frozen=True)
class Preset:
    """Every value one training run needs. Copy one with :meth:`replace` to change it.

    ``as_dict()`` is its flat form, what a checkpoint records (the model's fields beside the
    others, one level, so that a record reads as one table); ``Preset.from_dict`` reads it
    back.
    """

    name: str
    model: ConvS2SConfig = DEFAULT_MODEL  # the model, without its vocabularies
    # data
    src_lang: str = "de"
    trg_lang: str = "en"
    tokenizer: str = "word"  # "word" (spaCy, lower-cased if lower) or "subword" (cased pieces)
    lower: bool = True  # word only
    min_freq: int = 2  # word only
    vocab_size: int = 8000  # subword only: pieces per vocabulary (specials included)
    joint_vocab: bool = True  # subword only: one vocabulary for both sides, or one per side
    subword_model: str = "bpe"  # subword only: sentencepiece's "bpe" or "unigram"
    # subword only: subword regularisation (convs2s.data.subword.TextPipeline.sample). > 0: each
    # epoch the training pairs are segmented afresh at random with this alpha (BPE-dropout's
    # probability, or the unigram sampling's smoothing), validation and translation always the
    # best segmentation. 0: off, the training pairs segmented once, the best way
    subword_sampling: float = 0.0
    train_pairs: int | None = None  # None: the whole training set; n: its first n pairs
    # sequence-level knowledge distillation (Kim & Rush, 2016; convs2s.run.distill writes the
    # file): a UTF-8 file of one target sentence per training pair, a teacher's translations of
    # the training split's sources. None: the references only
    distilled: str | None = None
    # "replace": train on the teacher's targets alone; "add": on the references and them (every
    # source twice). Validation always scores the real references
    distilled_mix: str = "replace"
    # more source languages of the same English targets (subword, into English only): each
    # adds its training pairs (its captions, the same targets); the vocabulary is learned on all
    # the sources and the target; validation stays in the preset's direction. (): none
    extra_sources: tuple[str, ...] = ()
    # continued training (issue 62): the run's first weights, vocabularies and text pipeline are
    # this checkpoint's (a run's best.pt or final.pt, or a shipped model), the same architecture;
    # the optimizer, warm-up and schedule start afresh. None: weights initialised at random
    init_from: str | None = None
    valid_pairs: int | None = None
    max_tokens: int = 4096  # padded tokens per batch (source or target side, the larger)
    # optimisation
    optimizer: str = "adamw"  # "adamw" or "nesterov" (the paper's)
    lr: float = 1e-3
    weight_decay: float = 1e-4
    momentum: float = 0.99  # nesterov only
    clip_norm: float = 0.1  # the paper's gradient clipping
    label_smoothing: float = 0.1
    # R-Drop (convs2s.model.loss.rdrop_loss): each batch twice, two dropout masks, this weight
    # times their symmetric KL added to the mean of their losses. 0: off, one pass a batch
    rdrop: float = 0.0
    warmup_steps: int = 200
    lr_shrink: float = 0.5  # multiply the LR by this when validation loss does not improve
    min_lr: float = 1e-5
    epochs: int = 30
    max_steps: int | None = None
    max_minutes: float | None = None
    patience: int = 4  # epochs without improvement before stopping early
    seed: int = 1234
    amp: bool = True  # mixed precision on CUDA (convs2s.run.precision): bf16, or fp16 on a T4
    # the final model (convs2s.run.final_choices): keep the last average_last epochs' weights,
    # then choose on validation between best.pt and their averages, and beam search's length
    # penalty; the time budget keeps room for it. 0: no final.pt (this course's choice, not the
    # paper's)
    average_last: int = 0
    final_beam: int = 5
    final_pairs: int | None = None  # the first n validation pairs decide (None: all of them)
    # torch.compile the training step (convs2s.run.compiled_training): None (eager) or
    # a mode of convs2s.system.compiling.COMPILE_MODES. How a step runs, not what it trains
    # (like the device): as_dict leaves it out, so a checkpoint does not record it and a run
    # resumes with or without it.
    compile: str | None = None

    def __post_init__(self):
        if not isinstance(self.model, ConvS2SConfig):
            raise TypeError(f"model must be a ConvS2SConfig, not a {type(self.model).__name__}; "
                            "Preset.from_dict reads a recorded (flat) preset.")
        given = [name for name in VOCABULARY_FIELDS if getattr(self.model, name) is not None]
        if given:
            raise ValueError(f"A preset's model leaves {', '.join(given)} to the vocabularies: "
                             "set them to None (the run fills them from its data).")
        check_direction(self.src_lang, self.trg_lang)
        if self.tokenizer not in TOKENIZER_KINDS:
            raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZER_KINDS)}, not "
                             f"{brief(self.tokenizer, 40)}.")
        if self.tokenizer == "subword":
            self.subword_settings()  # checks vocab_size, joint_vocab, subword_model
        elif self.subword_model not in MODEL_TYPES:
            raise ValueError(f"subword_model must be one of {', '.join(MODEL_TYPES)}.")
        if not (isinstance(self.epochs, numbers.Integral) and self.epochs >= 1):
            raise ValueError(f"epochs must be a whole number >= 1, not {brief(self.epochs, 40)}.")
        if self.max_steps is not None and not (isinstance(self.max_steps, numbers.Integral)
                                               and self.max_steps >= 1):
            raise ValueError(f"max_steps must be None or a whole number >= 1, not "
                             f"{brief(self.max_steps, 40)}.")
        if self.max_minutes is not None and not (isinstance(self.max_minutes, numbers.Real)
                                                 and 0 < self.max_minutes < math.inf):
            raise ValueError(f"max_minutes must be None or a number of minutes > 0, not "
                             f"{brief(self.max_minutes, 40)}.")
        if self.final_pairs is not None and (isinstance(self.final_pairs, bool) or not isinstance(
                self.final_pairs, numbers.Integral) or self.final_pairs < 1):
            raise ValueError(f"final_pairs must be None or a whole number >= 1, not "
                             f"{brief(self.final_pairs, 40)}.")
        for name, top in (("lr", math.inf), ("lr_shrink", 1)):  # a huge lr: tests diverge
            value = getattr(self, name)
            if isinstance(value, bool) or not (isinstance(value, numbers.Real) and 0 < value <= top
                                               and math.isfinite(value)):
                raise ValueError(f"{name} must be a number above 0" + (
                    " and at most 1" if top == 1 else "") + f", not {brief(value, 40)}.")
        if isinstance(self.rdrop, bool) or not (isinstance(self.rdrop, numbers.Real)
                                                and 0 <= self.rdrop <= MAX_RDROP):  # NaN too
            raise ValueError(f"rdrop must be a number from 0 to {MAX_RDROP:g}, not "
                             f"{brief(self.rdrop, 40)}.")
        if isinstance(self.subword_sampling, bool) or not (
                isinstance(self.subword_sampling, numbers.Real)
                and 0 <= self.subword_sampling <= 1):  # NaN too
            raise ValueError(f"subword_sampling must be a number from 0 (off) to 1, not "
                             f"{brief(self.subword_sampling, 40)}.")
        if self.subword_sampling and self.tokenizer != "subword":
            raise ValueError("subword_sampling (--subword-sampling) samples segmentations of "
                             "subword pieces: it needs the subword tokenizer (--tokenizer "
                             f"subword), not {self.tokenizer}.")
        self._check_training_data()
        if self.compile is not None:
            check_mode(self.compile)
        for name in ("average_last", "final_beam"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < (
                    0 if name == "average_last" else 1):
                raise ValueError(f"{name} must be a whole number >= "
                                 f"{0 if name == 'average_last' else 1}, not {brief(value, 40)}.")

    def _check_training_data(self) -> None:
        """``distilled``, ``distilled_mix``, ``init_from`` and ``extra_sources``: their types,
        and a one-line ``ValueError`` where they do not apply (extra sources into another
        language than English, or with words). ``distilled`` and ``init_from`` become a
        ``str``, ``extra_sources`` a tuple in :data:`LANGUAGES`' order (``("cs", "fr")`` and
        ``["fr", "cs"]`` are one setting)."""
        for name, what in (("distilled", "a file of target sentences"),
                           ("init_from", "a checkpoint")):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, value := os.fspath(value))
            if value is not None and not (isinstance(value, str) and value.strip()):
                raise ValueError(f"{name} must be None or the path of {what}, not "
                                 f"{brief(value, 40)}.")
        if self.distilled_mix not in DISTILLED_MIXES:
            raise ValueError(f"distilled_mix must be one of {', '.join(DISTILLED_MIXES)}, not "
                             f"{brief(self.distilled_mix, 40)}.")
        if self.distilled is None and self.distilled_mix != FIELDS_ADDED_LATER["distilled_mix"]:
            raise ValueError(f"distilled_mix {self.distilled_mix!r} (--distilled-mix) says how to "
                             "use a distilled file, and none is given: add distilled "
                             "(--distilled FILE), or leave distilled_mix out.")
        langs = self.extra_sources
        if isinstance(langs, str) or not isinstance(langs, (tuple, list)) or not all(
                isinstance(lang, str) for lang in langs):
            raise ValueError(f"extra_sources must be a tuple of languages (e.g. ('fr', 'cs')), "
                             f"not {brief(langs, 40)}.")
        unknown = [lang for lang in langs if lang not in LANGUAGES]
        if unknown:
            raise ValueError(f"extra_sources (--extra-sources): Multi30k has no language "
                             f"{brief(unknown[0], 20)}; choose from {', '.join(LANGUAGES)}.")
        if len(set(langs)) != len(langs):
            raise ValueError(f"extra_sources (--extra-sources) names a language twice: "
                             f"{', '.join(langs)}.")
        object.__setattr__(self, "extra_sources", tuple(sorted(langs, key=LANGUAGES.index)))
        if not langs:
            return
        if self.trg_lang != EXTRA_SOURCES_TARGET:
            raise ValueError(
                "extra_sources (--extra-sources) adds other captions of the same English "
                "targets (Multi30k's German, French and Czech lines translate its English "
                "ones): it applies to a run into English (--trg en), not into "
                f"{LANGUAGE_NAMES[self.trg_lang]}.")
        same = [lang for lang in langs if lang in (self.src_lang, self.trg_lang)]
        if same:
            side = "source" if same[0] == self.src_lang else "target"
            raise ValueError(f"extra_sources (--extra-sources) names the run's own {side} "
                             f"language {same[0]}: give the other languages only.")
        if self.tokenizer != "subword":
            raise ValueError("extra_sources (--extra-sources) needs the subword tokenizer "
                             "(--tokenizer subword): one vocabulary learned on every source "
                             f"language, where the word tokenizer is {self.src_lang}'s alone.")

    def subword_settings(self) -> SubwordSettings:
        return SubwordSettings(vocab_size=self.vocab_size, joint=self.joint_vocab,
                               model_type=self.subword_model)

    def as_dict(self) -> dict:
        """The flat form a checkpoint records: ``name``, the model's fields (not the vocabulary
        ones; those of :data:`RECORDED_MODEL_FIELDS`, then any other not at its default), then
        the other fields but ``compile`` (how the steps ran, not what they trained) and those of
        :data:`FIELDS_ADDED_LATER` at their value. For every preset that could be written before
        the model had a configuration, this is the dict checkpoints recorded then."""
        out = {"name": self.name}
        out.update((name, getattr(self.model, name)) for name in RECORDED_MODEL_FIELDS)
        out.update((name, getattr(self.model, name)) for name in MODEL_FIELDS
                   if name not in out and getattr(self.model, name) != getattr(DEFAULT_MODEL, name))
        out.update((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                   if f.name not in ("name", "model", "compile") and not (
                       f.name in FIELDS_ADDED_LATER
                       and getattr(self, f.name) == FIELDS_ADDED_LATER[f.name]))
        return out

    @classmethod
    def from_dict(cls, record: dict) -> Preset:
        """The preset a checkpoint recorded: the flat form of :meth:`as_dict` (also one from
        before the model had a configuration, which may lack fields added later: they take
        their defaults), or ``dataclasses.asdict``'s, with the model as a dict under
        ``"model"``. ``ValueError`` for a field no preset has."""
        try:  # a field saved under an old name (model.convs2s.RENAMED_FIELDS) still loads
            record = current_names(dict(record))
            if isinstance(record.get("model"), dict):
                record["model"] = ConvS2SConfig(**current_names(record["model"]))
        except TypeError as e:
            raise ValueError(str(e)) from None
        return cls(**_split(record, DEFAULT_MODEL))

    def replace(self, **changes) -> Preset:
        """A copy with ``changes``, which may name the model's fields too
        (``preset.replace(hid_dim=128, epochs=3)``)."""
        return dataclasses.replace(self, **_split(changes, self.model))


def _split(changes: dict, model: ConvS2SConfig) -> dict:
    """``changes`` with the model's fields among them moved into a copy of ``model``."""
    known = {f.name for f in dataclasses.fields(Preset)}
    unknown = sorted(k for k in changes if k not in known and k not in MODEL_FIELDS)
    if unknown:
        raise ValueError(f"A preset has no field {', '.join(unknown)}.")
    model_changes = {k: changes.pop(k) for k in MODEL_FIELDS if k in changes}
    if model_changes:
        if "model" in changes:
            raise ValueError(f"Give model=... or the model's fields ({', '.join(model_changes)}), "
                             "not both.")
        changes["model"] = dataclasses.replace(model, **model_changes)
    return changes


PRESETS: dict[str, Preset] = {
    # CI and quick mode: a tiny model on a slice of the data, seconds on a laptop CPU.
    "quick": Preset(
        name="quick",
        model=ConvS2SConfig(emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, dropout=0.1,
                            max_positions=100),
        train_pairs=2000, valid_pairs=200, max_tokens=1500, lr=3e-3, warmup_steps=10,
        epochs=3, patience=2,
    ),
    # The quick preset with cased subwords (a 1,000-piece joint vocabulary): tests and quick
    # mode of the subword sections. Not tuned.
    "quick_subword": Preset(
        name="quick_subword",
        model=ConvS2SConfig(emb_dim=64, hid_dim=64, enc_layers=2, dec_layers=2, dropout=0.1,
                            max_positions=100, share_input_output_embed=True),
        train_pairs=2000, valid_pairs=200, max_tokens=1500, lr=3e-3, warmup_steps=10,
        epochs=3, patience=2, tokenizer="subword", vocab_size=1000, average_last=3,
        final_pairs=60,
    ),
    # A laptop without a GPU: a 5M-parameter model with a 25-minute budget.
    "cpu": Preset(
        name="cpu",
        model=ConvS2SConfig(emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, dropout=0.2,
                            max_positions=100),
        max_tokens=3000, lr=2e-3, warmup_steps=200, epochs=15, max_minutes=25, patience=3,
    ),
    # The cpu preset on cased subwords (one joint 8,000-piece sentencepiece BPE vocabulary
    # learned on the training split): the quality benchmark's preset for every direction, with
    # a 30-minute budget. Notebook 05 trains it; 06 evaluates it.
    "cpu_subword": Preset(
        name="cpu_subword",
        model=ConvS2SConfig(emb_dim=256, hid_dim=256, enc_layers=4, dec_layers=4, dropout=0.2,
                            max_positions=100, share_input_output_embed=True),
        max_tokens=3000, lr=2e-3, warmup_steps=200, epochs=30, max_minutes=30, patience=3,
        tokenizer="subword", vocab_size=8000, joint_vocab=True, average_last=5,
    ),
    # One GPU (a free Colab T4 fits it): the classic tutorial's size, 10+10 layers. A 30-minute
    # budget, like the CPU runs: a free Colab session disconnects after about 90 minutes without
    # interaction and its GPU time is rationed, so notebook 05 on Colab must not train for hours
    # (the budget also makes the GPU and CPU figures comparable).
    "gpu": Preset(
        name="gpu",
        model=ConvS2SConfig(emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10,
                            dropout=0.25, max_positions=100),
        max_tokens=8000, lr=1e-3, warmup_steps=400, epochs=40, patience=5, max_minutes=30,
    ),
    # The gpu preset on cpu_subword's vocabulary (what notebook 05 trains on a GPU), with the
    # same 30-minute budget.
    "gpu_subword": Preset(
        name="gpu_subword",
        model=ConvS2SConfig(emb_dim=256, hid_dim=512, enc_layers=10, dec_layers=10,
                            dropout=0.25, max_positions=100, share_input_output_embed=True),
        max_tokens=8000, lr=1e-3, warmup_steps=400, epochs=40, patience=5, max_minutes=30,
        tokenizer="subword", vocab_size=8000, joint_vocab=True, average_last=5,
    ),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"Unknown preset {brief(name, 40)}; choose one of "
                         f"{sorted(PRESETS)}.") from None


