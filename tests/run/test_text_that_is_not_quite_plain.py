"""A sentence that reads as plain text but is not quite (pasted from a web page, a word processor
or a terminal) translates as the plain sentence: tabs and non-breaking spaces between the words,
a byte order mark, a zero-width space, a soft hyphen, terminal colours, a NUL or a right-to-left
override. Each became pieces the model never saw and changed the translation, silently; now
every path that takes a user's sentence makes it plain text first (convs2s.data.plain_text:
the Python API, the command line, the evaluation of a file), and plain text is left as it is, so
its tokens are those training saw. What is nothing but such characters is refused in one line.

The sentences are made up in the test; the model is the shipped German → English one.
"""

from __future__ import annotations

import io
import unicodedata

import pytest

import convs2s
from convs2s.data import DataError, Tokenizer, load_multi30k, plain_text
from convs2s.run import translate_cli as translate

PLAIN = "Ein Hund läuft durch den Schnee."
#: The plain sentence as it arrives from elsewhere; each reads the same to a person.
VARIANTS = {
    "tabs": "Ein\tHund\tläuft\tdurch\tden\tSchnee.",
    "non-breaking spaces": "Ein\u00a0Hund läuft\u202fdurch den\u2009Schnee.",
    "runs of spaces and a newline": "  Ein   Hund läuft \n durch den Schnee.\r\n",
    "byte order mark": "\ufeffEin Hund läuft durch den Schnee.",
    "zero-width space": "Ein Hu\u200bnd läuft \u200bdurch den Schnee.",
    "soft hyphen": "Ein Hund läuft durch den Schnee\u00ad.",
    "ANSI escape sequences": "\x1b[1;31mEin Hund\x1b[0m läuft durch den "
                             "\x1b]8;;https://example.org\x07Schnee\x1b]8;;\x07.\x1b[K",
    "NUL": "Ein Hund lä\x00uft durch den Schnee.\x00",
    "right-to-left override": "\u202eEin Hund läuft durch den Schnee.\u202c",
    "bidi isolates and a word joiner": "\u2068Ein Hund\u2069 läuft\u2060 durch den Schnee.",
    "decomposed umlaut": "Ein Hund la\u0308uft durch den Schnee.",
}
#: Nothing left once made plain text.
ONLY_ESCAPES = ["\x1b[31m\x1b[0m", "\x1b]0;title\x07 \u200b", "\x1b[2J\t\x1b[H"]


@pytest.fixture(scope="module")
def shipped():
    return convs2s.pretrained("de-en")


def test_the_variants_really_are_other_text(shipped):
    """The premise: every variant differs from the plain sentence, and all but the decomposed
    one give the shipped subword model other pieces than the plain sentence's."""
    assert all(v != PLAIN for v in VARIANTS.values())
    assert unicodedata.is_normalized("NFC", PLAIN) and PLAIN.isprintable()
    tokenize = shipped.pipeline.src_tokenizer
    same = [name for name, v in VARIANTS.items() if tokenize(v) == tokenize(PLAIN)]
    assert same == ["decomposed umlaut"]


@pytest.mark.parametrize("name", VARIANTS)
def test_each_odd_variant_is_the_plain_sentence_as_plain_text(name):
    assert plain_text(VARIANTS[name]) == PLAIN


@pytest.mark.parametrize("name", VARIANTS)
def test_each_odd_variant_gives_exactly_the_plain_sentences_tokens(shipped, name):
    assert shipped.source_tokens(VARIANTS[name]) == shipped.source_tokens(PLAIN)
    assert shipped.translate_with_attention(VARIANTS[name]).source_tokens == \
        shipped.source_tokens(PLAIN)


@pytest.mark.parametrize("lower", [True, False])
def test_the_word_tokenizer_gives_the_plain_sentences_tokens_for_each_variant(lower):
    tok = Tokenizer("de", lower=lower)
    assert {name: tok(plain_text(v)) for name, v in VARIANTS.items()} == \
        dict.fromkeys(VARIANTS, tok(PLAIN))


def test_each_odd_variant_translates_as_the_plain_sentence(shipped):
    expected = shipped.translate(PLAIN, beam_size=1)
    assert expected.startswith("A dog")
    got = shipped.translate(list(VARIANTS.values()), beam_size=1)
    assert dict(zip(VARIANTS, got, strict=True)) == dict.fromkeys(VARIANTS, expected)
    assert shipped.translate_tokens(list(VARIANTS.values()), beam_size=1) == \
        [shipped.translate_tokens([PLAIN], beam_size=1)[0]] * len(VARIANTS)


def test_the_command_line_translates_each_odd_line_as_the_plain_sentence(shipped):
    lines = [v.replace("\n", " ").replace("\r", " ").encode() + b"\n"
             for v in VARIANTS.values()]
    out, err = io.StringIO(), io.StringIO()
    n, failed = translate.translate_lines(shipped, lines, out, err, beam_size=1)
    assert (n, failed, err.getvalue()) == (len(VARIANTS), [], "")
    assert out.getvalue().splitlines() == [shipped.translate(PLAIN, beam_size=1)] * len(VARIANTS)


@pytest.mark.parametrize("text", ONLY_ESCAPES, ids=repr)
def test_nothing_but_escape_sequences_is_refused_in_one_line(shipped, text):
    with pytest.raises(ValueError) as e:
        shipped.translate(text)
    message = str(e.value)
    assert message.startswith("Nothing to translate: the sentence holds only terminal escape "
                              "sequences") and message.endswith("Give a German sentence.")
    assert "\n" not in message


def test_plain_text_is_left_as_it_is_so_its_tokens_are_those_training_saw(shipped):
    plain = [PLAIN, "Zwei Männer spielen Fußball auf der Straße …", "Um 12:30 Uhr, 3,5 km!",
             "Große Straße; „Zitat“ – (Klammer) [eckig] {geschweift} 100 %", "x", "Ein 😀 Hund."]
    assert [plain_text(s) for s in plain] == plain
    assert [shipped.source_tokens(s) for s in plain] == \
        [shipped.pipeline.src_tokenizer(s) for s in plain]


def test_every_multi30k_test_sentence_is_plain_text_already():
    """What the benchmarks translate is left as it is: their scores do not move."""
    try:
        splits = load_multi30k(download=False)
    except DataError as e:
        pytest.skip(f"needs the Multi30k files (CONVS2S_DATA_DIR): {e}")
    changed = [s for pair in splits["test"] for s in pair if plain_text(s) != s]
    assert changed == []
