"""What a checkpoint file must be before convs2s uses it: the guard :meth:`Checkpoint.load
<convs2s.run.checkpoint.Checkpoint.load>` reads every file through.

A checkpoint may come from someone else (a shared run, a download), so it is data, checked in
this order, and nothing is allocated for a tensor, or a tensor's values read, before its
description has passed:

1. the file (:func:`read`): a regular file (not a folder, a device or a symbolic-link loop)
   holding a zip archive as ``torch.save`` writes it, whose entries are stored uncompressed (so
   that no entry unpacks to more than the file holds) behind intact headers, inside the file and
   not overlapping;
2. the contents (:func:`read`), read with ``weights_only=True`` (a pickle that could run code is
   refused) and ``mmap=True`` (the tensors' storages are mapped from the file, not copied; a
   path that is not UTF-8, which torch's reader cannot take, is read through a Python file):
   every tensor is dense, on the CPU (never a ``meta`` placeholder) and contiguous, its storage
   exactly as large as its values (several tensors may share one), and the storages hold
   exactly the archive's tensor data;
3. the model (:func:`check_dict`): ``model_class`` and the sizes in ``model_config`` within
   :data:`LIMITS`, the model built on PyTorch's ``meta`` device (no memory) within
   :data:`MAX_MODEL_ELEMENTS`, and the weights with exactly its names, shapes and dtypes (a
   floating dtype where the model has one); the vocabularies well formed and of the sizes the
   model was built for;
4. only then the values: every weight finite; a subword pipeline's pieces are the vocabularies.

The checked tensors are then copied off the mapping (:func:`copied`, each storage once), so a
loaded checkpoint never depends on its file.

Anything wrong is one :class:`CheckpointError` line naming the file and what is wrong; only a
file whose bytes are wrong is called corrupted (a read error or a lack of memory says so).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import mmap
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
from convs2s.system.arguments import MAX_VOCAB_SIZE

#: The most a checkpoint's ``model_config`` may ask for, by field. Each is far above every preset
#: (at most 100 positions, 8,000-token vocabularies, 512 channels, 10+10 layers of kernel width 3)
#: and the classic tutorial's model (bentrevett/pytorch-seq2seq: 256/512 channels, 10+10 layers,
#: 100 positions, vocabularies of about 8,000), and bounds what a checkpoint makes its reader
#: allocate or compute: the decoder's longest output is ``max_positions`` tokens.
LIMITS: dict[str, int] = {
    "max_positions": 1024,  # fairseq's fconv default; translation decodes up to this many tokens
    "src_vocab_size": MAX_VOCAB_SIZE,
    "trg_vocab_size": MAX_VOCAB_SIZE,
    **dict.fromkeys(("emb_dim", "hid_dim", "enc_hid_dim", "dec_hid_dim", "attn_dim", "out_dim"),
                    8192),
    "enc_layers": 100,
    "dec_layers": 100,
    "kernel_size": 127,
    "attention_heads": 256,
}

#: The most elements (parameters and buffers together) the model a checkpoint describes may
#: have: 4 GB in float32, 25 times the classic tutorial's 40 million.
MAX_MODEL_ELEMENTS = 10**9

# Several tensors may share one storage (tied embeddings; a GRU's weights flattened on a GPU);
# such a storage may hold this many bytes per tensor beyond them, for alignment.
_SHARED_STORAGE_SLACK = 1024

# The start of every zip archive (torch.save writes one).
_ZIP_MAGIC = b"PK\x03\x04"


class CheckpointError(RuntimeError):
    """A checkpoint is unreadable, or does not fit the model or data it is loaded into."""


def read(path: str | os.PathLike, format: str, version: int) -> dict[str, Any]:
    """The raw dictionary of a checkpoint file, checked as the module's docstring says (steps
    1 and 2, and its ``format`` and ``version`` tags); its tensors mapped from the file."""
    path = Path(path)
    size = _regular_file_size(path)
    stored = _check_archive(path, size)
    try:
        with _private_mapping():
            data = _load(path)
    except pickle.UnpicklingError as e:  # what a safe load refuses: never retry it unsafely
        if "GLOBAL" in str(e):  # it names a class or function the safe load does not allow
            raise CheckpointError(
                f"{path} is not a convs2s checkpoint: it holds Python objects that a safe load "
                "(weights_only=True) refuses, and convs2s never loads a file that could run "
                "code. Use a checkpoint that convs2s.run.train wrote."
            ) from e
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint: its contents (data.pkl) are not "
            "what a safe load (weights_only=True) reads. It may be corrupted: delete it and "
            "train again, or use the other checkpoint (best.pt / last.pt) in the same folder."
        ) from e
    except OSError as e:  # the file, not its bytes: say so, never "corrupted"
        raise CheckpointError(f"{path} cannot be read: {e.strerror or e}.") from None
    except MemoryError:
        raise CheckpointError(f"{path} cannot be read: out of memory. Close other programs, "
                              "or use a machine with more memory.") from None
    except Exception as e:  # a damaged archive, a record torch cannot read, ...
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint ({type(e).__name__}). It may be "
            "truncated or corrupted: delete it and train again, or use the other checkpoint "
            "(best.pt / last.pt) in the same folder."
        ) from e
    if not isinstance(data, dict) or data.get("format") != format:
        raise CheckpointError(f"{path} is a torch file but not a convs2s checkpoint.")
    if data.get("version") != version:
        raise CheckpointError(
            f"{path} is checkpoint format version {_brief(data.get('version'))}; this convs2s "
            f"reads version {version}."
        )
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
    """Steps 3 and 4 on a checkpoint's raw dictionary: ``ValueError`` (a sentence about "it")
    unless it names one of ``classes`` and its parts fit (see the module's docstring). Returns
    the parts, checked: ``model_class``, ``model_config``, ``state_dict``, ``src_vocab``,
    ``trg_vocab``, ``pipeline``, and those of ``preset``, ``data``, ``run_id``,
    ``train_state`` and ``choices`` it holds."""
    if not isinstance(data, dict):
        raise ValueError(f"it holds a {type(data).__name__}, not a checkpoint dictionary.")
    missing = {"model_config", "model", "src_vocab", "trg_vocab"} - set(data)
    if missing:
        raise ValueError(f"it lacks {sorted(missing)}; it is incomplete.")
    check_tensors(data)  # what every tensor claims; no value read yet
    name = data.get("model_class", "ConvS2S")
    if not isinstance(name, str) or name not in classes:
        raise ValueError(f"its model_class {_brief(name)} is not one of {sorted(classes)}.")
    src_vocab = vocab_from_dict(data["src_vocab"], "src_vocab")
    trg_vocab = vocab_from_dict(data["trg_vocab"], "trg_vocab")
    model_config, weights = data["model_config"], data["model"]
    if not isinstance(model_config, dict) or not isinstance(weights, dict):
        raise ValueError("its model_config or model is not a dictionary.")
    model_config = _current_names(model_config, "model_config")
    check_config(model_config)
    check_vocabularies(model_config, src_vocab, trg_vocab)
    check_shapes(classes[name], model_config, weights)
    check_finite(weights)  # the first values read
    pipeline = TextPipeline.from_checkpoint(data)
    check_pipeline(pipeline, src_vocab, trg_vocab)
    optional = {"preset": dict, "data": dict, "train_state": dict, "run_id": str, "choices": dict}
    for key, kind in optional.items():
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise ValueError(f"its {key} is a {type(data[key]).__name__}, not a "
                             f"{kind.__name__}.")
    preset = data.get("preset")
    if preset is not None:  # flat (Preset.as_dict), or dataclasses.asdict's with "model"
        preset = _current_names(preset, "preset")
        if isinstance(preset.get("model"), dict):
            preset["model"] = _current_names(preset["model"], "preset's model")
    if data.get("choices") is not None:
        alpha = data["choices"].get("length_penalty")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                not 0 <= alpha <= 10:
            raise ValueError(f"its recorded length penalty {_brief(alpha)} is not a number "
                             "from 0 to 10.")
    return {"model_class": name, "model_config": dict(model_config), "state_dict": weights,
            "src_vocab": src_vocab, "trg_vocab": trg_vocab, "pipeline": pipeline,
            **{key: data[key] for key in optional if data.get(key) is not None},
            **({"preset": preset} if preset is not None else {})}


def _current_names(fields: dict, what: str) -> dict:
    """``fields`` under the model's current option names (a checkpoint saved before an option
    was renamed holds its old name: :data:`convs2s.model.convs2s.RENAMED_FIELDS`)."""
    try:
        return current_names(fields)
    except TypeError as e:
        raise ValueError(f"its {what}: {e}") from None


def copied(obj: Any, device: torch.device, moved: dict) -> Any:
    """``obj`` with every tensor in its dicts, lists and tuples copied to ``device`` (the CPU
    included: a copy in memory, no longer the file's mapping), as ``torch.load``'s
    ``map_location`` moves them: each storage once, so that tensors sharing one (tied weights)
    still share it there."""
    if isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if key not in moved:
            whole = torch.empty(0, dtype=torch.uint8).set_(storage)
            moved[key] = whole.to(device, copy=True).untyped_storage()  # off the file
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
    """The :class:`Vocab` a checkpoint stores as ``{"itos": [...], "specials": [...]}``.

    Anything else raises ``ValueError`` saying what is wrong (never a ``KeyError``).
    """
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
    """Raise ``ValueError`` unless a model config, its weights and two vocabularies fit.

    Checks that the vocabulary sizes and padding ids are those the model was built with, and
    that every weight is finite (a diverged training run saves NaN weights, which translate
    into nonsense such as "On on on on ...").
    """
    check_vocabularies(model_config, src_vocab, trg_vocab)
    not_tensors = [k for k, v in weights.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ValueError(f"its weights {not_tensors[:3]} are not tensors.")
    check_finite(weights)


def check_vocabularies(model_config: dict, src_vocab: Vocab, trg_vocab: Vocab) -> None:
    """``ValueError`` unless the vocabularies have the sizes and padding ids of the config."""
    for side, vocab in (("src", src_vocab), ("trg", trg_vocab)):
        size, pad = model_config.get(f"{side}_vocab_size"), model_config.get(f"{side}_pad_idx")
        if size != len(vocab):
            raise ValueError(
                f"the model was built for a {side}_vocab of {_brief(size)} tokens, but its "
                f"{side}_vocab has {len(vocab)}: the parts do not belong together."
            )
        if pad is not None and pad != vocab.pad_idx:
            raise ValueError(f"the model pads the {side} with id {_brief(pad)}, but its "
                             f"{side}_vocab pads with id {vocab.pad_idx}.")


def check_finite(weights: dict) -> None:
    """``ValueError`` unless every floating weight is finite (this reads every value: call it
    after :func:`check_shapes`)."""
    bad = [k for k, v in weights.items()
           if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ValueError(
            f"{len(bad)} of its weight tensors hold NaN or infinite values ({shown}): training "
            "diverged. Use an earlier checkpoint, or train again with a lower learning rate."
        )


def check_config(model_config: dict) -> None:
    """``ValueError`` unless every size ``model_config`` asks for is within :data:`LIMITS`.

    Checked before a model is built, even on the ``meta`` device: a size of ``10**30`` makes
    PyTorch fail deep inside, and a large ``max_positions`` makes decoding run that many steps.
    """
    for name, value in model_config.items():
        if not isinstance(name, str):
            raise ValueError(f"its model_config has a key {_brief(name)}, not an option name.")
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 63:
            raise ValueError(f"its model_config's {_name(name)} is {_brief(value)}, more than any "
                             "model can have.")
    for name, limit in LIMITS.items():
        value = model_config.get(name)
        if value is None:  # not an option of this class, or its default (RNN's attn_dim)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"its model_config's {name} is {_brief(value)}, not a whole "
                             "number.")
        if not 1 <= value <= limit:
            raise ValueError(f"its model_config asks for {name}={value}; a checkpoint may ask "
                             f"for 1 to {limit:,} (convs2s.run.checkpoint_guard.LIMITS).")


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


def check_shapes(cls: type[nn.Module], model_config: dict, weights: dict) -> None:
    """``ValueError`` unless ``cls(**model_config)`` has exactly these weights' names, shapes and
    kinds of dtype (a floating dtype where the model has one, else the model's).

    The configuration is checked against :data:`LIMITS`, then the model is built on PyTorch's
    ``meta`` device, which allocates no memory, and its size checked against
    :data:`MAX_MODEL_ELEMENTS`. Only the weights' descriptions are compared, never their values.
    """
    check_config(model_config)
    try:
        with torch.device("meta"):
            shell = cls(**model_config)
    except (TypeError, ValueError, RuntimeError) as e:
        reason = _first_line(e)
        raise ValueError(f"its model_config does not fit the model: {reason}"
                         + ("" if reason.endswith(".") else ".")) from e
    elements = sum(t.numel() for t in itertools.chain(shell.parameters(), shell.buffers()))
    if elements > MAX_MODEL_ELEMENTS:
        raise ValueError(f"its model_config asks for a model of {elements:,} parameters and "
                         f"buffers; a checkpoint may ask for at most {MAX_MODEL_ELEMENTS:,}.")
    not_tensors = [k for k, v in weights.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ValueError(f"its weights {_brief(not_tensors[:3])} are not tensors.")
    expected = shell.state_dict()
    problems = [f"missing {k}" for k in expected if k not in weights]
    problems += [f"unexpected {_name(k)}" for k in weights if k not in expected]
    for k, want in expected.items():
        got = weights.get(k)
        if got is None:
            continue
        if got.shape != want.shape:
            problems.append(f"{k} is {list(got.shape)}, the config gives {list(want.shape)}")
        elif (got.is_floating_point() != want.is_floating_point()
              or (not want.is_floating_point() and got.dtype != want.dtype)):
            problems.append(f"{k} holds {str(got.dtype).removeprefix('torch.')}, the model "
                            f"{str(want.dtype).removeprefix('torch.')}")
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ValueError("its weights do not fit its model_config: "
                         + "; ".join(problems[:3]) + more + ".")


def check_tensors(data: Any) -> int:
    """``ValueError`` unless every tensor in ``data`` (nested dicts, lists and tuples) is a
    dense tensor with values, stored exactly; the number of bytes their storages hold.

    Reads no values: a tensor must be strided (not sparse, quantized or nested), not on the
    ``meta`` device (a shape without values) and contiguous (a stride-0 view of a few stored
    values would pass for a large tensor until something reads it), and its storage exactly as
    large as its values. Several tensors may share a storage (tied embeddings; a GRU's weights
    flattened on a GPU); together they must cover it, but for alignment padding.
    """
    storages: dict[tuple[int, int, str], tuple[str, set[tuple[int, int]]]] = {}
    for where, t in _tensors(data):
        problem = _tensor_problem(t)
        if problem:
            raise ValueError(f"{where()} {problem}")
        storage, size = t.untyped_storage(), t.element_size()
        start = t.storage_offset() * size
        end = start + t.numel() * size
        if end > storage.nbytes():
            raise ValueError(f"{where()} reaches beyond its storage ({end:,} of "
                             f"{storage.nbytes():,} bytes).")
        key = (storage.data_ptr(), storage.nbytes(), str(storage.device))
        storages.setdefault(key, (where(), set()))[1].add((start, end))
    total = 0
    for (_, nbytes, _), (where, ranges) in storages.items():
        used = _covered(ranges)
        slack = 0 if len(ranges) == 1 else _SHARED_STORAGE_SLACK * len(ranges)
        if nbytes - used > slack:
            raise ValueError(f"{where} has a storage of {nbytes:,} bytes but uses {used:,} of "
                             "them: a tensor's storage must be exactly as large as its values.")
        total += nbytes
    return total


def _tensors(data: Any) -> Iterator[tuple[Any, torch.Tensor]]:
    """Every tensor in nested dicts, lists and tuples, with a function naming where it is
    (``its weight decoder.fc_out.weight``, ``its train_state['optimizer']...``)."""
    seen: set[int] = set()
    stack: list[tuple[tuple, Any]] = [((), data)]
    while stack:
        keys, obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            yield (lambda keys=keys: _where(keys)), obj
        elif isinstance(obj, (dict, list, tuple, set, frozenset)) and id(obj) not in seen:
            seen.add(id(obj))
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            stack.extend((keys + (k,), v) for k, v in items)


def _where(keys: tuple) -> str:
    if len(keys) == 2 and keys[0] == "model":
        return f"its weight {_name(keys[1])}"
    if not keys:
        return "it"
    return f"its {_name(keys[0])}" + "".join(f"[{_brief(k)}]" for k in keys[1:])


def _tensor_problem(t: torch.Tensor) -> str | None:
    if t.device.type == "meta":
        return ("is a meta tensor: a shape without values (made on PyTorch's meta device), "
                "not trained weights.")
    if t.layout != torch.strided:
        return (f"is a {str(t.layout).removeprefix('torch.')} tensor; a checkpoint holds dense "
                "tensors.")
    if t.is_quantized or t.is_nested:
        return "is a quantized or nested tensor; a checkpoint holds plain dense tensors."
    if not t.is_contiguous():
        return (f"is a view of shape {list(t.shape)} with strides {list(t.stride())} over "
                f"{t.untyped_storage().nbytes():,} stored bytes, not a dense tensor: a "
                "checkpoint stores every value of its tensors.")
    return None


def _covered(ranges: set[tuple[int, int]]) -> int:
    """How many bytes the union of ``[start, end)`` ranges covers."""
    covered, reached = 0, 0
    for start, end in sorted(ranges):
        if end > reached:
            covered += end - max(start, reached)
            reached = end
    return covered


def _brief(value: Any, limit: int = 60) -> str:
    """``repr(value)``, shortened to ``limit`` characters (and safe for any value)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 63:
        return f"a {value.bit_length()}-bit number"
    try:
        text = repr(value)
    except Exception:  # a value too deeply nested to show
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _name(value: Any, limit: int = 80) -> str:
    """A name (a key, a weight's name) as it is if it is a short printable string, else
    :func:`_brief`'s form."""
    if isinstance(value, str) and value.isprintable() and len(value) <= limit:
        return value
    return _brief(value, limit)


def _first_line(error: BaseException) -> str:
    """An exception's message without what PyTorch appends (C++ frames, notes)."""
    lines = str(error).strip().splitlines()
    return _name(lines[0] if lines else type(error).__name__, 200)


def _load(path: Path) -> Any:
    """``torch.load`` of ``path``, its tensors mapped from the file. torch's reader takes a file
    name only as UTF-8, so a path that is not (a folder named in another encoding, its bytes
    kept by Python as lone surrogates) is read through a Python file instead, into memory."""
    try:
        os.fspath(path).encode("utf-8")
    except UnicodeEncodeError:
        with open(path, "rb") as f:
            return torch.load(f, map_location="cpu", weights_only=True)
    return torch.load(path, map_location="cpu", weights_only=True, mmap=True)


def _regular_file_size(path: Path) -> int:
    """The size of the regular file ``path`` (followed through symbolic links), or
    :class:`CheckpointError` saying why it is not one."""
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
        raise CheckpointError(
            f"No checkpoint at {path}. Train one first (python -m convs2s.train --preset quick "
            f"--out {path.parent}) or pass the path of an existing best.pt / last.pt."
        ) from None
    if stat.S_ISDIR(st.st_mode):
        hint = next((f" Did you mean {path / n}?" for n in ("best.pt", "final.pt", "last.pt")
                     if (path / n).is_file()), "")
        raise CheckpointError(f"{path} is a folder, not a checkpoint file.{hint}")
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"{path} is not a file; pass the path of a checkpoint (best.pt, "
                              "final.pt or last.pt in a run's folder).")
    return st.st_size


def _check_archive(path: Path, size: int) -> int:
    """:class:`CheckpointError` unless ``path`` (of ``size`` bytes) is a zip archive as
    torch.save writes it: one folder holding data.pkl, every entry stored uncompressed behind an
    intact local header, the entries' bytes inside the file and not overlapping. Returns the
    bytes of tensor data (``data/`` entries) it stores. Reads only the archive's directory and
    headers."""
    unread = "It was refused unread."
    try:
        with open(path, "rb") as f:
            head = f.read(len(_ZIP_MAGIC))
            with zipfile.ZipFile(f) as z:
                entries = z.infolist()
            for entry in entries:
                if entry.compress_type != zipfile.ZIP_STORED:
                    raise CheckpointError(
                        f"{path} is not a checkpoint torch.save wrote: its entry "
                        f"{_name(entry.filename)} is compressed ({entry.compress_size:,} bytes "
                        f"that unpack to {entry.file_size:,}), and torch.save stores every "
                        "entry as it is. " + unread)
            spans = [_entry_span(f, entry) for entry in entries]
    except CheckpointError:
        raise
    except OSError as e:
        raise CheckpointError(f"{path} cannot be read: {e.strerror}.") from None
    except _Damaged as e:
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint: its zip entry {e} is damaged. It may "
            "be corrupted: delete it and train again, or use the other checkpoint (best.pt / "
            "last.pt) in the same folder.") from None
    except Exception as e:  # BadZipFile, or what a damaged directory makes zipfile raise
        if head != _ZIP_MAGIC and not _ZIP_MAGIC.startswith(head):
            raise CheckpointError(
                f"{path} is not a checkpoint: it is not the zip archive torch.save writes (it "
                f"begins with {head!r}). Pass a best.pt, final.pt or last.pt that "
                "convs2s.run.train wrote."
            ) from None
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint: its zip archive ({size:,} bytes) is "
            f"incomplete ({type(e).__name__}). It may be truncated or corrupted: delete it and "
            "train again, or use the other checkpoint (best.pt / last.pt) in the same folder."
        ) from None
    reached = 0
    for start, end in sorted(spans):
        if start < reached or end > size:
            raise CheckpointError(
                f"{path} is not a checkpoint torch.save wrote: its entries overlap or reach "
                f"beyond the file's {size:,} bytes. " + unread)
        reached = end
    parts = [entry.filename.split("/", 1) for entry in entries]
    if sum(len(p) == 2 and p[1] == "data.pkl" for p in parts) != 1 or \
            len({p[0] for p in parts}) != 1:
        raise CheckpointError(f"{path} is a zip archive, but not one torch.save writes (one "
                              "folder holding data.pkl). " + unread)
    return sum(entry.file_size for entry, p in zip(entries, parts, strict=True)
               if len(p) == 2 and p[1].startswith("data/"))


