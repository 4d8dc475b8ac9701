"""Cased subword vocabularies (sentencepiece), and the text pipeline a checkpoint records.

The word-level pipeline (:func:`convs2s.data.make_tokenizer`) lower-cases spaCy tokens and maps
every word seen fewer than twice to ``<unk>``: its output is lower-cased, with ``<unk>`` holes
("eisfischerhütte" -> ``<unk>``). A subword vocabulary splits rare words into known pieces
(``▁Eis fisch er hütte``), so every sentence is encoded without ``<unk>``, and keeps the case;
decoding the pieces gives back the exact text, which is what the standard, cased sacreBLEU wants
to see.

- :class:`SubwordSettings`: vocabulary size, joint or one vocabulary per side, model type.
- :func:`train_subword`: a :class:`SubwordTokenizer` learned on given sentences (the training
  split only), cached on disk under :func:`cache_dir` by a hash of those sentences, the settings
  and the library version; a second call with the same input reads the cache.
- :class:`TextPipeline`: the source and target language, the tokenizers, the detokenizer and
  how to build the vocabularies, for either kind (``"word"`` or ``"subword"``);
  :meth:`TextPipeline.sample` draws random segmentations of training pairs (subword
  regularisation, ``--subword-sampling``), the same ones for the same seed in one process
  (a new process draws others: see :func:`seeded_sampling`).
  :meth:`TextPipeline.record` is what a checkpoint stores and :meth:`TextPipeline.from_checkpoint`
  reads it back; a checkpoint without these fields (written before they existed) means German to
  English, word-level, lower-cased.

Why sentencepiece (compared with ``tokenizers`` by ``benchmarks/subword_choice.py`` on the
Multi30k de-en training split; the figures are in its results file): both libraries decode
every cased validation sentence back exactly (up to runs of whitespace, which sentencepiece
collapses) with no ``<unk>``; sentencepiece's BPE learned faster and is deterministic, where
``tokenizers``' unigram is not (two runs, two vocabularies); its model is one self-contained byte
string (stored in the checkpoint) and needs no pre-tokenizer to configure for a lossless round
trip. ``tokenizers``' BPE gives a few per cent fewer tokens per sentence because some of its
pieces glue punctuation to words (``▁man's``, ``man.``), which sentencepiece's script
boundaries forbid. A joint vocabulary leaves part of each side's pieces unused where one per
side uses nearly all of them; which gives the better BLEU is for validation to say
(``joint_vocab``).
"""

from __future__ import annotations

import hashlib
import io
import json
import numbers
import os
import re
import struct
import threading
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from convs2s.data import LANGUAGES, Tokenizer, Vocab, check_direction, detokenize, nfc
from convs2s.data.tokenizers import not_a_sentence
from convs2s.system.arguments import MAX_VOCAB_SIZE, brief, check_size
from convs2s.system.atomic_files import atomic_write, remove_stale_temps
from convs2s.system.local_files import read_small

__all__ = [
    "SPECIALS",
    "SubwordSettings",
    "SubwordTokenizer",
    "TextPipeline",
    "cache_dir",
    "cache_key",
    "seeded_sampling",
    "train_subword",
]

#: The four specials, in the roles (and ids 0-3) :class:`convs2s.data.Vocab` gives them.
SPECIALS = ("<unk>", "<pad>", "<bos>", "<eos>")

LIBRARY = "sentencepiece"
MODEL_TYPES = ("bpe", "unigram")
TOKENIZER_KINDS = ("word", "subword")
#: The largest cached model file read: a model of MAX_VOCAB_SIZE pieces takes some tens of MB
#: (8,000 pieces: about 250 kB).
MAX_MODEL_BYTES = 128 << 20


