"""Datasets and batches: :class:`TranslationDataset` numericalises the pairs once, dropping
over-long examples (and again from other segmentations: ``resegment``); :func:`make_loader`
batches them with :class:`BucketBatchSampler` (similar lengths together, so little padding) into
right-padded ``(src, trg)`` LongTensors ``[batch, len]``.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from convs2s.data.vocab import Vocab
from convs2s.system.arguments import WrongType, brief


def check_length(
    tokens: Sequence, max_len: int | None, *, extra: int = 0, what: str = "source sentence"
) -> None:
    """Raise ``ValueError`` if ``len(tokens) + extra`` positions exceed ``max_len``.

    ``extra`` counts positions the model adds (2 for bos and eos). ``max_len=None`` checks
    nothing. The translator calls this so an over-long input fails with a clear message instead
    of an index error deep inside the positional embedding.
    """
    if max_len is None:
        return
    n = len(tokens) + extra
    if n > max_len:
        added = f" ({len(tokens)} tokens + {extra} for <bos>/<eos>)" if extra else f" ({n} tokens)"
        raise ValueError(
            f"The {what} is {n} positions long{added}, but the model handles at most "
            f"{max_len}. Shorten it or split it into several sentences."
        )


class TranslationDataset(Dataset):
    """Numericalised ``(src_ids, trg_ids)`` LongTensor pairs, built once at construction.

    ``src`` is the source token ids (wrapped in bos/eos only if ``src_bos_eos=True``, as
    bentrevett's torchtext tutorials did); ``trg`` is ``<bos> ... <eos>``. With ``max_len``, an
    example whose source or target (counting bos/eos) is longer than ``max_len`` positions is
    dropped; ``n_dropped`` says how many, and a warning reports it.

    Attributes: ``pairs`` (the raw pairs kept), ``indices`` (their positions in the input),
    ``src_lengths``/``trg_lengths`` (lengths of the stored tensors), ``src_vocab``/``trg_vocab``.
    :meth:`resegment` replaces the examples' tokens with others of the same pairs (subword
    sampling); the examples kept stay those of the tokenizers given here.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[str, str]],
        src_tokenizer: Callable[[str], list[str]],
        trg_tokenizer: Callable[[str], list[str]],
        src_vocab: Vocab,
        trg_vocab: Vocab,
        *,
        max_len: int | None = None,
        src_bos_eos: bool = False,
    ):
        if max_len is not None and max_len < 3:
            raise ValueError(f"max_len must be at least 3 (<bos> x <eos>), got {max_len}.")
        pairs = sentence_pairs(pairs)
        self.src_vocab, self.trg_vocab = src_vocab, trg_vocab
        self.max_len, self.src_bos_eos = max_len, src_bos_eos
        self.pairs: list[tuple[str, str]] = []
        self.indices: list[int] = []
        self.src: list[torch.Tensor] = []
        self.trg: list[torch.Tensor] = []
        n = 0
        for n, (s, t) in enumerate(pairs, start=1):
            src = src_vocab.encode(src_tokenizer(s), add_bos_eos=src_bos_eos)
            trg = trg_vocab.encode(trg_tokenizer(t), add_bos_eos=True)
            if max_len is not None and (len(src) > max_len or len(trg) > max_len):
                continue
            self.pairs.append((s, t))
            self.indices.append(n - 1)
            self.src.append(torch.tensor(src, dtype=torch.long))
            self.trg.append(torch.tensor(trg, dtype=torch.long))
        self.n_dropped = n - len(self.pairs)
        if self.n_dropped:
            warnings.warn(
                f"TranslationDataset: dropped {self.n_dropped} of {n} examples longer than "
                f"max_len={max_len} positions (source, or target with <bos>/<eos>).",
                UserWarning,
                stacklevel=2,
            )
        self.src_lengths = [len(x) for x in self.src]
        self.trg_lengths = [len(x) for x in self.trg]
        self._first: tuple[list[torch.Tensor], list[torch.Tensor]] | None = None

    def resegment(self, tokens: Sequence[tuple[Sequence[str], Sequence[str]]]) -> int:
        """Numericalise the examples again from ``tokens``, one ``(source tokens, target
        tokens)`` per example of ``pairs``, in its order (another segmentation of the same
        text: :meth:`convs2s.data.subword.TextPipeline.sample`). An example whose new source or
        target is longer than ``max_len`` keeps its tensors from construction, so the examples
        stay the same ones; returns how many kept them. ``src_lengths``/``trg_lengths`` follow
        (give them to the batch sampler: :meth:`BucketBatchSampler.set_lengths`)."""
        if len(tokens) != len(self.pairs):
            raise ValueError(f"resegment takes the tokens of the dataset's {len(self.pairs)} "
                             f"examples, not of {len(tokens)}.")
        if self._first is None:
            self._first = (self.src, self.trg)
        first_src, first_trg = self._first
        src_out, trg_out, kept = [], [], 0
        for i, (s, t) in enumerate(tokens):
            src = self.src_vocab.encode(s, add_bos_eos=self.src_bos_eos)
            trg = self.trg_vocab.encode(t, add_bos_eos=True)
            if self.max_len is not None and (len(src) > self.max_len
                                             or len(trg) > self.max_len):
                src_out.append(first_src[i])
                trg_out.append(first_trg[i])
                kept += 1
            else:  # through numpy: ten times faster than torch.tensor for short lists
                src_out.append(torch.from_numpy(np.array(src, dtype=np.int64)))
                trg_out.append(torch.from_numpy(np.array(trg, dtype=np.int64)))
        self.set_examples(src_out, trg_out)
        return kept

    def set_examples(self, src: Sequence[torch.Tensor], trg: Sequence[torch.Tensor]) -> None:
        """The examples' ids from now on, one ``(src[i], trg[i])`` per example of ``pairs`` in
        its order: what an earlier :meth:`resegment` made (a resumed run puts back the
        segmentation it trained on). The caller checks that they are ids of the same pairs;
        ``src_lengths``/``trg_lengths`` follow."""
        if not len(src) == len(trg) == len(self.pairs):
            raise ValueError(f"set_examples takes the ids of the dataset's {len(self.pairs)} "
                             f"examples, not of {len(src)} and {len(trg)}.")
        if self._first is None:
            self._first = (self.src, self.trg)
        self.src, self.trg = list(src), list(trg)
        self.src_lengths = [len(x) for x in self.src]
        self.trg_lengths = [len(x) for x in self.trg]

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.src[i], self.trg[i]

    def __repr__(self) -> str:
        return (
            f"TranslationDataset({len(self)} examples, {self.n_dropped} dropped, "
            f"max_len={self.max_len})"
        )


