"""Cased subword vocabularies: learning, the on-disk cache, exact round trips, checkpoint records.

Every corpus here is made up in the test (no Multi30k text).
"""

import os
import pickle
import warnings

import pytest

from convs2s.data import Vocab, subword
from convs2s.data.subword import SubwordSettings, SubwordTokenizer, TextPipeline, train_subword

# Made-up sentences with what cased detokenization must keep: umlauts, ß, Czech háčky and
# čárky, French elisions, English apostrophes, quotes and punctuation.
GERMAN = [
    "Ein Mädchen läuft über die Straße.",
    "Zwei Männer grüßen die Großmutter!",
    "Die Bäume sind grün, die Blätter gelb.",
    "Ist das Fußballspiel schon zu Ende?",
    "Der Bär schläft: „Ruhe“, sagt die Frau.",
    "Ein Junge isst Äpfel und Öl (nicht viel).",
]
ENGLISH = [
    "A girl runs across the street.",
    "Two men greet the grandmother!",
    "The trees are green, the leaves yellow.",
    "Is the football match over already?",
    "The bear sleeps: \"Quiet\", says the woman.",
    "A boy eats apples and oil (not much).",
]
CZECH = [
    "Žena čte knihu u řeky.",
    "Dítě běží přes ulici, že?",
    "Muž s čepicí jí koláč.",
]
FRENCH = [
    "L'homme n'est pas là, c'est vrai.",
    "Aujourd'hui, l'élève lit « un livre ».",
    "Où est l'église ? Près de l'hôtel.",
]
PAIRS = list(zip(GERMAN, ENGLISH, strict=True))
SMALL = SubwordSettings(vocab_size=120)


@pytest.fixture
def counted():
    """A counter of the times a model was actually learned (cache misses)."""
    calls = []
    return calls, lambda: calls.append(1)


# ------------------------------------------------------------------------------- settings


@pytest.mark.parametrize("kwargs, message", [
    ({"vocab_size": 4}, "vocab_size must be a whole number >= 8"),
    ({"vocab_size": 100.0}, "vocab_size must be a whole number"),
    ({"vocab_size": True}, "vocab_size must be a whole number"),
    ({"joint": "yes"}, "joint must be True or False"),
    ({"model_type": "wordpiece"}, "model_type must be one of bpe, unigram"),
])
def test_settings_refuse_bad_values_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as e:
        SubwordSettings(**kwargs)
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_cased_text_round_trips_exactly(model_type):
    lines = GERMAN + ENGLISH + CZECH + FRENCH
    tok = train_subword(lines, SubwordSettings(vocab_size=150, model_type=model_type),
                        cache=False)
    vocab = tok.vocab()
    for s in lines:
        pieces = tok(s)
        assert tok.decode(pieces) == s
        assert vocab.unk_idx not in vocab.encode(pieces)  # every piece is in the vocabulary
        # through ids, as the model sees them (Vocab.decode drops <bos>/<eos>/<pad>)
        assert tok.decode(vocab.decode(vocab.encode(pieces, add_bos_eos=True))) == s
    # new sentences made of seen characters decode exactly too, case and all
    for s in ("Äpfel? Straße! L'élève grüßt.", "Žena, ulice: „Bär“ (grün)."):
        assert tok.decode(tok(s)) == s


def test_a_rare_word_is_split_into_pieces_not_unk():
    tok = train_subword(GERMAN + ENGLISH, SMALL, cache=False)
    pieces = tok("Eisfischerhütte")
    assert len(pieces) > 1 and tok.decode(pieces) == "Eisfischerhütte"
    assert tok.vocab().unk_idx not in tok.vocab().encode(pieces)


def test_a_character_never_seen_in_training_becomes_unk():
    tok = train_subword(ENGLISH, SMALL, cache=False)
    vocab = tok.vocab()
    assert vocab.unk_idx in vocab.encode(tok("ř"))


