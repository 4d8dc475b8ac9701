"""The data pipeline: Multi30k loading, spaCy tokenizers, vocabularies, datasets and batching.

This module does on plain ``torch.utils.data`` what torchtext's ``Multi30k.splits``, ``Field``
and ``BucketIterator`` used to do:

- :func:`load_multi30k` reads (and, when they are missing, downloads and sha256-checks) the raw
  Multi30k task-1 files of one direction (any two of English, German, French and Czech; German
  to English by default) and returns ``{"train", "valid", "test"}`` lists of
  ``(source, target)`` string pairs. :func:`load_pairs` reads any parallel pair of files.
- :func:`make_tokenizer` gives a lowercasing spaCy tokenizer for a language (the word-level
  pipeline; :mod:`convs2s.subword` has the cased subword one).
- :class:`Vocab` maps tokens to ids (``<unk>``, ``<pad>``, ``<bos>``, ``<eos>`` first).
- :class:`TranslationDataset` numericalises the pairs once, dropping over-long examples.
- :func:`make_loader` batches them with :class:`BucketBatchSampler` (similar lengths together,
  so little padding) into right-padded ``(src, trg)`` LongTensors of shape ``[batch, len]``.

Typical use::

    splits = load_multi30k()
    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src_vocab = Vocab.build(tok_de(de) for de, _ in splits["train"])
    trg_vocab = Vocab.build(tok_en(en) for _, en in splits["train"])
    train = TranslationDataset(splits["train"], tok_de, tok_en, src_vocab, trg_vocab, max_len=100)
    loader = make_loader(train, batch_size=128)
    for src, trg in loader:  # src [batch, src_len], trg [batch, trg_len] = <bos> ... <eos> <pad>
        ...
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import unicodedata
import urllib.error
import urllib.request
import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from convs2s.config import data_dir
from convs2s.fileio import atomic_write, remove_stale_temps, write_text_atomic

__all__ = [
    "DataError",
    "MULTI30K_FILES",
    "MULTI30K_SHA256",
    "DEFAULT_DATA_URL",
    "LANGUAGES",
    "LANGUAGE_NAMES",
    "check_direction",
    "multi30k_files",
    "fetch_multi30k",
    "load_multi30k",
    "load_pairs",
    "make_tokenizer",
    "nfc",
    "Tokenizer",
    "Vocab",
    "TranslationDataset",
    "BucketBatchSampler",
    "PadCollate",
    "make_loader",
    "padding_ratio",
    "check_length",
]


class DataError(RuntimeError):
    """A data file is missing, cannot be downloaded, or is corrupted or malformed."""


# --------------------------------------------------------------------------------------------
# Multi30k files
# --------------------------------------------------------------------------------------------

#: Where the raw Multi30k task-1 files are downloaded from; ``CONVS2S_DATA_URL`` overrides it
#: (any URL ``urllib`` opens, including ``file:///some/folder/``).
DEFAULT_DATA_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"

#: split name -> file stem. ``test`` is ``test_2016_flickr``, the test set of published results.
MULTI30K_FILES = {"train": "train", "valid": "val", "test": "test_2016_flickr"}

#: The languages of Multi30k task 1; every line of one split's four files is the same caption.
LANGUAGES = ("en", "de", "fr", "cs")
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}

#: sha256 of every file the loader reads; a file that does not match is never used.
MULTI30K_SHA256 = {
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
}


def _offline_hint(names) -> str:
    return (
        "If this machine cannot download, copy the Multi30k files ("
        + ", ".join(names)
        + ") into a folder and set CONVS2S_DATA_DIR to that folder."
    )


def multi30k_files(src: str = "de", trg: str = "en") -> list[str]:
    """The six file names one direction needs (three splits, two languages), checked."""
    check_direction(src, trg)
    return [f"{stem}.{lang}.gz" for stem in MULTI30K_FILES.values() for lang in (src, trg)]


# (resolved path, size, mtime_ns) -> sha256 of files already checked in this process.
_VERIFIED: dict[tuple[str, int, int], str] = {}


def data_url() -> str:
    """The base URL downloads come from: ``CONVS2S_DATA_URL`` if set, else the Multi30k repo."""
    url = os.environ.get("CONVS2S_DATA_URL", "").strip() or DEFAULT_DATA_URL
    return url if url.endswith("/") else url + "/"


def _sha256_file(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _VERIFIED:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _VERIFIED[key] = h.hexdigest()
    return _VERIFIED[key]


def _check_sha256(path: Path, expected: str) -> None:
    actual = _sha256_file(path)
    if actual != expected:
        raise DataError(
            f"{path} is corrupted or not the expected Multi30k file (truncated download?): "
            f"its sha256 is {actual}, expected {expected}. Delete it so the loader downloads it "
            f"again, or set CONVS2S_DATA_DIR to a folder that has the correct files."
        )


def _download(name: str, root: Path, expected: str, names: list[str]) -> None:
    """Download ``name`` into ``root``; nothing is created there unless the download succeeds.

    The bytes first go to an unnamed temporary file (it vanishes with the process, whatever
    happens) and are sha256-checked; only then is ``root`` created if needed and the file
    written into it atomically (a ``.<name>.<random>.part`` file, renamed once complete).
    """
    from tqdm.auto import tqdm

    url = data_url() + name
    with tempfile.TemporaryFile() as spool:
        h = hashlib.sha256()
        try:
            with urllib.request.urlopen(url, timeout=60) as resp:
                total = resp.headers.get("Content-Length")
                with tqdm(
                    total=int(total) if total and total.isdigit() else None,
                    unit="B",
                    unit_scale=True,
                    desc=f"downloading {name}",
                    leave=False,
                ) as bar:
                    for block in iter(lambda: resp.read(1 << 16), b""):
                        spool.write(block)
                        h.update(block)
                        bar.update(len(block))
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            raise DataError(
                f"Could not download Multi30k file {name} from {url} into {root}: {reason}. "
                f"{_offline_hint(names)}"
            ) from e
        actual = h.hexdigest()
        if actual != expected:
            raise DataError(
                f"The download of Multi30k file {name} from {url} has sha256 {actual}, expected "
                f"{expected}; it was not saved in {root}. Try again later, or set "
                f"CONVS2S_DATA_DIR to a folder that already has the correct files."
            )
        try:
            root.mkdir(parents=True, exist_ok=True)
            spool.seek(0)
            atomic_write(root / name, lambda out: shutil.copyfileobj(spool, out), suffix=".part")
        except OSError as e:
            raise DataError(
                f"Cannot write the downloaded {name} into the data folder {root}: {e}. Free some "
                f"space or make the folder writable, or set CONVS2S_DATA_DIR to another folder."
            ) from e


def _ensure_file(name: str, root: Path, download: bool, names: list[str] | None = None) -> Path:
    path = root / name
    expected = MULTI30K_SHA256[name]
    if not path.is_file():
        if not download:
            raise DataError(
                f"Multi30k file {name} is not in {root} and download=False. Set CONVS2S_DATA_DIR "
                f"to a folder that has the files, or call load_multi30k(download=True)."
            )
        _download(name, root, expected, names or [name])
    _check_sha256(path, expected)
    return path


def check_direction(src: str, trg: str) -> tuple[str, str]:
    """``(src, trg)`` if both are Multi30k languages and differ, else one-line ``ValueError``."""
    for side, lang in (("source", src), ("target", trg)):
        if lang not in LANGUAGES:
            raise ValueError(
                f"Multi30k has no {side} language {lang!r}; choose one of "
                f"{', '.join(LANGUAGES)} (e.g. --src de --trg en)."
            )
    if src == trg:
        raise ValueError(f"The source and target language are both {src!r}; choose two "
                         f"different languages of {', '.join(LANGUAGES)}.")
    return src, trg


def load_multi30k(
    root: str | os.PathLike | None = None, *, download: bool = True, src: str = "de",
    trg: str = "en"
) -> dict[str, list[tuple[str, str]]]:
    """The Multi30k task-1 splits of one direction as raw ``(source, target)`` string pairs.

    ``src`` and ``trg`` are two different languages of :data:`LANGUAGES` (``en``, ``de``,
    ``fr``, ``cs``); the default is German to English, ``(german, english)`` pairs. An unknown
    language raises ``ValueError``. Swapping ``src`` and ``trg`` swaps every pair.

    Returns ``{"train": ..., "valid": ..., "test": ...}`` with 29,000 / 1,014 / 1,000 pairs
    (``test`` is ``test_2016_flickr``). Only the six files of the direction are read (and, if
    missing, downloaded). ``root`` defaults to :func:`convs2s.config.data_dir`
    (``CONVS2S_DATA_DIR`` when set). Files missing there are downloaded from
    ``CONVS2S_DATA_URL`` (default :data:`DEFAULT_DATA_URL`) unless ``download=False``. Every
    file, downloaded or already there, must match its sha256 in :data:`MULTI30K_SHA256`;
    anything wrong raises :class:`DataError` naming the file (its absolute path) and what to do.
    A relative ``root`` is taken relative to the current folder. The folder is created only
    when a download into it succeeded; half-written downloads a killed run left there are
    removed first.
    """
    names = multi30k_files(src, trg)
    root = _absolute(root) if root is not None else _absolute(data_dir())
    if root.exists() and not root.is_dir():
        raise DataError(f"The Multi30k data folder {root} exists but is not a folder.")
    # downloads an earlier, killed run left half-written (.<file>.<random>.part), any language
    remove_stale_temps(root, targets=list(MULTI30K_SHA256), suffixes=(".part",))
    splits = {}
    for split, stem in MULTI30K_FILES.items():
        source = _ensure_file(f"{stem}.{src}.gz", root, download, names)
        target = _ensure_file(f"{stem}.{trg}.gz", root, download, names)
        splits[split] = load_pairs(source, target)
    return splits


def fetch_multi30k(
    root: str | os.PathLike | None = None, *, languages: Sequence[str] = LANGUAGES,
    download: bool = True
) -> list[Path]:
    """Make sure the files of ``languages`` (default: all four, twelve files) are in ``root``.

    Each file is downloaded if missing (unless ``download=False``) and sha256-checked, as
    :func:`load_multi30k` does; returns their paths. ``ValueError`` for an unknown language.
    """
    for lang in languages:
        if lang not in LANGUAGES:
            raise ValueError(f"Multi30k has no language {lang!r}; choose from "
                             f"{', '.join(LANGUAGES)}.")
    names = [f"{stem}.{lang}.gz" for stem in MULTI30K_FILES.values() for lang in languages]
    root = _absolute(root) if root is not None else _absolute(data_dir())
    if root.exists() and not root.is_dir():
        raise DataError(f"The Multi30k data folder {root} exists but is not a folder.")
    remove_stale_temps(root, targets=list(MULTI30K_SHA256), suffixes=(".part",))
    return [_ensure_file(name, root, download, names) for name in names]


def _absolute(path: str | os.PathLike) -> Path:
    """``path`` made absolute (``~`` expanded, ``..`` resolved), so messages name one folder."""
    return Path(path).expanduser().resolve()


def _read_lines(path: str | os.PathLike) -> list[str]:
    """The lines of a UTF-8 text file (plain or gzip), without their line endings."""
    path = _absolute(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise DataError(f"Cannot read {path}: {e}") from e
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise DataError(
                f"{path} is a truncated or corrupted gzip file ({e}). Delete it and download it "
                f"again, or set CONVS2S_DATA_DIR to a folder that has intact files."
            ) from e
    elif path.suffix == ".gz":
        raise DataError(f"{path} ends in .gz but is not a gzip file.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path} is not valid UTF-8 text: byte {raw[e.start : e.start + 1]!r} on line {line} "
            f"({e.reason})."
        ) from e
    if text.startswith("\ufeff"):  # a byte order mark is encoding, not text
        text = text[1:]
    # split on "\n" only: str.splitlines() would also split inside a sentence on \x0b, \x1c,
    # \u2028 and friends, and break the line-by-line alignment of the two languages.
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [nfc(line[:-1] if line.endswith("\r") else line) for line in lines]


def load_pairs(de_path: str | os.PathLike, en_path: str | os.PathLike) -> list[tuple[str, str]]:
    """Line-aligned ``(german, english)`` pairs from two parallel UTF-8 files (plain or .gz).

    Line endings are stripped and the text is normalised to NFC (see :func:`nfc`); it is
    otherwise kept as it is (no lowercasing, no whitespace stripping). Different line counts,
    bad gzip or non-UTF-8 raise :class:`DataError`.
    """
    de_path, en_path = _absolute(de_path), _absolute(en_path)
    de, en = _read_lines(de_path), _read_lines(en_path)
    if len(de) != len(en):
        raise DataError(
            f"{de_path} has {len(de)} lines but {en_path} has {len(en)}; the two sides of a "
            f"parallel corpus must have one line per sentence pair."
        )
    return list(zip(de, en, strict=True))


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def nfc(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): "a" + U+0308 (combining diaeresis) becomes
    "ä", as every Multi30k file already spells it.

    Text copied on macOS often comes decomposed (NFD). It reads the same, but a vocabulary
    learned on NFC text knows "fährt" only with one "ä" code point, and a subword model never
    saw U+0308 alone: NFD input would become ``<unk>``. Every tokenizer (and the lines read
    from a corpus file) normalise first. NFC, not NFKC: NFKC would also rewrite compatibility
    characters, such as the 48 non-breaking spaces of the German training and validation
    files (into plain spaces) or "…" (into "..."). Already-NFC text comes back unchanged.
    """
    return unicodedata.normalize("NFC", text)


