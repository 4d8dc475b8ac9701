"""convs2s.run.checkpoint.Checkpoint: the file format, and what loading a file refuses.

A checkpoint names its model class by name (``model_class``: "ConvS2S", ...) and holds only
tensors, numbers, strings, bytes, lists and dicts, never a pickled convs2s object: so a file
written before a module moved keeps loading after. Every reader goes through
:meth:`Checkpoint.load`, which loads with ``weights_only=True`` and checks the parts once;
anything wrong is one :class:`CheckpointError` line naming the file.

A checkpoint may come from elsewhere: what its archive and tensors claim, and the sizes its
model_config asks for (``LIMITS``), are checked before anything is allocated for them or any value
read. The files that claim gigabytes are loaded in a child process whose address space is bounded,
so that a loader which tried to allocate what they claim would fail there, not take the machine's
memory.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import pickletools
import re
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
import torch
from conftest import TINY_PAIRS

from convs2s.data import Vocab
from convs2s.model import ConvS2S
from convs2s.model.rnn import RNNAttentionSeq2Seq
from convs2s.model.variants import VariantConvS2S
from convs2s.run.checkpoint import MODEL_CLASSES, Checkpoint, CheckpointError, save_checkpoint
from convs2s.run.checkpoint_guard import LIMITS, MAX_MODEL_ELEMENTS, check_config
from convs2s.run.presets import PRESETS
from convs2s.run.resume import check_compatible
from convs2s.run.train import train

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]
VOCAB = Vocab(SPECIALS + [f"w{i}" for i in range(16)], SPECIALS)  # 20 tokens; <pad> is id 1
PAD = VOCAB.pad_idx
SMALL = dict(src_pad_idx=PAD, trg_pad_idx=PAD, max_positions=16)
CONV = dict(emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1, **SMALL)

# A small model of every class a checkpoint may name, by the name checkpoints record.
BUILD = {
    "ConvS2S": lambda: ConvS2S(len(VOCAB), len(VOCAB), **CONV),
    "RNNAttentionSeq2Seq": lambda: RNNAttentionSeq2Seq(
        len(VOCAB), len(VOCAB), emb_dim=8, enc_hid_dim=8, dec_hid_dim=8, **SMALL),
    "VariantConvS2S": lambda: VariantConvS2S(
        len(VOCAB), len(VOCAB), conv="depthwise", encoder_self_attention=True,
        attention_heads=2, **CONV),
}


def tiny(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return BUILD[name]().eval()


def tokens(lengths, seed: int) -> torch.Tensor:
    """Right-padded random token ids (no specials), one row per length."""
    g = torch.Generator().manual_seed(seed)
    out = torch.full((len(lengths), max(lengths)), PAD)
    for b, n in enumerate(lengths):
        out[b, :n] = torch.randint(4, len(VOCAB), (n,), generator=g)
    return out


def saved(tmp_path: Path, name: str = "ConvS2S") -> Path:
    return Checkpoint.from_model(tiny(name), VOCAB, VOCAB).save(tmp_path / f"{name}.pt")


# --------------------------------------------------------------------------------------------
# Checkpoints name classes, not module paths
# --------------------------------------------------------------------------------------------


def test_checkpoints_name_these_model_classes():
    """Renaming one of these classes would break every checkpoint that names it: keep the old
    name in MODEL_CLASSES then."""
    assert sorted(MODEL_CLASSES) == sorted(BUILD)
    assert all(cls.__name__ == name for name, cls in MODEL_CLASSES.items())


def _pickled_modules(path: Path) -> set[str]:
    """The modules whose objects the file's pickle (``data.pkl`` in torch's zip) names."""
    with zipfile.ZipFile(path) as z:
        [pkl] = [n for n in z.namelist() if n.endswith("/data.pkl")]
        data = z.read(pkl)
    modules, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":  # protocol 2, what torch.save writes: "module name"
            modules.add(arg.split(" ")[0])
        elif op.name == "STACK_GLOBAL":  # protocol 4+: the two strings pushed before it
            modules.add(strings[-2])
        if isinstance(arg, str):
            strings.append(arg)
    assert b"convs2s." not in data
    return modules


@pytest.fixture(scope="module")
def training_run(tmp_path_factory) -> Path:
    """best.pt and last.pt of a one-epoch training run on the tiny corpus, written now."""
    out = tmp_path_factory.mktemp("run")
    preset = dataclasses.replace(PRESETS["quick"], epochs=1, min_freq=1)
    data = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}
    train(preset, out, data=data, progress=False, log=lambda *_: None)
    return out


@pytest.mark.parametrize("name", ["best.pt", "last.pt"])
def test_a_training_checkpoint_pickles_no_convs2s_object(training_run, name):
    """What a checkpoint pickles is torch's and Python's own: nothing in it names a module of
    convs2s, so moving a module cannot break the files written before."""
    modules = _pickled_modules(training_run / name)
    assert modules and not {m for m in modules if m.split(".")[0] == "convs2s"}, modules
    data = torch.load(training_run / name, weights_only=True)
    assert data["model_class"] == "ConvS2S" and data["train_state"]["step"] > 0


@pytest.mark.parametrize("name", sorted(MODEL_CLASSES))
def test_a_checkpoint_of_each_model_class_loads_by_its_name(tmp_path, name):
    model = tiny(name)
    path = Checkpoint.from_model(model, VOCAB, VOCAB).save(tmp_path / f"{name}.pt")
    assert not {m for m in _pickled_modules(path) if m.startswith("convs2s")}
    data = torch.load(path, weights_only=True)
    assert data["model_class"] == name  # a name, not a module path
    src, trg_in = tokens([4, 3], seed=1), tokens([3, 3], seed=2)
    for loaded in (Checkpoint.load(path), Checkpoint.from_dict(data)):
        rebuilt = loaded.build_model()
        assert type(rebuilt) is MODEL_CLASSES[name] and loaded.model_class == name
        with torch.no_grad():
            torch.testing.assert_close(rebuilt(src, trg_in)[0], model(src, trg_in)[0])


def test_a_checkpoint_that_names_no_class_is_convs2s(tmp_path):
    """What convs2s.run.train wrote before it recorded the class."""
    data = torch.load(saved(tmp_path), weights_only=True)
    del data["model_class"]
    assert type(Checkpoint.from_dict(data).build_model()) is ConvS2S


def test_a_checkpoint_saved_under_an_old_option_name_loads_under_the_new_one(tmp_path):
    """``encoder_grad_scale`` is now ``scale_encoder_gradients`` (the shipped models and older
    runs hold the old name): the model is built, resumes against the same configuration, and
    the recorded preset reads back with the new name."""
    data = torch.load(saved(tmp_path), weights_only=True)
    data["model_config"] = {("encoder_grad_scale" if k == "scale_encoder_gradients" else k): v
                            for k, v in data["model_config"].items()}
    data["model_config"]["encoder_grad_scale"] = False
    data["preset"] = {**PRESETS["quick"].as_dict(), "encoder_grad_scale": False}
    ckpt = Checkpoint.from_dict(data)
    assert "encoder_grad_scale" not in ckpt.model_config
    assert ckpt.model_config["scale_encoder_gradients"] is False
    assert ckpt.build_model().config == ckpt.model_config
    check_compatible(data, ckpt.model_config, VOCAB, VOCAB)
    assert ckpt.preset["scale_encoder_gradients"] is False and "encoder_grad_scale" not in \
        ckpt.preset
    both = {**data, "model_config": {**data["model_config"], "scale_encoder_gradients": True}}
    with pytest.raises(CheckpointError, match="old name of scale_encoder_gradients"):
        Checkpoint.from_dict(both)


@pytest.mark.parametrize("model_class", [
    "Transformer", "convs2s.model.convs2s.ConvS2S", "convs2s.model.ConvS2S", "convs2s2", "",
    None, 3,
])
def test_a_checkpoint_naming_an_unknown_class_is_refused_in_one_line(tmp_path, model_class):
    """The negative control: a name that is not in MODEL_CLASSES, a module path included, is
    refused; no class is looked up anywhere else."""
    data = torch.load(saved(tmp_path), weights_only=True)
    data["model_class"] = model_class
    path = save_checkpoint(tmp_path / "unknown.pt",
                           {k: v for k, v in data.items() if k not in ("format", "version")})
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(f"{path} cannot be used: ")
    assert f"its model_class {model_class!r} is not one of {sorted(MODEL_CLASSES)}" in message


# --------------------------------------------------------------------------------------------
# What loading refuses
# --------------------------------------------------------------------------------------------


def test_a_malformed_baseline_checkpoint_is_one_clear_error(tmp_path):
    """A baseline's checkpoint is checked as ConvS2S's is: a missing part is one line, not a
    KeyError."""
    data = Checkpoint.from_model(tiny("RNNAttentionSeq2Seq"), VOCAB, VOCAB).to_dict()
    del data["model_config"]["enc_hid_dim"], data["trg_vocab"]["itos"]
    path = save_checkpoint(tmp_path / "bad.pt", data)
    with pytest.raises(CheckpointError, match="bad.pt cannot be used: its trg_vocab has no list"):
        Checkpoint.load(path)


@pytest.mark.parametrize("change, refusal", [
    ({"emb_dim": 10**6}, r"its model_config asks for emb_dim=1000000; a checkpoint may ask for "
                         r"1 to 8,192"),
    ({"hid_dim": 8192, "enc_layers": 100, "dec_layers": 100},
     r"its model_config asks for a model of [\d,]+ parameters and buffers; a checkpoint may "
     r"ask for at most 1,000,000,000\."),
    ({"emb_dim": 4096}, r"its weights do not fit its model_config: .*the config gives"),
])
def test_a_huge_model_config_is_refused_before_allocating(tmp_path, monkeypatch, change,
                                                          refusal):
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict()
    data["model_config"].update(change)
    path = save_checkpoint(tmp_path / "huge.pt", data)
    real_empty, big = torch.empty, []

    def watching_empty(*size, **kw):  # what nn.Embedding/Linear allocate with
        t = real_empty(*size, **kw)
        if t.device.type != "meta" and t.numel() > 10**7:
            big.append(t.numel())
        return t

    monkeypatch.setattr(torch, "empty", watching_empty)
    with pytest.raises(CheckpointError, match="huge.pt cannot be used: " + refusal):
        Checkpoint.load(path)
    assert not big


def test_a_missing_final_pt_of_an_unfinished_run_says_what_the_run_holds(tmp_path):
    """The message suggests what works: not training into a folder that already holds a run
    (which train refuses), but the files it has, or finishing it with --resume."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "last.pt").write_bytes(b"")
    with pytest.raises(CheckpointError) as raised:
        Checkpoint.load(run / "final.pt")
    said = str(raised.value)
    assert "holds last.pt" in said and "--resume" in said and "--preset quick" not in said, said
    (tmp_path / "notes").write_text("x")
    with pytest.raises(CheckpointError, match="notes is a file, not a run's folder"):
        Checkpoint.load(tmp_path / "notes" / "final.pt")
    (run / "final.pt").write_bytes(b"")  # a finished run: a typo is asked about, no --resume
    with pytest.raises(CheckpointError) as raised:
        Checkpoint.load(run / "fianl.pt")
    said = str(raised.value)
    assert said.endswith(f"Did you mean {run / 'final.pt'}?") and "--resume" not in said, said


