"""convs2s.data: corpus loading, tokenizers, vocabulary, dataset, batching.

Everything runs on a tiny invented corpus (tests/conftest.py) or synthetic lengths, except the
tests marked ``real corpus``, which read CONVS2S_DATA_DIR and are skipped when it is unset.
"""

import gzip
import hashlib
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from convs2s.data import (
    BucketBatchSampler,
    DataError,
    TranslationDataset,
    Vocab,
    check_length,
    load_multi30k,
    load_pairs,
    make_loader,
    make_tokenizer,
    multi30k,
    padding_ratio,
)

FILES = multi30k.multi30k_files("de", "en")  # the six files of the default direction


def gz(path: Path, lines) -> Path:
    path.write_bytes(gzip.compress("".join(f"{s}\n" for s in lines).encode(), mtime=0))
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tiny_sums(tiny_corpus, monkeypatch):
    """Make the loader expect the tiny corpus' checksums instead of the real ones."""
    sums = {name: sha(tiny_corpus / name) for name in FILES}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    return sums


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Point downloads at an empty local folder, so no test ever touches the network."""
    empty = tmp_path / "empty_mirror"
    empty.mkdir()
    monkeypatch.setenv("CONVS2S_DATA_URL", empty.as_uri())
    return empty


@pytest.fixture(scope="module")
def toks():
    return make_tokenizer("de"), make_tokenizer("en")


@pytest.fixture
def tiny_data(tiny_pairs, toks):
    tok_de, tok_en = toks
    src_vocab = Vocab.build((tok_de(de) for de, _ in tiny_pairs), min_freq=1)
    trg_vocab = Vocab.build((tok_en(en) for _, en in tiny_pairs), min_freq=1)
    return TranslationDataset(tiny_pairs, tok_de, tok_en, src_vocab, trg_vocab)


def synthetic_lengths(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 40, n)
    return [(int(s), int(s + rng.integers(-3, 6) + 2)) for s in src]


# ------------------------------------------------------------------ tokenizers


def test_tokenizer_lowercases_and_splits_punctuation(toks):
    tok_de, tok_en = toks
    assert tok_de("Ein Hund läuft.") == ["ein", "hund", "läuft", "."]
    assert tok_en("A dog runs.") == ["a", "dog", "runs", "."]
    assert make_tokenizer("en", lower=False)("A dog runs.") == ["A", "dog", "runs", "."]


def test_tokenizer_drops_whitespace_tokens(toks):
    tok_de, _ = toks
    assert tok_de(" Ein  Hund\u00a0\tläuft. ") == ["ein", "hund", "läuft", "."]


def test_tokenizer_unsupported_language():
    with pytest.raises(ValueError, match="No spaCy tokenizer for language 'klingon'"):
        make_tokenizer("klingon")
    with pytest.raises(ValueError, match="spaCy language code"):
        make_tokenizer(None)


def test_tokenizer_pickles(toks):
    tok = pickle.loads(pickle.dumps(toks[0]))
    assert tok("Eine Katze.") == ["eine", "katze", "."]


# ------------------------------------------------------------------ vocabulary


def test_vocab_specials_and_order():
    v = Vocab.build([["b", "a", "c", "a"], ["c", "a", "b", "d"]], min_freq=1)
    assert v.itos[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert (v.unk_idx, v.pad_idx, v.bos_idx, v.eos_idx) == (0, 1, 2, 3)
    # frequency descending, ties alphabetical
    assert v.itos[4:] == ["a", "b", "c", "d"]
    assert len(v) == 8 and v.stoi["a"] == 4


def test_vocab_min_freq_and_max_size():
    lists = [["x", "y", "y", "z", "z", "z"]]
    assert Vocab.build(lists).itos[4:] == ["z", "y"]  # min_freq=2 by default
    assert Vocab.build(lists, min_freq=3).itos[4:] == ["z"]
    assert Vocab.build(lists, min_freq=1, max_size=2).itos[4:] == ["z", "y"]
    with pytest.raises(TypeError, match="tokenize first"):
        Vocab.build(["not", "tokenized"])


def test_vocab_never_duplicates_specials():
    v = Vocab.build([["<pad>", "<pad>", "a", "a"]])
    assert v.itos == ["<unk>", "<pad>", "<bos>", "<eos>", "a"]


def test_vocab_encode_decode(tiny_pairs, toks):
    tok_de, _ = toks
    v = Vocab.build(tok_de(de) for de, _ in tiny_pairs)  # min_freq=2
    assert "ein" in v and "hund" in v and "katze" in v
    assert "kaffee" not in v  # seen once
    tokens = tok_de("Ein Hund trinkt Kaffee.")
    ids = v.encode(tokens)
    assert ids[3] == v.unk_idx and ids[2] == v.unk_idx
    assert v.decode(ids) == ["ein", "hund", "<unk>", "<unk>", "."]
    known = tok_de("Ein Hund.")
    assert v.decode(v.encode(known)) == known
    wrapped = v.encode(known, add_bos_eos=True)
    assert wrapped[0] == v.bos_idx and wrapped[-1] == v.eos_idx
    # decode stops at eos and drops pad/bos; tensors work too
    assert v.decode(torch.tensor(wrapped + [v.pad_idx, v.stoi["ein"]])) == known
    assert v.decode([v.bos_idx, v.stoi["hund"], v.pad_idx, v.stoi["."]]) == ["hund", "."]
    with pytest.raises(ValueError, match="outside this vocabulary"):
        v.decode([len(v)])


def test_vocab_save_load(tmp_path):
    v = Vocab.build([["ä", "ö", "ß", "ä"]], min_freq=1)
    path = tmp_path / "vocab.json"
    v.save(path)
    assert Vocab.load(path) == v
    assert Vocab.load(path) != Vocab.build([["ä"]], min_freq=1)
    assert [p.name for p in tmp_path.iterdir()] == ["vocab.json"]  # no temp file left


@pytest.mark.parametrize(
    "content",
    [
        "not json {",
        "[1, 2, 3]",
        json.dumps({"format": "something else", "specials": [], "itos": []}),
        json.dumps({"format": "convs2s.Vocab", "specials": ["<unk>"], "itos": ["<unk>"]}),
        json.dumps(
            {
                "format": "convs2s.Vocab",
                "specials": ["a", "b", "c", "d"],
                "itos": ["a", "b", "c", "d", "a"],
            }
        ),
        json.dumps(
            {
                "format": "convs2s.Vocab",
                "specials": ["a", "b", "c", "d"],
                "itos": ["a", "b", "c", "d", 5],
            }
        ),
    ],
)
def test_vocab_load_malformed(tmp_path, content):
    path = tmp_path / "vocab.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match="vocab"):
        Vocab.load(path)


# ------------------------------------------------------------------ dataset


def test_dataset_numericalises_with_bos_eos(tiny_data, tiny_pairs, toks):
    tok_de, tok_en = toks
    assert len(tiny_data) == len(tiny_pairs) and tiny_data.n_dropped == 0
    src, trg = tiny_data[0]
    assert src.dtype == trg.dtype == torch.long
    assert src.tolist() == tiny_data.src_vocab.encode(tok_de(tiny_pairs[0][0]))
    assert trg[0] == tiny_data.trg_vocab.bos_idx and trg[-1] == tiny_data.trg_vocab.eos_idx
    assert tiny_data.trg_vocab.decode(trg) == tok_en(tiny_pairs[0][1])


def test_dataset_max_len_drops_and_reports(tiny_pairs, toks, tiny_data):
    tok_de, tok_en = toks
    sv, tv = tiny_data.src_vocab, tiny_data.trg_vocab
    max_len = 8
    expected = sum(
        len(tok_de(de)) > max_len or len(tok_en(en)) + 2 > max_len for de, en in tiny_pairs
    )
    assert expected > 0
    with pytest.warns(UserWarning, match=f"dropped {expected} of {len(tiny_pairs)}"):
        ds = TranslationDataset(tiny_pairs, tok_de, tok_en, sv, tv, max_len=max_len)
    assert ds.n_dropped == expected and len(ds) == len(tiny_pairs) - expected
    assert max(ds.src_lengths) <= max_len and max(ds.trg_lengths) <= max_len
    assert [tiny_pairs[i] for i in ds.indices] == ds.pairs
    wrapped = TranslationDataset(tiny_pairs[:1], tok_de, tok_en, sv, tv, src_bos_eos=True)
    assert wrapped[0][0][0] == sv.bos_idx and wrapped[0][0][-1] == sv.eos_idx


def test_check_length():
    check_length(["a"] * 5, 5)
    check_length(["a"] * 500, None)
    with pytest.raises(ValueError, match="6 positions long.*at most 5"):
        check_length(["a"] * 6, 5)
    with pytest.raises(ValueError, match=r"\(4 tokens \+ 2 for <bos>/<eos>\)"):
        check_length(["a"] * 4, 5, extra=2)


# ------------------------------------------------------------------ loader


def test_loader_shapes_padding_and_bos_eos(tiny_data):
    loader = make_loader(tiny_data, batch_size=5, seed=3)
    pad, bos, eos = (
        tiny_data.trg_vocab.pad_idx,
        tiny_data.trg_vocab.bos_idx,
        tiny_data.trg_vocab.eos_idx,
    )
    planned = loader.batch_sampler.batches()
    seen = 0
    for idx, (src, trg) in zip(planned, loader, strict=True):
        assert src.dtype == trg.dtype == torch.long
        assert src.dim() == trg.dim() == 2 and src.shape[0] == trg.shape[0] == len(idx) <= 5
        assert (trg[:, 0] == bos).all()
        for row, i in enumerate(idx):
            s, t = tiny_data[i]
            # the example, then right padding only
            assert src[row, : len(s)].tolist() == s.tolist()
            assert (src[row, len(s) :] == pad).all()
            assert trg[row, : len(t)].tolist() == t.tolist()
            assert (trg[row, len(t) :] == pad).all()
            assert (trg[row] == eos).sum() == 1 and trg[row, len(t) - 1] == eos
        assert src.shape[1] == max(len(tiny_data[i][0]) for i in idx)  # no all-pad column
        seen += len(idx)
    assert seen == len(tiny_data) and len(loader) == len(planned) == 3


def test_loader_from_id_pairs_needs_pad_idx():
    pairs = [([5, 6], [2, 7, 3]), ([5], [2, 3])]
    with pytest.raises(ValueError, match="pad_idx"):
        make_loader(pairs, batch_size=2)
    src, trg = next(iter(make_loader(pairs, batch_size=2, pad_idx=1, shuffle=False, bucket=False)))
    assert src.tolist() == [[5, 6], [5, 1]] and trg.tolist() == [[2, 7, 3], [2, 3, 1]]


def test_loader_eval_order(tiny_data):
    loader = make_loader(tiny_data, batch_size=4, shuffle=False, bucket=False)
    assert loader.batch_sampler.batches() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


@pytest.mark.parametrize("bucket", [True, False])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("size", [{"batch_size": 32}, {"batch_size": 7}, {"max_tokens": 400}])
def test_every_example_once_per_epoch(bucket, shuffle, size):
    lengths = synthetic_lengths(1000)
    sampler = BucketBatchSampler(lengths, bucket=bucket, shuffle=shuffle, chunk_batches=5, **size)
    for _ in range(2):
        expected_len = len(sampler)
        batches = list(sampler)
        assert len(batches) == expected_len
        assert all(len(b) > 0 for b in batches)
        assert sorted(i for b in batches for i in b) == list(range(1000))
        if "batch_size" in size:
            assert all(len(b) <= size["batch_size"] for b in batches)


def test_same_seed_same_batches_and_epochs_differ():
    lengths = synthetic_lengths(500)

    def run(seed, epochs=2):
        s = BucketBatchSampler(lengths, batch_size=16, seed=seed)
        return [list(s) for _ in range(epochs)]

    a, b, c = run(0), run(0), run(1)
    assert a == b
    assert a[0] != c[0]
    assert a[0] != a[1]  # each iteration is a new epoch
    s = BucketBatchSampler(lengths, batch_size=16, seed=0)
    s.set_epoch(1)
    assert list(s) == a[1]  # set_epoch reproduces (resuming, DDP)
    s.set_epoch(0)
    assert list(s) == a[0]


def test_bucketing_groups_similar_lengths():
    lengths = synthetic_lengths(2000)
    src = np.array([s for s, _ in lengths])

    def spread(bucket):
        batches = list(BucketBatchSampler(lengths, batch_size=20, bucket=bucket))
        return np.mean([src[b].max() - src[b].min() for b in batches])

    assert spread(True) < 0.25 * spread(False)


def test_max_tokens_bound():
    lengths = synthetic_lengths(1000)
    size = np.array([max(s, t) for s, t in lengths])
    for bucket in (True, False):
        batches = list(BucketBatchSampler(lengths, max_tokens=300, bucket=bucket))
        assert all(len(b) * size[b].max() <= 300 for b in batches)
    with pytest.raises(ValueError, match="Example .* more than max_tokens=10"):
        BucketBatchSampler(lengths, max_tokens=10)


def test_max_tokens_loader(tiny_data):
    loader = make_loader(tiny_data, max_tokens=30)
    n = 0
    for src, trg in loader:
        assert src.numel() <= 30 and trg.numel() <= 30
        n += len(src)
    assert n == len(tiny_data)


@pytest.mark.parametrize(
    "kwargs", [{}, {"batch_size": 4, "max_tokens": 100}, {"batch_size": 0}, {"max_tokens": -1}]
)
def test_batch_size_xor_max_tokens(kwargs):
    with pytest.raises(ValueError):
        BucketBatchSampler([3, 4, 5], **kwargs)


@pytest.mark.parametrize("replicas", [2, 3, 4])
@pytest.mark.parametrize("size", [{"batch_size": 16}, {"max_tokens": 250}])
def test_ddp_sharding_disjoint_complete(replicas, size):
    lengths = synthetic_lengths(503)
    for epoch in (0, 1):
        shards = []
        for rank in range(replicas):
            s = BucketBatchSampler(lengths, num_replicas=replicas, rank=rank, **size)
            s.set_epoch(epoch)
            assert len(s) == len(s.batches()) // replicas
            shards.append(list(s))
        assert len({len(b) for b in shards}) == 1  # same number of batches on every rank
        assert len(shards[0]) == len(s.batches()) // replicas
        ids = [i for shard in shards for b in shard for i in b]
        assert sorted(ids) == list(range(503))  # disjoint and complete
    with pytest.raises(ValueError, match="rank"):
        BucketBatchSampler(lengths, batch_size=8, num_replicas=2, rank=2)


def test_ddp_sharding_splits_batches_to_even_count():
    s = [BucketBatchSampler([5] * 10, batch_size=4, num_replicas=2, rank=r) for r in (0, 1)]
    shards = [list(x) for x in s]
    assert [len(x) for x in shards] == [2, 2]
    assert sorted(i for x in shards for b in x for i in b) == list(range(10))


def test_padding_ratio():
    src = torch.tensor([[4, 5, 1], [4, 1, 1]])
    trg = torch.tensor([[2, 4, 3], [2, 3, 1]])
    assert padding_ratio([(src, trg)], pad_idx=1) == pytest.approx(4 / 12)
    assert padding_ratio([], pad_idx=1) == 0.0


def test_bucketing_reduces_padding():
    pairs = [([7] * s, [7] * t) for s, t in synthetic_lengths(2000)]
    ratio = {
        b: padding_ratio(make_loader(pairs, batch_size=32, bucket=b, pad_idx=1), 1)
        for b in (True, False)
    }
    assert ratio[True] < 0.1 < 0.3 < ratio[False]


# ------------------------------------------------------------------ files


def test_load_pairs_gz_and_plain(tmp_path, tiny_pairs):
    de = gz(tmp_path / "a.de.gz", [d for d, _ in tiny_pairs])
    en = tmp_path / "a.en"
    en.write_bytes("".join(f"{e}\r\n" for _, e in tiny_pairs).encode())  # CRLF, no .gz
    assert load_pairs(de, en) == tiny_pairs


def test_load_pairs_keeps_raw_text(tmp_path):
    de = tmp_path / "x.de"
    en = tmp_path / "x.en"
    de.write_text("Ein  Hund läuft. \nKatze", encoding="utf-8")  # no final newline
    en.write_text("A  dog runs. \nCat\n", encoding="utf-8")
    assert load_pairs(de, en) == [("Ein  Hund läuft. ", "A  dog runs. "), ("Katze", "Cat")]


def test_load_pairs_line_count_mismatch(tmp_path):
    de = gz(tmp_path / "m.de.gz", ["Ein Hund.", "Eine Katze."])
    en = gz(tmp_path / "m.en.gz", ["A dog."])
    with pytest.raises(DataError, match=r"m\.de\.gz has 2 lines but .*m\.en\.gz has 1"):
        load_pairs(de, en)


def test_load_pairs_non_utf8(tmp_path):
    de = tmp_path / "u.de"
    de.write_bytes(b"Ein Hund.\n" + "Eine Käsekatze.\n".encode("latin-1"))
    en = tmp_path / "u.en"
    en.write_text("A dog.\nA cheese cat.\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"u\.de is not valid UTF-8.*line 2"):
        load_pairs(de, en)


def test_load_pairs_truncated_gzip(tmp_path, tiny_pairs):
    full = gz(tmp_path / "t.de.gz", [d for d, _ in tiny_pairs] * 20).read_bytes()
    de = tmp_path / "t.de.gz"
    de.write_bytes(full[: len(full) // 2])
    en = gz(tmp_path / "t.en.gz", [e for _, e in tiny_pairs] * 20)
    with pytest.raises(DataError, match=r"t\.de\.gz is a truncated or corrupted gzip"):
        load_pairs(de, en)
    fake = tmp_path / "f.de.gz"
    fake.write_text("plain text\n")
    with pytest.raises(DataError, match="not a gzip file"):
        load_pairs(fake, en)


def test_load_multi30k_tiny(tiny_corpus, tiny_sums, tiny_pairs, no_network):
    splits = load_multi30k(tiny_corpus, download=False)
    assert splits == {"train": tiny_pairs[:8], "valid": tiny_pairs[8:10], "test": tiny_pairs[10:12]}
    assert load_multi30k(tiny_corpus) == splits  # all present: nothing to download


def test_load_multi30k_default_root_is_config_dir(tiny_corpus, tiny_sums, monkeypatch):
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    assert len(load_multi30k(download=False)["train"]) == 8


def test_download_from_mirror(tiny_corpus, tiny_sums, tmp_path, monkeypatch, tiny_pairs):
    monkeypatch.setenv("CONVS2S_DATA_URL", tiny_corpus.as_uri())
    root = tmp_path / "cache" / "multi30k"
    assert load_multi30k(root)["valid"] == tiny_pairs[8:10]
    assert sorted(p.name for p in root.iterdir()) == sorted(FILES)
    # a second call reads the cache; the mirror may be gone
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "gone").as_uri())
    assert load_multi30k(root)["test"] == tiny_pairs[10:12]


def test_missing_files_download_unreachable(tmp_path, no_network):
    root = tmp_path / "nowhere"
    with pytest.raises(DataError) as err:
        load_multi30k(root)
    msg = str(err.value)
    assert "train.de.gz" in msg and no_network.as_uri() in msg and "CONVS2S_DATA_DIR" in msg
    assert not root.exists() or list(root.iterdir()) == []


def test_missing_files_without_download(tmp_path, no_network):
    with pytest.raises(DataError, match="train.de.gz is not in .*download=False"):
        load_multi30k(tmp_path, download=False)


def test_download_checksum_mismatch_leaves_nothing(tiny_corpus, tiny_sums, tmp_path, monkeypatch):
    mirror = tmp_path / "bad_mirror"
    mirror.mkdir()
    for name in FILES:
        (mirror / name).write_bytes((tiny_corpus / name).read_bytes())
    gz(mirror / "val.en.gz", ["A wrong file."])
    monkeypatch.setenv("CONVS2S_DATA_URL", mirror.as_uri())
    root = tmp_path / "cache"
    with pytest.raises(DataError) as err:
        load_multi30k(root)
    msg = str(err.value)
    assert "val.en.gz" in msg and "sha256" in msg and mirror.as_uri() in msg
    assert "CONVS2S_DATA_DIR" in msg
    names = sorted(p.name for p in root.iterdir())
    assert "val.en.gz" not in names and not any(n.endswith(".part") for n in names)
    assert names == ["train.de.gz", "train.en.gz", "val.de.gz"]  # the good ones before it


def test_local_file_wrong_checksum(tiny_corpus, tiny_sums, no_network):
    gz(tiny_corpus / "test_2016_flickr.en.gz", ["Something else.", "Entirely."])
    with pytest.raises(DataError, match=r"test_2016_flickr\.en\.gz is corrupted.*sha256"):
        load_multi30k(tiny_corpus)


def test_local_truncated_gzip(tiny_corpus, tiny_sums, no_network, monkeypatch):
    path = tiny_corpus / "train.en.gz"
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) - 12])
    # the checksum catches it ...
    with pytest.raises(DataError, match=r"train\.en\.gz is corrupted"):
        load_multi30k(tiny_corpus)
    # ... and if the sum matched, the gzip reader would
    monkeypatch.setitem(multi30k.MULTI30K_SHA256, "train.en.gz", sha(path))
    with pytest.raises(DataError, match=r"train\.en\.gz is a truncated or corrupted gzip"):
        load_multi30k(tiny_corpus)


# ---------------------------------------------- folders, orphans, modes


@pytest.fixture
def umask():
    """Set the process umask for one test (``umask(0o027)``), then put the old one back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def test_failed_download_creates_no_folder(tmp_path, no_network):
    # the data folder (and its parents) are created only once a download succeeded
    root = tmp_path / "new" / "multi30k"
    with pytest.raises(DataError) as err:
        load_multi30k(root)
    assert not (tmp_path / "new").exists()
    assert str(root) in str(err.value)


