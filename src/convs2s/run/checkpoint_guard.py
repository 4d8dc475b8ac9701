"""What a checkpoint file must be before convs2s uses it: the guard that :meth:`Checkpoint.load
<convs2s.run.checkpoint.Checkpoint.load>` reads every file through.

A checkpoint may come from someone else (a shared run, a download), so it is data. The guard
leans on what torch guarantees: ``torch.load(weights_only=True)`` unpickles no code, and
``mmap=True`` maps the tensors' storages from the file (none can be larger than it, and none is
copied while it is checked). Then one comparison on PyTorch's ``meta`` device (no memory): the
model that ``model_config`` asks for, its sizes within :data:`LIMITS` and
:data:`MAX_MODEL_ELEMENTS`, against every weight's name, shape and dtype. Only then are values
read (every weight finite) and the tensors copied off the file (:func:`copied`).

torch's loader lets the following through (``tests/run/test_what_torch_load_lets_through.py``
shows each), so they are checked by hand: the archive before the load, the tensors before any
value is read.

- an entry stored compressed: torch inflates ``data.pkl`` in memory whatever its size (a small
  file can take gigabytes), and reads a compressed tensor record's bytes as its values;
- a local zip header that disagrees with the directory, entries that overlap, tensor data that
  no tensor uses: bytes torch would read as what they are not;
- a tensor that is not plain and stored exactly: a stride-0 view (a few bytes that stand for
  gigabytes once read), a storage larger than its values, a meta, sparse, quantized or nested
  tensor.

Anything wrong is one :class:`CheckpointError` line naming the file and what is wrong; only a
file whose bytes are wrong is called corrupted (a read error or a lack of memory says so).
"""

from __future__ import annotations

import errno
import itertools
import os
import pickle
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from convs2s.data import Vocab
from convs2s.data.subword import TextPipeline
from convs2s.model.convs2s import current_names
from convs2s.system.arguments import MAX_VOCAB_SIZE, brief

#: The most a checkpoint's ``model_config`` may ask for, by field: far above every preset and the
#: classic tutorial's model (bentrevett/pytorch-seq2seq: 512 channels, 10+10 layers, 100
#: positions, vocabularies of about 8,000); decoding runs up to ``max_positions`` steps.
LIMITS: dict[str, int] = {
    "max_positions": 1024,  # fairseq's fconv default
    "src_vocab_size": MAX_VOCAB_SIZE, "trg_vocab_size": MAX_VOCAB_SIZE,
    **dict.fromkeys(("emb_dim", "hid_dim", "enc_hid_dim", "dec_hid_dim", "attn_dim", "out_dim"),
                    8192),
    "enc_layers": 100, "dec_layers": 100, "kernel_size": 127, "attention_heads": 256,
}

#: The most elements (parameters and buffers) the model a checkpoint describes may have: 4 GB in
#: float32, 25 times the classic tutorial's 40 million.
MAX_MODEL_ELEMENTS = 10**9

# Tensors sharing one storage (tied embeddings; a GRU's weights flattened on a GPU) may leave
# this many bytes of it per tensor unused, for alignment.
_SHARED_STORAGE_SLACK = 1024
_AGAIN = ("delete it and train again, or use the other checkpoint (best.pt / last.pt) in the "
          "same folder.")


#: How this module's messages begin their advice, which follows the problem they state.
_ADVICE = (" It may be ", " Pass ")


class CheckpointError(RuntimeError):
    """A checkpoint is unreadable, or does not fit the model or data it is loaded into."""

    @property
    def problem(self) -> str:
        """The message without the advice this module adds ("Pass a best.pt ...", "It may be
        corrupted: delete it ..."), for a caller whose user has no other file to pass."""
        text = " ".join(str(self).split())
        cuts = [i for i in (text.find(a) for a in _ADVICE) if i >= 0]
        return (text[:min(cuts)] if cuts else text).rstrip(".")