def test_a_truncated_missing_or_foreign_file_is_a_clear_error(tmp_path):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(saved(tmp_path).read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a readable convs2s checkpoint.*truncated"):
        Checkpoint.load(broken)
    with pytest.raises(CheckpointError, match="No checkpoint at"):
        Checkpoint.load(tmp_path / "missing.pt")
    not_ours = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, not_ours)
    with pytest.raises(CheckpointError, match="not a convs2s checkpoint"):
        Checkpoint.load(not_ours)


def test_another_format_version_is_refused(tmp_path):
    data = torch.load(saved(tmp_path), weights_only=True)
    torch.save({**data, "version": 2}, tmp_path / "v2.pt")
    with pytest.raises(CheckpointError, match=r"v2.pt is checkpoint format version 2; this "
                                              r"convs2s reads version 1\.$"):
        Checkpoint.load(tmp_path / "v2.pt")


def test_a_file_that_would_run_code_is_refused_unrun(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"format": "convs2s-checkpoint", "version": 1, "row": Evil()}, tmp_path / "e.pt")
    with pytest.raises(CheckpointError, match="e.pt is not a convs2s checkpoint: it holds Python "
                                              r"objects that a safe load \(weights_only=True\) "
                                              "refuses") as e:
        Checkpoint.load(tmp_path / "e.pt")
    assert "\n" not in str(e.value) and not marker.exists()


