"""The mistakes a learner makes with the data layer from a notebook: a (source, target) pair or
None for a tokenizer's sentence, load_multi30k's dict, a list of sentences or one pair for a
dataset's pairs, raw text or a float for make_loader, sentences for Vocab.build's token lists and
one str for Vocab.encode's tokens. Each is one line that names what was given and what to pass,
raised before any work, not a unicodedata, unpacking or torch error frames down (or, for the
vocabulary, no error at all)."""

from __future__ import annotations

import pytest
from conftest import TINY_PAIRS

from convs2s.data import TranslationDataset, Vocab, make_loader, make_tokenizer

DATA = {"train": TINY_PAIRS[:8], "valid": TINY_PAIRS[8:10], "test": TINY_PAIRS[10:]}


def _one_line(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, text
    return text


@pytest.fixture(scope="module")
def toks():
    return make_tokenizer("de"), make_tokenizer("en")


@pytest.fixture(scope="module")
def vocabs(toks):
    tok_de, tok_en = toks
    return (Vocab.build((tok_de(de) for de, _ in TINY_PAIRS), min_freq=1),
            Vocab.build((tok_en(en) for _, en in TINY_PAIRS), min_freq=1))


@pytest.fixture
def dataset(toks, vocabs):
    return TranslationDataset(TINY_PAIRS, *toks, *vocabs)


# ------------------------------------------------------------------ tokenizers


def test_a_tokenizer_given_a_pair_says_to_tokenize_one_side(toks):
    """tok_de(data["train"][0]) was "normalize() argument 2 must be str, not tuple"."""
    tok_de, tok_en = toks
    with pytest.raises(TypeError) as e:
        tok_de(DATA["train"][0])
    assert _one_line(e) == ("a tokenizer takes one sentence (str), not tuple: tokenize one "
                            "side of each pair, e.g. [tok(source) for source, _ in pairs].")
    with pytest.raises(TypeError, match=r"not list: tokenize one side of each pair"):
        tok_en(list(DATA["train"]))


def test_a_subword_tokenizer_given_a_pair_says_the_same(tmp_path):
    from convs2s.data.subword import SubwordSettings, TextPipeline

    pipeline = TextPipeline.learn(DATA["train"] * 20, "de", "en",
                                  SubwordSettings(vocab_size=60), cache=tmp_path)
    with pytest.raises(TypeError) as e:
        pipeline.src_tokenizer(DATA["train"][0])
    assert _one_line(e).startswith("a tokenizer takes one sentence (str), not tuple: tokenize")


def test_a_tokenizer_given_none_names_it(toks):
    with pytest.raises(TypeError) as e:
        toks[0](None)
    assert _one_line(e) == "a tokenizer takes one sentence (str), not NoneType."


def test_a_tokenizer_still_takes_a_sentence(toks):
    assert toks[0]("Ein Hund läuft.") == ["ein", "hund", "läuft", "."]


# ------------------------------------------------------------------ TranslationDataset


@pytest.mark.parametrize("pairs, given", [
    (DATA, r"not a dict \(keys 'train', 'valid', 'test'\)\.$"),
    ([de for de, _ in TINY_PAIRS], r"not a list holding str \(item 0: 'Ein Hund läuft\.'\)\.$"),
    (TINY_PAIRS[0], r"not a tuple holding str \(item 0: 'Ein Hund läuft\.'\)\.$"),
    ("Ein Hund läuft.", r"not str\.$"),
    (None, r"not NoneType\.$"),
])
def test_a_dataset_refuses_what_is_not_a_list_of_pairs(toks, vocabs, pairs, given):
    """TranslationDataset(data, ...) was "too many values to unpack (expected 2)"; nothing is
    tokenized before the refusal."""
    calls = []

    def tok(text):
        calls.append(text)
        return text.split()

    with pytest.raises(TypeError, match=given) as e:
        TranslationDataset(pairs, tok, tok, *vocabs)
    assert _one_line(e).startswith("pairs must be a list of (source, target) sentence pairs, "
                                   "e.g. data['train'], not ")
    assert isinstance(e.value, ValueError)  # what the unpacking raised before: still caught
    assert calls == []


def test_a_dataset_refuses_a_bad_pair_before_tokenizing_the_good_ones(toks, vocabs):
    calls = []

    def tok(text):
        calls.append(text)
        return text.split()

    with pytest.raises(TypeError, match=r"not a list holding str \(item 2: 'Ein Mann"):
        TranslationDataset([*TINY_PAIRS[:2], TINY_PAIRS[2][0]], tok, tok, *vocabs)
    assert calls == []


def test_a_dataset_still_takes_pairs_from_an_iterator(toks, vocabs):
    ds = TranslationDataset(iter(TINY_PAIRS), *toks, *vocabs)
    assert len(ds) == len(TINY_PAIRS) and ds.pairs == TINY_PAIRS


# ------------------------------------------------------------------ make_loader


def test_make_loader_given_text_pairs_says_to_build_a_dataset():
    """make_loader(data["train"], batch_size=32) was "new(): invalid data type 'str'"."""
    with pytest.raises(TypeError) as e:
        make_loader(DATA["train"], batch_size=32)
    text = _one_line(e)
    assert text.startswith("make_loader takes a TranslationDataset (or (src_ids, trg_ids) pairs "
                           "of token ids), not pairs of text such as ('Ein Hund läuft.', ")
    assert text.endswith("build TranslationDataset(pairs, tok_src, tok_trg, src_vocab, "
                         "trg_vocab) first.")
    with pytest.raises(TypeError, match=r"not dict: build TranslationDataset"):
        make_loader(DATA, batch_size=32)


@pytest.mark.parametrize("size, shown", [(2.0, "2.0"), (True, "True"), ("32", "'32'")])
def test_make_loader_refuses_a_batch_size_that_is_not_an_int_up_front(dataset, size, shown):
    """batch_size=2.0 failed only while iterating ('float' object cannot be interpreted as an
    integer); True was one example a batch."""
    with pytest.raises(TypeError) as e:
        make_loader(dataset, batch_size=size)
    assert _one_line(e) == f"batch_size must be a number of examples (an int), not {shown}."
    with pytest.raises(TypeError, match=r"^max_tokens must be a number of padded tokens \(an "
                                        r"int\), not True\.$"):
        make_loader(dataset, max_tokens=True)


def test_make_loader_still_takes_datasets_and_id_pairs(dataset):
    assert sum(len(src) for src, _ in make_loader(dataset, batch_size=5)) == len(TINY_PAIRS)
    ids = [([4, 5, 6], [2, 7, 3]), ([4, 5], [2, 3])]
    batches = list(make_loader(ids, batch_size=2, pad_idx=1, shuffle=False, bucket=False))
    assert [tuple(x.shape) for x in batches[0]] == [(2, 3), (2, 3)]


# ------------------------------------------------------------------ Vocab


def test_vocab_build_refuses_sentence_pairs():
    """Vocab.build(data["train"]) built a vocabulary of whole sentences, silently."""
    with pytest.raises(TypeError) as e:
        Vocab.build(DATA["train"], min_freq=1)
    assert _one_line(e) == ("Vocab.build takes lists of tokens, not sentences (it got 'Ein Hund "
                            "läuft.'); tokenize first, e.g. Vocab.build(tok_de(de) for de, _ in "
                            "pairs).")
    with pytest.raises(TypeError, match=r"not strings; tokenize first, e\.g\. Vocab\.build"):
        Vocab.build([de for de, _ in TINY_PAIRS])


def test_vocab_build_still_takes_token_lists_even_with_space_tokens(toks):
    vocab = Vocab.build([["ein", "hund"], ["ein", " "], (" ", "katze")], min_freq=1)
    assert vocab.itos[4:] == [" ", "ein", "hund", "katze"]


def test_vocab_encode_refuses_a_string(vocabs, toks):
    """Vocab.encode("ein hund") gave an <unk> id per character, silently."""
    with pytest.raises(TypeError) as e:
        vocabs[0].encode("ein hund")
    assert _one_line(e) == ("Vocab.encode takes a list of tokens, not a string; tokenize first, "
                            "e.g. vocab.encode(tok_de(sentence)).")
    assert vocabs[0].encode(toks[0]("ein hund")) == vocabs[0].encode(["ein", "hund"])
    assert vocabs[0].unk_idx not in vocabs[0].encode(["ein", "hund"])