def read(path: str | os.PathLike, format: str, version: int) -> dict[str, Any]:
    """The raw dictionary of the checkpoint file ``path`` (its tensors mapped from the file),
    its file, archive, ``format`` and ``version`` tags and tensors checked."""
    path = Path(path)
    stored = _check_archive(path, _regular_file_size(path))
    try:
        data = _load(path)
    except pickle.UnpicklingError as e:  # what a safe load refuses: never retry it unsafely
        if "GLOBAL" in str(e):  # it names a class or function the safe load does not allow
            raise CheckpointError(
                f"{path} is not a convs2s checkpoint: it holds Python objects that a safe load "
                "(weights_only=True) refuses, and convs2s never loads a file that could run "
                "code. Use a checkpoint that convs2s.run.train wrote.") from e
        raise CheckpointError(f"{path} is not a readable convs2s checkpoint: its contents "
                              "(data.pkl) are not what a safe load (weights_only=True) reads. "
                              f"It may be corrupted: {_AGAIN}") from e
    except OSError as e:  # the file, not its bytes: say so, never "corrupted"
        raise CheckpointError(f"{path} cannot be read: {e.strerror or e}.") from None
    except MemoryError:
        raise CheckpointError(f"{path} cannot be read: out of memory. Close other programs, "
                              "or use a machine with more memory.") from None
    except Exception as e:  # a damaged archive, a record torch cannot read, ...
        raise CheckpointError(f"{path} is not a readable convs2s checkpoint "
                              f"({type(e).__name__}). It may be truncated or corrupted: "
                              f"{_AGAIN}") from e
    if not isinstance(data, dict) or data.get("format") != format:
        raise CheckpointError(f"{path} is a torch file but not a convs2s checkpoint.")
    if data.get("version") != version:
        raise CheckpointError(f"{path} is checkpoint format version "
                              f"{brief(data.get('version'))}; this convs2s reads version "
                              f"{version}.")
    try:
        claimed = check_tensors(data)
        if claimed != stored:
            raise ValueError(f"its tensors claim {claimed:,} bytes of storage, but its archive "
                             f"stores {stored:,}: it is damaged or was not written by "
                             "torch.save.")
    except ValueError as e:
        raise unusable(path, e) from e
    return data


def check_dict(data: Any, classes: dict[str, type[nn.Module]]) -> dict[str, Any]:
    """The parts of a checkpoint's raw dictionary (the fields of :class:`Checkpoint
    <convs2s.run.checkpoint.Checkpoint>` but ``extra``), checked in an order that reads no
    value before its description has passed; else ``ValueError``, a sentence about "it"."""
    if not isinstance(data, dict):
        raise ValueError(f"it holds a {type(data).__name__}, not a checkpoint dictionary.")
    missing = {"model_config", "model", "src_vocab", "trg_vocab"} - set(data)
    if missing:
        raise ValueError(f"it lacks {sorted(missing)}; it is incomplete.")
    check_tensors(data)  # what every tensor claims; no value read yet
    name = data.get("model_class", "ConvS2S")
    if not isinstance(name, str) or name not in classes:
        raise ValueError(f"its model_class {brief(name)} is not one of {sorted(classes)}.")
    src_vocab = vocab_from_dict(data["src_vocab"], "src_vocab")
    trg_vocab = vocab_from_dict(data["trg_vocab"], "trg_vocab")
    config, weights = data["model_config"], data["model"]
    if not isinstance(config, dict) or not isinstance(weights, dict):
        raise ValueError("its model_config or model is not a dictionary.")
    config = _current_names(config, "model_config")
    check_shapes(classes[name], config, weights)
    check_parts(config, weights, src_vocab, trg_vocab)  # the first values read
    pipeline = TextPipeline.from_checkpoint(data)
    check_pipeline(pipeline, src_vocab, trg_vocab)
    retired = data.get("tokenizers")  # written beside "tokenizer" until #61; no longer read
    if retired is not None and retired != {"src_lang": pipeline.src_lang,
                                           "trg_lang": pipeline.trg_lang, "lower": pipeline.lower}:
        raise ValueError(f"its tokenizers entry {brief(retired)} (no longer read) disagrees "
                         f"with its tokenizer entry ({pipeline}).")
    kinds = {"preset": dict, "data": dict, "train_state": dict, "run_id": str, "choices": dict}
    parts = {key: data[key] for key in kinds if data.get(key) is not None}
    for key, value in parts.items():
        if not isinstance(value, kinds[key]):
            raise ValueError(f"its {key} is a {type(value).__name__}, not a "
                             f"{kinds[key].__name__}.")
    if "preset" in parts:  # flat (Preset.as_dict), or dataclasses.asdict's with "model"
        parts["preset"] = _current_names(parts["preset"], "preset")
        if isinstance(parts["preset"].get("model"), dict):
            parts["preset"]["model"] = _current_names(parts["preset"]["model"], "preset's model")
    alpha = parts["choices"].get("length_penalty") if "choices" in parts else 1.0
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 10:
        raise ValueError(f"its recorded length penalty {brief(alpha)} is not a number "
                         "from 0 to 10.")
    return {"model_class": name, "model_config": dict(config), "state_dict": weights,
            "src_vocab": src_vocab, "trg_vocab": trg_vocab, "pipeline": pipeline, **parts}