def test_a_device_file_as_checkpoint_is_not_a_file():
    with pytest.raises(CheckpointError, match=r"^/dev/null is not a file; pass the path of a "):
        Checkpoint.load("/dev/null")


def test_a_folder_given_as_checkpoint_names_the_file_inside(tmp_path):
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "best.pt").write_bytes(b"x")
    with pytest.raises(CheckpointError, match=r"q is a folder, not a checkpoint file\. Did you "
                                              r"mean .*q/best.pt\?"):
        Checkpoint.load(tmp_path / "q")


# --------------------------------------------------------------------------------------------
# A checkpoint from elsewhere: what it claims is checked before anything is allocated or read
# --------------------------------------------------------------------------------------------


def crafted(tmp_path: Path, name: str = "crafted.pt", *, config: dict | None = None,
            weights: dict | None = None) -> Path:
    """The tiny ConvS2S checkpoint with ``config`` changes and ``weights`` replaced or added,
    saved as ``torch.save`` writes it."""
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict()
    data["model_config"].update(config or {})
    data["model"].update(weights or {})
    return save_checkpoint(tmp_path / name, data)


def refusal(path: Path) -> str:
    """The one-line message with which loading ``path`` is refused."""
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(str(path)), message
    return message


POSITIONS = "encoder.pos_embedding.weight"  # [max_positions, emb_dim]: [16, 8] in tiny()


