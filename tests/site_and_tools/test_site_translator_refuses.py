"""What the website's translator refuses (tools/site/static/translator.js ``checkSource``): what
the package's ``Translator.source_tokens`` refuses, with the package's messages, and a sentence
too long for the model before any piece is made (a 2-million-character paste does not block the
page); what it translates, it cuts into the package's pieces, also for text that is not quite
plain (tabs, non-breaking spaces, a byte order mark, terminal colours: made plain text first).

The page's function runs in Node.js (no browser needed) on each shipped model's tokenizer, as
the site writes it (its message names the model's source language, as the package's does); the
last test runs the page itself in headless Chromium.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tools.site import translator

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "site" / "static" / "translator.js"
LONG_PASTE = "Ein Hund läuft über die Wiese. " * 65_000  # about 2 million characters
REFUSED = ["\x00", "\u200b\u200b", "\ufeff", "😀🐶", "שלום עולם", "مرحبا", "😀.", ".",
           "Ein \ud800 Hund.", "\udcff", "", "   ", "Hund " * 300, "🐶" * 30 + " " + "🐱" * 12,
           "\x1b[31m\x1b[0m", "\x1b]0;title\x07 \u200b"]
TRANSLATED = ["Ein Hund läuft.", "Ein Hund 🐶.", "Ein\u200bHund.", "x", "12 Hunde",
              "\x1b[Hund \x1b]Hund \x9b1mHund"]
#: The page makes a typed sentence plain text as the package does (plainText,
#: convs2s.data.plain_text): each of these gives the pieces of PLAIN on both sides.
PLAIN = "Ein Hund läuft durch den Schnee."
NOT_QUITE_PLAIN = [
    "Ein\tHund\tläuft\tdurch\tden\tSchnee.",
    "Ein\u00a0Hund läuft\u202fdurch den\u2009Schnee.",
    "  Ein   Hund läuft \n durch den Schnee.\r\n",
    "\ufeffEin Hund läuft durch den Schnee.",
    "Ein Hu\u200bnd läuft \u200bdurch den Schnee.",
    "Ein Hund läuft durch den Schnee\u00ad.",
    "\x1b[1;31mEin Hund\x1b[0m läuft durch den \x1b]8;;https://example.org\x07Schnee\x1b]8;;\x07.",
    "Ein Hund lä\x00uft durch den Schnee.\x00",
    "\u202eEin Hund läuft durch den Schnee.\u202c",
    "\u2068Ein Hund\u2069 läuft\u2060 durch den Schnee.",
]

# Loads translator.js as the page does (a window and a document that hold no widget), then
# answers each line of stdin (JSON: [text, count the merges?]) with checkSource's result, and
# how often the tokenizer looked up a merge (a piece) while checking it.
_NODE = r"""
const fs = require("fs"), vm = require("vm"), readline = require("readline");
const context = {window: {}, document: {currentScript: null, readyState: "complete",
                                        querySelectorAll: () => []}};
vm.createContext(context);
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), context);
const page = context.window.convs2sTranslator;
const tok = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
page.checkSource("Ein Hund.", tok);  // builds the tokenizer's tables
const merges = tok.mergeable;
let lookups = 0;
tok.mergeable = {get: (piece) => { lookups++; return merges.get(piece); }};
readline.createInterface({input: process.stdin}).on("line", (line) => {
  lookups = 0;
  const r = page.checkSource(JSON.parse(line), tok);
  console.log(JSON.stringify({message: r.message, pieces: r.pieces, lookups}));
});
"""


DIRECTIONS = list(translator.MODELS)


@pytest.fixture(scope="module", params=DIRECTIONS)
def package(request):
    """The shipped model of each direction the page offers (the tests below run once for each)."""
    import convs2s

    return convs2s.pretrained(request.param)


@pytest.fixture(scope="module")
def page_check(package, tmp_path_factory):
    """``checkSource`` of the page, in Node.js, on the shipped model's tokenizer."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs Node.js (apt-get install nodejs)")
    folder = tmp_path_factory.mktemp("page")
    (folder / "check.js").write_text(_NODE, encoding="utf-8")
    (folder / "tok.json").write_text(json.dumps(translator.tokenizer_data(package)),
                                     encoding="utf-8")

    def check(texts: list[str]) -> list[dict]:
        lines = "".join(json.dumps(t) + "\n" for t in texts)
        done = subprocess.run([node, str(folder / "check.js"), str(SCRIPT),
                               str(folder / "tok.json")], input=lines, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    return check


def _package_check(package, text: str) -> dict:
    try:
        return {"message": "", "pieces": package.source_tokens(text)}
    except ValueError as e:
        return {"message": str(e), "pieces": []}


def test_the_page_refuses_what_the_package_refuses_with_the_packages_messages(package,
                                                                              page_check):
    texts = REFUSED + TRANSLATED + [PLAIN] + NOT_QUITE_PLAIN
    page = page_check(texts)
    expected = [_package_check(package, t) for t in texts]
    got = [{"message": p["message"], "pieces": p["pieces"]} for p in page]
    wrong = [(t, g, e) for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert wrong == [], wrong[:3]
    assert all(e["message"] for e in expected[:len(REFUSED)])  # the premise: all refused
    assert not any(e["message"] for e in expected[len(REFUSED):])
    plain = len(REFUSED) + len(TRANSLATED)  # PLAIN's, then NOT_QUITE_PLAIN's
    assert [g["pieces"] for g in got[plain + 1:]] == [got[plain]["pieces"]] * len(NOT_QUITE_PLAIN)
    # "Nothing to translate ... Give a <the model's source language> sentence."
    language = {"de": "German", "en": "English"}[package.src_lang]
    assert any(g["message"].endswith(f"Give a {language} sentence.") for g in got)


def test_the_page_refuses_a_two_million_character_paste_before_making_its_pieces(package,
                                                                                 page_check):
    [page] = page_check([LONG_PASTE])
    assert page["lookups"] == 0, "the tokenizer ran before the length was checked"
    assert page["message"].startswith("The source sentence is more than 100 positions long")
    assert page["message"].endswith("Shorten it or split it into several sentences.")
    with pytest.raises(ValueError, match="positions long"):  # the package refuses it too
        package.source_tokens(LONG_PASTE)


@pytest.mark.browser
@pytest.mark.slow
def test_the_page_says_why_it_refuses_a_paste_or_a_lone_surrogate(web):
    import convs2s
    from tools import site_screenshots as shots

    package = convs2s.pretrained("de-en")  # the page's first direction, loaded by its button

    base, browser = web
    t = shots.SitePage(browser, base)
    try:
        t.open("06_inference_beam_search_bleu.html")
        t.page.locator(".convs2s-translator .translator-load").click()
        t.page.wait_for_function("['translated', 'failed'].includes("
                                 "document.querySelector('.convs2s-translator').dataset.state)",
                                 timeout=180_000)
        results = t.page.evaluate("""async () => {
            const texts = ["Ein Hund läuft über die Wiese. ".repeat(65000),
                           "Ein " + String.fromCharCode(0xd800) + " Hund.", "😀🐶"];
            const out = [];
            for (const s of texts) out.push(await window.convs2sTranslator.translate(s));
            return out; }""")
        assert [r["ok"] for r in results] == [False, False, False]
        assert "more than 100 positions long" in results[0]["message"]
        for r, text in zip(results[1:], ["Ein \ud800 Hund.", "😀🐶"], strict=True):
            assert r["message"] == _package_check(package, text)["message"]
        assert t.problems() == []
    finally:
        t.close()