@functools.cache
def _spacy_tokenizer(lang: str):
    import spacy

    try:
        return spacy.blank(lang).tokenizer
    except (ImportError, KeyError, ValueError) as e:
        raise ValueError(
            f"No spaCy tokenizer for language {lang!r}: {e}. Use a spaCy language code such as "
            f"'de' or 'en'."
        ) from e


class Tokenizer:
    """``str -> list[str]``: spaCy's rule-based tokenizer for ``lang``, optionally lowercased.

    It is ``spacy.blank(lang).tokenizer``: the same prefix/suffix/infix rules and exceptions as
    the tokenizer inside ``de_core_news_sm`` / ``en_core_web_sm`` (the statistical models do not
    change tokenization), with no model to download. Whitespace tokens (from double spaces, tabs
    or non-breaking spaces) are dropped. Lowercasing happens after tokenization, as torchtext's
    ``Field(lower=True)`` did. The text is normalised to NFC first (:func:`nfc`), so decomposed
    input gives the tokens of the composed text. Picklable: it holds only ``lang`` and
    ``lower``.
    """

    def __init__(self, lang: str, lower: bool = True):
        if not isinstance(lang, str):
            raise ValueError(f"lang must be a spaCy language code such as 'de', not {lang!r}.")
        _spacy_tokenizer(lang)  # fail now, not at the first sentence
        self.lang, self.lower = lang, lower

    def __call__(self, text: str) -> list[str]:
        tokens = (t.text for t in _spacy_tokenizer(self.lang)(nfc(text)) if not t.is_space)
        return [t.lower() for t in tokens] if self.lower else list(tokens)

    def __repr__(self) -> str:
        return f"Tokenizer(lang={self.lang!r}, lower={self.lower})"