def test_a_weight_stored_as_a_stride_0_view_is_refused_before_its_values_are_read(
        tmp_path, monkeypatch):
    """``zeros(1, 1).expand(16, 8)`` is saved as one value with strides (0, 0): it has the
    shape the config gives, but reading it (``isfinite``) would materialise every element."""
    path = crafted(tmp_path, weights={POSITIONS: torch.zeros(1, 1).expand(16, 8)})
    read = []
    monkeypatch.setattr(torch, "isfinite", lambda t: read.append(t) or t == t)
    message = refusal(path)
    assert f"its weight {POSITIONS} is a view of shape [16, 8] with strides [0, 0] over 4 " \
           "stored bytes, not a dense tensor" in message
    assert not read


@pytest.mark.parametrize("weight, problem", [
    (torch.zeros(1000)[:128].view(16, 8),
     f"its weight {POSITIONS} has a storage of 4,000 bytes but uses 512 of them"),
    (torch.zeros(16, 8, device="meta"),
     f"its weight {POSITIONS} is a meta tensor: a shape without values"),
    (torch.eye(16, 8).to_sparse(), f"its weight {POSITIONS} is a sparse_coo tensor; a "
                                   "checkpoint holds dense tensors"),
    (torch.zeros(16, 8, dtype=torch.int64),
     f"its weights do not fit its model_config: {POSITIONS} holds int64, the model float32"),
    (torch.zeros(16, 8, dtype=torch.complex64),
     f"its weights do not fit its model_config: {POSITIONS} holds complex64, the model "
     "float32"),
])
def test_a_weight_that_is_not_a_plain_stored_tensor_is_refused_in_one_line(tmp_path, weight,
                                                                           problem):
    """A weight with a larger storage than its values, a meta placeholder, a sparse tensor or
    a dtype the model does not have: one line naming the file and the weight."""
    assert problem in refusal(crafted(tmp_path, weights={POSITIONS: weight}))