def _is_pair(item: object) -> bool:
    """Whether ``item`` unpacks into two sides (a tuple or list of two, not a string of two)."""
    return (not isinstance(item, str | bytes | Mapping) and hasattr(item, "__len__")
            and len(item) == 2)


def _iterable(x: object) -> bool:
    """Whether ``x`` is a collection of items a loop reads (not a string, not a dict): what
    ``for`` takes, an ``__iter__`` or (a map-style ``Dataset``) a ``__getitem__``."""
    return (not isinstance(x, str | bytes | Mapping)
            and (isinstance(x, Iterable) or hasattr(x, "__getitem__")))


def sentence_pairs(pairs) -> Sequence:
    """``pairs`` as a sequence, checked before any is tokenized to hold (source, target)
    pairs: a one-line ``TypeError`` (a ``ValueError`` too) for load_multi30k's dict, a list of
    sentences or one pair."""
    example = "pairs must be a list of (source, target) sentence pairs, e.g. data['train']"
    if isinstance(pairs, Mapping):
        keys = ", ".join(map(repr, list(pairs)[:4]))
        raise WrongType(f"{example}, not a {type(pairs).__name__} (keys {keys}).")
    if not _iterable(pairs):
        raise WrongType(f"{example}, not {type(pairs).__name__}.")
    if not isinstance(pairs, Sequence):  # an iterator: read once, here
        pairs = list(pairs)
    for i, item in enumerate(pairs):
        if not _is_pair(item):
            raise WrongType(f"{example}, not a {type(pairs).__name__} holding "
                            f"{type(item).__name__} (item {i}: {brief(item)}).")
    return pairs


