"""Issue 62's data switches. Sequence-level knowledge distillation: ``python -m
convs2s.run.distill`` writes a teacher's beam-search translations of the training sources (one
line per pair, resumable from its progress file, nothing half-written), and ``--distilled FILE``
(``--distilled-mix replace|add``) trains on them alone or beside the references. Extra sources:
``--extra-sources fr,cs`` adds the French and Czech captions of the same English targets, with
one vocabulary learned on every source and the target. Either way validation keeps the real
de→en pairs, the checkpoint records what the model trained on, ``--resume`` refuses other
data flags in one line, and bad input is one line.

A made-up four-language corpus laid out like Multi30k stands in for the real one (the
loader's sha256 sums are its files'), so the data is read through the real loader."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import FOUR_LANGUAGE_CAPTIONS as CAPTIONS
from conftest import recording_training_batches  # line i: one made-up caption

from convs2s.data import LANGUAGES, DataError, multi30k
from convs2s.data.subword import train_subword
from convs2s.model import ConvS2SConfig
from convs2s.run import distill
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.prepare import fingerprint, select_pairs
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.translate_cli import one_line
from convs2s.run.translator import Translator

SPLITS = {"train": slice(0, 8), "val": slice(8, 10), "test_2016_flickr": slice(10, 12)}
TRAIN, VALID = SPLITS["train"], SPLITS["val"]
# The teacher's translations, invented: what a distilled file holds (one per training pair):
# each reference's words in reverse order, so made of the text a vocabulary learned on the
# references covers, as a teacher's output is.
TAUGHT = [" ".join(reversed(en.removesuffix(".").split())) + "."
          for en in CAPTIONS["en"][TRAIN]]

TINY = Preset(name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1,
                                               dec_layers=1, dropout=0.1, max_positions=64),
              min_freq=1, max_tokens=80, lr=5e-3, warmup_steps=2, epochs=1, patience=100,
              label_smoothing=0.1, seed=7, tokenizer="subword", vocab_size=80)


def _pairs(src: str, split: slice, trg: str = "en") -> list[tuple[str, str]]:
    return list(zip(CAPTIONS[src][split], CAPTIONS[trg][split], strict=True))


def _write(path: Path, lines) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> Path:
    """The twelve files of the made-up corpus; the loader expects their sha256; no network;
    subword models learned here stay here; ``--preset quick`` is TINY."""
    root = tmp_path / "multi30k4"
    root.mkdir()
    for (stem, part), lang in itertools.product(SPLITS.items(), LANGUAGES):
        (root / f"{stem}.{lang}.gz").write_bytes(gzip.compress(
            "".join(f"{s}\n" for s in CAPTIONS[lang][part]).encode(), mtime=0))
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    (tmp_path / "no_mirror").mkdir()
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "no_mirror").as_uri())
    monkeypatch.setenv("CONVS2S_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(PRESETS, "quick", TINY)
    return root


def _main(corpus: Path, out: Path, *flags: str) -> int:
    """``python -m convs2s.train --preset quick`` on the corpus, in this process."""
    try:
        return train_mod.main(["--preset", "quick", "--no-progress", "--data-dir", str(corpus),
                               "--out", str(out), *flags])
    except SystemExit as e:  # argparse's refusals
        return e.code


def _recorded_run(out: Path, preset: Preset, corpus: Path, monkeypatch):
    """Train ``preset`` on the corpus; returns the (source, target) texts of every example its
    steps saw, of its validations' examples, and its result."""
    with recording_training_batches(monkeypatch) as (steps, valid):
        result = train_mod.train(preset, out, data=corpus, progress=False, log=lambda *_: None)
    ckpt = Checkpoint.load(result.last_path)
    return _texts(ckpt, steps), [_texts(ckpt, v) for v in valid], ckpt


def _texts(ckpt: Checkpoint, batches) -> Counter:
    """Every example of the batches as its (source, target) text, decoded by the run's own
    pipeline and vocabularies, counted."""
    pipe, sv, tv = ckpt.pipeline, ckpt.src_vocab, ckpt.trg_vocab
    return Counter((pipe.src_tokenizer.decode(sv.decode(s)), pipe.detokenize(tv.decode(t)))
                   for src, trg in batches for s, t in zip(src, trg, strict=True))


