"""Shared fixtures: a tiny invented German-English corpus laid out like Multi30k."""

import contextlib
import gzip
import sys
from pathlib import Path

import pytest
import shared_site
import torch

# The one place that sets the tests' thread count (no test file sets it). Unit tests use tiny
# models, for which one intra-op thread is fastest: on a busy 2-core machine (another process
# holding a core) a second, spin-waiting OpenMP thread makes them many times slower.
TEST_THREADS = 1
torch.set_num_threads(TEST_THREADS)  # for what test modules build when they are imported


@pytest.fixture(autouse=True)
def _test_threads():
    """Every test starts with ``TEST_THREADS`` intra-op threads, whatever ran before it."""
    if torch.get_num_threads() != TEST_THREADS:
        torch.set_num_threads(TEST_THREADS)
    yield


@pytest.fixture(autouse=True)
def _fresh_hint_counts():
    """Every test starts as a fresh session of convs2s.course.checks: no wrong tries counted yet
    (the second wrong try of a check prints a closer hint) and not a graded copy."""
    core = sys.modules.get("convs2s.course.checks._core")
    if core is not None:
        core._wrong_tries.clear()
        core._graded, core._class_version, core._recorded = False, False, frozenset()
    yield
    core = sys.modules.get("convs2s.course.checks._core")
    if core is not None:
        core._graded, core._class_version, core._recorded = False, False, frozenset()


@pytest.fixture(scope="session", autouse=True)
def _no_process_left_behind():
    """At the end of the test run, no process a test started may still run: any that does is
    killed (with its own children) and the run fails, naming it."""
    yield
    from signal_support import command_line, kill_all, leftover_processes

    left = leftover_processes()
    if left:
        names = [f"{pid}: {command_line(pid)}" for pid in left]
        kill_all(left)
        pytest.fail("processes left running by the tests (now killed):\n" + "\n".join(names),
                    pytrace=False)


def padded_batch(lengths, vocab: int = 20, seed: int = 1, pad: int = 0) -> torch.Tensor:
    """``[len(lengths), max(lengths)]`` random token ids (3 to vocab-1: never <pad>, <bos> or
    <eos> when those are 0, 1, 2), sentence b right-padded with ``pad`` after ``lengths[b]``."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((len(lengths), max(lengths)), pad)
    for b, n in enumerate(lengths):
        src[b, :n] = torch.randint(3, vocab, (n,), generator=g)
    return src


# Invented sentence pairs (not from Multi30k). Some words repeat so that min_freq=2 keeps them.
TINY_PAIRS = [
    ("Ein Hund läuft.", "A dog runs."),
    ("Eine Katze schläft.", "A cat sleeps."),
    ("Ein Mann liest ein Buch.", "A man reads a book."),
    ("Zwei Kinder spielen im Park.", "Two children play in the park."),
    ("Eine Frau trinkt Kaffee.", "A woman drinks coffee."),
    ("Der Hund spielt mit einem Ball.", "The dog plays with a ball."),
    ("Ein Junge fährt Fahrrad.", "A boy rides a bike."),
    ("Die Katze sitzt auf dem Dach.", "The cat sits on the roof."),
    ("Ein Mädchen singt ein Lied.", "A girl sings a song."),
    ("Zwei Männer arbeiten draußen.", "Two men work outside."),
    ("Ein alter Mann geht über die Straße.", "An old man walks across the street."),
    ("Kinder lachen und rennen am Strand.", "Children laugh and run on the beach."),
]

# Multi30k file stem -> the slice of TINY_PAIRS it holds.
TINY_SPLITS = {"train": slice(0, 8), "val": slice(8, 10), "test_2016_flickr": slice(10, 12)}


def write_gz(path: Path, lines) -> Path:
    """Write lines as UTF-8, one per line, gzip-compressed with a fixed mtime (stable sha256)."""
    path.write_bytes(gzip.compress("".join(f"{s}\n" for s in lines).encode("utf-8"), mtime=0))
    return path


@pytest.fixture
def tiny_pairs():
    return list(TINY_PAIRS)


@pytest.fixture
def tiny_corpus(tmp_path) -> Path:
    """A folder with the six Multi30k file names, each holding a slice of TINY_PAIRS."""
    root = tmp_path / "tiny_multi30k"
    root.mkdir()
    for stem, part in TINY_SPLITS.items():
        write_gz(root / f"{stem}.de.gz", [de for de, _ in TINY_PAIRS[part]])
        write_gz(root / f"{stem}.en.gz", [en for _, en in TINY_PAIRS[part]])
    return root


# --------------------------------------------------------------------------------------------
# The real course website, built once for the whole run and shared by the modules that check
# it (site_and_tools/test_site.py, test_site_flipbooks.py, test_site_translator.py). Here, not in
# a site_and_tools/conftest.py: the test modules import this file as ``conftest``, and a second
# conftest module would take that name from them.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    """The site as ``make site`` builds it, from notebooks/ as they are (``site.build``'s
    result: ``.out`` is the folder). Under ``make test``, the site ``make site`` has just built
    (tests/shared_site.py); else a build of this process's own."""
    from tools import site

    root = Path(__file__).resolve().parents[1]
    shared = shared_site.recorded(root / "notebooks")
    if shared is not None:
        return shared
    out = tmp_path_factory.mktemp("site") / "site"
    return site.build(out, root / "notebooks", root, log=lambda line: None)


