"""convs2s.data.truecase: all-lower-case or all-caps input gets back the case a cased model was
trained on; any other input is left as typed. Invented sentences, not Multi30k."""

from __future__ import annotations

import pytest

from convs2s.data import truecase as tc

TRAIN = ["Ein Hund läuft über die Straße.", "Der Hund spielt mit einem Ball.",
         "Eine Frau sieht den Hund.", "Zwei Männer gehen über die Straße.",
         "Ein Mann liest ein Buch im Park.", "Die Frau liest ein Buch."]


@pytest.mark.parametrize("text, case", [
    ("ein hund läuft.", "lower"), ("EIN HUND LÄUFT.", "upper"), ("Ein Hund läuft.", None),
    ("ein Hund", None), ("12 + 3 = 15 !", None), ("", None), ("straße", "lower"),
    ("STRASSE 12", "upper"), ("ß", "lower"),
])
def test_uniform_case(text, case):
    assert tc.uniform_case(text) == case


def test_the_casing_table_keeps_each_words_most_frequent_form():
    table = tc.casing_table(TRAIN)
    assert table["hund"] == "Hund" and table["straße"] == "Straße" and table["buch"] == "Buch"
    # a sentence's capitalised first word says nothing about the word: "die" is lower-case
    # where it stands inside a sentence, "ein" too
    assert table["die"] == "die" and table["ein"] == "ein"
    assert table["zwei"] == "Zwei"  # seen only first in a sentence: that form is all we know
    # the capitals of Straße are STRASSE: its lower case finds Straße again
    assert table["strasse"] == "Straße"
    assert tc.casing_table([]) == {}


@pytest.mark.parametrize("typed, restored", [
    ("ein hund läuft über die straße.", "Ein Hund läuft über die Straße."),
    ("EIN HUND LÄUFT ÜBER DIE STRASSE.", "Ein Hund läuft über die Straße."),
    ("  zwei männer lesen ein buch!", "  Zwei Männer lesen ein Buch!"),
    ("\"hund\", sagt die frau.", "\"Hund\", sagt die Frau."),
    ("ein xyzzy", "Ein xyzzy"),  # a word not in the table stays lower-case
    ("3 hunde", "3 Hunde"),  # the first word is capitalised, after a number too
    ("der t-shirt-hund", "Der t-shirt-Hund"),  # each run of letters is a word
])
def test_lower_case_or_all_caps_input_gets_the_tables_case(typed, restored):
    table = tc.casing_table(TRAIN)
    assert tc.truecase(typed, table) == restored
    # only the case changed: lower-cased (or upper-cased) again, it is the input
    out = tc.truecase(typed, table)
    assert (out.lower() if tc.uniform_case(typed) == "lower" else out.upper()) == typed


@pytest.mark.parametrize("typed", ["Ein hund läuft.", "ein Hund", "eIN HUND", "", "   ",
                                   "12:30", "😀🐶", "Straße"])
def test_mixed_case_or_caseless_input_is_left_as_typed(typed):
    assert tc.truecase(typed, tc.casing_table(TRAIN)) == typed


def test_a_table_entry_that_is_not_the_word_is_ignored():
    # a mapping could hold anything: only a form of the same word (same letters) is used;
    # an all-caps form is one ("USA")
    table = {"hund": "Katze", "frau": 3, "mann": "MANN", "ball": "Ball"}
    assert tc.truecase("hund frau mann ball", table) == "Hund frau MANN Ball"
    assert tc.truecase("HUND MANN", table) == "Hund MANN"


def test_lower_case_strasse_is_not_respelled_but_capitals_get_their_eszett():
    table = tc.casing_table(TRAIN)
    assert tc.truecase("die strasse", table) == "Die strasse"  # only the case may change
    assert tc.truecase("DIE STRASSE", table) == "Die Straße"  # STRASSE is Straße in capitals


class _Pieces:
    """A toy subword tokenizer: a word it knows is one piece, anything else one per letter."""

    KNOWN = ["▁Hund", "▁läuft", "▁die", "▁Die", "▁Ball", "▁ball"]

    def __call__(self, text):
        out = []
        for word in text.split():
            piece = "▁" + word
            out += [piece] if piece in self.KNOWN else ["▁", *word]
        return out


def test_piece_casing_prefers_the_form_cut_into_fewer_then_more_frequent_pieces():
    rank = {p: i for i, p in enumerate(_Pieces.KNOWN)}
    best = tc.piece_casing(_Pieces(), rank)
    assert best("hund") == "Hund"  # one piece against four
    assert best("läuft") == "läuft"
    assert best("die") == "die"  # one piece each: the more frequent (smaller id) wins
    assert best("ball") == "Ball"
    assert best("xyz") == "xyz"  # a tie in every way: as typed
    assert tc.truecase("der hund läuft", best) == "Der Hund läuft"


def test_multi30k_casing_is_none_without_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "nothing here"))
    tc.multi30k_casing.cache_clear()
    try:
        assert tc.multi30k_casing("de") is None
    finally:
        tc.multi30k_casing.cache_clear()


def test_multi30k_casing_reads_the_training_split(tiny_corpus, monkeypatch):
    import hashlib

    from convs2s.data import multi30k

    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tiny_corpus.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)  # the invented files' checksums
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    tc.multi30k_casing.cache_clear()
    try:
        table = tc.multi30k_casing("de")
    finally:
        tc.multi30k_casing.cache_clear()
    assert table["hund"] == "Hund" and table["katze"] == "Katze" and table["buch"] == "Buch"
    assert table["läuft"] == "läuft"


#: Invented English captions (not Multi30k): the source side of the English → German model.
ENGLISH_TRAIN = ["A man walks his dog in New York.", "The dog runs through Central Park.",
                 "Two women stand in front of the Eiffel Tower.", "A man and a dog play.",
                 "Two children play in the park near the river."]


@pytest.mark.parametrize("typed, restored", [
    ("a man walks his dog in new york.", "A man walks his dog in New York."),
    ("A MAN WALKS HIS DOG IN NEW YORK.", "A man walks his dog in New York."),
    ("two children play near the eiffel tower!", "Two children play near the Eiffel Tower!"),
    ("the dog runs through central park.", "The dog runs through Central Park."),
])
def test_english_input_gets_the_case_of_english_captions(typed, restored):
    """Nothing in the rewrite is German: an English table restores English case (the first word,
    names), for the English → German model."""
    table = tc.casing_table(ENGLISH_TRAIN)
    assert table["dog"] == "dog" and table["york"] == "York" and table["a"] == "a"
    assert tc.truecase(typed, table) == restored


def test_multi30k_casing_reads_the_english_captions_for_an_english_source(tiny_corpus,
                                                                         monkeypatch):
    import hashlib

    from convs2s.data import multi30k

    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tiny_corpus.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)  # the invented files' checksums
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    tc.multi30k_casing.cache_clear()
    try:
        table = tc.multi30k_casing("en")
    finally:
        tc.multi30k_casing.cache_clear()
    assert table["dog"] == "dog" and table["cat"] == "cat" and "hund" not in table
    assert tc.truecase("THE DOG PLAYS WITH A BALL.", table) == "The dog plays with a ball."
