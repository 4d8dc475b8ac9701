"""Giving all-lower-case or all-caps input back the case a cased model was trained on.

The shipped translators read cased text, as Multi30k writes it: German with its nouns
capitalised (``convs2s.pretrained("de-en")``), English with its names (``"en-de"``), the first
word of a sentence in both. Typed in lower case (``ein hund läuft durch den schnee.``) or in
capitals, the same sentence is made of pieces the model rarely or never saw, and it translates
worse. :func:`truecase` rewrites such input before it is encoded, word by word, with the casing
the model knows best; text with any mixed case is the writer's choice and is left as it is.
Nothing here knows a language: the casing is learned from the model's own source side (its
language's training captions, or its vocabulary), so the same functions serve either direction.

- :func:`uniform_case`: ``"lower"``, ``"upper"`` or None (mixed, or no letters);
- :func:`casing_table`: each word's most frequent casing in a corpus (the training split), as
  a mapping from the lower-case word to that form;
- :func:`piece_casing`: the same choice from a subword vocabulary alone (what a checkpoint
  holds, no corpus needed): of a word's lower-case and capitalised forms, the one its
  tokenizer cuts into fewer pieces, then the one whose pieces are more frequent;
- :func:`truecase`: the rewrite, with either of them.

Measured with the shipped German→English model (``convs2s.pretrained("de-en")``, greedy) on
Multi30k's validation split and test2016, lower-cased or all-caps source against the same
true-cased (``benchmarks/truecasing.py``): the figures are in ``benchmarks/RESULTS.md``. Pure
functions; no model is loaded.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

__all__ = ["uniform_case", "casing_table", "piece_casing", "truecase", "multi30k_casing"]

#: A word: a run of letters (digits, underscores and punctuation separate words).
_WORD = re.compile(r"[^\W\d_]+")


def uniform_case(sentence: str) -> str | None:
    """``"lower"`` if every cased letter of ``sentence`` is lower-case, ``"upper"`` if every one
    is upper-case, None if both occur or it has no cased letter. Pure."""
    cased = [c for c in sentence if c.lower() != c.upper()]
    if not cased:
        return None
    if all(c == c.lower() for c in cased):
        return "lower"
    if all(c == c.upper() for c in cased):
        return "upper"
    return None


def casing_table(sentences: Iterable[str]) -> dict[str, str]:
    """{lower-case word: its most frequent form} over ``sentences`` (ties: the form that sorts
    first, so capitals win a tie). A sentence's first word is not counted where it is
    capitalised (its capital says only where it stands), unless the word occurs nowhere else.
    A form whose capitals are spelled otherwise (``Straße``: ``STRASSE``) is also found under
    that spelling's lower case (``strasse``), where no word of that spelling was seen, so that
    all-caps input gets its ß back. Pure."""
    counts: dict[str, Counter[str]] = {}
    first_words: dict[str, Counter[str]] = {}
    for sentence in sentences:
        for n, m in enumerate(_WORD.finditer(sentence)):
            word = m.group(0)
            target = first_words if n == 0 else counts
            target.setdefault(word.lower(), Counter())[word] += 1
    table = {}
    for key in counts.keys() | first_words.keys():
        forms = counts.get(key) or first_words[key]
        table[key] = min(forms, key=lambda form: (-forms[form], form))
    for form in sorted(table.values()):
        table.setdefault(form.upper().lower(), form)
    return table


def piece_casing(tokenize: Callable[[str], Sequence[str]],
                 rank: Mapping[str, int]) -> Callable[[str], str]:
    """A lower-case word -> its form, chosen with a subword model: of the word as it is and
    capitalised, the one ``tokenize`` (text -> pieces) cuts into fewer pieces; on a tie, the
    one whose rarest piece has the smaller ``rank`` (a vocabulary's ids: sentencepiece numbers
    its pieces most frequent first), else the lower-case word. Pure, given ``tokenize``."""
    def best(word: str) -> str:
        def cost(form: str) -> tuple[int, int]:
            pieces = [p for p in tokenize(form) if p.strip("\u2581 ")]
            return len(pieces), max((rank.get(p, len(rank)) for p in pieces), default=0)

        lower, capital = word, _capitalised(word)
        return capital if capital != lower and cost(capital) < cost(lower) else lower
    return best


def truecase(sentence: str, casing: Mapping[str, str] | Callable[[str], str]) -> str:
    """``sentence`` with the case a cased model knows, if it is entirely lower-case or entirely
    upper-case (:func:`uniform_case`); any other sentence is returned unchanged.

    Each word (a run of letters) is lower-cased and replaced by ``casing``'s form of it (a
    mapping such as :func:`casing_table`'s, where a word it lacks stays lower-case, or a
    function such as :func:`piece_casing`'s); the first letter of the sentence is then
    capitalised. Only the case changes: the result, lower-cased (for lower-case input) or
    upper-cased (for all-caps input), is the input again. Pure."""
    case = uniform_case(sentence)
    if case is None:
        return sentence
    pick = casing.get if isinstance(casing, Mapping) else None

    def form(m: re.Match) -> str:
        word = m.group(0)
        lower = word.lower()
        chosen = pick(lower, lower) if pick else casing(lower)
        # the chosen form only if it is this word, spelled as typed (a mapping could hold
        # anything): its lower case is the word typed in lower case, its upper case the word
        # typed in capitals
        same = (isinstance(chosen, str)
                and (chosen.lower() == word if case == "lower" else chosen.upper() == word))
        return chosen if same else lower

    text = _WORD.sub(form, sentence)
    first = _WORD.search(text)
    return text if first is None else text[:first.start()] + _capitalised(text[first.start():])


def _capitalised(text: str) -> str:
    """``text`` with its first character upper-case, where that is one character (not ß)."""
    head = text[:1].upper()
    return head + text[1:] if len(head) == 1 else text


@functools.lru_cache(maxsize=4)
def multi30k_casing(lang: str = "de") -> dict[str, str] | None:
    """:func:`casing_table` of the Multi30k training split in ``lang`` (read once per process
    from :func:`convs2s.system.environment.data_dir`, never downloaded), or None where the files
    are not there."""
    from convs2s.data.multi30k import LANGUAGES, DataError, load_multi30k

    other = next(code for code in LANGUAGES if code != lang)
    try:
        train = load_multi30k(download=False, src=lang, trg=other)["train"]
    except (DataError, OSError, ValueError):
        return None
    return casing_table(source for source, _ in train)