def test_the_vocab_is_the_models_pieces_with_the_specials_first():
    tok = train_subword(GERMAN + ENGLISH, SMALL, cache=False)
    vocab = tok.vocab()
    assert vocab.itos[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert (vocab.unk_idx, vocab.pad_idx, vocab.bos_idx, vocab.eos_idx) == (0, 1, 2, 3)
    assert vocab.itos == tok.pieces and len(vocab) == len(tok) <= SMALL.vocab_size


def test_learning_is_deterministic():
    a = train_subword(GERMAN + ENGLISH, SMALL, cache=False)
    b = train_subword(GERMAN + ENGLISH, SMALL, cache=False)
    assert a.model == b.model and a.sha256 == b.sha256


def test_pickles_with_its_model():
    tok = train_subword(GERMAN + ENGLISH, SMALL, cache=False)
    again = pickle.loads(pickle.dumps(tok))
    assert again.sha256 == tok.sha256 and again(GERMAN[0]) == tok(GERMAN[0])


def test_bad_model_bytes_are_refused_in_one_line():
    for bad in (b"", b"not a model", "text"):
        with pytest.raises(ValueError) as e:
            SubwordTokenizer(bad)
        assert "\n" not in str(e.value)


def test_no_text_or_token_lists_are_refused():
    with pytest.raises(ValueError, match="no text"):
        train_subword(["", "  "], SMALL, cache=False)
    with pytest.raises(TypeError, match="sentences"):
        train_subword([["a", "b"]], SMALL, cache=False)


# ------------------------------------------------------------------------------- the cache


def test_second_call_hits_the_cache(tmp_path, counted):
    calls, on_train = counted
    first = train_subword(GERMAN + ENGLISH, SMALL, cache=tmp_path, on_train=on_train)
    assert len(calls) == 1
    files = list(tmp_path.iterdir())
    assert [f.name for f in files] == [f"{subword.cache_key(GERMAN + ENGLISH, SMALL)}.model"]
    assert files[0].read_bytes() == first.model
    second = train_subword(GERMAN + ENGLISH, SMALL, cache=tmp_path, on_train=on_train)
    assert len(calls) == 1, "the second call learned again instead of reading the cache"
    assert second.model == first.model


@pytest.mark.parametrize("change", [
    {"settings": SubwordSettings(vocab_size=100)},
    {"settings": SubwordSettings(vocab_size=120, model_type="unigram")},
    {"settings": SubwordSettings(vocab_size=120, joint=False)},
    {"lines": GERMAN + ENGLISH[:-1]},  # one sentence fewer
    {"lines": GERMAN + [ENGLISH[0].lower()] + ENGLISH[1:]},  # one character changed
])
def test_a_changed_setting_or_data_misses_the_cache(tmp_path, counted, change):
    calls, on_train = counted
    train_subword(GERMAN + ENGLISH, SMALL, cache=tmp_path, on_train=on_train)
    lines, settings = change.get("lines", GERMAN + ENGLISH), change.get("settings", SMALL)
    assert subword.cache_key(lines, settings) != subword.cache_key(GERMAN + ENGLISH, SMALL)
    train_subword(lines, settings, cache=tmp_path, on_train=on_train)
    assert len(calls) == 2
    assert len(list(tmp_path.glob("*.model"))) == 2


def test_the_library_version_is_part_of_the_key(monkeypatch):
    key = subword.cache_key(GERMAN, SMALL)
    monkeypatch.setattr(subword, "_library_version", lambda: "99.0")
    assert subword.cache_key(GERMAN, SMALL) != key


def test_default_cache_folder_follows_the_environment(tmp_path, monkeypatch, counted):
    monkeypatch.delenv("CONVS2S_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert subword.cache_dir() == tmp_path / "xdg" / "convs2s" / "subword"
    monkeypatch.setenv("CONVS2S_CACHE_DIR", str(tmp_path / "mine"))
    assert subword.cache_dir() == (tmp_path / "mine" / "subword").resolve()
    calls, on_train = counted
    train_subword(GERMAN, SMALL, on_train=on_train)
    train_subword(GERMAN, SMALL, on_train=on_train)
    assert len(calls) == 1 and len(list((tmp_path / "mine" / "subword").iterdir())) == 1


def test_cache_writes_leave_no_temporary_file_and_use_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        train_subword(GERMAN, SMALL, cache=tmp_path)
    finally:
        os.umask(old)
    (model,) = tmp_path.iterdir()
    assert model.suffix == ".model" and (model.stat().st_mode & 0o777) == 0o640


def test_a_corrupt_cached_model_is_learned_again(tmp_path, counted):
    calls, on_train = counted
    good = train_subword(GERMAN, SMALL, cache=tmp_path, on_train=on_train)
    (path,) = tmp_path.iterdir()
    path.write_bytes(b"garbage")
    with pytest.warns(UserWarning, match="unreadable cached subword model"):
        again = train_subword(GERMAN, SMALL, cache=tmp_path, on_train=on_train)
    assert len(calls) == 2 and again.model == good.model == path.read_bytes()


def test_an_unwritable_cache_only_warns(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with pytest.warns(UserWarning, match="could not cache the subword model"):
        tok = train_subword(GERMAN, SMALL, cache=blocker / "cache")
    assert tok.decode(tok(GERMAN[0])) == GERMAN[0]
    assert blocker.read_text() == "not a folder"


# ------------------------------------------------------------------------------- pipelines


def test_joint_pipeline_shares_one_model(tmp_path):
    p = TextPipeline.learn(PAIRS, "de", "en", SMALL, cache=tmp_path)
    assert p.kind == "subword" and p.cased
    assert p.src_tokenizer.sha256 == p.trg_tokenizer.sha256
    src_vocab, trg_vocab = p.vocabs()
    assert src_vocab == trg_vocab
    assert p.detokenize(p.trg_tokenizer(ENGLISH[4])) == ENGLISH[4]


def test_per_side_pipeline_learns_each_language_alone(tmp_path):
    p = TextPipeline.learn(PAIRS, "de", "en", SubwordSettings(vocab_size=120, joint=False),
                           cache=tmp_path)
    assert p.src_tokenizer.sha256 != p.trg_tokenizer.sha256
    src_vocab, trg_vocab = p.vocabs()
    assert "ß" in "".join(src_vocab.itos) and "ß" not in "".join(trg_vocab.itos)
    assert len(list(tmp_path.iterdir())) == 2


def test_word_pipeline_is_the_lowercased_spacy_one():
    p = TextPipeline.word()
    assert (p.kind, p.src_lang, p.trg_lang, p.lower, p.cased) == ("word", "de", "en", True, False)
    assert p.src_tokenizer("Ein Mann.") == ["ein", "mann", "."]
    src_vocab, trg_vocab = p.vocabs(PAIRS, min_freq=1)
    assert isinstance(src_vocab, Vocab) and "straße" in src_vocab and "girl" in trg_vocab
    assert p.detokenize(["a", "man", "."]) == "A man."


def test_record_round_trips_through_a_checkpoint_dict(tmp_path):
    p = TextPipeline.learn(PAIRS, "de", "en", SMALL, cache=tmp_path)
    record = p.record()
    assert (record["src_lang"], record["trg_lang"]) == ("de", "en")
    tok = record["tokenizer"]
    assert tok["kind"] == "subword" and tok["library"] == "sentencepiece"
    assert isinstance(tok["src_model"], bytes) and tok["src_sha256"] == p.src_tokenizer.sha256
    again = TextPipeline.from_checkpoint(record)
    assert again.settings_dict() == p.settings_dict()
    assert again.trg_tokenizer(ENGLISH[1]) == p.trg_tokenizer(ENGLISH[1])
    word = TextPipeline.from_checkpoint(TextPipeline.word("fr", "cs", lower=False).record())
    assert (word.kind, word.src_lang, word.trg_lang, word.lower) == ("word", "fr", "cs", False)


@pytest.mark.parametrize("data", [
    {},  # the oldest checkpoints: no tokenizer settings at all
    {"tokenizers": {"src_lang": "de", "trg_lang": "en", "lower": True}},  # an older record
])
def test_old_checkpoints_mean_german_to_english_word_level(data):
    p = TextPipeline.from_checkpoint(data)
    assert (p.kind, p.src_lang, p.trg_lang, p.lower) == ("word", "de", "en", True)


@pytest.mark.parametrize("change, message", [
    (lambda r: r.update(src_lang="xx"), "src_lang 'xx' is not one of en, de, fr, cs"),
    (lambda r: r["tokenizer"].update(kind="chars"), "not one of the kinds word, subword"),
    (lambda r: r["tokenizer"].update(library="tokenizers"), "comes from 'tokenizers'"),
    (lambda r: r["tokenizer"].pop("trg_model"), "lacks 'trg_model'"),
    (lambda r: r["tokenizer"].update(src_model=b"junk"), "malformed"),
    (lambda r: r["tokenizer"].update(src_sha256="0" * 64), "does not match its sha256"),
    (lambda r: r["tokenizer"].update(vocab_size=-1), "malformed"),
])
def test_malformed_records_are_one_line_errors(tmp_path, change, message):
    record = TextPipeline.learn(PAIRS, "de", "en", SMALL, cache=tmp_path).record()
    change(record)
    with pytest.raises(ValueError, match=message) as e:
        TextPipeline.from_checkpoint(record)
    assert "\n" not in str(e.value)


def test_pipeline_refuses_unknown_languages_and_kinds():
    with pytest.raises(ValueError, match="no source language 'xx'"):
        TextPipeline.word("xx", "en")
    with pytest.raises(ValueError, match="both 'en'"):
        TextPipeline.word("en", "en")
    with pytest.raises(ValueError, match="kind must be one of word, subword"):
        TextPipeline("chars")


# ------------------------------------------------------ what the subword trainer says and caches


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_too_small_a_vocab_size_says_raise_it_to_what_works(model_type):
    """sentencepiece needs one piece per distinct character plus the specials: below that the
    advice must be to raise vocab_size, to a number that then works (not "Lower vocab_size")."""
    lines = GERMAN + ENGLISH
    with pytest.raises(ValueError) as e:
        train_subword(lines, SubwordSettings(vocab_size=9, model_type=model_type), cache=False)
    message = str(e.value)
    assert "\n" not in message and "lower" not in message.lower(), message
    needed = len(set("".join(lines))) + len(subword.SPECIALS)  # 52 characters (space too) + 4
    assert f"raise vocab_size (--vocab-size) to at least {needed}" in message, message
    assert f"{needed - len(subword.SPECIALS)} different characters" in message, message
    # the advice is right: the number it names works, one fewer does not
    assert len(train_subword(lines, SubwordSettings(vocab_size=needed, model_type=model_type),
                             cache=False)) == needed
    with pytest.raises(ValueError, match=f"at least {needed}"):
        train_subword(lines, SubwordSettings(vocab_size=needed - 1, model_type=model_type),
                      cache=False)


@pytest.mark.parametrize("swapped, why", [
    (SubwordSettings(vocab_size=100), "it has 100 pieces, where these sentences give 120"),
    (SubwordSettings(vocab_size=150), "it has 150 pieces, more than vocab_size=120"),
    (SubwordSettings(vocab_size=120, model_type="unigram"), "it is a unigram model, not bpe"),
])
def test_subword_cache_a_model_learned_with_other_settings_is_learned_again(
        tmp_path, counted, swapped, why):
    """A valid model of other settings put in the cache under this key (a copied cache folder,
    a hand edit) is not used: it is learned again, with a warning, and the file replaced."""
    calls, on_train = counted
    lines = GERMAN + ENGLISH
    right = train_subword(lines, SMALL, cache=tmp_path, on_train=on_train)
    path = tmp_path / f"{subword.cache_key(lines, SMALL)}.model"
    wrong = train_subword(lines, swapped, cache=False)
    assert wrong.model != right.model
    path.write_bytes(wrong.model)
    with pytest.warns(UserWarning, match=f"does not match its settings.*{why}") as record:
        again = train_subword(lines, SMALL, cache=tmp_path, on_train=on_train)
    assert len(calls) == 2, "the swapped-in model was used"
    assert again.model == right.model == path.read_bytes()
    assert len(again) == SMALL.vocab_size
    assert all("\n" not in str(w.message) for w in record)
    # and the next call reads the repaired cache
    train_subword(lines, SMALL, cache=tmp_path, on_train=on_train)
    assert len(calls) == 2


def test_subword_cache_the_settings_check_reads_what_the_model_says(tmp_path):
    """What the check compares: sentencepiece's own record of how the model was learned."""
    for settings in (SMALL, SubwordSettings(vocab_size=100, model_type="unigram")):
        tok = train_subword(GERMAN + ENGLISH, settings, cache=False)
        assert tok.trained_with() == {"model_type": settings.model_type,
                                      "vocab_size": settings.vocab_size,
                                      "normalization": "identity", "character_coverage": 1.0}
        tok.check_settings(settings)  # no error
    big = train_subword(ENGLISH, SubwordSettings(vocab_size=5000), cache=False)
    # a small corpus gives fewer pieces than asked for, and sentencepiece records those
    assert len(big) < 5000 and big.trained_with()["vocab_size"] == len(big)
    big.check_settings(SubwordSettings(vocab_size=5000))
    with pytest.raises(ValueError, match=f"has {len(big)} pieces, more than vocab_size=200"):
        big.check_settings(SubwordSettings(vocab_size=200))
    with pytest.raises(ValueError, match="it is a bpe model, not unigram") as e:
        big.check_settings(SubwordSettings(vocab_size=5000, model_type="unigram"))
    assert "\n" not in str(e.value)


def test_subword_cache_a_small_corpus_model_is_kept_after_learning_it_again(tmp_path, counted):
    """Fewer pieces than vocab_size: learned again to tell, kept (no warning, file untouched)
    when these sentences give just that model."""
    calls, on_train = counted
    settings = SubwordSettings(vocab_size=5000)
    first = train_subword(ENGLISH, settings, cache=tmp_path, on_train=on_train)
    (path,) = tmp_path.iterdir()
    mtime = path.stat().st_mtime_ns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = train_subword(ENGLISH, settings, cache=tmp_path, on_train=on_train)
    assert len(calls) == 2 and again.model == first.model and len(again) < 5000
    assert path.stat().st_mtime_ns == mtime