def make_tokenizer(lang: str, lower: bool = True) -> Tokenizer:
    """A tokenizer for ``lang`` (``"de"``, ``"en"``, ...); see :class:`Tokenizer`.

    An unsupported language raises ``ValueError``. The spaCy object is built once per language.
    """
    return Tokenizer(lang, lower=lower)


_NO_SPACE_BEFORE = re.compile(r" (?=[.,!?;:%)\]}]|'s\b|'re\b|'ll\b|'ve\b|'d\b|'m\b|n't\b)")
_NO_SPACE_AFTER = re.compile(r"(?<=[(\[{]) ")


def detokenize(tokens: Sequence[str]) -> str:
    """Join word-level tokens into a sentence: ``["a", "man", "."]`` -> ``"A man."``.

    The inverse of :class:`Tokenizer` as far as lower-cased tokens allow: no space before
    punctuation and clitics, a capital first letter. (Subword models decode their pieces
    exactly instead: :meth:`convs2s.subword.TextPipeline.detokenize`.)
    """
    text = " ".join(tokens)
    text = _NO_SPACE_AFTER.sub("", _NO_SPACE_BEFORE.sub("", text))
    text = re.sub(r' " (.*?) " ', r' "\1" ', f" {text} ").strip()
    return text[:1].upper() + text[1:]