class _IdPairs(Dataset):
    """Already numericalised ``(src_ids, trg_ids)`` pairs (lists or tensors) as a dataset."""

    def __init__(self, pairs: Sequence[tuple[Sequence[int], Sequence[int]]]):
        self.src = [torch.as_tensor(s, dtype=torch.long) for s, _ in pairs]
        self.trg = [torch.as_tensor(t, dtype=torch.long) for _, t in pairs]
        self.src_lengths = [len(x) for x in self.src]
        self.trg_lengths = [len(x) for x in self.trg]

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.src[i], self.trg[i]


# --------------------------------------------------------------------------------------------
# Batching
# --------------------------------------------------------------------------------------------


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of example indices, similar lengths together; reproducible and DDP-shardable.

    ``lengths`` holds one entry per example: an int, or a ``(src_len, trg_len)`` pair. Give
    exactly one of ``batch_size`` (examples per batch) or ``max_tokens`` (a bound on the padded
    size of every batch: examples x longest side of the longest example).

    One epoch, with ``bucket=True``: shuffle the indices (seeded by ``seed`` and the epoch),
    split them into chunks of about ``chunk_batches`` batches, sort each chunk by length (source
    first, then target), cut it into batches, and shuffle the batch order. With
    ``bucket=False`` the shuffled indices are cut into batches as they come (plain random
    batches, for comparison). With ``shuffle=False`` nothing is shuffled: ``bucket=False`` then
    keeps the dataset's order (what evaluation wants).

    Every example is in exactly one batch per epoch. With ``num_replicas`` > 1 (DDP), rank
    ``rank`` gets every ``num_replicas``-th batch; when the batch count does not divide evenly,
    the largest batches are split in two until it does, so the ranks get disjoint batches, the
    same number each, and together every example once.

    Epochs: each ``iter()`` uses the current epoch and then advances it by one, so a plain loop
    gets a new order every epoch. ``set_epoch(e)`` picks the epoch of the next ``iter()`` (as
    with ``DistributedSampler``): calling it every epoch, or resuming from a checkpoint, gives the
    same batches as an uninterrupted run with the same seed.
    """

    def __init__(
        self,
        lengths: Sequence[int] | Sequence[tuple[int, int]],
        *,
        batch_size: int | None = None,
        max_tokens: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        bucket: bool = True,
        num_replicas: int | None = None,
        rank: int | None = None,
        chunk_batches: int = 100,
    ):
        if (batch_size is None) == (max_tokens is None):
            raise ValueError(
                "Give exactly one of batch_size (examples per batch) or max_tokens (padded "
                f"tokens per batch); got batch_size={batch_size}, max_tokens={max_tokens}."
            )
        if batch_size is not None and (isinstance(batch_size, bool)
                                       or not isinstance(batch_size, numbers.Integral)):
            raise WrongType(f"batch_size must be a number of examples (an int), not "
                            f"{brief(batch_size)}.")
        if max_tokens is not None and (isinstance(max_tokens, bool)
                                       or not isinstance(max_tokens, numbers.Real)):
            raise WrongType(f"max_tokens must be a number of padded tokens (an int), not "
                            f"{brief(max_tokens)}.")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}.")
        if chunk_batches < 1:
            raise ValueError(f"chunk_batches must be at least 1, got {chunk_batches}.")
        if num_replicas is None or rank is None:
            dist = torch.distributed
            ddp = dist.is_available() and dist.is_initialized()
            if num_replicas is None:
                num_replicas = dist.get_world_size() if ddp else 1
            if rank is None:
                rank = dist.get_rank() if ddp else 0
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(
                f"Need num_replicas >= 1 and 0 <= rank < num_replicas; got "
                f"num_replicas={num_replicas}, rank={rank}."
            )
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self._set_lengths(lengths)
        if len(self.lengths) and len(self.lengths) < num_replicas:
            raise ValueError(f"{len(self.lengths)} examples cannot fill {num_replicas} replicas.")
        self.shuffle, self.seed, self.bucket = shuffle, seed, bucket
        self.num_replicas, self.rank, self.chunk_batches = num_replicas, rank, chunk_batches
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None

    def _set_lengths(self, lengths: Sequence[int] | Sequence[tuple[int, int]]) -> None:
        lens = np.asarray(lengths, dtype=np.int64)
        if lens.ndim == 1:
            lens = lens[:, None]
        if lens.ndim != 2 or (len(lens) and lens.min() < 0):
            raise ValueError("lengths must be non-negative ints or (src_len, trg_len) pairs.")
        size = lens.max(axis=1) if lens.shape[1] else np.zeros(len(lens), np.int64)
        if self.max_tokens is not None and len(lens) and size.max() > self.max_tokens:
            i = int(size.argmax())
            raise ValueError(
                f"Example {i} alone is {int(size[i])} tokens long, more than "
                f"max_tokens={self.max_tokens}; raise max_tokens or drop long examples with "
                "max_len."
            )
        self.lengths, self.size = lens, size

    def set_lengths(self, lengths: Sequence[int] | Sequence[tuple[int, int]]) -> None:
        """New lengths for the same examples (their tokens changed:
        :meth:`TranslationDataset.resegment`); the batches are cut from them from now on."""
        if len(lengths) != len(self.lengths):
            raise ValueError(f"set_lengths takes the lengths of the sampler's {len(self.lengths)} "
                             f"examples, not of {len(lengths)}.")
        self._set_lengths(lengths)
        self._cache = None

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next iteration (each ``iter()`` then advances it by one)."""
        self.epoch = int(epoch)

    def _cut(self, order: np.ndarray) -> list[np.ndarray]:
        if self.batch_size is not None:
            return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        # greedy: grow the batch while (examples x longest example) stays within max_tokens
        batches, start, longest = [], 0, 0
        for i, size in enumerate(self.size[order].tolist()):
            if i > start and (i - start + 1) * max(longest, size) > self.max_tokens:
                batches.append(order[start:i])
                start, longest = i, size
            else:
                longest = max(longest, size)
        if start < len(order):
            batches.append(order[start:])
        return batches

    def batches(self, epoch: int | None = None) -> list[list[int]]:
        """All batches of ``epoch`` (default: the next one) for every rank, before sharding."""
        epoch = self.epoch if epoch is None else epoch
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        n = len(self.lengths)
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        if self.bucket:
            if self.batch_size is not None:
                chunk = self.batch_size * self.chunk_batches
            else:
                typical = max(1.0, float(np.mean(self.size))) if n else 1.0
                chunk = max(1, int(self.max_tokens / typical)) * self.chunk_batches
            batches = []
            for c in range(0, n, chunk):
                idx = order[c : c + chunk]
                lens = self.lengths[idx]
                # sort by source length, ties by target length; lexsort is stable
                keys = tuple(lens[:, j] for j in reversed(range(lens.shape[1])))
                batches += self._cut(idx[np.lexsort(keys)] if keys else idx)
        else:
            batches = self._cut(order)
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        while len(batches) % self.num_replicas:
            i = max(range(len(batches)), key=lambda j: len(batches[j]))
            b = batches[i]
            half = (len(b) + 1) // 2
            batches[i : i + 1] = [b[:half], b[half:]]
        result = [[int(j) for j in b] for b in batches]
        self._cache = (epoch, result)
        return result

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        return iter(self.batches(epoch)[self.rank :: self.num_replicas])

    def __len__(self) -> int:
        return len(self.batches()) // self.num_replicas


