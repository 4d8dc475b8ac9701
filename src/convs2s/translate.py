"""Translate with a trained checkpoint: ``Translator`` and the ``python -m convs2s.translate`` CLI.

    >>> t = Translator.from_checkpoint("runs/cpu/best.pt")        # doctest: +SKIP
    >>> t.translate("Ein Mann fährt Fahrrad.")                     # doctest: +SKIP
    'A man rides a bike.'

The model was trained on lower-cased spaCy tokens, so its output is lower-cased tokens;
:func:`detokenize` joins them back into a sentence (no space before punctuation, a capital
first letter), which is what the standard, cased sacreBLEU score sees.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from convs2s import config
from convs2s.checkpoint import load_checkpoint, vocab_from_dict
from convs2s.data import Vocab, check_length, make_tokenizer
from convs2s.decode import beam_search, greedy_decode
from convs2s.model import ConvS2S

_NO_SPACE_BEFORE = re.compile(r" (?=[.,!?;:%)\]}]|'s\b|'re\b|'ll\b|'ve\b|'d\b|'m\b|n't\b)")
_NO_SPACE_AFTER = re.compile(r"(?<=[(\[{]) ")


def detokenize(tokens: Sequence[str]) -> str:
    """Join English tokens into a sentence: ``["a", "man", "."]`` -> ``"A man."``."""
    text = " ".join(tokens)
    text = _NO_SPACE_AFTER.sub("", _NO_SPACE_BEFORE.sub("", text))
    text = re.sub(r' " (.*?) " ', r' "\1" ', f" {text} ").strip()
    return text[:1].upper() + text[1:]


@dataclass
class Translation:
    source_tokens: list[str]
    tokens: list[str]
    text: str
    attention: torch.Tensor  # [dec_layers, len(tokens), len(source_tokens)]


class Translator:
    """A model, its vocabularies and tokenizers, ready to translate sentences."""

    def __init__(self, model: ConvS2S, src_vocab: Vocab, trg_vocab: Vocab, *,
                 src_lang: str = "de", trg_lang: str = "en", lower: bool = True, device=None):
        if device is None:
            device = next(model.parameters()).device
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()
        self.src_vocab, self.trg_vocab = src_vocab, trg_vocab
        self.src_tokenizer = make_tokenizer(src_lang, lower=lower)
        self.max_positions = model.config["max_positions"]

    @classmethod
    def from_checkpoint(cls, path, device=None) -> Translator:
        data = load_checkpoint(path)
        model = ConvS2S(**data["model_config"])
        model.load_state_dict(data["model"])
        tok = data.get("tokenizers", {})
        device = torch.device(device) if device is not None else config.device()
        return cls(model, vocab_from_dict(data["src_vocab"]), vocab_from_dict(data["trg_vocab"]),
                   src_lang=tok.get("src_lang", "de"), trg_lang=tok.get("trg_lang", "en"),
                   lower=tok.get("lower", True), device=device)

    # -- input checks --------------------------------------------------------------------------
    def _tokens(self, sentence) -> list[str]:
        if not isinstance(sentence, str):
            raise TypeError(f"translate() takes a German sentence (str) or a list of them, not "
                            f"{type(sentence).__name__}.")
        if not sentence.strip():
            raise ValueError("Cannot translate an empty or whitespace-only sentence.")
        tokens = self.src_tokenizer(sentence)
        check_length(tokens, self.max_positions, what="source sentence")
        return tokens

    def _batch(self, token_lists: list[list[str]]) -> torch.Tensor:
        ids = [torch.tensor(self.src_vocab.encode(t), dtype=torch.long) for t in token_lists]
        src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True,
                                              padding_value=self.src_vocab.pad_idx)
        return src.to(self.device)  # src = [batch, src_len]

    def _max_len(self, max_len: int | None) -> int:
        return self.max_positions if max_len is None else max_len

    # -- translation ---------------------------------------------------------------------------
    def translate_tokens(self, sentences: Sequence[str], *, beam_size: int = 5,
                         max_len: int | None = None, batch_size: int = 64) -> list[list[str]]:
        """Output token lists for a list of sentences (what the tutorial BLEU compares)."""
        token_lists = [self._tokens(s) for s in sentences]
        if beam_size < 1:
            raise ValueError(f"beam_size must be at least 1, got {beam_size}.")
        out: list[list[str]] = []
        v = self.trg_vocab
        for i in range(0, len(token_lists), batch_size):
            src = self._batch(token_lists[i: i + batch_size])
            kw = dict(max_len=self._max_len(max_len), bos_idx=v.bos_idx, eos_idx=v.eos_idx)
            if beam_size == 1:
                ids = greedy_decode(self.model, src, **kw)
            else:
                ids = beam_search(self.model, src, beam_size=beam_size, **kw)
            out.extend(v.decode(x) for x in ids)
        return out

    def translate(self, sentences: str | Sequence[str], *, beam_size: int = 5,
                  max_len: int | None = None):
        """Translate one sentence (-> str) or a list of sentences (-> list of str)."""
        single = isinstance(sentences, str)
        if not single and not isinstance(sentences, (list, tuple)):
            raise TypeError(f"translate() takes a str or a list of str, not "
                            f"{type(sentences).__name__}.")
        batch = [sentences] if single else list(sentences)
        texts = [detokenize(t) for t in self.translate_tokens(batch, beam_size=beam_size,
                                                               max_len=max_len)]
        return texts[0] if single else texts

    def translate_with_attention(self, sentence: str, *, max_len: int | None = None) -> Translation:
        """Greedy translation of one sentence with every decoder layer's attention, for plots."""
        tokens = self._tokens(sentence)
        v = self.trg_vocab
        ids, attn = greedy_decode(self.model, self._batch([tokens]), max_len=self._max_len(max_len),
                                  bos_idx=v.bos_idx, eos_idx=v.eos_idx, return_attention=True)
        out = v.decode(ids[0])
        return Translation(tokens, out, detokenize(out), attn[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convs2s.translate",
                                     description="Translate German sentences to English.")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("sentences", nargs="+", help="German sentences")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--device")
    args = parser.parse_args(argv)
    try:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
        for text in translator.translate(args.sentences, beam_size=args.beam_size):
            print(text)
    except (ValueError, TypeError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