# --------------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------------

_VOCAB_FORMAT = "convs2s.Vocab"


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
                raise TypeError("Vocab.build takes lists of tokens, not strings; tokenize first.")
            counts.update(tokens)
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


# --------------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------------


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

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.src[i], self.trg[i]

    def __repr__(self) -> str:
        return (
            f"TranslationDataset({len(self)} examples, {self.n_dropped} dropped, "
            f"max_len={self.max_len})"
        )


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
        lens = np.asarray(lengths, dtype=np.int64)
        if lens.ndim == 1:
            lens = lens[:, None]
        if lens.ndim != 2 or (len(lens) and lens.min() < 0):
            raise ValueError("lengths must be non-negative ints or (src_len, trg_len) pairs.")
        self.lengths = lens
        self.size = lens.max(axis=1) if lens.shape[1] else np.zeros(len(lens), np.int64)
        if max_tokens is not None and len(lens) and self.size.max() > max_tokens:
            i = int(self.size.argmax())
            raise ValueError(
                f"Example {i} alone is {int(self.size[i])} tokens long, more than "
                f"max_tokens={max_tokens}; raise max_tokens or drop long examples with max_len."
            )
        if len(lens) and len(lens) < num_replicas:
            raise ValueError(f"{len(lens)} examples cannot fill {num_replicas} replicas.")
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.shuffle, self.seed, self.bucket = shuffle, seed, bucket
        self.num_replicas, self.rank, self.chunk_batches = num_replicas, rank, chunk_batches
        self.epoch = 0
        self._cache: tuple[int, list[list[int]]] | None = None

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
        dataset = _IdPairs(dataset)
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


def padding_ratio(batches: Iterable[tuple[torch.Tensor, torch.Tensor]], pad_idx: int) -> float:
    """Pad tokens / all tokens, over both ``src`` and ``trg`` of every batch (0 = no padding)."""
    pads = total = 0
    for src, trg in batches:
        for x in (src, trg):
            pads += int((x == pad_idx).sum())
            total += x.numel()
    return pads / total if total else 0.0