def test_weights_sharing_a_storage_larger_than_they_need_are_refused(tmp_path):
    base = torch.zeros(4000)  # 16,000 bytes, of which two [16, 8] weights use 1,024
    shared = {POSITIONS: base[:128].view(16, 8),
              "decoder.pos_embedding.weight": base[128:256].view(16, 8)}
    assert "has a storage of 16,000 bytes but uses 1,024 of them" in \
        refusal(crafted(tmp_path, weights=shared))


def test_tensors_that_share_one_storage_still_load(tmp_path):
    """Tied embeddings are one tensor under two names; a GRU's weights on a GPU are views into
    one flat buffer (cuDNN's layout). Both are dense and cover their storage: they load."""
    tied = ConvS2S(len(VOCAB), len(VOCAB), share_input_output_embed=True, **CONV)
    path = Checkpoint.from_model(tied, VOCAB, VOCAB).save(tmp_path / "tied.pt")
    assert Checkpoint.load(path).build_model().config["share_input_output_embed"]

    rnn = tiny("RNNAttentionSeq2Seq")
    weights = rnn.state_dict()
    gru = [k for k in weights if k.startswith("encoder.rnn.")]
    flat = torch.cat([weights[k].flatten() for k in gru])
    offset = 0
    for k in gru:
        n = weights[k].numel()
        weights[k] = flat[offset:offset + n].view(weights[k].shape)
        offset += n
    assert len({weights[k].untyped_storage().data_ptr() for k in gru}) == 1
    ckpt = Checkpoint.from_model(rnn, VOCAB, VOCAB)
    path = dataclasses.replace(ckpt, state_dict=weights).save(tmp_path / "flat.pt")
    src, trg_in = tokens([4, 3], seed=1), tokens([3, 3], seed=2)
    with torch.no_grad():
        torch.testing.assert_close(Checkpoint.load(path).build_model()(src, trg_in)[0],
                                   rnn(src, trg_in)[0])


@pytest.mark.skipif(not hasattr(torch.serialization, "set_default_mmap_options")
                    or not hasattr(mmap, "MAP_SHARED"), reason="PyTorch >= 2.5 on Unix")
def test_changing_a_loaded_tensor_never_changes_the_file_even_where_mapping_is_shared(tmp_path):
    """The tensors are mapped from the file: copy-on-write, even in a program that made
    torch.load map files shared."""
    path = saved(tmp_path)
    before = path.read_bytes()
    with torch.serialization.set_default_mmap_options(mmap.MAP_SHARED):
        ckpt = Checkpoint.load(path)
    for weight in ckpt.state_dict.values():
        weight.add_(1.0)
    del ckpt
    assert path.read_bytes() == before


def test_a_checkpoint_is_moved_to_another_device_only_after_its_checks_with_ties_kept(
        tmp_path):
    """``map_location``: the tensors are checked on the CPU (mapped from the file), then moved,
    each storage once (here to the meta device, which every machine has; CUDA takes the same
    path)."""
    tied = ConvS2S(len(VOCAB), len(VOCAB), share_input_output_embed=True, **CONV)
    path = Checkpoint.from_model(tied, VOCAB, VOCAB).save(tmp_path / "tied.pt")
    on_cpu = Checkpoint.load(path).state_dict
    moved = Checkpoint.load(path, map_location="meta").state_dict
    assert {w.device.type for w in moved.values()} == {"meta"}
    assert {k: w.shape for k, w in moved.items()} == {k: w.shape for k, w in on_cpu.items()}

    def storage(w):  # which storage a tensor uses (on the meta device too)
        return w.untyped_storage()._cdata

    tied = ("decoder.tok_embedding.weight", "decoder.fc_out.weight")
    assert on_cpu[tied[0]].data_ptr() == on_cpu[tied[1]].data_ptr()  # one storage in the file
    assert storage(moved[tied[0]]) == storage(moved[tied[1]])
    assert storage(moved[tied[0]]) != storage(moved["encoder.tok_embedding.weight"])