class PadCollate:
    """Stack ``(src, trg)`` examples into right-padded ``[batch, len]`` LongTensors."""

    def __init__(self, src_pad_idx: int, trg_pad_idx: int | None = None):
        self.src_pad_idx = src_pad_idx
        self.trg_pad_idx = src_pad_idx if trg_pad_idx is None else trg_pad_idx

    def __call__(self, batch):
        srcs, trgs = zip(*batch, strict=True)
        pad = torch.nn.utils.rnn.pad_sequence
        return (
            pad(list(srcs), batch_first=True, padding_value=self.src_pad_idx),
            pad(list(trgs), batch_first=True, padding_value=self.trg_pad_idx),
        )


def make_loader(
    dataset: TranslationDataset | Sequence[tuple[Sequence[int], Sequence[int]]],
    *,
    batch_size: int | None = None,
    max_tokens: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
    bucket: bool = True,
    pad_idx: int | tuple[int, int] | None = None,
    num_replicas: int | None = None,
    rank: int | None = None,
    chunk_batches: int = 100,
    num_workers: int = 0,
    pin_memory: bool = False,
) -> DataLoader:
    """A ``DataLoader`` yielding ``(src, trg)`` LongTensors ``[batch, len]``, right-padded.

    ``dataset`` is a :class:`TranslationDataset` or a sequence of ``(src_ids, trg_ids)``
    pairs. Exactly one of ``batch_size`` / ``max_tokens`` is required. Batching is by
    :class:`BucketBatchSampler` (``loader.batch_sampler``; call its ``set_epoch`` for DDP or
    resuming). ``pad_idx`` (an int, or ``(src_pad, trg_pad)``) defaults to the dataset's vocabs'.
    For evaluation in corpus order use ``shuffle=False, bucket=False``.
    """
    if not isinstance(dataset, Dataset) or not hasattr(dataset, "src_lengths"):
        dataset = _IdPairs(_id_pairs(dataset))
    if pad_idx is None:
        if not isinstance(dataset, TranslationDataset):
            raise ValueError("pad_idx is needed when the dataset is not a TranslationDataset.")
        src_pad, trg_pad = dataset.src_vocab.pad_idx, dataset.trg_vocab.pad_idx
    elif isinstance(pad_idx, tuple):
        src_pad, trg_pad = pad_idx
    else:
        src_pad = trg_pad = pad_idx
    sampler = BucketBatchSampler(
        list(zip(dataset.src_lengths, dataset.trg_lengths, strict=True)),
        batch_size=batch_size,
        max_tokens=max_tokens,
        shuffle=shuffle,
        seed=seed,
        bucket=bucket,
        num_replicas=num_replicas,
        rank=rank,
        chunk_batches=chunk_batches,
    )
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        collate_fn=PadCollate(src_pad, trg_pad),
        num_workers=num_workers,
        pin_memory=pin_memory,
    )