def _sentencepiece():
    try:
        import sentencepiece
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise ImportError("Subword vocabularies need sentencepiece: pip install sentencepiece"
                          ) from e
    return sentencepiece


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubwordSettings:
    """How a subword vocabulary is learned.

    ``vocab_size``: pieces per vocabulary, the four specials included (an upper bound: a small
    corpus may give fewer). ``joint``: one vocabulary learned on both sides together, shared by
    source and target (True), or one per side, each ``vocab_size`` pieces (False).
    ``model_type``: sentencepiece's ``"bpe"`` or ``"unigram"``. Every character of the training
    text is kept (``character_coverage=1.0``) and sentencepiece does not normalise the text (its
    ``identity`` rule), so decoding gives back the text exactly. (convs2s puts all text into
    NFC before sentencepiece sees it, training text too: :func:`convs2s.data.nfc`.)
    """

    vocab_size: int = 8000
    joint: bool = True
    model_type: str = "bpe"

    def __post_init__(self):
        check_size(self.vocab_size, "vocab_size", MAX_VOCAB_SIZE, least=len(SPECIALS) + 4)
        if not isinstance(self.joint, bool):
            raise ValueError(f"joint must be True or False, not {self.joint!r}.")
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type must be one of {', '.join(MODEL_TYPES)}, not "
                             f"{self.model_type!r}.")

    def as_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------