@pytest.mark.parametrize("config, problem", [
    ({"max_positions": 10**30}, "its model_config's max_positions is a 100-bit number, more "
                                "than any model can have"),
    ({"max_positions": 2048}, "its model_config asks for max_positions=2048; a checkpoint may "
                              "ask for 1 to 1,024"),
])
def test_a_model_config_asking_for_more_than_the_limits_is_refused_in_one_line(
        tmp_path, config, problem):
    """A number too large for PyTorch (which answered with pages of C++ frames), or more
    positions than LIMITS allow: with 2,048 positions the weights are stored and fit, but
    decoding would run up to 2,048 steps a sentence."""
    weights = {}
    if config.get("max_positions") == 2048:
        weights = {POSITIONS: torch.zeros(2048, 8), "decoder.pos_embedding.weight":
                   torch.zeros(2048, 8)}
    assert problem in refusal(crafted(tmp_path, config=config, weights=weights))


def test_every_size_a_model_config_holds_is_bounded_and_every_preset_is_far_within():
    """Each whole-number option of each model class is in LIMITS (the padding ids are bounded
    by the vocabularies), and every preset's model, with vocabularies of 10,000 tokens, passes
    with room to spare."""
    for name in BUILD:
        ints = {k for k, v in tiny(name).config.items()
                if isinstance(v, int) and not isinstance(v, bool)}
        assert ints - set(LIMITS) == {"src_pad_idx", "trg_pad_idx"}, name
    for preset in PRESETS.values():
        config = preset.model.as_dict() | {"src_vocab_size": 10_000, "trg_vocab_size": 10_000,
                                           "src_pad_idx": 1, "trg_pad_idx": 1}
        check_config(config)
        assert all(4 * config[k] <= limit for k, limit in LIMITS.items() if k in config), preset
        with torch.device("meta"):
            assert sum(p.numel() for p in ConvS2S(**config).parameters()) * 10 \
                < MAX_MODEL_ELEMENTS


def test_unused_tensor_data_in_the_archive_is_refused(tmp_path):
    """Every stored byte of tensor data belongs to a tensor: a record no tensor uses (or a
    storage that claims more than its record) does not pass."""
    path = crafted(tmp_path)
    with zipfile.ZipFile(path, "a") as z:
        folder = z.namelist()[0].split("/")[0]
        z.writestr(f"{folder}/data/999", bytes(1000))
    assert "its tensors claim" in refusal(path) and "but its archive stores" in refusal(path)


def _patched(path: Path, entry: str, local: dict[int, bytes] | None = None,
             central: dict[int, bytes] | None = None) -> Path:
    """``path`` with bytes of ``entry``'s local and central headers replaced (offset: bytes)."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        where = z.start_dir  # the central directory: one header per entry, in order
        for info in z.infolist():
            if info.filename.endswith(entry):
                break
            where += 46 + len(info.filename.encode()) + len(info.extra) + len(info.comment)
    for start, patches in ((info.header_offset, local), (where, central)):
        for at, patch in (patches or {}).items():
            data[start + at:start + at + len(patch)] = patch
    path.write_bytes(bytes(data))
    return path


def test_a_damaged_or_overlapping_zip_entry_is_refused_before_torch_reads_it(tmp_path):
    """torch.load maps each record by its local header: one that does not match the archive's
    directory, or records that overlap (one entry's bytes counted as another's), are refused."""
    damaged = _patched(crafted(tmp_path, "damaged.pt"), "/data/0", local={30: b"X"})
    assert re.search(r"its zip entry \S+/data/0 is damaged", refusal(damaged))
    path = crafted(tmp_path, "overlap.pt")
    with zipfile.ZipFile(path) as z:
        size = next(i.file_size for i in z.infolist() if i.filename.endswith("/data/0"))
    longer = (size + 4096).to_bytes(4, "little")
    overlap = _patched(path, "/data/0", central={20: longer + longer})
    assert "its entries overlap or reach beyond the file's" in refusal(overlap)


def test_a_file_that_is_not_a_checkpoint_is_said_to_be_none(tmp_path):
    """A PNG, a one-byte file or a pickle a safe load cannot parse is not "a file that could
    run code": it is not a checkpoint, or a damaged one."""
    png = tmp_path / "plot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    message = refusal(png)
    assert "is not a checkpoint: it is not the zip archive torch.save writes (it begins with " \
           "b'\\x89PNG')" in message and "run code" not in message
    for name, content in (("one.pt", b"x"), ("P.pt", b"P"), ("empty.pt", b"")):
        (tmp_path / name).write_bytes(content)
        message = refusal(tmp_path / name)
        assert "run code" not in message and ("not a checkpoint" in message
                                              or "truncated" in message), message
    # a torch file whose pickle a safe load cannot read, but names no class or function
    torch.save({"format": "convs2s-checkpoint", "version": 1, "n": 10**1000}, tmp_path / "n.pt")
    message = refusal(tmp_path / "n.pt")
    assert "its contents (data.pkl) are not what a safe load (weights_only=True) reads. It " \
           "may be corrupted" in message and "run code" not in message


