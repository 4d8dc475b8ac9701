"""Why convs2s.run.checkpoint_guard keeps each of its hand-written checks: torch's own loader,
``torch.load(weights_only=True, mmap=True)``, followed by the guard's one comparison of every
weight's name, shape and dtype with the model built on the ``meta`` device
(:func:`~convs2s.run.checkpoint_guard.check_shapes`), accepts each of these files. The guard
refuses them (tests/run/test_checkpoint.py). Should a torch release refuse one of them itself,
its test here fails: the hand-written check may then go.
"""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

import pytest
import torch
from test_checkpoint import POSITIONS, VOCAB, _patched, _zip, crafted, refusal, saved, tiny

from convs2s.model import ConvS2S
from convs2s.run.checkpoint import Checkpoint, save_checkpoint
from convs2s.run.checkpoint_guard import check_shapes


def accepted(path: Path) -> dict:
    """What torch's loader and the meta-device comparison make of ``path`` (they raise if
    they refuse it)."""
    data = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    check_shapes(ConvS2S, data["model_config"], data["model"])
    return data


@pytest.mark.parametrize("weight", [
    torch.zeros(1, 1).expand(16, 8),  # a stride-0 view: 4 stored bytes standing for 512
    torch.zeros(1000)[:128].view(16, 8),  # a storage of 4,000 bytes for 512 bytes of values
    torch.zeros(16, 8, device="meta"),  # a shape without values
    torch.eye(16, 8).to_sparse(),
], ids=["stride-0 view", "storage larger than its values", "meta", "sparse"])
def test_tensors_that_are_not_plain_and_exactly_stored_pass_torch(tmp_path, weight):
    loaded = accepted(crafted(tmp_path, weights={POSITIONS: weight}))["model"][POSITIONS]
    assert loaded.shape == (16, 8)


def test_tensor_data_no_tensor_uses_passes_torch(tmp_path):
    path = crafted(tmp_path)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(z.namelist()[0].split("/")[0] + "/data/999", bytes(1000))
    accepted(path)


def test_a_damaged_local_header_and_overlapping_entries_pass_torch(tmp_path):
    accepted(_patched(crafted(tmp_path, "damaged.pt"), "/data/0", local={30: b"X"}))
    path = crafted(tmp_path, "overlap.pt")
    with zipfile.ZipFile(path) as z:
        size = next(i.file_size for i in z.infolist() if i.filename.endswith("/data/0"))
    longer = (size + 4096).to_bytes(4, "little")
    accepted(_patched(path, "/data/0", central={20: longer + longer}))


def _deflated(path: Path, which: str, padding: int = 0) -> Path:
    """``path`` rewritten with its entry ending in ``which`` deflated (and ``padding`` zero
    bytes after it, which unpickling never reaches)."""
    entries = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith(which):
                pack = zlib.compressobj(9, zlib.DEFLATED, -15)
                raw = data + bytes(padding)
                entries.append((info.filename, pack.compress(raw) + pack.flush(), len(raw)))
            else:
                entries.append((info.filename, data, None))
    return _zip(path.with_name("deflated.pt"), entries)


def test_compressed_entries_pass_torch(tmp_path):
    """A deflated data.pkl is inflated whole in memory (here 64 MB from a file of under
    200 kB), and a deflated tensor record is read as it lies in the file: its compressed bytes
    become the tensor's values."""
    path = saved(tmp_path)
    bomb = _deflated(path, "/data.pkl", padding=64 << 20)
    assert bomb.stat().st_size < 200_000
    accepted(bomb)
    original = torch.load(path, weights_only=True)["model"]
    with zipfile.ZipFile(path) as z:  # the record of the tensor that lies first in the file
        first = min((i for i in z.infolist() if "/data/" in i.filename),
                    key=lambda i: i.header_offset).filename
    garbled = accepted(_deflated(path, first))["model"]
    assert any(not torch.equal(garbled[k].nan_to_num(), original[k].nan_to_num())
               for k in original)


@pytest.mark.filterwarnings("ignore::UserWarning")  # prototype nested, deprecated quantized
def test_nested_and_quantized_tensors_pass_torch_and_the_guard_refuses_them_in_one_line(
        tmp_path):
    """A nested weight loads, and then makes the meta comparison fail deep inside PyTorch (not
    its one-line refusal); a quantized tensor beside the weights loads and passes it."""
    nested = crafted(tmp_path, "nested.pt", weights={
        POSITIONS: torch.nested.nested_tensor([torch.zeros(8), torch.zeros(8)])})
    with pytest.raises(RuntimeError) as e:
        accepted(nested)
    assert not isinstance(e.value, ValueError)
    data = Checkpoint.from_model(tiny("ConvS2S"), VOCAB, VOCAB).to_dict()
    data["note"] = torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.qint8)
    quantized = save_checkpoint(tmp_path / "quantized.pt", data)
    accepted(quantized)
    assert f"its weight {POSITIONS} is a nested tensor; a checkpoint holds dense tensors" in \
        refusal(nested)
    assert "its note is a quantized tensor; a checkpoint holds dense tensors" in \
        refusal(quantized)
