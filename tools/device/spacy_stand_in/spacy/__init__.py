"""A stand-in for spaCy on the lent GPU machine only (tools/device/candidates.sh puts it on the
path when ``import spacy`` fails there): the real spaCy and its compiled dependencies weigh more
than the device tool carries beside the repository (64 MiB in all).

Only the tutorial BLEU needs a word tokenizer (``convs2s.run.metrics.corpus_bleu``); every
choice a run makes, and every figure benchmarks/candidates.py reports, is sacreBLEU's, which
tokenizes by itself. This splits words from punctuation, close to but not the same as spaCy's
rules, so a tutorial BLEU computed with it is not the package's: never report one.
"""

import re

_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class _Token:
    __slots__ = ("text",)
    is_space = False

    def __init__(self, text: str):
        self.text = text


class _Blank:
    def __init__(self, lang: str):
        self.lang = lang

    def tokenizer(self, text: str) -> list:
        return [_Token(m.group()) for m in _TOKEN.finditer(text)]


def blank(lang: str) -> _Blank:
    return _Blank(lang)
