"""Word-level tokenizers: spaCy's rule-based tokenizer per language (``spacy.blank``), NFC
normalisation, a user's sentence made plain text (:func:`plain_text`), and :func:`detokenize` (the
cased subword pipeline is :mod:`convs2s.data.subword`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence


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


#: Terminal escape sequences (ECMA-48), as text copied from a terminal or a log carries them:
#: CSI (colours, cursor moves: ESC [ 31 m, or the one-character C1 CSI), OSC (a window title, a
#: hyperlink) and DCS/SOS/PM/APC strings up to their terminator (BEL or ST; an unterminated one
#: loses its ESC and introducer only, never the text after it), and any other ESC with its
#: intermediate and final bytes. tools/site/static/translator.js (``ESCAPES``) has the same.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x9b[0-?]*[ -/]*[@-~]"
                      r"|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
                      r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)|\x1b[ -/]*[0-~]")
#: Unicode categories dropped from a user's sentence: controls (C0 and C1: NUL, ESC, DEL; the
#: whitespace ones, tab and newline, become spaces first) and formats (byte order mark,
#: zero-width space and joiners, soft hyphen, bidirectional overrides and isolates).
_DROPPED = ("Cc", "Cf")


def plain_text(text: str) -> str:
    """A user's sentence as the plain text a model was trained on, before it is tokenized:
    terminal escape sequences removed, every run of Unicode whitespace (tabs, newlines,
    non-breaking and other spaces) one space, no space at either end, control and format
    characters (Unicode categories Cc and Cf: NUL, a byte order mark, a zero-width space, a soft
    hyphen, a right-to-left override) dropped, then NFC (:func:`nfc`).

    Plain text (NFC, single spaces, none of these characters: every Multi30k test sentence)
    comes back unchanged, so its tokens are those training saw. Text pasted from a web page, a
    word processor or a terminal reads the same to a person but not to a tokenizer: a subword
    model never saw a tab or a zero-width space, and would make ``<unk>`` pieces of them, which
    change the translation. What the commands and :class:`convs2s.run.translator.Translator`
    translate goes through here (training text does not: the models were trained on the corpus
    as it is); the website's translator does the same (``plainText`` in
    tools/site/static/translator.js). May return ``""`` (nothing but such characters).
    """
    if not text.isprintable():  # a control, format or separator character other than " "
        text = _ESCAPES.sub("", text)
        text = "".join(" " if c.isspace() else "" if unicodedata.category(c) in _DROPPED else c
                       for c in text)
    return nfc(" ".join(text.split()))


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
        if not isinstance(text, str):
            raise TypeError(not_a_sentence(text))
        tokens = (t.text for t in _spacy_tokenizer(self.lang)(nfc(text)) if not t.is_space)
        return [t.lower() for t in tokens] if self.lower else list(tokens)

    def __repr__(self) -> str:
        return f"Tokenizer(lang={self.lang!r}, lower={self.lower})"


def not_a_sentence(text: object) -> str:
    """The one-line message for a tokenizer called with something other than one sentence: a
    pair or a list (a split's item, ``data["train"][0]``) is told to tokenize one side."""
    hint = (": tokenize one side of each pair, e.g. [tok(source) for source, _ in pairs]"
            if isinstance(text, tuple | list) else "")
    return f"a tokenizer takes one sentence (str), not {type(text).__name__}{hint}."


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
    exactly instead: :meth:`convs2s.data.subword.TextPipeline.detokenize`.)
    """
    text = " ".join(tokens)
    text = _NO_SPACE_AFTER.sub("", _NO_SPACE_BEFORE.sub("", text))
    text = re.sub(r' " (.*?) " ', r' "\1" ', f" {text} ").strip()
    return text[:1].upper() + text[1:]


