"""Translate with a trained checkpoint: :class:`Translator` (text in, text out).

    >>> t = Translator.from_checkpoint("runs/cpu/best.pt")        # doctest: +SKIP
    >>> t.translate("Ein Mann fährt Fahrrad.")                     # doctest: +SKIP
    'A man rides a bike.'

The checkpoint says which languages and which text pipeline the model was trained with
(:class:`convs2s.data.subword.TextPipeline`): a word-level model (the course's original, trained on
lower-cased spaCy tokens) outputs lower-cased tokens, which :func:`convs2s.data.detokenize` joins
back into a sentence (no space before punctuation, a capital first letter); a subword model
outputs sentencepiece pieces of cased text, decoded back into the exact cased sentence. Either way
the text is what the standard, cased sacreBLEU score sees. A checkpoint written before checkpoints
recorded this is German to English, word-level. Its command line is
:mod:`convs2s.run.translate_cli`.
"""


from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from convs2s.data import LANGUAGE_NAMES, Vocab, check_length, plain_text
from convs2s.data.subword import TextPipeline
from convs2s.model.convs2s import ConvS2S
from convs2s.model.search import (
    beam_search,
    beam_search_alphas,
    check_length_penalty,
    check_max_len,
    greedy_decode,
)
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.checkpoint_guard import check_parts, check_pipeline
from convs2s.system.arguments import MAX_BATCH_SIZE, MAX_BEAM_SIZE, MAX_SENTENCES, check_size
from convs2s.system.environment import check_device

__all__ = ["Translation", "Translator", "check_sizes"]

#: Unicode categories of characters that show nothing: controls (NUL), formats (zero-width
#: space, byte order mark, soft hyphen), separators.
_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}


def check_sizes(*, beam_size: int, batch_size: int) -> None:
    """``ValueError`` (one line) unless ``beam_size`` is 1 to :data:`MAX_BEAM_SIZE` and
    ``batch_size`` 1 to :data:`MAX_BATCH_SIZE`, the bounds ``--beam-size`` and ``--batch-size``
    have too."""
    check_size(batch_size, "batch_size", MAX_BATCH_SIZE,
               why=" (the sentences of a batch are decoded together, in memory)")
    check_size(beam_size, "beam_size", MAX_BEAM_SIZE,
               why=" (beam search keeps that many hypotheses per sentence; 5 to 10 is usual)")


@dataclass
class Translation:
    source_tokens: list[str]
    tokens: list[str]
    text: str
    attention: torch.Tensor  # [dec_layers, len(tokens), len(source_tokens)]