def copied(obj: Any, device: torch.device, moved: dict) -> Any:
    """``obj`` with every tensor copied to ``device`` (the CPU too: off the file's mapping),
    each storage once (in ``moved``), so that tied weights stay tied, as ``map_location``."""
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in moved:
            whole = torch.empty(0, dtype=torch.uint8).set_(storage)
            moved[key] = whole.to(device, copy=True).untyped_storage()
        return torch.empty(0, dtype=obj.dtype, device=device).set_(
            moved[key], obj.storage_offset(), obj.shape, obj.stride())
    if isinstance(obj, dict):
        return type(obj)((k, copied(v, device, moved)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(copied(v, device, moved) for v in obj)
    return obj


def unusable(path: Path | None, reason: Exception | str) -> CheckpointError:
    """The one line that refuses a checkpoint for ``reason`` (a sentence about it)."""
    return CheckpointError(f"{path or 'the checkpoint'} cannot be used: {reason} Use the other "
                           "checkpoint (best.pt / last.pt) in its folder, or train again.")


def vocab_from_dict(part: Any, side: str = "vocab") -> Vocab:
    """The :class:`Vocab` a checkpoint stores as ``{"itos": [...], "specials": [...]}``."""
    if not isinstance(part, dict):
        raise ValueError(f"its {side} is a {type(part).__name__}, not a vocabulary "
                         "({'itos': [...], 'specials': [...]}).")
    for key in ("itos", "specials"):
        value = part.get(key)
        if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
            raise ValueError(f"its {side} has no list of token strings under {key!r}.")
    try:
        return Vocab(part["itos"], part["specials"])
    except ValueError as e:
        raise ValueError(f"its {side} is malformed: {e}") from e


def check_parts(model_config: dict, weights: dict, src_vocab: Vocab, trg_vocab: Vocab) -> None:
    """``ValueError`` unless the vocabularies have the config's sizes and padding ids, and every
    weight is finite (a diverged run saves NaN weights). Reads every value."""
    for side, vocab in (("src", src_vocab), ("trg", trg_vocab)):
        size, pad = model_config.get(f"{side}_vocab_size"), model_config.get(f"{side}_pad_idx")
        if size != len(vocab):
            raise ValueError(f"the model was built for a {side}_vocab of {brief(size)} tokens, "
                             f"but its {side}_vocab has {len(vocab)}: the parts do not belong "
                             "together.")
        if pad is not None and pad != vocab.pad_idx:
            raise ValueError(f"the model pads the {side} with id {brief(pad)}, but its "
                             f"{side}_vocab pads with id {vocab.pad_idx}.")
    not_tensors = [k for k, v in weights.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ValueError(f"its weights {brief(not_tensors[:3])} are not tensors.")
    bad = [k for k, v in weights.items()
           if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ValueError(f"{len(bad)} of its weight tensors hold NaN or infinite values "
                         f"({shown}): training diverged. Use an earlier checkpoint, or train "
                         "again with a lower learning rate.")


def check_pipeline(pipeline: TextPipeline, src_vocab: Vocab, trg_vocab: Vocab) -> None:
    """``ValueError`` unless a subword pipeline's models give exactly these vocabularies."""
    if pipeline.kind != "subword":
        return
    for side, vocab, tok in (("src", src_vocab, pipeline.src_tokenizer),
                             ("trg", trg_vocab, pipeline.trg_tokenizer)):
        if list(vocab.itos) != list(tok.pieces):
            raise ValueError(f"its {side}_vocab ({len(vocab)} tokens) is not the pieces of its "
                             f"{side} subword model ({len(tok.pieces)}): the parts do not belong "
                             "together.")


def check_config(model_config: dict) -> None:
    """``ValueError`` unless every size ``model_config`` asks for is within :data:`LIMITS` (a
    size of ``10**30`` makes PyTorch fail deep inside, even on the ``meta`` device)."""
    for name, limit in LIMITS.items():
        value = model_config.get(name)
        if value is None:  # not an option of this class, or its default (RNN's attn_dim)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"its model_config's {name} is {brief(value)}, not a whole number.")
        if value.bit_length() > 63:
            raise ValueError(f"its model_config's {name} is a {value.bit_length()}-bit number, "
                             "more than any model can have.")
        if not 1 <= value <= limit:
            raise ValueError(f"its model_config asks for {name}={value}; a checkpoint may ask "
                             f"for 1 to {limit:,} (convs2s.run.checkpoint_guard.LIMITS).")


def check_shapes(cls: type[nn.Module], model_config: dict, weights: dict) -> None:
    """``ValueError`` unless ``cls(**model_config)``, built on the ``meta`` device within
    :data:`LIMITS` and :data:`MAX_MODEL_ELEMENTS`, has exactly these weights' names, shapes and
    kinds of dtype (floating where the model's is, else the model's). Reads no value."""
    check_config(model_config)
    try:
        with torch.device("meta"):
            shell = cls(**model_config)
    except (TypeError, ValueError, RuntimeError) as e:
        reason = _name((str(e).strip().splitlines() or [type(e).__name__])[0], 200)
        raise ValueError(f"its model_config does not fit the model: {reason}"
                         + ("" if reason.endswith(".") else ".")) from e
    elements = sum(t.numel() for t in itertools.chain(shell.parameters(), shell.buffers()))
    if elements > MAX_MODEL_ELEMENTS:
        raise ValueError(f"its model_config asks for a model of {elements:,} parameters and "
                         f"buffers; a checkpoint may ask for at most {MAX_MODEL_ELEMENTS:,}.")
    expected = shell.state_dict()
    problems = [f"missing {k}" for k in expected if k not in weights]
    problems += [f"unexpected {_name(k)}" for k in weights if k not in expected]
    for k, want in expected.items():
        got = weights.get(k)
        if not isinstance(got, torch.Tensor):
            problems += [] if got is None else [f"{k} is a {type(got).__name__}, not a tensor"]
        elif got.shape != want.shape:
            problems.append(f"{k} is {list(got.shape)}, the config gives {list(want.shape)}")
        elif (got.is_floating_point() != want.is_floating_point()
              or not want.is_floating_point() and got.dtype != want.dtype):
            problems.append(f"{k} holds {str(got.dtype).removeprefix('torch.')}, the model "
                            f"{str(want.dtype).removeprefix('torch.')}")
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ValueError("its weights do not fit its model_config: "
                         + "; ".join(problems[:3]) + more + ".")


def check_tensors(data: Any) -> int:
    """The bytes the storages of the tensors in ``data`` hold, unless one is not plain, dense
    and stored exactly (``ValueError``): a meta, sparse, quantized or nested tensor, a view that
    is not contiguous, a storage larger than the values of the tensors that share it."""
    storages: dict[tuple[int, int, str], tuple[str, list[tuple[int, int]]]] = {}
    for where, t in _tensors(data):
        kind = ("meta" if t.is_meta else "nested" if t.is_nested else
                "quantized" if t.is_quantized else str(t.layout).removeprefix("torch."))
        if kind == "meta":
            raise ValueError(f"{where()} is a meta tensor: a shape without values (made on "
                             "PyTorch's meta device), not trained weights.")
        if kind != "strided":
            raise ValueError(f"{where()} is a {kind} tensor; a checkpoint holds dense tensors.")
        storage = t.untyped_storage()
        if not t.is_contiguous():
            raise ValueError(f"{where()} is a view of shape {list(t.shape)} with strides "
                             f"{list(t.stride())} over {storage.nbytes():,} stored bytes, not a "
                             "dense tensor: a checkpoint stores every value of its tensors.")
        start = t.storage_offset() * t.element_size()
        key = (storage.data_ptr(), storage.nbytes(), str(storage.device))
        storages.setdefault(key, (where(), []))[1].append((start, start + t.nbytes))
    for (_, nbytes, _), (where, ranges) in storages.items():
        used, reached = 0, 0  # the bytes the union of the ranges covers
        for start, end in sorted(ranges):
            used, reached = used + max(0, end - max(start, reached)), max(reached, end)
        if nbytes - used > (0 if len(ranges) == 1 else _SHARED_STORAGE_SLACK * len(ranges)):
            raise ValueError(f"{where} has a storage of {nbytes:,} bytes but uses {used:,} of "
                             "them: a tensor's storage must be exactly as large as its values.")
    return sum(nbytes for _, nbytes, _ in storages)


def _tensors(data: Any) -> Iterator[tuple[Any, torch.Tensor]]:
    """Every tensor in nested dicts, lists and tuples, with a function naming where it is."""
    seen: set[int] = set()
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        keys, obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            yield (lambda keys=keys: _where(keys)), obj
        elif isinstance(obj, (dict, list, tuple, set, frozenset)) and id(obj) not in seen:
            seen.add(id(obj))
            stack.extend((keys + (k,), v) for k, v in
                         (obj.items() if isinstance(obj, dict) else enumerate(obj)))


def _where(keys: tuple) -> str:
    if len(keys) == 2 and keys[0] == "model":
        return f"its weight {_name(keys[1])}"
    return f"its {_name(keys[0])}" + "".join(f"[{brief(k)}]" for k in keys[1:]) if keys else "it"


def _missing(path: Path) -> str:
    """Why there is no checkpoint at ``path``, and what to do, by what its folder holds."""
    folder = path.parent
    if folder.is_file():
        return (f"No checkpoint at {path}: {folder} is a file, not a run's folder. Pass the path "
                "of a best.pt, final.pt or last.pt.")
    held = [n for n in ("final.pt", "best.pt", "last.pt") if (folder / n).is_file()]
    if "final.pt" in held:  # a finished run: a typo, most likely
        return (f"No checkpoint at {path}: the run in {folder} holds {', '.join(held)}. "
                f"Did you mean {folder / 'final.pt'}?")
    if held:  # a run not finished
        return (f"No checkpoint at {path}: the run in {folder} has not written it, and holds "
                f"{', '.join(held)}. Pass one of those, or finish the run: its own training "
                "command again with --resume.")
    return (f"No checkpoint at {path}. Train one first (python -m convs2s.train --preset quick "
            f"--out {folder}) or pass the path of an existing best.pt / last.pt.")


def _regular_file_size(path: Path) -> int:
    """The size of the regular file ``path``, or the one line that says why it is not one."""
    try:
        st = path.stat()
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CheckpointError(f"{path} is not a checkpoint file: its symbolic links lead "
                                  "in a loop. Pass the path of a best.pt, final.pt or last.pt."
                                  ) from None
        if e.errno == errno.ENOENT and path.is_symlink():
            raise CheckpointError(f"{path} is a symbolic link to {os.readlink(path)}, which does "
                                  "not exist.") from None
        if e.errno not in (errno.ENOENT, errno.ENOTDIR):
            raise CheckpointError(f"{path} cannot be read: {e.strerror}.") from None
        raise CheckpointError(_missing(path)) from None
    if stat.S_ISDIR(st.st_mode):
        hint = next((f" Did you mean {path / n}?" for n in ("best.pt", "final.pt", "last.pt")
                     if (path / n).is_file()), "")
        raise CheckpointError(f"{path} is a folder, not a checkpoint file.{hint}")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"{path} is not a file; pass the path of a checkpoint (best.pt, "
                              "final.pt or last.pt in a run's folder).")
    return st.st_size


def _check_archive(path: Path, size: int) -> int:
    """The bytes of tensor data (``data/`` records) in the zip archive ``path`` (``size``
    bytes), unless an entry is compressed (torch.save stores them as they are), its local header
    does not match the directory (``zipfile`` compares them), or entries overlap."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            z = zipfile.ZipFile(f)
            entries = z.infolist()
            for entry in entries:
                if entry.compress_type != zipfile.ZIP_STORED:
                    raise CheckpointError(
                        f"{path} is not a checkpoint torch.save wrote: its entry "
                        f"{_name(entry.filename)} is compressed ({entry.compress_size:,} bytes "
                        f"that unpack to {entry.file_size:,}), and torch.save stores every "
                        "entry as it is. It was refused unread.")
                try:
                    z.open(entry).close()  # zipfile compares its local header with the directory
                except zipfile.BadZipFile:
                    raise CheckpointError(
                        f"{path} is not a readable convs2s checkpoint: its zip entry "
                        f"{_name(entry.filename)} is damaged. It may be corrupted: {_AGAIN}"
                    ) from None
    except CheckpointError:
        raise
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read: {e.strerror}.") from None
    except Exception as e:  # BadZipFile, or what a damaged directory makes zipfile raise
        if not (head == b"PK\x03\x04" or b"PK\x03\x04".startswith(head)):
            raise CheckpointError(
                f"{path} is not a checkpoint: it is not the zip archive torch.save writes (it "
                f"begins with {head!r}). Pass a best.pt, final.pt or last.pt that "
                "convs2s.run.train wrote.") from None
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint: its zip archive ({size:,} bytes) is "
            f"incomplete ({type(e).__name__}). It may be truncated or corrupted: {_AGAIN}"
        ) from None
    reached = 0  # each entry's local header (30 bytes and its name) and data, at the least
    for entry in sorted(entries, key=lambda e: e.header_offset):
        end = entry.header_offset + 30 + len(entry.filename.encode()) + entry.compress_size
        if entry.header_offset < reached or end > size:
            raise CheckpointError(
                f"{path} is not a checkpoint torch.save wrote: its entries overlap or reach "
                f"beyond the file's {size:,} bytes. It was refused unread.")
        reached = end
    return sum(e.file_size for e in entries if e.filename.partition("/")[2].startswith("data/"))


def _load(path: Path) -> Any:
    """``torch.load`` of ``path``, its tensors mapped from the file; a path that is not UTF-8,
    which torch's reader cannot take, through a Python file, into memory."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        with open(path, "rb") as f:
            return torch.load(f, map_location="cpu", weights_only=True)
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def _current_names(fields: dict, what: str) -> dict:
    """``fields`` under the model's current option names (``RENAMED_FIELDS``)."""
    try:
        return current_names(fields)
    except TypeError as e:
        raise ValueError(f"its {what}: {e}") from None


def _name(value: Any, limit: int = 80) -> str:
    """A name (a key, a weight's name) as it is if short and printable, else cut short."""
    if isinstance(value, str) and value.isprintable() and len(value) <= limit:
        return value
    return brief(value, limit)
