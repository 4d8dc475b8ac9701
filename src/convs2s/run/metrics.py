"""BLEU, two ways, clearly labelled, and chrF.

- **sacreBLEU** (``sacrebleu``): detokenized, cased hypotheses against the raw references, the
  ``13a`` tokenizer. This is the standard, comparable across papers.
- **tutorial BLEU** (``tutorial``): BLEU-4 on lower-cased spaCy tokens, no smoothing. This is
  what the classic PyTorch seq2seq tutorials computed with torchtext's ``bleu_score`` (they
  compared the token lists their models produced with the lower-cased, spaCy-tokenized
  references), so our figures can be put beside theirs (GRU+attention 28.11, ConvS2S 34.14,
  Transformer 36.52). It is usually a few points higher than sacreBLEU on Multi30k.
- **chrF** (``chrf``): sacreBLEU's character n-gram F-score (chrF2) of the same detokenized,
  cased text; it credits a partly right word (an inflection, a compound's part), which matters
  for German and Czech targets.

Give the target language (``lang``) so the tutorial score tokenizes with that language's rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu

from convs2s.data import make_tokenizer


@dataclass(frozen=True)
class BleuScores:
    sacrebleu: float  # detokenized, cased, 13a: the standard
    tutorial: float  # lower-cased spaCy tokens, BLEU-4: comparable with the classic tutorials
    signature: str  # sacreBLEU's signature for the standard score
    n: int
    chrf: float | None = None  # chrF2 of the detokenized, cased text
    chrf_signature: str = ""

    def __str__(self) -> str:
        chrf = f" | chrF {self.chrf:.2f}" if self.chrf is not None else ""
        return (f"sacreBLEU {self.sacrebleu:.2f} ({self.signature}) | tutorial-comparable BLEU "
                f"{self.tutorial:.2f} (lower-cased spaCy tokens){chrf} | {self.n} sentences")


def tutorial_bleu(
    hyp_tokens: Sequence[Sequence[str]], ref_tokens: Sequence[Sequence[str]]
) -> float:
    """Corpus BLEU-4 of token lists against one reference each, as torchtext's bleu_score."""
    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    hyps = [" ".join(t) for t in hyp_tokens]
    refs = [" ".join(t) for t in ref_tokens]
    return metric.corpus_score(hyps, [refs]).score


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[str], *, lang: str = "en",
                hyp_tokens: Sequence[Sequence[str]] | None = None) -> BleuScores:
    """Both BLEU scores and chrF of detokenized ``hypotheses`` against raw ``references``.

    One reference per hypothesis; ``lang`` is their language (the target language).
    ``hyp_tokens``: the model's output token lists, when you have them. The tutorial score then
    uses them as they are, as the classic tutorials did; otherwise the hypotheses are
    re-tokenized, which splits a ``<unk>`` the model produced into ``<``, ``unk``, ``>`` and
    so changes the score slightly. A subword model's pieces are not words: leave
    ``hyp_tokens`` out, and its detokenized text is re-tokenized like the references.
    """
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("corpus_bleu takes lists of sentences, not a single string.")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references; "
                         "give exactly one reference per hypothesis.")
    if not hypotheses:
        raise ValueError("corpus_bleu needs at least one sentence.")
    standard = sacrebleu.metrics.BLEU()
    score = standard.corpus_score(list(hypotheses), [list(references)])
    tok = make_tokenizer(lang, lower=True)
    if hyp_tokens is None:
        hyp_tokens = [tok(h) for h in hypotheses]
    elif len(hyp_tokens) != len(hypotheses):
        raise ValueError(f"{len(hyp_tokens)} token lists for {len(hypotheses)} hypotheses.")
    tutorial = tutorial_bleu(hyp_tokens, [tok(r) for r in references])
    chrf = sacrebleu.metrics.CHRF()
    chrf_score = chrf.corpus_score(list(hypotheses), [list(references)])
    return BleuScores(score.score, tutorial, str(standard.get_signature()), len(hypotheses),
                      chrf_score.score, str(chrf.get_signature()))