def _through(ckpt: Checkpoint, pairs) -> Counter:
    """``pairs`` as :func:`_texts` shows them: through the run's tokenizers and vocabularies
    and back (a character no training text had is ``<unk>``, e.g. in validation pairs)."""
    pipe, sv, tv = ckpt.pipeline, ckpt.src_vocab, ckpt.trg_vocab
    return Counter((pipe.src_tokenizer.decode(sv.decode(sv.encode(pipe.src_tokenizer(s)))),
                    pipe.detokenize(tv.decode(tv.encode(pipe.trg_tokenizer(t)))))
                   for s, t in pairs)


# ---------------------------------------------------------------- python -m convs2s.run.distill


@pytest.fixture
def teacher(corpus, tmp_path) -> Path:
    """A tiny de→en subword teacher trained on the corpus for two epochs (its best.pt)."""
    result = train_mod.train(TINY.replace(epochs=2), tmp_path / "teacher", data=corpus,
                             progress=False, log=lambda *_: None)
    return result.best_path


def _distill(corpus: Path, teacher: Path, out: Path, *flags: str) -> int:
    try:
        return distill.main(["--teacher", str(teacher), "--out", str(out), "--data-dir",
                             str(corpus), *flags])
    except SystemExit as e:
        return e.code


def test_distill_writes_the_teachers_beam_translations_line_by_line(corpus, teacher, tmp_path,
                                                                    capsys):
    """Line i is the teacher's beam-5 translation of training source i at its own length
    penalty (the same search as Translator.translate, one sentence a batch here), or the
    reference where that is empty; no progress file is left."""
    out = tmp_path / "distilled.en"
    assert _distill(corpus, teacher, out, "--batch-size", "1") == 0
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == 8
    translator = Translator.from_checkpoint(teacher)
    assert translator.length_penalty == 1.0  # a best.pt records none: fairseq's default
    expected = []
    for de, en in _pairs("de", TRAIN):
        own = one_line(translator.translate(de, beam_size=5)).strip()
        expected.append(own or en)
    assert lines[:-1] == expected
    assert any(a != en for a, (_, en) in zip(expected, _pairs("de", TRAIN), strict=True))
    assert not distill.progress_path(out).exists()
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("distilling the 8 de sources of the de->en training split")
    assert err[-1].startswith(f"wrote {out}: 8 lines")


def test_an_interrupted_distill_continues_to_the_uninterrupted_file(corpus, teacher, tmp_path,
                                                                    monkeypatch, capsys):
    """Ctrl-C in the third batch: one line naming the progress file, exit 130, no FILE; the
    progress file holds two whole batches (a line a crash cut, and a batch it cut, are dropped
    on resuming); the same command then writes exactly the uninterrupted run's file."""
    whole = tmp_path / "whole.en"
    assert _distill(corpus, teacher, whole, "--batch-size", "2") == 0
    out = tmp_path / "part.en"
    calls, real = [], Translator.translate_token_lists

    def stop_third(self, *args, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args, **kw)

    capsys.readouterr()
    with monkeypatch.context() as m:
        m.setattr(Translator, "translate_token_lists", stop_third)
        assert _distill(corpus, teacher, out, "--batch-size", "2") == 130
    err = capsys.readouterr().err.splitlines()
    partial = distill.progress_path(out)
    assert not out.exists() and partial.exists()
    assert err[-1] == (f"interrupted; the translations so far are kept in {partial}: run the "
                       "same command again to continue.")
    header, *done = partial.read_text(encoding="utf-8").split("\n")[:-1]
    assert json.loads(header)["written_by"] == "convs2s.run.distill" and len(done) == 4
    with open(partial, "ab") as f:  # a crash inside a batch's write: a line and a half
        f.write(b"half of a batch\nand a cut li")
    assert _distill(corpus, teacher, out, "--batch-size", "2") == 0
    assert "continuing from" in capsys.readouterr().err
    assert out.read_bytes() == whole.read_bytes() and not partial.exists()


