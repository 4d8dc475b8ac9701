"""Vocabularies: :class:`Vocab` maps tokens to ids (``<unk>``, ``<pad>``, ``<bos>``, ``<eos>``
first)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from convs2s.data.multi30k import DataError, _absolute
from convs2s.system.arguments import brief
from convs2s.system.atomic_files import write_text_atomic

_VOCAB_FORMAT = "convs2s.Vocab"
#: How a split's pairs become what :meth:`Vocab.build` takes (in its messages).
_TOKENIZED = "tok_de(de) for de, _ in pairs"


class Vocab:
    """Token <-> id maps. The first four specials play the roles unk, pad, bos, eos (in order).

    Build one with :meth:`Vocab.build`. Ids: specials first, then tokens by frequency
    (descending), ties alphabetically, so the same corpus always gives the same ids.
    """

    def __init__(self, itos: Sequence[str], specials: Sequence[str]):
        itos, specials = list(itos), list(specials)
        if len(specials) < 4:
            raise ValueError(
                "Vocab needs at least four specials, in the order unk, pad, bos, eos; "
                f"got {specials!r}."
            )
        if itos[: len(specials)] != specials:
            raise ValueError("A Vocab's token list must start with its specials.")
        if len(set(itos)) != len(itos):
            raise ValueError("A Vocab's token list has duplicates.")
        self.itos: list[str] = itos
        self.specials: tuple[str, ...] = tuple(specials)
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}
        self.unk_idx, self.pad_idx, self.bos_idx, self.eos_idx = range(4)

    @classmethod
    def build(
        cls,
        token_lists: Iterable[Sequence[str]],
        min_freq: int = 2,
        specials: Sequence[str] = ("<unk>", "<pad>", "<bos>", "<eos>"),
        max_size: int | None = None,
    ) -> Vocab:
        """A vocabulary of the tokens seen at least ``min_freq`` times in ``token_lists``.

        ``max_size`` caps the number of non-special tokens (the most frequent are kept).
        """
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1, got {min_freq}.")
        if max_size is not None and max_size < 0:
            raise ValueError(f"max_size must be None or >= 0, got {max_size}.")
        counts: Counter[str] = Counter()
        for tokens in token_lists:
            if isinstance(tokens, str):
                raise TypeError("Vocab.build takes lists of tokens, not strings; tokenize first, "
                                f"e.g. Vocab.build({_TOKENIZED}).")
            counts.update(tokens)
        # a token with a space in it is a sentence: (source, target) pairs, not token lists
        sentence = next((t for t in counts if isinstance(t, str) and " " in t and t.strip()),
                        None)
        if sentence is not None:
            raise TypeError(f"Vocab.build takes lists of tokens, not sentences (it got "
                            f"{brief(sentence)}); tokenize first, e.g. "
                            f"Vocab.build({_TOKENIZED}).")
        special_set = set(specials)
        kept = sorted(
            (t for t, n in counts.items() if n >= min_freq and t not in special_set),
            key=lambda t: (-counts[t], t),
        )
        if max_size is not None:
            kept = kept[:max_size]
        return cls(list(specials) + kept, specials)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return self.itos == other.itos and self.specials == other.specials

    __hash__ = None  # mutable-ish container semantics; equal vocabs need not share a hash

    def __repr__(self) -> str:
        return f"Vocab({len(self)} tokens, specials={self.specials!r})"

    def encode(self, tokens: Iterable[str], *, add_bos_eos: bool = False) -> list[int]:
        """Ids of ``tokens``; unknown tokens become ``unk_idx``. Optionally wrapped in bos/eos."""
        if isinstance(tokens, str):  # its characters would be tokens, nearly all <unk>
            raise TypeError("Vocab.encode takes a list of tokens, not a string; tokenize first, "
                            "e.g. vocab.encode(tok_de(sentence)).")
        ids = [self.stoi.get(t, self.unk_idx) for t in tokens]
        return [self.bos_idx, *ids, self.eos_idx] if add_bos_eos else ids

    def decode(self, ids: Iterable[int] | torch.Tensor) -> list[str]:
        """Tokens of ``ids`` (a list or 1-D tensor): stops at the first eos, drops pad and bos."""
        if isinstance(ids, torch.Tensor):
            if ids.dim() != 1:
                raise ValueError(f"decode takes one sequence (1-D), got shape {tuple(ids.shape)}.")
            ids = ids.tolist()
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_idx:
                break
            if i in (self.pad_idx, self.bos_idx):
                continue
            if not 0 <= i < len(self.itos):
                raise ValueError(f"id {i} is outside this vocabulary of {len(self)} tokens.")
            out.append(self.itos[i])
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the vocabulary as JSON, atomically (temp file in the same folder, then rename).

        A new file gets the mode the umask gives; an existing one keeps its mode."""
        path = Path(path)
        payload = {
            "format": _VOCAB_FORMAT,
            "version": 1,
            "specials": list(self.specials),
            "itos": self.itos,
        }
        write_text_atomic(path, json.dumps(payload, ensure_ascii=False))

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        """Read a vocabulary written by :meth:`save`; a malformed file raises :class:`DataError`."""
        path = _absolute(path)
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"Cannot read vocabulary file {path}: {e}") from e
        ok = (
            isinstance(payload, dict)
            and payload.get("format") == _VOCAB_FORMAT
            and isinstance(payload.get("itos"), list)
            and isinstance(payload.get("specials"), list)
            and all(isinstance(t, str) for t in payload["itos"] + payload["specials"])
        )
        if not ok:
            raise DataError(
                f"{path} is not a vocabulary file written by convs2s.data.Vocab.save "
                "(expected JSON with 'format', 'specials' and 'itos')."
            )
        try:
            return cls(payload["itos"], payload["specials"])
        except ValueError as e:
            raise DataError(f"Vocabulary file {path} is malformed: {e}") from e