@pytest.fixture(scope="session")
def web(built):
    """The built site served on localhost, and one headless Chromium."""
    from test_browser import _require_browser  # the same skip/require rule as the widget tests

    from tools import screenshots
    from tools import site_screenshots as shots

    _require_browser()
    with shots.serve(built.out) as base, screenshots.Browser() as browser:
        yield base, browser


@pytest.fixture
def tab(web):
    """A fresh tab of the served site."""
    from tools import site_screenshots as shots

    base, browser = web
    t = shots.SitePage(browser, base)
    yield t
    t.close()


# --------------------------------------------------------------------------------------------
# python -m convs2s.evaluate, shared by tests/run/test_evaluate.py and test_evaluate_files.py
# --------------------------------------------------------------------------------------------


@pytest.fixture
def tiny_ckpt(tmp_path, tiny_pairs) -> Path:
    """A tiny random word-level German-English model on TINY_PAIRS' vocabularies, saved as
    ``run/best.pt`` in the test's folder (what the evaluate tests score)."""
    from convs2s.data import Vocab, make_tokenizer
    from convs2s.model import ConvS2S
    from convs2s.run.checkpoint import save_checkpoint, vocab_to_dict

    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src = Vocab.build((tok_de(de) for de, _ in tiny_pairs), min_freq=1)
    trg = Vocab.build((tok_en(en) for _, en in tiny_pairs), min_freq=1)
    torch.manual_seed(0)
    model = ConvS2S(len(src), len(trg), emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=2,
                    max_positions=24, src_pad_idx=src.pad_idx, trg_pad_idx=trg.pad_idx)
    return save_checkpoint(tmp_path / "run" / "best.pt", {
        "model_config": dict(model.config), "model": model.state_dict(),
        "src_vocab": vocab_to_dict(src), "trg_vocab": vocab_to_dict(trg)})


@pytest.fixture
def no_evaluation(monkeypatch):
    """Fail the test if ``convs2s.evaluate`` starts its work (loading the model or the data)
    before it has checked its arguments and input files."""
    from convs2s.run import evaluate

    def forbidden(*args, **kwargs):
        raise AssertionError("the work started before the arguments and input were checked")

    monkeypatch.setattr(evaluate.Translator, "from_checkpoint", forbidden)
    monkeypatch.setattr(evaluate, "load_multi30k", forbidden)


def run_evaluate(argv, capsys) -> tuple[int, str, list[str]]:
    """``python -m convs2s.evaluate ARGV`` in this process: (exit status, stdout, stderr lines)."""
    from convs2s.run import evaluate

    try:
        code = evaluate.main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


# Line i of every language is the same made-up caption (none is from Multi30k).
FOUR_LANGUAGE_CAPTIONS = {
    "en": ["A dog runs.", "A cat sleeps.", "A man reads a book.", "Two children play.",
           "A woman drinks coffee.", "The dog plays with a ball.", "A boy rides a bike.",
           "The cat sits on the roof.", "A girl sings a song.", "Two men work outside.",
           "An old man walks.", "Children laugh on the beach."],
    "de": ["Ein Hund läuft.", "Eine Katze schläft.", "Ein Mann liest ein Buch.",
           "Zwei Kinder spielen.", "Eine Frau trinkt Kaffee.", "Der Hund spielt mit einem Ball.",
           "Ein Junge fährt Fahrrad.", "Die Katze sitzt auf dem Dach.",
           "Ein Mädchen singt ein Lied.", "Zwei Männer arbeiten draußen.",
           "Ein alter Mann geht.", "Kinder lachen am Strand."],
    "fr": ["Un chien court.", "Un chat dort.", "Un homme lit un livre.", "Deux enfants jouent.",
           "Une femme boit du café.", "Le chien joue avec une balle.",
           "Un garçon fait du vélo.", "Le chat est assis sur le toit.",
           "Une fille chante une chanson.", "Deux hommes travaillent dehors.",
           "Un vieil homme marche.", "Les enfants rient sur la plage."],
    "cs": ["Pes běží.", "Kočka spí.", "Muž čte knihu.", "Dvě děti si hrají.",
           "Žena pije kávu.", "Pes si hraje s míčem.", "Chlapec jede na kole.",
           "Kočka sedí na střeše.", "Dívka zpívá píseň.", "Dva muži pracují venku.",
           "Starý muž jde.", "Děti se smějí na pláži."],
}


@contextlib.contextmanager
def recording_training_batches(monkeypatch):
    """While inside: every batch a training step of ``convs2s.run.train`` sees goes to
    ``steps`` and every validation's batches to ``valid`` (the run itself unchanged).
    Yields ``(steps, valid)``."""
    from convs2s.run import train as train_mod

    steps, valid = [], []
    real_step, real_eval = train_mod.next_token_loss, train_mod.evaluate_loss

    def step(model, src, trg, *args, **kw):
        steps.append((src.clone(), trg.clone()))
        return real_step(model, src, trg, *args, **kw)

    def evaluate(model, loader, *args):
        batches = [(s.clone(), t.clone()) for s, t in loader]
        valid.append(batches)
        return real_eval(model, batches, *args)

    with monkeypatch.context() as m:
        m.setattr(train_mod, "next_token_loss", step)
        m.setattr(train_mod, "evaluate_loss", evaluate)
        yield steps, valid