def test_a_progress_file_of_other_settings_or_none_is_refused_in_one_line(
        corpus, teacher, tmp_path, monkeypatch, capsys):
    """Continuing with another beam or batch size, or from another teacher's file or a file
    that is no progress file: one line, exit 1, the file untouched, nothing written."""
    out = tmp_path / "d.en"
    partial = distill.progress_path(out)

    def stop(self, *args, **kw):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Translator, "translate_token_lists", stop)
        assert _distill(corpus, teacher, out) == 130
    before = partial.read_bytes()
    header = json.loads(before)
    assert (header["beam_size"], header["batch_size"], header["direction"]) == (5, 64, "de-en")
    other = {**header, "teacher_sha256": "0" * 64}
    for flags, message, text in (
            (["--beam-size", "3"], "beam_size: there 5, now 3", before),
            (["--batch-size", "4"], "batch_size: there 64, now 4", before),
            ([], "teacher_sha256: there '000", json.dumps(other).encode() + b"\n"),
            ([], "is not a progress file of python -m convs2s.run.distill", b"my notes\n")):
        partial.write_bytes(text)
        capsys.readouterr()
        assert _distill(corpus, teacher, out, *flags) == 1
        err = capsys.readouterr().err.splitlines()
        assert err[-1].startswith("error: ") and message in err[-1], err
        assert len(err) <= 2 and err[0].startswith(("distilling", "error: "))
        assert partial.read_bytes() == text and not out.exists()


def test_distills_bad_arguments_are_one_line_and_write_nothing(corpus, tmp_path, capsys):
    """A missing teacher, an --out that exists, is a folder or lies in no folder: exit 2, one
    line naming the flag; nothing is written."""
    ckpt = tmp_path / "nothing.pt"
    exists = _write(tmp_path / "there.en", ["kept"])
    before = sorted(tmp_path.rglob("*"))
    for teacher, out, message in (
            (ckpt, tmp_path / "a.en", "no such checkpoint file"),
            (tmp_path, tmp_path / "a.en", "is a folder, not a checkpoint file (give a best.pt"),
            (exists, exists, "already exists; this command never overwrites a file"),
            (exists, tmp_path, "is a folder"),
            (exists, tmp_path / "no" / "a.en", "does not exist; make it first")):
        capsys.readouterr()
        assert _distill(corpus, teacher, out) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") <= 2, err
    assert exists.read_text(encoding="utf-8") == "kept\n"
    assert sorted(tmp_path.rglob("*")) == before
    bad = _write(tmp_path / "bad.pt", ["not a checkpoint"])
    assert _distill(corpus, bad, tmp_path / "b.en") == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not (tmp_path / "b.en").exists() and not distill.progress_path(
        tmp_path / "b.en").exists()


# ------------------------------------------------------------------------ --distilled FILE


def test_replace_trains_on_the_teachers_targets_and_validates_on_the_references(
        corpus, tmp_path, monkeypatch):
    """``replace`` (the default): every step's example is a source with the teacher's target,
    none with its reference; validation sees the real de→en pairs, as a run without the file
    does; the vocabulary is the one the references give (the teacher's); the checkpoint names
    the file, and its data fingerprint is of the pairs trained on."""
    taught = _write(tmp_path / "taught.en", TAUGHT)
    preset = TINY.replace(distilled=str(taught))
    seen, valid, ckpt = _recorded_run(tmp_path / "student", preset, corpus, monkeypatch)
    de = CAPTIONS["de"][TRAIN]
    assert seen == Counter(zip(de, TAUGHT, strict=True))
    plain_seen, plain_valid, plain = _recorded_run(tmp_path / "plain", TINY, corpus, monkeypatch)
    assert plain_seen == Counter(_pairs("de", TRAIN))
    assert valid == plain_valid and valid[0] == _through(ckpt, _pairs("de", VALID))
    assert ckpt.src_vocab.itos == plain.src_vocab.itos == ckpt.trg_vocab.itos
    assert ckpt.preset["distilled"] == str(taught) and "distilled_mix" not in ckpt.preset
    assert Preset.from_dict(ckpt.preset).distilled_mix == "replace"
    assert ckpt.data["train"] == fingerprint(list(zip(de, TAUGHT, strict=True)))
    assert ckpt.data["valid"] == plain.data["valid"]
    for key in ("distilled", "distilled_mix", "extra_sources"):
        assert key not in plain.preset  # a run without the switches records what it did before