def _id_pairs(dataset) -> list:
    """What :func:`make_loader` takes instead of a dataset, as a list, checked to be pairs of
    token ids: a one-line ``TypeError`` (a ``ValueError`` too) for text, load_multi30k's dict or
    anything else, saying to build a :class:`TranslationDataset` first."""
    what = f"{type(dataset).__name__}"
    if _iterable(dataset):
        pairs = list(dataset)
        bad = next((p for p in pairs if not _is_pair(p)
                    or any(isinstance(side, str | bytes) for side in p)), None)
        if bad is None:
            return pairs
        text = _is_pair(bad) and all(isinstance(side, str) for side in bad)
        what = (f"pairs of text such as {brief(bad)}" if text
                else f"a {what} holding {type(bad).__name__} ({brief(bad)})")
    raise WrongType(f"make_loader takes a TranslationDataset (or (src_ids, trg_ids) pairs of "
                    f"token ids), not {what}: build TranslationDataset(pairs, tok_src, tok_trg, "
                    "src_vocab, trg_vocab) first.")


def padding_ratio(batches: Iterable[tuple[torch.Tensor, torch.Tensor]], pad_idx: int) -> float:
    """Pad tokens / all tokens, over both ``src`` and ``trg`` of every batch (0 = no padding)."""
    pads = total = 0
    for src, trg in batches:
        for x in (src, trg):
            pads += int((x == pad_idx).sum())
            total += x.numel()
    return pads / total if total else 0.0
