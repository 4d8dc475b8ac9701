"""What a training run is built from: the preset's pairs, text pipeline, vocabularies and
datasets, the model and its optimizer, and the fingerprint a checkpoint keeps of the data.

The training pairs are the split's, or with ``preset.distilled`` the teacher's targets instead
of the references or beside them (sequence-level knowledge distillation, Kim & Rush 2016: the
file :mod:`convs2s.run.distill` writes), and with ``preset.extra_sources`` the other languages'
captions of the same English targets besides (:func:`select_pairs`). The text pipeline and the
vocabularies are learned on the references and every source (:func:`vocabulary_text`), so a
distilled student gets the vocabulary its teacher had; validation is always the split's own
pairs in the preset's direction."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import torch
from torch.utils.data import DataLoader

from convs2s.data import DataError, TranslationDataset, Vocab, load_multi30k
from convs2s.data.multi30k import LANGUAGE_NAMES, load_lines
from convs2s.data.subword import SPECIALS, TextPipeline, train_subword
from convs2s.model.convs2s import ConvS2S
from convs2s.run.checkpoint_guard import MAX_MODEL_ELEMENTS
from convs2s.run.presets import PRESETS, Preset, get_preset
from convs2s.system.arguments import WrongType

__all__ = ["MAX_MODEL_PARAMETERS", "as_preset", "build_model", "check_model_size", "fingerprint",
           "load_data", "load_extra_sources", "make_optimizer", "make_pipeline",
           "model_parameters", "prepare_data", "read_distilled", "sample_segmentations",
           "segmentation_state", "select_pairs", "set_segmentation", "vocabulary_text",
           "SEGMENTATION_TENSORS"]

#: The most parameters a training run's model may have. Far above every preset (the largest,
#: ``gpu``, has 41 million with 8,000-token vocabularies), the classic tutorial's model (about
#: 40 million) and the paper's WMT'14 models (15 + 15 layers up to thousands of channels wide,
#: with 40,000-token vocabularies: a few hundred million by fairseq's ``fconv_wmt_*``), and
#: exactly what a checkpoint may hold (:data:`convs2s.run.checkpoint_guard.MAX_MODEL_ELEMENTS`),
#: so that every model trained can be loaded again. The command line's size flags are bounded
#: one by one (``--layers`` 64, ``--emb-dim``/``--hid-dim`` 4,096); together they could ask for
#: 15 billion.
MAX_MODEL_PARAMETERS = MAX_MODEL_ELEMENTS


def as_preset(preset: Preset | str) -> Preset:
    """``preset`` itself, or the one of :data:`~convs2s.run.presets.PRESETS` it names
    (:func:`~convs2s.run.presets.get_preset`); a one-line ``TypeError`` (a ``ValueError`` too)
    for anything else (None, a dict)."""
    if isinstance(preset, str):
        return get_preset(preset)
    if not isinstance(preset, Preset):
        raise WrongType(f"preset must be a Preset or a name in PRESETS ({', '.join(PRESETS)}), "
                        f"not {type(preset).__name__}.")
    return preset


def make_optimizer(model: torch.nn.Module, preset: Preset) -> torch.optim.Optimizer:
    """AdamW by default; ``"nesterov"``: the paper's Nesterov SGD, which it tuned for WMT-sized
    data trained for days. At equal wall time on Multi30k AdamW reaches the lower validation
    loss (``benchmarks/train_choices.py``).

    On a CUDA GPU AdamW is fused: the whole update in one kernel per chunk of parameters, where
    PyTorch's default there (foreach) launches a dozen; elsewhere it is PyTorch's default."""
    if preset.optimizer == "adamw":
        fused = True if all(p.is_cuda for p in model.parameters()) else None
        return torch.optim.AdamW(model.parameters(), lr=preset.lr, betas=(0.9, 0.98),
                                 weight_decay=preset.weight_decay, fused=fused)
    if preset.optimizer == "nesterov":
        return torch.optim.SGD(model.parameters(), lr=preset.lr, momentum=preset.momentum,
                               nesterov=True, weight_decay=preset.weight_decay)
    raise ValueError(f"optimizer must be 'adamw' or 'nesterov', not {preset.optimizer!r}.")


def make_pipeline(preset: Preset, train_pairs, extra_sources=()) -> TextPipeline:
    """The preset's text pipeline; a subword one is learned on ``train_pairs`` (or its cache),
    and on ``extra_sources``' sentences as more source text (``preset.extra_sources``: one
    vocabulary for every source language, and with ``joint_vocab`` for the target too)."""
    if preset.tokenizer == "word":
        return TextPipeline.word(preset.src_lang, preset.trg_lang, lower=preset.lower)
    settings = preset.subword_settings()
    if not extra_sources:
        return TextPipeline.learn(train_pairs, preset.src_lang, preset.trg_lang, settings)
    sources = [s for s, _ in train_pairs] + list(extra_sources)
    targets = [t for _, t in train_pairs]
    if settings.joint:
        src_model = trg_model = train_subword(sources + targets, settings)
    else:
        src_model, trg_model = train_subword(sources, settings), train_subword(targets, settings)
    return TextPipeline("subword", preset.src_lang, preset.trg_lang, settings=settings,
                        src_model=src_model, trg_model=trg_model)


def prepare_data(
    preset: Preset | str, data: dict | None = None, vocabs: tuple[Vocab, Vocab] | None = None,
    pipeline: TextPipeline | None = None,
):
    """Tokenize, build (or reuse) the vocabularies and the train/valid datasets for a preset
    (or its name in :data:`~convs2s.run.presets.PRESETS`).

    ``pipeline`` (default: :func:`make_pipeline`'s, learned on :func:`vocabulary_text`)
    tokenizes; the pipeline used is ``train_ds.pipeline``. ``data``: as :func:`select_pairs`
    takes it. A ``ValueError`` (one line) if the model's ``max_positions`` leaves no training
    or no validation pair (every one too long)."""
    preset = as_preset(preset)
    data = load_data(preset) if data is None else data
    train_pairs, valid_pairs = select_pairs(preset, data)
    references, extra_sources = vocabulary_text(preset, data)
    if pipeline is None:
        pipeline = make_pipeline(preset, references, extra_sources)
    tok_src, tok_trg = pipeline.src_tokenizer, pipeline.trg_tokenizer
    if vocabs is None:
        src_vocab, trg_vocab = pipeline.vocabs(references, min_freq=preset.min_freq)
    else:
        src_vocab, trg_vocab = vocabs
    kw = dict(max_len=preset.model.max_positions)
    train_ds = TranslationDataset(train_pairs, tok_src, tok_trg, src_vocab, trg_vocab, **kw)
    valid_ds = TranslationDataset(valid_pairs, tok_src, tok_trg, src_vocab, trg_vocab, **kw)
    for ds, split in ((train_ds, "training"), (valid_ds, "validation")):
        if not len(ds):  # nothing to train on, or a validation loss of 0.0 every epoch
            raise ValueError(
                f"all {ds.n_dropped:,} {split} pairs are longer than max_positions="
                f"{preset.model.max_positions} (source, or target with <bos>/<eos>): raise "
                "max_positions.")
    train_ds.pipeline = valid_ds.pipeline = pipeline
    return train_ds, valid_ds, src_vocab, trg_vocab


def sample_segmentations(loader: DataLoader, pipeline: TextPipeline, alpha: float, seed: int,
                         epoch: int) -> int:
    """Subword regularisation: the ``loader``'s training pairs segmented afresh for ``epoch`` at
    random (:meth:`convs2s.data.subword.TextPipeline.sample` with ``alpha``, seeded by ``seed``
    and ``epoch``), and its batches cut from their new lengths. A pair whose sampled pieces are
    too long for the model keeps its best segmentation; returns how many did."""
    ds = loader.dataset
    kept = ds.resegment(pipeline.sample(ds.pairs, alpha, (seed, epoch)))
    loader.batch_sampler.set_lengths(list(zip(ds.src_lengths, ds.trg_lengths, strict=True)))
    return kept


#: The tensors of a stored segmentation (:func:`segmentation_state`), in the order they travel.
SEGMENTATION_TENSORS = ("src_lengths", "trg_lengths", "src", "trg")


def segmentation_state(loader: DataLoader, epoch: int) -> dict:
    """The training pairs' segmentation as the ``loader``'s dataset holds it now (sampled for
    ``epoch``), as plain tensors a checkpoint keeps: each side's lengths and its ids end to end.
    sentencepiece draws other samples in another process for the same seed
    (:func:`convs2s.data.subword.seeded_sampling`), so a run resumed inside an epoch puts these
    back (:func:`set_segmentation`) rather than sampling again."""
    ds = loader.dataset
    state = {"epoch": epoch}
    for side in ("src", "trg"):
        ids = getattr(ds, side)
        state[f"{side}_lengths"] = torch.tensor([len(x) for x in ids], dtype=torch.int32)
        state[side] = (torch.cat(ids) if ids else torch.zeros(0)).to(torch.int32)
    return state


def set_segmentation(loader: DataLoader, state: dict) -> None:
    """Put back a segmentation :func:`segmentation_state` stored (or the main process shared):
    the ``loader``'s examples and its batches' lengths. ``ValueError`` (one line, what is wrong)
    unless it holds, for each side, a length per training pair within the model's positions and
    that many ids of the side's vocabulary."""
    ds = loader.dataset
    limit = ds.max_len if ds.max_len is not None else float("inf")
    sides = []
    for side, vocab in (("src", ds.src_vocab), ("trg", ds.trg_vocab)):
        lengths, ids = state.get(f"{side}_lengths"), state.get(side)
        if not (_int_vector(lengths) and len(lengths) == len(ds.pairs) and (
                not len(lengths) or 0 <= int(lengths.min()) and int(lengths.max()) <= limit)):
            raise ValueError(f"its {side} lengths are not one per training pair "
                             f"({len(ds.pairs)}) within {limit} positions")
        if not (_int_vector(ids) and len(ids) == int(lengths.sum()) and (
                not len(ids) or 0 <= int(ids.min()) and int(ids.max()) < len(vocab))):
            raise ValueError(f"its {side} ids are not as many as its lengths add up to, each "
                             f"an id of the {len(vocab)}-token vocabulary")
        sides.append(list(torch.split(ids.to(torch.long), lengths.tolist())))
    ds.set_examples(*sides)
    loader.batch_sampler.set_lengths(list(zip(ds.src_lengths, ds.trg_lengths, strict=True)))


def _int_vector(x: object) -> bool:
    return (isinstance(x, torch.Tensor) and x.dim() == 1 and not x.is_floating_point()
            and not x.is_complex() and x.dtype != torch.bool and not x.is_meta)


def load_data(preset: Preset, root=None) -> dict:
    """Multi30k in the preset's direction (:func:`~convs2s.data.load_multi30k` from ``root``,
    default ``CONVS2S_DATA_DIR``), with the training pairs of its extra sources
    (:func:`load_extra_sources`)."""
    data = load_multi30k(root, src=preset.src_lang, trg=preset.trg_lang)
    return load_extra_sources(preset, data, root)


def load_extra_sources(preset: Preset, data: dict, root=None) -> dict:
    """``data`` with ``"extra_sources"``: for each language of ``preset.extra_sources``, the
    training split from it into the preset's target (``(caption, target)`` pairs), read from
    ``root`` as ``load_multi30k`` reads it; ``data`` itself when the preset has none (or
    ``data`` has them already)."""
    have = data.get("extra_sources") or {}
    missing = [lang for lang in preset.extra_sources if lang not in have]
    if not missing:
        return data
    loaded = {lang: load_multi30k(root, src=lang, trg=preset.trg_lang)["train"]
              for lang in missing}
    return {**data, "extra_sources": {**have, **loaded}}


def read_distilled(path, references: list, direction: str = "") -> list[str]:
    """The target sentences of a distilled file (:mod:`convs2s.run.distill` writes one), one
    per pair of the whole training split ``references``: :class:`~convs2s.data.DataError` in
    one line for a file that cannot be read, holds another number of lines, or an empty one."""
    lines = load_lines(path)
    split = f"the {direction} training split" if direction else "the training split"
    if len(lines) != len(references):
        raise DataError(
            f"The distilled file {path} has {len(lines):,} lines, but {split} has "
            f"{len(references):,} pairs: it must hold one target sentence per training pair, "
            "in order (python -m convs2s.run.distill --teacher CHECKPOINT --out FILE writes "
            "one).")
    empty = next((i for i, line in enumerate(lines, 1) if not line.strip()), None)
    if empty is not None:
        raise DataError(f"The distilled file {path} has an empty line (line {empty:,}): every "
                        "line is the target of a training pair. Write it again (python -m "
                        "convs2s.run.distill).")
    return lines


def select_pairs(preset: Preset, data: dict | None = None) -> tuple[list, list]:
    """The training and validation pairs a preset uses (``data`` defaults to
    :func:`load_data`'s; a given ``data`` must already be ``(source, target)`` pairs in the
    preset's direction, with ``"extra_sources"`` when the preset has them).

    The training pairs: the split's first ``train_pairs``; with ``distilled``, their targets
    replaced by the file's (``distilled_mix`` "replace") or those pairs added after them
    ("add"); then, for each of ``extra_sources``, its captions of the same targets (the
    references). The validation pairs are the split's, whatever the preset trains on."""
    if data is None:
        data = load_data(preset)
    for split in ("train", "valid"):
        if split not in data or not data[split]:
            raise ValueError(f"data has no {split!r} split; expected load_multi30k()'s dict.")
    train_pairs = data["train"][: preset.train_pairs] if preset.train_pairs else data["train"]
    valid_pairs = data["valid"][: preset.valid_pairs] if preset.valid_pairs else data["valid"]
    if preset.distilled is not None:
        direction = f"{preset.src_lang}→{preset.trg_lang}"
        targets = read_distilled(preset.distilled, data["train"], direction)
        taught = [(s, t) for (s, _), t in zip(train_pairs, targets, strict=False)]
        train_pairs = taught if preset.distilled_mix == "replace" else train_pairs + taught
    for pairs in _extra_source_pairs(preset, data):
        train_pairs = train_pairs + pairs
    return train_pairs, valid_pairs


def vocabulary_text(preset: Preset, data: dict) -> tuple[list, list[str]]:
    """What the text pipeline and the vocabularies are learned on: the split's first
    ``train_pairs`` pairs with their references (never a distilled file's targets), and the
    extra sources' captions (each target once)."""
    pairs = data["train"][: preset.train_pairs] if preset.train_pairs else data["train"]
    return pairs, [s for extra in _extra_source_pairs(preset, data) for s, _ in extra]


def _extra_source_pairs(preset: Preset, data: dict) -> list[list]:
    """The first ``train_pairs`` training pairs of each extra source, checked: the same
    targets as the preset's own training split, line by line."""
    out = []
    have = data.get("extra_sources") or {}
    targets = [t for _, t in data["train"]]
    for lang in preset.extra_sources:
        if lang not in have:
            raise ValueError(f"data has no extra_sources[{lang!r}] (the {LANGUAGE_NAMES[lang]} "
                             "training pairs); add them with "
                             "convs2s.run.prepare.load_extra_sources(preset, data, root).")
        pairs = have[lang]
        if [t for _, t in pairs] != targets:
            raise DataError(
                f"The {LANGUAGE_NAMES[lang]} training pairs do not have the training split's "
                f"{preset.trg_lang} targets line by line ({len(pairs):,} pairs, the split "
                f"{len(targets):,}): extra sources are other captions of the same targets. "
                "Use Multi30k's files of one release for every language.")
        out.append(pairs[: preset.train_pairs] if preset.train_pairs else pairs)
    return out


def fingerprint(pairs: list) -> dict:
    """How many pairs and their sha256: what a checkpoint records of the data it trained on."""
    text = json.dumps([list(p) for p in pairs], ensure_ascii=False)
    return {"pairs": len(pairs), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def model_parameters(preset: Preset, src_vocab_size: int, trg_vocab_size: int) -> int:
    """The parameters of the preset's model for vocabularies of these sizes, counted on
    PyTorch's ``meta`` device (shapes only: no memory, a fraction of a second even for
    billions)."""
    config = dataclasses.replace(preset.model, src_vocab_size=src_vocab_size,
                                 trg_vocab_size=trg_vocab_size, src_pad_idx=1, trg_pad_idx=1)
    with torch.device("meta"):
        return sum(p.numel() for p in ConvS2S(config).parameters())


def check_model_size(preset: Preset, src_vocab: Vocab | None = None,
                     trg_vocab: Vocab | None = None) -> int:
    """``ValueError`` (one line naming the limit) if the preset's model has more than
    :data:`MAX_MODEL_PARAMETERS` parameters; returns their number.

    Without the vocabularies (before the data is read) a subword model is counted with
    ``vocab_size`` tokens a side and a word model with the specials alone, so the count then is
    what the configuration itself asks for (the embeddings add to it); with them, exactly."""
    if src_vocab is not None and trg_vocab is not None:
        sizes, how = (len(src_vocab), len(trg_vocab)), ""
    elif preset.tokenizer == "subword":  # at most vocab_size pieces a side
        sizes, how = (preset.vocab_size, preset.vocab_size), "up to "
    else:
        sizes, how = (len(SPECIALS), len(SPECIALS)), "at least "
    n = model_parameters(preset, *sizes)
    if n > MAX_MODEL_PARAMETERS:
        m = preset.model
        raise ValueError(
            f"The model is too large: {m.enc_layers} + {m.dec_layers} layers, emb_dim "
            f"{m.emb_dim} and hid_dim {m.hid_dim} make {how}{n:,} parameters, and training "
            f"takes at most {MAX_MODEL_PARAMETERS:,} (convs2s.run.prepare.MAX_MODEL_PARAMETERS). "
            "Use fewer layers (--layers; enc_layers, dec_layers) or narrower ones (--emb-dim, "
            "--hid-dim; emb_dim, hid_dim).")
    return n


def build_model(preset: Preset | str, src_vocab: Vocab, trg_vocab: Vocab) -> ConvS2S:
    """The preset's model (``preset`` or its name in :data:`~convs2s.run.presets.PRESETS`)
    for these vocabularies (their sizes and padding ids); ``ValueError`` first if it would have
    more than :data:`MAX_MODEL_PARAMETERS` parameters (:func:`check_model_size`)."""
    preset = as_preset(preset)
    for vocab in (src_vocab, trg_vocab):
        if not isinstance(vocab, Vocab):
            raise WrongType("build_model takes the source and target Vocab (vocabularies), not "
                            f"{type(vocab).__name__}: build_model(preset, src_vocab, trg_vocab).")
    check_model_size(preset, src_vocab, trg_vocab)
    return ConvS2S(preset.model.with_vocabularies(src_vocab, trg_vocab))