def test_add_trains_on_the_references_and_the_teachers_targets(corpus, tmp_path, monkeypatch):
    """``add``: every source twice, once with its reference and once with the teacher's
    target; validation unchanged; the record says ``add``. The first ``train_pairs`` pairs take
    the first lines of the file."""
    taught = _write(tmp_path / "taught.en", TAUGHT)
    preset = TINY.replace(distilled=str(taught), distilled_mix="add")
    seen, valid, ckpt = _recorded_run(tmp_path / "student", preset, corpus, monkeypatch)
    de = CAPTIONS["de"][TRAIN]
    assert seen == Counter(_pairs("de", TRAIN)) + Counter(zip(de, TAUGHT, strict=True))
    assert valid[0] == _through(ckpt, _pairs("de", VALID))
    assert ckpt.preset["distilled_mix"] == "add"
    data = {"train": _pairs("de", TRAIN), "valid": _pairs("de", VALID)}
    train, _ = select_pairs(preset.replace(train_pairs=3), data)
    assert train == _pairs("de", slice(0, 3)) + list(zip(de[:3], TAUGHT[:3], strict=True))


def test_a_distilled_file_that_does_not_fit_is_refused_in_one_line(corpus, tmp_path, capsys):
    """A line too few, an empty line: exit 1 and one line naming the counts or the line, the
    run's folder not left behind; a missing file, a folder, or --distilled-mix alone: exit 2,
    one line, before any data loads."""
    short = _write(tmp_path / "short.en", TAUGHT[:-1])
    holed = _write(tmp_path / "holed.en", [*TAUGHT[:3], " ", *TAUGHT[4:]])
    for path, message in (
            (short, f"The distilled file {short} has 7 lines, but the de→en training split has "
                    "8 pairs"),
            (holed, f"The distilled file {holed} has an empty line (line 4)")):
        capsys.readouterr()
        assert _main(corpus, tmp_path / "run", "--distilled", str(path)) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "run").exists()
    for flags, message in ((["--distilled", str(tmp_path / "none.en")], "no such file"),
                           (["--distilled", str(tmp_path)], "a folder"),
                           (["--distilled-mix", "add"], "and none is given")):
        capsys.readouterr()
        assert _main(corpus, tmp_path / "run", *flags) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") <= 2, err
        assert not (tmp_path / "run").exists()
    with pytest.raises(DataError, match="has 7 lines"):
        select_pairs(TINY.replace(distilled=short), {"train": _pairs("de", TRAIN),
                                                     "valid": _pairs("de", VALID)})


def test_resume_keeps_the_data_flags_and_refuses_others_in_one_line(corpus, tmp_path, capsys):
    """A distilled run resumes with the same file and mix only; one with extra sources with
    the same languages only; a run without them refuses either. Each refusal is one line and
    trains nothing."""
    taught = _write(tmp_path / "taught.en", TAUGHT).resolve()  # what --distilled records
    out, plain = tmp_path / "distilled", tmp_path / "plain"
    assert _main(corpus, out, "--distilled", str(taught)) == 0
    assert _main(corpus, plain) == 0
    capsys.readouterr()
    for folder, flags, message in (
            (out, [], f"distilled: checkpoint '{taught}', now None"),
            (out, ["--distilled", str(taught), "--distilled-mix", "add"],
             "distilled_mix: checkpoint 'replace', now 'add'"),
            (out, ["--distilled", str(taught), "--extra-sources", "fr"],
             "extra_sources: checkpoint (), now ('fr',)"),
            (plain, ["--distilled", str(taught)], f"distilled: checkpoint None, now '{taught}'"),
            (plain, ["--extra-sources", "cs"], "extra_sources: checkpoint (), now ('cs',)")):
        assert _main(corpus, folder, "--resume", "--epochs", "2", *flags) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert len(Checkpoint.load(folder / "last.pt").history) == 1
    assert _main(corpus, out, "--resume", "--epochs", "2", "--distilled", str(taught)) == 0
    assert _main(corpus, plain, "--resume", "--epochs", "2") == 0
    for folder in (out, plain):
        assert len(Checkpoint.load(folder / "last.pt").history) == 2

    extra = tmp_path / "extra"
    assert _main(corpus, extra, "--extra-sources", "fr,cs") == 0
    capsys.readouterr()
    assert _main(corpus, extra, "--resume", "--epochs", "2", "--extra-sources", "fr") == 1
    err = capsys.readouterr().err
    assert "extra_sources: checkpoint ('fr', 'cs'), now ('fr',)" in err and err.count("\n") == 1
    assert _main(corpus, extra, "--resume", "--epochs", "2", "--extra-sources", "cs,fr") == 0
    assert len(Checkpoint.load(extra / "last.pt").history) == 2