class _Damaged(Exception):
    """A zip entry whose local header does not match the archive's directory."""


def _entry_span(f, entry: zipfile.ZipInfo) -> tuple[int, int]:
    """Where ``entry``'s bytes lie in the open archive ``f``, read from its local header (what
    torch reads them by), which must name the entry and store it uncompressed."""
    f.seek(entry.header_offset)
    header = f.read(30)
    if len(header) < 30 or header[:4] != _ZIP_MAGIC:
        raise _Damaged(_name(entry.filename))
    method, name_length, extra_length = (int.from_bytes(header[i:i + 2], "little")
                                         for i in (8, 26, 28))
    if method != zipfile.ZIP_STORED or entry.compress_size != entry.file_size or \
            f.read(name_length) != entry.filename.encode():
        raise _Damaged(_name(entry.filename))
    start = entry.header_offset + 30 + name_length + extra_length
    return start, start + entry.file_size


def _private_mapping() -> contextlib.AbstractContextManager:
    """Map files copy-on-write, PyTorch's default (the only choice before PyTorch 2.5): writing
    to a loaded tensor must never write to the checkpoint file, even where a program has made
    ``torch.load`` map files shared."""
    private = getattr(mmap, "MAP_PRIVATE", None)  # none on Windows, where torch maps privately
    get = getattr(torch.serialization, "get_default_mmap_options", None)
    if private is None or get is None or get() == private:
        return contextlib.nullcontext()
    return torch.serialization.set_default_mmap_options(private)