class SubwordTokenizer:
    """A trained sentencepiece model: ``tok(text) -> pieces`` and ``tok.decode(pieces) -> text``.

    Cased text in, cased text out: ``tok.decode(tok(s)) == s`` for text made of characters the
    model saw in training (a character it never saw becomes ``<unk>``), given in NFC: the text
    is put into NFC first (:func:`convs2s.data.nfc`), so decomposed input ("a" + U+0308) gives
    the pieces of the composed text ("ä"). Built from the model's bytes (``tok.model``, what a
    checkpoint stores); ``tok.sha256`` names them. :meth:`trained_with` tells the settings it
    was learned with. Picklable.
    """

    def __init__(self, model: bytes):
        if not isinstance(model, (bytes, bytearray)) or not model:
            raise ValueError("a subword model is a non-empty byte string (a sentencepiece "
                             "model's serialized proto).")
        self.model = bytes(model)
        self.sha256 = hashlib.sha256(self.model).hexdigest()
        self._load()

    def _load(self) -> None:
        spm = _sentencepiece()
        proc = spm.SentencePieceProcessor()
        try:
            proc.LoadFromSerializedProto(self.model)
        except (RuntimeError, OSError, TypeError) as e:
            raise ValueError(f"the bytes are not a sentencepiece model ({e}).") from None
        pieces = [proc.id_to_piece(i) for i in range(proc.get_piece_size())]
        if tuple(pieces[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"the subword model's first pieces are {pieces[:4]}, not the "
                             f"specials {list(SPECIALS)}.")
        self._proc, self.pieces = proc, pieces

    def __getstate__(self) -> dict:
        return {"model": self.model}

    def __setstate__(self, state: dict) -> None:
        self.model = state["model"]
        self.sha256 = hashlib.sha256(self.model).hexdigest()
        self._load()

    def __len__(self) -> int:
        return len(self.pieces)

    def __call__(self, text: str) -> list[str]:
        if not isinstance(text, str):
            raise TypeError(not_a_sentence(text))
        return self._proc.encode(nfc(text), out_type=str)

    def sample(self, text: str, alpha: float) -> list[str]:
        """One segmentation of ``text`` drawn at random (subword regularisation), where
        ``tok(text)`` gives the best one: a unigram model draws from all its segmentations
        (sentencepiece's ``nbest_size=-1``) with their probabilities raised to ``alpha``
        (Kudo, 2018; smaller is more varied), a BPE model skips each merge with probability
        ``alpha`` (BPE-dropout, Provilkov et al., 2020; larger is more varied). Decoding gives
        the text back either way. The draws come from sentencepiece's own random generator:
        run inside :func:`seeded_sampling` to make them reproducible."""
        return self._proc.encode(nfc(text), out_type=str, enable_sampling=True, alpha=alpha,
                                 nbest_size=-1)

    def decode(self, pieces: Sequence[str]) -> str:
        """The text of ``pieces`` (specials other than ``<unk>`` are dropped)."""
        return self._proc.decode([p for p in pieces if p not in SPECIALS[1:]])

    def vocab(self) -> Vocab:
        """The model's pieces as a :class:`Vocab`: the same ids as sentencepiece's."""
        return Vocab(self.pieces, SPECIALS)

    def trained_with(self) -> dict:
        """How sentencepiece says the model was learned: ``{"model_type", "vocab_size" (the
        pieces asked for, or, when the corpus gave fewer, the pieces made), "normalization",
        "character_coverage"}``, read from the trainer and normalizer specs in the model."""
        model = _message(self.model)
        trainer = _message(model.get(2, [b""])[-1])
        normalizer = _message(model.get(3, [b""])[-1])
        model_type = trainer.get(3, [1])[-1]  # proto defaults where a field is absent
        coverage = trainer.get(10, [struct.pack("<f", 0.9995)])[-1]
        return {"model_type": _MODEL_TYPE_IDS.get(model_type, str(model_type)),
                "vocab_size": trainer.get(4, [8000])[-1],
                "normalization": normalizer.get(1, [b"nmt_nfkc"])[-1].decode("utf-8", "replace"),
                "character_coverage": struct.unpack("<f", coverage)[0]}

    def check_settings(self, settings: SubwordSettings) -> None:
        """``ValueError`` (one line) unless the model can have been learned as
        :func:`train_subword` learns one with ``settings``: that model type, no more pieces
        than ``vocab_size`` (as sentencepiece counts them), no normalisation, every character.

        Fewer pieces than ``vocab_size`` pass: a small corpus gives fewer, and sentencepiece
        then records the pieces it made as its ``vocab_size``, just as it records a smaller
        ``vocab_size`` asked for; the model alone cannot tell the two apart (``train_subword``
        learns such a cached model again to tell).
        """
        spec = self.trained_with()
        if spec["model_type"] != settings.model_type:
            problem = f"it is a {spec['model_type']} model, not {settings.model_type}"
        elif len(self) > settings.vocab_size:
            problem = f"it has {len(self)} pieces, more than vocab_size={settings.vocab_size}"
        elif (spec["normalization"], spec["character_coverage"]) != ("identity", 1.0):
            problem = (f"it was learned with normalization {spec['normalization']!r} and "
                       f"character_coverage {spec['character_coverage']}, not 'identity' and 1.0")
        else:
            return
        raise ValueError(f"{problem} ({self!r}).")

    def __repr__(self) -> str:
        return f"SubwordTokenizer({len(self)} pieces, sha256 {self.sha256[:12]})"


_T = TypeVar("_T")
#: One seeded sampling at a time: sentencepiece's seed is one for the whole process.
_SAMPLING = threading.Lock()


def seeded_sampling(seed: int | Sequence[int], work: Callable[[], _T]) -> _T:
    """``work()``, its sentencepiece samples (:meth:`SubwordTokenizer.sample`) drawn from a
    generator seeded by ``seed`` (an int, or ints such as ``(run seed, epoch)``): the same seed
    gives the same segmentations in this process. Not in another: with sentencepiece 0.2.3, three
    processes sampling the same sentences with the same model and seed drew three different
    segmentations (its generator takes more than the seed: a salt of its random-number library
    is the likely cause). So a resumed run keeps its epoch's segmentations in ``last.pt``, and
    torchrun's processes take the main one's (:class:`convs2s.run.train.Trainer`).

    sentencepiece keeps one generator per thread, seeded from its process-wide seed
    (``set_random_generator_seed``) when the thread first samples, and some of its versions
    never reseed one already made: so the seed is set and ``work`` runs in a new thread, one
    ``work`` at a time, and this returns its result (or raises its exception). The seed stays
    set afterwards (sentencepiece cannot unset it): other sampling in this process is seeded too.
    """
    state = np.random.SeedSequence(seed).generate_state(1)[0]
    state = int(state) % 0xFFFFFFFF  # 2**32 - 1 is sentencepiece's "no seed"
    with _SAMPLING, ThreadPoolExecutor(max_workers=1, thread_name_prefix="sentencepiece") as pool:
        _sentencepiece().set_random_generator_seed(state)
        return pool.submit(work).result()


#: sentencepiece's TrainerSpec.ModelType values (sentencepiece_model.proto).
_MODEL_TYPE_IDS = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def _message(data: bytes) -> dict[int, list]:
    """The fields of one serialized protobuf message: ``{field number: [values]}``.

    Varints come back as ints, everything else as bytes (a nested message is parsed by calling
    this again). Just enough of the wire format to read a sentencepiece model's trainer and
    normalizer specs (sentencepiece_model.proto: ModelProto 2 = trainer_spec, 3 =
    normalizer_spec; TrainerSpec 3 = model_type, 4 = vocab_size, 10 = character_coverage;
    NormalizerSpec 1 = name): sentencepiece's Python package offers no reader of its own
    without protobuf, which is not a dependency. ``ValueError`` for bytes that are not one.
    """
    fields: dict[int, list] = {}
    pos = 0

    def varint() -> int:
        nonlocal pos
        value = shift = 0
        while True:
            if pos >= len(data) or shift > 63:
                raise ValueError("a truncated or malformed protobuf message")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            value: int | bytes = varint()
        elif wire in (1, 2, 5):  # fixed 64-bit, length-delimited, fixed 32-bit
            size = {1: 8, 5: 4}[wire] if wire != 2 else varint()
            if pos + size > len(data):
                raise ValueError("a truncated protobuf message")
            value, pos = data[pos:pos + size], pos + size
        else:
            raise ValueError(f"protobuf wire type {wire} is not one sentencepiece writes")
        fields.setdefault(number, []).append(value)
    return fields


# --------------------------------------------------------------------------------------------
# Training and the cache
# --------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where learned subword models are kept: ``CONVS2S_CACHE_DIR`` if set, else
    ``$XDG_CACHE_HOME/convs2s/subword`` (``~/.cache/convs2s/subword``), beside the default data
    folder ``~/.cache/convs2s/multi30k``. Created when the first model is written."""
    env = os.environ.get("CONVS2S_CACHE_DIR", "").strip()
    if env:
        return Path(env).expanduser().resolve() / "subword"
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "convs2s" / "subword"


def _library_version() -> str:
    return _sentencepiece().__version__


def _text_sha256(lines: Sequence[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def cache_key(lines: Sequence[str], settings: SubwordSettings) -> str:
    """The hash a model learned on ``lines`` with ``settings`` is cached under.

    It covers the sentences themselves in NFC (so the Multi30k files' contents, and which
    slice of them; the NFD spelling of a text has the key of its NFC one, and text already in
    NFC, as Multi30k is, keeps the key it had before convs2s normalised), every setting and the
    library's version: any other change gives another key.
    """
    lines = [nfc(s) for s in lines]
    what = {"library": LIBRARY, "version": _library_version(), "settings": settings.as_dict(),
            "data": _text_sha256(lines), "sentences": len(lines)}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def _learn(lines: Sequence[str], settings: SubwordSettings) -> bytes:
    spm = _sentencepiece()
    lines = [s for s in lines if s.strip()]
    if not lines:
        raise ValueError("Cannot learn a subword vocabulary from no text.")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model,
            vocab_size=settings.vocab_size, model_type=settings.model_type,
            character_coverage=1.0, normalization_rule_name="identity",
            hard_vocab_limit=False, unk_id=0, pad_id=1, bos_id=2, eos_id=3,
            unk_piece=SPECIALS[0], pad_piece=SPECIALS[1], bos_piece=SPECIALS[2],
            eos_piece=SPECIALS[3], minloglevel=2, num_threads=1,
            max_sentence_length=1 << 16, input_sentence_size=0,
        )
    except RuntimeError as e:
        raise ValueError(_learning_failed(str(e), settings, len(lines))) from None
    return model.getvalue()


def _learning_failed(error: str, settings: SubwordSettings, sentences: int) -> str:
    """One line saying why sentencepiece failed, and what to do where that is known."""
    # sentencepiece needs a piece for every character of the text (character_coverage=1.0)
    # besides the specials: "Vocabulary size is smaller than required_chars. 9 vs 56."
    too_small = re.search(r"smaller than required_chars\D*?(\d+) vs (\d+)", error)
    if too_small:
        needed = int(too_small.group(2))
        return (f"vocab_size={settings.vocab_size} is too small for these {sentences} "
                f"sentences: they have {needed - len(SPECIALS)} different characters, and each "
                f"needs a piece of its own besides the {len(SPECIALS)} specials; raise "
                f"vocab_size (--vocab-size) to at least {needed}.")
    first = error.strip().splitlines()[0] if error.strip() else "unknown error"
    first = re.sub(r"^[A-Z_]+: \S+\(\d+\) \[[^\]]*\] ", "", first)  # file(line) [condition]
    return (f"sentencepiece cannot learn a vocabulary of {settings.vocab_size} pieces from "
            f"these {sentences} sentences: {first}")


def train_subword(lines: Iterable[str], settings: SubwordSettings | None = None, *,
                  cache: str | os.PathLike | None | bool = True,
                  on_train: Callable[[], None] | None = None) -> SubwordTokenizer:
    """A :class:`SubwordTokenizer` learned on ``lines`` (give it the training split only).

    The sentences are put into NFC first (:func:`convs2s.data.nfc`): decomposed training text
    gives the model of the composed text.

    ``cache``: True (default) keeps models in :func:`cache_dir`, a folder keeps them there,
    False/None learns afresh every time. A cached model is read back when the sentences, the
    settings and the library version all match (see :func:`cache_key`); otherwise it is learned
    (seconds on Multi30k) and written atomically (a temporary file, then a rename), so a crash
    never leaves half a model. The file is not trusted: one that is not a model, or a model
    whose own record says it was learned with other settings (another model type, more pieces
    than ``vocab_size``: :meth:`SubwordTokenizer.check_settings`), is learned again and
    replaced, with a warning; a cache only saves seconds, so relearning beats refusing. A
    cached model with fewer pieces than ``vocab_size`` (the corpus gave no more, or a model of
    a smaller ``vocab_size`` was put there) is learned again to tell which: kept if it is the
    same, replaced with a warning if not (on Multi30k, only for a ``vocab_size`` beyond what
    the corpus can give). A cache folder that cannot be written only costs a warning.
    ``on_train`` is called just before learning (tests count cache misses with it).
    """
    settings = settings or SubwordSettings()
    lines = list(lines)
    if not all(isinstance(s, str) for s in lines):
        raise TypeError("train_subword takes sentences (str), not token lists.")
    lines = [nfc(s) for s in lines]
    folder = None
    if cache is True:
        folder = cache_dir()
    elif cache not in (False, None):
        folder = Path(cache).expanduser()
    path = folder / f"{cache_key(lines, settings)}.model" if folder is not None else None
    cached = _read_cached(path, settings) if path is not None else None
    if cached is not None and len(cached) == settings.vocab_size:
        return cached
    if on_train is not None:
        on_train()
    tok = SubwordTokenizer(_learn(lines, settings))
    if cached is not None:  # it has fewer pieces than vocab_size: is that what these give?
        if cached.model == tok.model:
            return cached
        warnings.warn(f"ignoring the cached subword model {path}: it does not match its "
                      f"settings {settings} (it has {len(cached)} pieces, where these "
                      f"sentences give {len(tok)}); learning it again.", stacklevel=2)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_temps(path.parent, targets=[path.name])
            atomic_write(path, lambda f: f.write(tok.model))
        except OSError as e:
            warnings.warn(f"could not cache the subword model in {path.parent} ({e}); it will "
                          "be learned again next time.", stacklevel=2)
    return tok


def _read_cached(path: Path, settings: SubwordSettings) -> SubwordTokenizer | None:
    """The model cached at ``path``, or None (with a warning) when there is none, it is not a
    model (a file over :data:`MAX_MODEL_BYTES` is not even read), or it cannot have been learned
    with ``settings``."""
    if not path.is_file():
        return None
    try:
        cached = SubwordTokenizer(read_small(path, MAX_MODEL_BYTES, "subword model"))
    except (OSError, ValueError) as e:
        warnings.warn(f"ignoring the unreadable cached subword model {path} ({e}); "
                      "learning it again.", stacklevel=3)
        return None
    try:
        cached.check_settings(settings)
    except ValueError as e:
        warnings.warn(f"ignoring the cached subword model {path}: it does not match its "
                      f"settings {settings} ({e}); learning it again.", stacklevel=3)
        return None
    return cached


# --------------------------------------------------------------------------------------------
# The text pipeline a checkpoint records
# --------------------------------------------------------------------------------------------


class TextPipeline:
    """Source/target language, tokenizers and detokenizer of one model: word or subword.

    ``kind="word"``: spaCy tokens, lower-cased when ``lower`` (the course's original pipeline,
    what notebooks 00-08 use); vocabularies built from the training split with ``min_freq``;
    the output detokenized by :func:`convs2s.data.detokenize`.
    ``kind="subword"``: sentencepiece pieces of the cased text (``src_model``/``trg_model``,
    the same one when ``settings.joint``); the vocabularies are the models' pieces; the output
    decoded back into cased text.

    Build one with :meth:`word`, :meth:`learn` (subword, from training pairs) or
    :meth:`from_checkpoint`.
    """

    def __init__(self, kind: str, src_lang: str = "de", trg_lang: str = "en", *,
                 lower: bool = True, settings: SubwordSettings | None = None,
                 src_model: SubwordTokenizer | None = None,
                 trg_model: SubwordTokenizer | None = None):
        if kind not in TOKENIZER_KINDS:
            raise ValueError(f"tokenizer kind must be one of {', '.join(TOKENIZER_KINDS)}, "
                             f"not {kind!r}.")
        check_direction(src_lang, trg_lang)
        self.kind, self.src_lang, self.trg_lang = kind, src_lang, trg_lang
        if kind == "word":
            self.lower, self.settings = bool(lower), None
            self.src_tokenizer: Callable[[str], list[str]] = Tokenizer(src_lang, lower=lower)
            self.trg_tokenizer: Callable[[str], list[str]] = Tokenizer(trg_lang, lower=lower)
        else:
            if src_model is None or trg_model is None:
                raise ValueError("a subword pipeline needs its source and target models.")
            self.lower, self.settings = False, settings or SubwordSettings()
            self.src_tokenizer, self.trg_tokenizer = src_model, trg_model

    # -- building --------------------------------------------------------------------------------
    @classmethod
    def word(cls, src_lang: str = "de", trg_lang: str = "en", lower: bool = True) -> TextPipeline:
        return cls("word", src_lang, trg_lang, lower=lower)

    @classmethod
    def learn(cls, train_pairs: Sequence[tuple[str, str]], src_lang: str = "de",
              trg_lang: str = "en", settings: SubwordSettings | None = None, *,
              cache: str | os.PathLike | None | bool = True,
              on_train: Callable[[], None] | None = None) -> TextPipeline:
        """A subword pipeline learned on ``train_pairs`` (``(source, target)`` sentences)."""
        settings = settings or SubwordSettings()
        check_direction(src_lang, trg_lang)
        src = [s for s, _ in train_pairs]
        trg = [t for _, t in train_pairs]
        if settings.joint:
            src_model = trg_model = train_subword(src + trg, settings, cache=cache,
                                                  on_train=on_train)
        else:
            src_model = train_subword(src, settings, cache=cache, on_train=on_train)
            trg_model = train_subword(trg, settings, cache=cache, on_train=on_train)
        return cls("subword", src_lang, trg_lang, settings=settings, src_model=src_model,
                   trg_model=trg_model)

    def vocabs(self, train_pairs: Sequence[tuple[str, str]] = (), *,
               min_freq: int = 2) -> tuple[Vocab, Vocab]:
        """Source and target :class:`Vocab`: the subword models' pieces, or for words the
        tokens of ``train_pairs`` seen at least ``min_freq`` times."""
        if self.kind == "subword":
            return self.src_tokenizer.vocab(), self.trg_tokenizer.vocab()
        src = Vocab.build((self.src_tokenizer(s) for s, _ in train_pairs), min_freq=min_freq)
        trg = Vocab.build((self.trg_tokenizer(t) for _, t in train_pairs), min_freq=min_freq)
        return src, trg

    # -- using -----------------------------------------------------------------------------------
    def sample(self, pairs: Sequence[tuple[str, str]], alpha: float,
               seed: int | Sequence[int]) -> list[tuple[list[str], list[str]]]:
        """A random segmentation of every ``(source, target)`` pair, where the tokenizers give
        the best one (:meth:`SubwordTokenizer.sample` with ``alpha`` in (0, 1]; subword
        regularisation, for training pairs only): the same ``seed`` gives the same pieces
        (:func:`seeded_sampling`). ``ValueError`` for a word pipeline (one segmentation)."""
        if self.kind != "subword":
            raise ValueError("sampling segmentations needs a subword pipeline; words have one "
                             "segmentation.")
        if isinstance(alpha, bool) or not (isinstance(alpha, numbers.Real) and 0 < alpha <= 1):
            raise ValueError(f"alpha must be a number above 0 and at most 1, not "
                             f"{brief(alpha, 40)}.")
        src, trg = self.src_tokenizer, self.trg_tokenizer
        return seeded_sampling(seed, lambda: [(src.sample(s, alpha), trg.sample(t, alpha))
                                              for s, t in pairs])

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens back into a sentence (subword: the exact cased text)."""
        if self.kind == "subword":
            return self.trg_tokenizer.decode(tokens)
        return detokenize(tokens)

    @property
    def cased(self) -> bool:
        return self.kind == "subword" or not self.lower

    # -- checkpoints -----------------------------------------------------------------------------
    def settings_dict(self) -> dict:
        """What identifies this pipeline, without the model bytes (for resume checks, reports)."""
        out: dict[str, Any] = {"src_lang": self.src_lang, "trg_lang": self.trg_lang,
                               "kind": self.kind}
        if self.kind == "word":
            out["lower"] = self.lower
        else:
            out.update(self.settings.as_dict(), library=LIBRARY,
                       src_sha256=self.src_tokenizer.sha256, trg_sha256=self.trg_tokenizer.sha256)
        return out

    def record(self) -> dict:
        """The checkpoint fields: ``src_lang``, ``trg_lang`` and ``tokenizer``.

        ``tokenizer`` is ``{"kind": "word", "lower": bool}`` or ``{"kind": "subword",
        "library": "sentencepiece", "library_version", "vocab_size", "joint", "model_type",
        "src_model": bytes, "src_sha256", "trg_model": bytes, "trg_sha256"}``: the models
        themselves travel in the checkpoint, so it translates on any machine.
        """
        if self.kind == "word":
            tokenizer: dict[str, Any] = {"kind": "word", "lower": self.lower}
        else:
            tokenizer = {"kind": "subword", "library": LIBRARY,
                         "library_version": _library_version(), **self.settings.as_dict(),
                         "src_model": self.src_tokenizer.model,
                         "src_sha256": self.src_tokenizer.sha256,
                         "trg_model": self.trg_tokenizer.model,
                         "trg_sha256": self.trg_tokenizer.sha256}
        return {"src_lang": self.src_lang, "trg_lang": self.trg_lang, "tokenizer": tokenizer}

    @classmethod
    def from_checkpoint(cls, data: dict) -> TextPipeline:
        """The pipeline a checkpoint's fields describe; ``ValueError`` (one line) if malformed.

        Reads ``src_lang``/``trg_lang``/``tokenizer`` (:meth:`record`); each one missing
        means its default: German to English, word-level, lower-cased.
        """
        src, trg = data.get("src_lang", "de"), data.get("trg_lang", "en")
        for side, lang in (("src_lang", src), ("trg_lang", trg)):
            if lang not in LANGUAGES:
                raise ValueError(f"its {side} {lang!r} is not one of {', '.join(LANGUAGES)}.")
        tok = data.get("tokenizer", {"kind": "word", "lower": True})
        if not isinstance(tok, dict) or tok.get("kind") not in TOKENIZER_KINDS:
            raise ValueError("its tokenizer entry is not one of the kinds "
                             f"{', '.join(TOKENIZER_KINDS)}.")
        if tok["kind"] == "word":
            return cls.word(src, trg, lower=bool(tok.get("lower", True)))
        if tok.get("library") != LIBRARY:
            raise ValueError(f"its subword tokenizer comes from {tok.get('library')!r}; this "
                             f"convs2s reads {LIBRARY} models.")
        try:
            settings = SubwordSettings(vocab_size=tok["vocab_size"], joint=tok["joint"],
                                       model_type=tok["model_type"])
            models = []
            for side in ("src", "trg"):
                model = SubwordTokenizer(tok[f"{side}_model"])
                if tok.get(f"{side}_sha256") not in (None, model.sha256):
                    raise ValueError(f"its {side} subword model does not match its sha256.")
                models.append(model)
        except KeyError as e:
            raise ValueError(f"its subword tokenizer lacks {e.args[0]!r}.") from None
        except ValueError as e:
            raise ValueError(f"its subword tokenizer is malformed: {e}") from None
        return cls("subword", src, trg, settings=settings, src_model=models[0],
                   trg_model=models[1])

    def __repr__(self) -> str:
        if self.kind == "word":
            return (f"TextPipeline(word, {self.src_lang}->{self.trg_lang}, "
                    f"lower={self.lower})")
        return (f"TextPipeline(subword, {self.src_lang}->{self.trg_lang}, "
                f"{self.settings})")
