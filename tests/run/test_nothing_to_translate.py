"""Input with nothing the model can translate gets a message saying so, never a confident
caption: only invisible or control characters ("\\x00", zero-width spaces, a byte order mark),
or only pieces the model does not know (emoji, right-to-left scripts). And a UTF-8 file with NUL
bytes in it is not called UTF-32 (nor refused whole: the NULs concern their line only)."""

from __future__ import annotations

import io

import pytest

import convs2s
from convs2s.course.analysis import translate_for_display
from convs2s.run import translate_cli as translate

INVISIBLE = ["\x00", "\u200b\u200b", "\ufeff", "\u00ad", "\u2060 \x07"]
UNKNOWN = ["😀🐶", "שלום עולם", "مرحبا بالعالم", "🐶 🐱 🐭."]


@pytest.fixture(scope="module")
def shipped():
    return convs2s.pretrained("de-en")


@pytest.mark.parametrize("text", INVISIBLE, ids=repr)
def test_only_invisible_characters_are_nothing_to_translate(shipped, text):
    with pytest.raises(ValueError, match="^Nothing to translate: the sentence holds only "
                                         "invisible or control characters"):
        shipped.translate(text)


@pytest.mark.parametrize("text", UNKNOWN)
def test_only_unknown_pieces_name_them_instead_of_a_caption(shipped, text):
    with pytest.raises(ValueError) as e:
        shipped.translate(text, beam_size=1)
    message = str(e.value)
    assert message.startswith("Nothing to translate: the model knows none of the sentence's "
                              "words (unknown pieces: ") and message.endswith("Give a German "
                                                                              "sentence.")
    assert text.split()[0].rstrip(".") in message
    result = translate_for_display(shipped, text)  # what notebook 06's widget shows
    assert not result["ok"] and result["message"] == message


def test_a_sentence_with_known_words_among_unknown_pieces_still_translates(shipped):
    assert shipped.translate("Ein Hund 🐶 läuft.", beam_size=1).startswith("A dog")
    assert shipped.translate_with_attention("Ein\u200bHund läuft.").text


def test_the_command_line_writes_an_empty_line_and_says_why_for_such_lines(shipped):
    lines = [s.encode() + b"\n" for s in ["Ein Hund läuft.", "😀🐶", "\u200b"]]
    out, err = io.StringIO(), io.StringIO()
    n, failed = translate.translate_lines(shipped, lines, out, err, beam_size=1)
    assert n == 3 and [lineno for lineno, _ in failed] == [2, 3]
    assert out.getvalue().split("\n")[1:] == ["", "", ""]
    assert all("Nothing to translate" in why for _, why in failed)


@pytest.mark.parametrize("data", [b"Hallo\x00\x00 Welt\n", b"\x00\x00\n", b"ab\x00\x00\x00\n"],
                         ids=["two NULs in text", "two NULs alone", "three NULs"])
def test_a_utf8_file_with_nul_bytes_is_not_called_utf16_or_utf32(data, tmp_path, capsys):
    path = tmp_path / "in.de"
    path.write_bytes(data)
    code = translate.main(["--pretrained", "de-en", "--input", str(path)])
    captured = capsys.readouterr()
    err = captured.err
    # the NULs concern their line only (issue 64): it is made plain text, as every sentence is,
    # and translated, or refused alone if nothing else is left; never the whole input
    assert captured.out.count("\n") == 1 and "not UTF-8 text" not in err, err
    assert "UTF-32" not in err and "UTF-16" not in err, err
    assert (code, err) == (0, "") or code == 1 and err.startswith("error: line 1: Nothing to "
                                                                  "translate"), err