def test_relative_data_folder_is_named_absolute_in_errors(tmp_path, no_network, monkeypatch):
    # a relative folder is resolved against the current folder and named absolute
    monkeypatch.chdir(tmp_path)
    expected = str(tmp_path.resolve() / "rel" / "data")
    for kwargs in ({}, {"download": False}):
        with pytest.raises(DataError) as err:
            load_multi30k("rel/../rel/data", **kwargs)
        assert expected in str(err.value), str(err.value)
    monkeypatch.setenv("CONVS2S_DATA_DIR", "rel/data")
    with pytest.raises(DataError, match=f"not in {expected} "):
        load_multi30k(download=False)
    assert not (tmp_path / "rel").exists()


def test_file_errors_name_absolute_paths(tmp_path, tiny_corpus, tiny_sums, no_network,
                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.de").write_text("eins\nzwei\n")
    (tmp_path / "a.en").write_text("one\n")
    with pytest.raises(DataError, match=f"{tmp_path.resolve() / 'a.de'} has 2 lines but "):
        load_pairs("a.de", "a.en")
    gz(tiny_corpus / "val.de.gz", ["Etwas anderes."])
    rel = os.path.relpath(tiny_corpus, tmp_path)
    with pytest.raises(DataError, match=f"{tiny_corpus.resolve() / 'val.de.gz'} is corrupted"):
        load_multi30k(rel)
    (tmp_path / "v.json").write_text("{}")
    with pytest.raises(DataError, match=f"{tmp_path.resolve() / 'v.json'} is not a vocabulary"):
        Vocab.load("v.json")


def test_stale_part_files_of_data_files_are_removed_at_the_next_load(tiny_corpus, tiny_sums,
                                                                     no_network):
    # what a killed download leaves, and only that, goes at the next start
    stale = [".train.de.gz.k2x_9abq.part", ".val.en.gz.00000000.part"]
    kept = [".train.de.gz.k2x_9abq.tmp",  # not a download's suffix
            ".notes.txt.k2x_9abq.part",  # not a data file's name
            "train.de.gz.part", ".train.de.gz.part", "mine.part"]  # not the temp pattern
    for name in stale + kept:
        (tiny_corpus / name).write_bytes(b"half")
    assert len(load_multi30k(tiny_corpus)["train"]) == 8
    assert sorted(p.name for p in tiny_corpus.iterdir()) == sorted(FILES + kept)


def test_download_killed_with_kill_9_leaves_a_part_file_the_next_load_removes(tiny_corpus,
                                                                             tiny_sums):
    # end to end: a process killed while writing a download into the data folder
    import signal
    import subprocess
    import sys
    import time

    (tiny_corpus / "val.de.gz").unlink()
    script = (
        "import sys, time\n"
        "from convs2s.system.atomic_files import atomic_write\n"
        "def write(f):\n"
        "    f.write(b'half a download'); f.flush()\n"
        "    print('writing', flush=True); time.sleep(600)\n"
        f"atomic_write({str(tiny_corpus / 'val.de.gz')!r}, write, suffix='.part')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(".part") for p in tiny_corpus.iterdir()):
        assert time.monotonic() < deadline, "the killed writer left no .part file"
        time.sleep(0.05)
    [orphan] = [p for p in tiny_corpus.iterdir() if p.name.endswith(".part")]
    assert orphan.name.startswith(".val.de.gz.")
    with pytest.raises(DataError, match="val.de.gz is not in"):
        load_multi30k(tiny_corpus, download=False)
    assert not orphan.exists()


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_downloaded_files_and_vocab_get_the_umask_mode(tiny_corpus, tiny_sums, tmp_path,
                                                       monkeypatch, umask, mask):
    # the umask's mode, not mkstemp's 0600
    umask(mask)
    monkeypatch.setenv("CONVS2S_DATA_URL", tiny_corpus.as_uri())
    root = tmp_path / "cache"
    load_multi30k(root)
    modes = {p.name: p.stat().st_mode & 0o777 for p in root.iterdir()}
    assert modes == {name: 0o666 & ~mask for name in FILES}
    vocab = Vocab.build([["a", "b"]], min_freq=1)
    vocab.save(tmp_path / "v.json")
    assert (tmp_path / "v.json").stat().st_mode & 0o777 == 0o666 & ~mask
    (tmp_path / "v.json").chmod(0o600)  # an existing file keeps its mode
    vocab.save(tmp_path / "v.json")
    assert (tmp_path / "v.json").stat().st_mode & 0o777 == 0o600
    assert Vocab.load(tmp_path / "v.json") == vocab


# ------------------------------------------------------------------ the real corpus

REAL = os.environ.get("CONVS2S_DATA_DIR", "").strip()
real_corpus = pytest.mark.skipif(
    not REAL,
    reason="real corpus: set CONVS2S_DATA_DIR to a folder with the Multi30k files "
    "(e.g. CONVS2S_DATA_DIR=../shared/data/multi30k) to run it",
)


@pytest.fixture(scope="module")
def real_splits():
    return load_multi30k(REAL, download=False)


@real_corpus
def test_real_split_sizes(real_splits):
    assert {k: len(v) for k, v in real_splits.items()} == {
        "train": 29000,
        "valid": 1014,
        "test": 1000,
    }
    de, en = real_splits["train"][0]
    assert de and en and de != en
    assert not de.endswith("\n") and not en.endswith("\n")
    assert all(de and en for split in real_splits.values() for de, en in split)


@real_corpus
def test_real_vocab_sizes(real_splits, toks):
    """Lowercased spaCy tokens, min_freq=2 on train, whitespace tokens dropped.

    bentrevett's torchtext tutorials report 7,853 / 5,893: the same counts plus the
    whitespace tokens (' ' and '\\xa0' in German, ' ' in English) that torchtext kept.
    """
    tok_de, tok_en = toks
    train = real_splits["train"]
    de = [tok_de(s) for s, _ in train]
    en = [tok_en(s) for _, s in train]
    assert (len(Vocab.build(de)), len(Vocab.build(en))) == (7851, 5892)


# ----------------------------------------------------------------------------------- directions


def test_the_offline_hint_names_the_files_of_the_direction_asked_for(tmp_path, no_network):
    with pytest.raises(DataError) as err:
        load_multi30k(tmp_path / "nowhere", src="fr", trg="cs")
    msg = str(err.value)
    assert "train.fr.gz" in msg and "test_2016_flickr.cs.gz" in msg and "train.de.gz" not in msg
    assert "\n" not in msg and not (tmp_path / "nowhere").exists()


def test_check_direction_and_the_file_names():
    assert multi30k.check_direction("cs", "fr") == ("cs", "fr")
    assert multi30k.multi30k_files("en", "cs") == [
        "train.en.gz", "train.cs.gz", "val.en.gz", "val.cs.gz",
        "test_2016_flickr.en.gz", "test_2016_flickr.cs.gz"]
    assert set(multi30k.multi30k_files("de", "en")) | set(multi30k.multi30k_files("fr", "cs")) == \
        set(multi30k.MULTI30K_SHA256)
    with pytest.raises(ValueError, match="no target language 'uk'"):
        multi30k.multi30k_files("en", "uk")


# ------------------------------------------------------------------ odd data files, downloads


@pytest.mark.parametrize("odd", ["folder", "link to itself", "loop of two links"])
def test_a_data_file_that_is_a_folder_or_a_link_loop_is_named_as_such(tiny_corpus, tiny_sums,
                                                                     no_network, odd):
    path = tiny_corpus / "val.en.gz"
    path.unlink()
    if odd == "folder":
        path.mkdir()
        what = "a folder"
    else:
        other = tiny_corpus / "other"
        path.symlink_to(path if odd == "link to itself" else other)
        if odd == "loop of two links":
            other.symlink_to(path)
        what = "a symbolic link loop (following its links leads back to one of them)"
    with pytest.raises(DataError) as err:
        load_multi30k(tiny_corpus)
    assert str(err.value) == (f"{path} is {what}, not the Multi30k file val.en.gz. Remove it "
                              "(the loader then downloads the file), or set CONVS2S_DATA_DIR to "
                              "a folder that has the files.")
    with pytest.raises(DataError, match=f"^Cannot read {path}: it is a folder, not a text file|"
                                        f"^{path} is a symbolic link loop"):
        load_pairs(path, tiny_corpus / "val.de.gz")


def test_a_data_folder_on_a_link_loop_is_named_as_such(tmp_path, no_network):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(DataError, match=f"^{loop / 'multi30k'} is a symbolic link loop"):
        load_multi30k(loop / "multi30k")


@pytest.fixture
def server():
    """A local HTTP server whose paths misbehave: /stall/ sends headers and then nothing,
    /endless/ sends bytes for ever (no Content-Length), /drip/ a byte every 50 ms; its base URL.
    """
    import http.server
    import threading
    import time

    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.flush()
            try:
                while not stop.is_set():
                    if self.path.startswith("/endless/"):
                        self.wfile.write(b"x" * 65536)
                    elif self.path.startswith("/drip/"):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.05)
                    else:
                        stop.wait(0.05)
            except OSError:  # the client hung up
                pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    stop.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


def test_a_download_larger_than_the_cap_is_refused(tiny_corpus, tiny_sums, tmp_path, monkeypatch,
                                                   server):
    monkeypatch.setattr(multi30k, "MAX_DOWNLOAD_BYTES", 1 << 20)
    root = tmp_path / "cache"
    # a file:// mirror tells the size first; the endless server does not
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "train.de.gz").write_bytes(bytes(2 << 20))
    for url in (mirror.as_uri() + "/", f"{server}/endless/"):
        monkeypatch.setenv("CONVS2S_DATA_URL", url)
        with pytest.raises(DataError) as err:
            load_multi30k(root)
        assert "train.de.gz" in str(err.value) and "\n" not in str(err.value)
        assert "the server sends more than 1,048,576 bytes" in str(err.value)
        assert not root.exists()


def test_a_stalled_or_dripping_download_is_given_up(tmp_path, monkeypatch, server):
    import time

    # one short timer a case, the other long, so that a busy machine (the server thread
    # starved for a while) cannot make the other one fire first
    for path, stall, deadline, reason in (
            ("stall", 0.5, 600.0, "nothing arrived for 0.5 s (the download stalled)"),
            ("drip", 60.0, 1.0, "it took more than 1 s")):
        monkeypatch.setattr(multi30k, "DOWNLOAD_STALL_SECONDS", stall)
        monkeypatch.setattr(multi30k, "DOWNLOAD_DEADLINE_SECONDS", deadline)
        monkeypatch.setenv("CONVS2S_DATA_URL", f"{server}/{path}/")
        start = time.monotonic()
        with pytest.raises(DataError) as err:
            load_multi30k(tmp_path / "cache")
        assert time.monotonic() - start < 30
        assert f"Could not download Multi30k file train.de.gz from {server}/{path}/" \
               f"train.de.gz" in str(err.value)
        assert reason in str(err.value), str(err.value)