class Translator:
    """A model, its vocabularies and its text pipeline, ready to translate sentences.

    ``pipeline`` (:class:`convs2s.data.subword.TextPipeline`) gives the languages, the tokenizers
    and the detokenizer; without it, ``src_lang``/``trg_lang``/``lower`` make a word-level one.
    """

    def __init__(self, model: ConvS2S, src_vocab: Vocab, trg_vocab: Vocab, *,
                 src_lang: str = "de", trg_lang: str = "en", lower: bool = True, device=None,
                 pipeline: TextPipeline | None = None):
        """``ValueError`` if the vocabularies do not fit the model or the pipeline, or a weight
        is not finite."""
        check_parts(model.config, model.state_dict(), src_vocab, trg_vocab)
        if pipeline is None:
            pipeline = TextPipeline.word(src_lang, trg_lang, lower=lower)
        check_pipeline(pipeline, src_vocab, trg_vocab)
        if device is None:
            device = next(model.parameters()).device
        self.device = check_device(device)
        self.model = model.to(self.device).eval()
        self.src_vocab, self.trg_vocab = src_vocab, trg_vocab
        self.pipeline = pipeline
        self.src_lang, self.trg_lang = pipeline.src_lang, pipeline.trg_lang
        self.src_tokenizer = pipeline.src_tokenizer
        self.trg_tokenizer = pipeline.trg_tokenizer
        self.max_positions = model.config["max_positions"]
        #: beam search's length penalty when a call gives none: the one chosen on validation
        #: for a final.pt (:mod:`convs2s.run.final_choices`), else 1.0 (fairseq's default)
        self.length_penalty = 1.0

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens as a sentence (a subword model: the exact cased text)."""
        return self.pipeline.detokenize(tokens)

    @classmethod
    def from_checkpoint(cls, checkpoint: str | os.PathLike | Checkpoint,
                        device=None) -> Translator:
        """A translator for a checkpoint file (or a loaded :class:`Checkpoint`).

        Raises :class:`convs2s.run.checkpoint.CheckpointError` (one line naming the file and the
        problem) for a file that is not a checkpoint, or whose parts do not belong together
        (see :meth:`Checkpoint.load`); ``ValueError`` for a device this machine does not have.
        """
        device = check_device(device)
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint.load(checkpoint)
        translator = cls(ckpt.build_model(), ckpt.src_vocab, ckpt.trg_vocab,
                         pipeline=ckpt.pipeline, device=device)
        translator.length_penalty = ckpt.length_penalty  # the recorded choice, if any
        return translator

    # -- input checks --------------------------------------------------------------------------
    def _tokens(self, sentence) -> list[str]:
        if not isinstance(sentence, str):
            name = LANGUAGE_NAMES.get(self.src_lang, self.src_lang)
            raise TypeError(f"translate() takes a {name} sentence (str) or a list of them, not "
                            f"{type(sentence).__name__}.")
        try:  # a lone surrogate: sentencepiece fails with a C++ cast error, spaCy's output too
            sentence.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"Cannot translate text that is not valid Unicode: character {e.start + 1} is "
                f"{sentence[e.start]!r}, a lone surrogate (half of a UTF-16 pair, or a byte that "
                "was not UTF-8, decoded with errors='surrogateescape'). Fix the text's encoding."
            ) from None
        if not sentence.strip():
            raise ValueError("Cannot translate an empty or whitespace-only sentence.")
        if all(unicodedata.category(c) in _INVISIBLE or c.isspace() for c in sentence):
            raise ValueError("Nothing to translate: the sentence holds only invisible or control "
                             "characters (such as NUL, a zero-width space or a byte order "
                             "mark).")
        sentence = plain_text(sentence)  # tabs, NBSPs, a BOM, ANSI colours: what training saw
        if not sentence:
            name = LANGUAGE_NAMES.get(self.src_lang, self.src_lang)
            raise ValueError("Nothing to translate: the sentence holds only terminal escape "
                             "sequences (such as colour codes) and invisible or control "
                             f"characters. Give a {name} sentence.")
        tokens = self.src_tokenizer(sentence)
        check_length(tokens, self.max_positions, what="source sentence")
        return tokens

    def source_tokens(self, sentence: str) -> list[str]:
        """The tokens of ``sentence`` to translate it by, made plain text first
        (:func:`convs2s.data.plain_text`: tabs and non-breaking spaces one space; a byte order
        mark, zero-width spaces, soft hyphens, bidirectional overrides, NUL and terminal escape
        sequences dropped): ``ValueError`` (one line) for what cannot be translated (empty, too
        long, not valid Unicode, only invisible characters or escape sequences), and for a
        sentence none of whose words the model knows (emoji, a script it never saw): its output
        would be a confident guess, so the unknown pieces are named instead."""
        tokens = self._tokens(sentence)
        words = [t for t in tokens if any(c.isalnum() for c in t)]
        if not any(t in self.src_vocab for t in words):
            unknown = [t for t in tokens if t not in self.src_vocab and t.strip("\u2581 ")]
            shown = ", ".join(t if len(t) <= 20 else t[:20] + "…" for t in unknown[:10]) + (
                f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
            name = LANGUAGE_NAMES.get(self.src_lang, self.src_lang)
            raise ValueError("Nothing to translate: the model knows none of the sentence's words"
                             + (f" (unknown pieces: {shown})" if unknown else "")
                             + f". Give a {name} sentence.")
        return tokens

    def _batch(self, token_lists: list[list[str]]) -> torch.Tensor:
        ids = [torch.tensor(self.src_vocab.encode(t), dtype=torch.long) for t in token_lists]
        src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True,
                                              padding_value=self.src_vocab.pad_idx)
        return src.to(self.device)  # src = [batch, src_len]

    def _settings(self, beam_size, batch_size, max_len, length_penalty=None) -> tuple[int, float]:
        """A call's decoding settings, checked once: ``beam_size`` and ``batch_size`` within
        their bounds (:func:`check_sizes`), ``max_len`` 1 to the model's ``max_positions``
        (None: all of them) and the length penalty 0 to 10 (None: the translator's own).
        Returns ``(max_len, length_penalty)``."""
        check_sizes(beam_size=beam_size, batch_size=batch_size)
        max_len = self.max_positions if max_len is None else check_max_len(self.model, max_len)
        return max_len, self.length_penalty_for(length_penalty)

    def length_penalty_for(self, length_penalty: float | None) -> float:
        """The length penalty a call asks for, else the translator's (checked: 0 to 10)."""
        return check_length_penalty(self.length_penalty if length_penalty is None
                                    else length_penalty)

    # -- translation ---------------------------------------------------------------------------
    def translate_tokens(self, sentences: Sequence[str], *, beam_size: int = 5,
                         max_len: int | None = None, batch_size: int = 64,
                         length_penalty: float | None = None) -> list[list[str]]:
        """Output token lists for a list of sentences (what the tutorial BLEU compares).

        ``batch_size`` sentences are decoded together; ``ValueError`` if it or ``beam_size``
        is not a whole number from 1 to its bound (:func:`check_sizes`), ``max_len`` not one
        from 1 to the model's ``max_positions``, or a sentence is empty, too long or not valid
        Unicode (a lone surrogate). ``length_penalty``: beam search's exponent, 0 to 10 (None:
        the translator's own, :attr:`length_penalty`; see
        :func:`convs2s.model.search.beam_search`; greedy decoding ignores it, but it is checked
        all the same).
        """
        max_len, alpha = self._settings(beam_size, batch_size, max_len, length_penalty)
        return self._decode([self._tokens(s) for s in _sentence_list(sentences)], beam_size,
                            batch_size, max_len, alpha)

    def translate_token_lists(self, token_lists: Sequence[list[str]], *, beam_size: int = 5,
                              max_len: int | None = None, batch_size: int = 64,
                              length_penalty: float | None = None) -> list[list[str]]:
        """:meth:`translate_tokens` for sentences already tokenized (and length-checked)."""
        _check_token_lists(token_lists)
        max_len, alpha = self._settings(beam_size, batch_size, max_len, length_penalty)
        return self._decode(token_lists, beam_size, batch_size, max_len, alpha)

    def translate_tokens_alphas(self, sentences: Sequence[str], alphas, *, beam_size: int = 5,
                                max_len: int | None = None,
                                batch_size: int = 64) -> list[list[list[str]]]:
        """:meth:`translate_tokens` with beam search at every length penalty in ``alphas``: one
        list of outputs per α, in that order, from one search (α only re-ranks the finished
        hypotheses; :func:`convs2s.model.search.beam_search_alphas`)."""
        max_len, _ = self._settings(beam_size, batch_size, max_len)
        alphas = [check_length_penalty(a) for a in _alpha_list(alphas)]
        return self._decode_alphas([self._tokens(s) for s in _sentence_list(sentences)], alphas,
                                   beam_size, batch_size, max_len)

    def translate_token_lists_alphas(self, token_lists: Sequence[list[str]], alphas, *,
                                     beam_size: int = 5, max_len: int | None = None,
                                     batch_size: int = 64) -> list[list[list[str]]]:
        """:meth:`translate_token_lists` with beam search for every length penalty in
        ``alphas`` (one list of outputs per α, in that order), from one search per batch
        (:func:`convs2s.model.search.beam_search_alphas`)."""
        _check_token_lists(token_lists)
        max_len, _ = self._settings(beam_size, batch_size, max_len)
        alphas = [check_length_penalty(a) for a in _alpha_list(alphas)]
        return self._decode_alphas(token_lists, alphas, beam_size, batch_size, max_len)

    def _decode(self, token_lists: Sequence[list[str]], beam_size: int, batch_size: int,
                max_len: int, alpha: float) -> list[list[str]]:
        """Output token lists for checked settings (:meth:`_settings`): greedy for a beam of
        1, else beam search."""
        out: list[list[str]] = []
        v = self.trg_vocab
        kw = dict(max_len=max_len, bos_idx=v.bos_idx, eos_idx=v.eos_idx, pad_idx=v.pad_idx)
        for i in range(0, len(token_lists), batch_size):
            src = self._batch(token_lists[i: i + batch_size])
            if beam_size == 1:
                ids = greedy_decode(self.model, src, **kw)
            else:
                ids = beam_search(self.model, src, beam_size=beam_size, length_penalty=alpha,
                                  **kw)
            out.extend(v.decode(x) for x in ids)
        return out

    def _decode_alphas(self, token_lists: Sequence[list[str]], alphas: list[float],
                       beam_size: int, batch_size: int,
                       max_len: int) -> list[list[list[str]]]:
        """One list of outputs per α in ``alphas``, from one beam search per batch (checked
        settings)."""
        out: list[list[list[str]]] = [[] for _ in alphas]
        v = self.trg_vocab
        for i in range(0, len(token_lists), batch_size):
            src = self._batch(token_lists[i: i + batch_size])
            per_alpha = beam_search_alphas(self.model, src, alphas=alphas, beam_size=beam_size,
                                           max_len=max_len, bos_idx=v.bos_idx,
                                           eos_idx=v.eos_idx, pad_idx=v.pad_idx)
            for j, ids in enumerate(per_alpha):
                out[j].extend(v.decode(x) for x in ids)
        return out

    def translate(self, sentences: str | Sequence[str], *, beam_size: int = 5,
                  max_len: int | None = None, length_penalty: float | None = None):
        """Translate one sentence (-> str) or a list of at most :data:`MAX_SENTENCES` sentences
        (-> list of str).

        ``ValueError`` (one line) for a sentence :meth:`source_tokens` refuses, a longer list
        (translate it in parts, or a file with ``python -m convs2s.translate``, which streams),
        or a size out of its bounds (:func:`check_sizes`; ``max_len``: 1 to the model's
        ``max_positions``)."""
        single = isinstance(sentences, str)
        if isinstance(sentences, tuple) and len(sentences) == 2 and all(
                isinstance(s, str) for s in sentences):  # data["test"][0]: a pair, not a list
            raise TypeError("translate() takes a str or a list of str, not a tuple of two: a "
                            "(source, target) pair such as data['test'][0] is translated by "
                            "translate(pair[0]).")
        if not single and not isinstance(sentences, (list, tuple)):
            raise TypeError(f"translate() takes a str or a list of str, not "
                            f"{type(sentences).__name__}.")
        if not single and len(sentences) > MAX_SENTENCES:  # before any is tokenized
            raise ValueError(
                f"translate() takes at most {MAX_SENTENCES:,} sentences a call, not "
                f"{len(sentences):,} (they and their translations are held in memory "
                "together): translate the list in parts, or write it to a file for python -m "
                "convs2s.translate, which streams.")
        batch = [sentences] if single else list(sentences)
        tokens = self.translate_token_lists([self.source_tokens(s) for s in batch],
                                            beam_size=beam_size, max_len=max_len,
                                            length_penalty=length_penalty)
        texts = [self.detokenize(t) for t in tokens]
        return texts[0] if single else texts

    def translate_with_attention(self, sentence: str, *, max_len: int | None = None) -> Translation:
        """Greedy translation of one sentence with every decoder layer's attention, for plots."""
        if isinstance(sentence, list | tuple):
            raise TypeError(f"translate_with_attention() takes one sentence (str), not "
                            f"{type(sentence).__name__}: call it once per sentence.")
        tokens = self.source_tokens(sentence)
        v = self.trg_vocab
        max_len, _ = self._settings(1, 1, max_len)
        ids, attn = greedy_decode(self.model, self._batch([tokens]), max_len=max_len,
                                  bos_idx=v.bos_idx, eos_idx=v.eos_idx, pad_idx=v.pad_idx,
                                  return_attention=True)
        out = v.decode(ids[0])
        return Translation(tokens, out, self.detokenize(out), attn[0])


def _sentence_list(sentences) -> Sequence[str]:
    """``sentences`` if it is a list of sentences (not one str, whose characters would each be
    translated): ``TypeError`` (one line) otherwise."""
    if isinstance(sentences, str):
        raise TypeError("this takes a list of sentences, not one str: pass [sentence], or use "
                        "translate(sentence) for one.")
    return sentences


def _check_token_lists(token_lists) -> None:
    """``TypeError`` (one line) unless ``token_lists`` holds lists of tokens (not strings)."""
    if isinstance(token_lists, str) or any(isinstance(t, str) for t in token_lists):
        raise TypeError("this takes a list of token lists (e.g. [translator.source_tokens(s)]), "
                        "not sentences (str): for sentences use translate_tokens.")


def _alpha_list(alphas):
    """``alphas`` if it is a list of length penalties: ``TypeError`` (one line) for one number."""
    if isinstance(alphas, str) or not isinstance(alphas, Iterable):
        raise TypeError(f"alphas must be a list of length penalties such as [0.5, 1.0], not "
                        f"{alphas!r}.")
    return alphas