# ------------------------------------------------------------------------ --extra-sources


def test_extra_sources_put_their_pairs_in_the_batches_and_validation_stays(
        corpus, tmp_path, monkeypatch):
    """``extra_sources`` fr, cs on de→en: the steps see the German, French and Czech captions
    of every English target; validation sees the de→en pairs alone; one joint vocabulary is
    learned on the three sources and the target (each English caption once); the record
    names the languages."""
    preset = TINY.replace(extra_sources=["cs", "fr"])
    assert preset.extra_sources == ("fr", "cs")  # one setting, whatever the order given
    seen, valid, ckpt = _recorded_run(tmp_path / "run", preset, corpus, monkeypatch)
    assert seen == Counter(_pairs("de", TRAIN) + _pairs("fr", TRAIN) + _pairs("cs", TRAIN))
    assert len(valid) == 1 and valid[0] == _through(ckpt, _pairs("de", VALID))
    assert ckpt.preset["extra_sources"] == ("fr", "cs")
    assert Preset.from_dict(json.loads(json.dumps(ckpt.preset))).extra_sources == ("fr", "cs")
    text = [s for lang in ("de", "fr", "cs") for s in CAPTIONS[lang][TRAIN]]
    joint = train_subword(text + CAPTIONS["en"][TRAIN], preset.subword_settings(), cache=False)
    assert ckpt.pipeline.src_tokenizer.model == joint.model
    assert ckpt.src_vocab.itos == ckpt.trg_vocab.itos == joint.vocab().itos
    assert {"ř", "é"} <= {c for piece in ckpt.src_vocab.itos for c in piece}
    assert ckpt.pipeline.src_lang == "de" and ckpt.data["valid"] == fingerprint(
        _pairs("de", VALID))
    # one vocabulary a side: the source's learned on the three sources
    separate = TINY.replace(extra_sources=("fr", "cs"), joint_vocab=False)
    _, _, ckpt = _recorded_run(tmp_path / "separate", separate, corpus, monkeypatch)
    assert ckpt.pipeline.src_tokenizer.model == train_subword(
        text, separate.subword_settings(), cache=False).model
    assert ckpt.pipeline.trg_tokenizer.model == train_subword(
        CAPTIONS["en"][TRAIN], separate.subword_settings(), cache=False).model


def test_extra_sources_where_they_do_not_apply_are_refused_in_one_line(corpus, tmp_path,
                                                                       capsys):
    """Into German, with the word tokenizer, an unknown language, the run's own source or
    target: exit 2, one line naming the flag, no run folder. Given data without the extra
    pairs, or with pairs of other targets: one-line errors."""
    for flags, message in (
            (["--src", "en", "--trg", "de", "--extra-sources", "fr,cs"],
             "it applies to a run into English (--trg en), not into German"),
            (["--tokenizer", "word", "--extra-sources", "fr"], "needs the subword tokenizer"),
            (["--extra-sources", "fr,es"], "Multi30k has no language 'es'"),
            (["--extra-sources", "de,fr"], "names the run's own source language de"),
            (["--extra-sources", "en"], "names the run's own target language en"),
            (["--extra-sources", "fr,fr"], "names a language twice")):
        capsys.readouterr()
        assert _main(corpus, tmp_path / "run", *flags) == 2
        err = capsys.readouterr().err
        assert "--extra-sources" in err and message in err and err.count("\n") <= 2, err
        assert not (tmp_path / "run").exists()
    preset = TINY.replace(extra_sources=("fr",))
    data = {"train": _pairs("de", TRAIN), "valid": _pairs("de", VALID)}
    with pytest.raises(ValueError, match=r"^data has no extra_sources\['fr'\] .*load_extra_"):
        select_pairs(preset, data)
    shifted = _pairs("fr", TRAIN)[1:] + _pairs("fr", TRAIN)[:1]
    with pytest.raises(DataError, match="do not have the training split's en targets line by "
                       "line") as e:
        select_pairs(preset, {**data, "extra_sources": {"fr": shifted}})
    assert "\n" not in str(e.value)


def test_the_help_names_the_switches(capsys):
    with pytest.raises(SystemExit):
        train_mod.main(["--help"])
    out = capsys.readouterr().out
    assert "--distilled FILE" in out and "--distilled-mix {replace,add}" in out
    assert "--extra-sources LANGS" in out