def test_a_symbolic_link_loop_or_a_dangling_link_is_said_to_be_one(tmp_path):
    (tmp_path / "a.pt").symlink_to(tmp_path / "b.pt")
    (tmp_path / "b.pt").symlink_to(tmp_path / "a.pt")
    assert "its symbolic links lead in a loop" in refusal(tmp_path / "a.pt")
    (tmp_path / "gone.pt").symlink_to(tmp_path / "nowhere.pt")
    assert f"is a symbolic link to {tmp_path / 'nowhere.pt'}, which does not exist" in \
        refusal(tmp_path / "gone.pt")


def test_a_checkpoint_given_as_a_dictionary_is_named_by_its_path_when_refused(tmp_path):
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict()
    data["model_config"]["max_positions"] = 4096
    with pytest.raises(CheckpointError, match=r"^runs/x/last\.pt cannot be used: its "
                                              r"model_config asks for max_positions=4096"):
        check_compatible(data, {}, VOCAB, VOCAB, path="runs/x/last.pt")


# -- memory: crafted files that claimed gigabytes, loaded in a child process whose address space
# is limited to what it has after importing torch plus HEADROOM, so that code which tries to
# allocate what the file claims fails there instead of taking the machine's memory.

HEADROOM = 1 << 30
CLAIM = 1 << 31  # bytes (or elements) a crafted file claims: more than HEADROOM

_CHILD = f"""
import resource, sys
from convs2s.run.checkpoint import Checkpoint, CheckpointError
size = next(int(line.split()[1]) for line in open("/proc/self/status")
            if line.startswith("VmSize:"))
limit = size * 1024 + {HEADROOM}
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    Checkpoint.load(sys.argv[1]).build_model()
except CheckpointError as e:
    print(e)
    sys.exit(3)
print("loaded")
"""


