"""Decomposed Unicode (NFD) reads as the composed text (NFC) it stands for.

Text copied on macOS often arrives decomposed: "ä" as "a" + U+0308 (combining diaeresis). Both
spellings are the same text to a reader, but not to a tokenizer: the word model's vocabulary has
"fährt" only as NFC, and a subword model never saw U+0308 alone, so NFD input became ``<unk>``
(word) or id 0 pieces (subword) and translated differently. Every tokenizer, the subword
training sentences and the lines read from a corpus file are normalised to NFC first.

Every sentence here is made up in the test (no Multi30k text).
"""

from __future__ import annotations

import unicodedata

import pytest
import torch

from convs2s.data import Tokenizer, Vocab, load_pairs
from convs2s.data.subword import SubwordSettings, TextPipeline, cache_key, train_subword
from convs2s.model import ConvS2S
from convs2s.run.translator import Translator

GERMAN = [
    "Ein Mann fährt über die Straße.",
    "Eine Frau fährt mit dem Fahrrad über die Brücke.",
    "Zwei Mädchen laufen über die Wiese …",
    "Ein Junge fährt Ski und lächelt.",
    "Die Männer spielen Fußball auf der Straße.",
    "Ein Hund läuft über den Strand.",
]
ENGLISH = [
    "A man drives across the street.",
    "A woman rides her bike across the bridge.",
    "Two girls run across the meadow …",
    "A boy skis and smiles.",
    "The men play football on the street.",
    "A dog runs across the beach.",
]
PAIRS = list(zip(GERMAN, ENGLISH, strict=True))
SENTENCE = "Ein Mann fährt über die Straße …"


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def test_the_nfd_test_text_really_differs_from_nfc():
    """The premise: NFD spells the umlauts with two code points, NFC with one."""
    assert nfd(SENTENCE) != SENTENCE and len(nfd(SENTENCE)) == len(SENTENCE) + 2
    assert "\u0308" in nfd(SENTENCE) and all(unicodedata.is_normalized("NFC", s) for s in GERMAN)


@pytest.mark.parametrize("lower", [True, False])
def test_word_tokenizer_reads_nfd_as_nfc(lower):
    tok = Tokenizer("de", lower=lower)
    assert tok(nfd(SENTENCE)) == tok(SENTENCE)
    vocab = Vocab.build((tok(s) for s in GERMAN), min_freq=1)
    assert vocab.unk_idx not in vocab.encode(tok(nfd(SENTENCE)))


def test_word_vocabulary_from_nfd_training_text_is_the_nfc_one():
    tok = Tokenizer("de")
    assert (Vocab.build((tok(nfd(s)) for s in GERMAN), min_freq=1)
            == Vocab.build((tok(s) for s in GERMAN), min_freq=1))


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_subword_tokenizer_reads_nfd_as_nfc(model_type):
    tok = train_subword(GERMAN + ENGLISH, SubwordSettings(vocab_size=100, model_type=model_type),
                        cache=False)
    assert tok(nfd(SENTENCE)) == tok(SENTENCE)
    assert 0 not in tok.vocab().encode(tok(nfd(SENTENCE)))  # no <unk> piece
    assert tok.decode(tok(nfd(SENTENCE))) == SENTENCE


def test_subword_model_from_nfd_training_text_is_the_nfc_one(tmp_path):
    settings = SubwordSettings(vocab_size=100)
    from_nfc = train_subword(GERMAN + ENGLISH, settings, cache=False)
    from_nfd = train_subword([nfd(s) for s in GERMAN + ENGLISH], settings, cache=tmp_path)
    assert from_nfd.model == from_nfc.model
    # the cache key is that of the NFC text: NFC data keeps the key it always had
    assert cache_key([nfd(s) for s in GERMAN], settings) == cache_key(GERMAN, settings)
    assert [f.name for f in tmp_path.iterdir()] == [
        f"{cache_key(GERMAN + ENGLISH, settings)}.model"]


def test_corpus_lines_are_read_as_nfc(tmp_path):
    de, en = tmp_path / "x.de", tmp_path / "x.en"
    de.write_text("".join(nfd(s) + "\n" for s in GERMAN), encoding="utf-8")
    en.write_text("".join(s + "\n" for s in ENGLISH), encoding="utf-8")
    assert load_pairs(de, en) == PAIRS


def _translator(pipeline: TextPipeline) -> Translator:
    src_vocab, trg_vocab = pipeline.vocabs(PAIRS, min_freq=1)
    torch.manual_seed(0)
    model = ConvS2S(len(src_vocab), len(trg_vocab), emb_dim=16, hid_dim=16, enc_layers=2,
                    dec_layers=2, max_positions=48, src_pad_idx=src_vocab.pad_idx,
                    trg_pad_idx=trg_vocab.pad_idx)
    return Translator(model, src_vocab, trg_vocab, pipeline=pipeline, device="cpu")


@pytest.mark.parametrize("kind", ["word", "subword"])
def test_nfd_input_translates_as_the_nfc_input(kind):
    if kind == "word":
        pipeline = TextPipeline.word("de", "en")
    else:
        pipeline = TextPipeline.learn(PAIRS, "de", "en", SubwordSettings(vocab_size=100),
                                      cache=False)
    translator = _translator(pipeline)
    ids = translator.src_vocab.encode(translator.src_tokenizer(nfd(SENTENCE)))
    assert translator.src_vocab.unk_idx not in ids
    for beam_size in (1, 3):
        assert (translator.translate(nfd(SENTENCE), beam_size=beam_size, max_len=12)
                == translator.translate(SENTENCE, beam_size=beam_size, max_len=12))