def load_with_bounded_memory(path: Path) -> str:
    """The one line with which a child process refuses ``path`` (its address space bounded)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True,
                          text=True, timeout=120, env=env)
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 3 and len(lines) == 1, (done.returncode, lines[-5:])
    assert lines[0].startswith(str(path)), lines[0]
    return lines[0]


def _zip(path: Path, entries: list[tuple[str, bytes, int | None]]) -> Path:
    """Write a zip archive by hand: (name, data, None) is stored; (name, deflated, size) holds
    raw deflate data that unpacks to ``size`` bytes (its CRC is left 0: nothing gets to check
    it)."""
    local, central = bytearray(), bytearray()
    for name, data, size in entries:
        raw = name.encode()
        method, crc, usize = (0, zlib.crc32(data), len(data)) if size is None else (8, 0, size)
        head = struct.pack("<HHHHHIIIHH", 20, 0, method, 0, 0x21, crc, len(data), usize,
                           len(raw), 0)
        central += b"PK\x01\x02" + struct.pack("<H", 20) + head + struct.pack(
            "<HHHII", 0, 0, 0, 0, len(local)) + raw
        local += b"PK\x03\x04" + head + raw + data
    end = struct.pack("<HHHHIIH", 0, 0, len(entries), len(entries), len(central), len(local), 0)
    path.write_bytes(bytes(local + central) + b"PK\x05\x06" + end)
    return path


def zip_bomb(tmp_path: Path) -> Path:
    """The tiny checkpoint plus a CLAIM-byte tensor stored deflated: a file of about 9 MB."""
    hole = tmp_path / "hole"  # a sparse file: mapping it costs no memory, saving it no disk
    with open(hole, "wb") as f:
        f.truncate(CLAIM)
    blob = torch.from_file(str(hole), shared=True, size=CLAIM, dtype=torch.uint8)
    data = {"format": "convs2s-checkpoint", "version": 1,
            **Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict(), "blob": blob}
    with torch.serialization.skip_data():  # the records' bytes are left out (a sparse file)
        torch.save(data, tmp_path / "skipped.pt")
    del blob
    hole.unlink()
    pack = zlib.compressobj(1, zlib.DEFLATED, -15)
    mib = pack.compress(bytes(1 << 20)) + pack.flush(zlib.Z_FULL_FLUSH)  # stands alone
    deflated = mib * (CLAIM >> 20) + pack.flush()
    entries = []
    with zipfile.ZipFile(tmp_path / "skipped.pt") as z:
        for i in z.infolist():
            if i.file_size == CLAIM:
                entries.append((i.filename, deflated, CLAIM))
            elif i.filename.split("/", 1)[1].startswith("data/"):  # skipped: zeros
                entries.append((i.filename, bytes(i.file_size), None))
            else:
                entries.append((i.filename, z.read(i), None))
    (tmp_path / "skipped.pt").unlink()
    return _zip(tmp_path / "bomb.pt", entries)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("case", ["unexpected stride-0 view", "positions as a stride-0 view",
                                  "zip bomb"])
def test_a_small_checkpoint_claiming_gigabytes_is_refused_within_bounded_memory(tmp_path, case):
    """Files of a few megabytes at most that claimed gigabytes: a stride-0 view of 2**31
    values under a name the model does not have, 4M positions stored as one value (whose
    model and decoding would be huge), and a tensor deflated in the archive. Each is refused in
    one line, in a process that could not even allocate what it claims."""
    if case == "unexpected stride-0 view":
        path = crafted(tmp_path, weights={"extra.weight": torch.zeros(1).expand(CLAIM)})
        expected = "its weight extra.weight is a view of shape [2147483648] with strides [0]"
    elif case == "positions as a stride-0 view":
        view = torch.zeros(1, 1).expand(1 << 22, 8)
        path = crafted(tmp_path, config={"max_positions": 1 << 22},
                       weights={POSITIONS: view, "decoder.pos_embedding.weight": view})
        expected = "is a view of shape [4194304, 8] with strides [0, 0]"
    else:
        if not hasattr(torch.serialization, "skip_data"):  # PyTorch < 2.5
            pytest.skip("building the zip bomb needs torch.serialization.skip_data")
        path = zip_bomb(tmp_path)
        expected = f"unpack to {CLAIM:,}), and torch.save stores every entry as it is"
    assert path.stat().st_size < 20 << 20
    assert expected in load_with_bounded_memory(path)


def test_a_loaded_checkpoint_does_not_depend_on_its_file(tmp_path):
    """The tensors are checked through a mapping of the file but handed out as copies: cutting
    the file to nothing afterwards (another program overwriting it in place) leaves the loaded
    weights whole. Were they still mapped, reading them would crash the process (SIGBUS), so
    this runs in a child process."""
    path = saved(tmp_path)
    script = (
        "import sys, torch\n"
        "from convs2s.run.checkpoint import Checkpoint\n"
        f"path = {str(path)!r}\n"
        "ckpt = Checkpoint.load(path)\n"
        "before = {k: v.clone() for k, v in ckpt.state_dict.items()}\n"
        "open(path, 'r+b').truncate(0)\n"
        "same = all(torch.equal(ckpt.state_dict[k], v) for k, v in before.items())\n"
        "print('same' if same else 'changed')\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "same", (proc.returncode, proc.stderr)
