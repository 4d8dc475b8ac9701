"""The training core: train.py opens with its idea, the run's state is one dataclass whose fields
are what checkpoints store, and one optimizer step serves the trainer and the baselines."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import torch
from conftest import TINY_PAIRS

from convs2s.model import ConvS2SConfig
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import load_checkpoint, save_checkpoint
from convs2s.run.precision import clipped_gradients, optimizer_step, update
from convs2s.run.presets import Preset
from convs2s.run.train import TrainState, train

TRAIN_PY = Path(train_mod.__file__)
TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=2, patience=100,
    label_smoothing=0.0, seed=7,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}
STORED_BESIDE = {"optimizer", "rng"}  # train_state entries that are not the run's state


def _run(out, preset=TINY, **kw):
    return train(preset, out, data=DATA, progress=False, log=lambda *_: None, **kw)


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Top-level classes and functions, and the methods of classes as ``Class.method``."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            found[node.name] = node
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found[f"{node.name}.{item.name}"] = item
    return found


def test_train_py_opens_with_the_state_the_schedule_the_setup_and_the_loop_step_by_step():
    tree = ast.parse(TRAIN_PY.read_text(encoding="utf-8"))
    defs = _definitions(tree)
    idea = ["TrainState", "learning_rate", "reduce_on_plateau", "Trainer.__init__",
            "Trainer.run", "Trainer.should_stop", "Trainer.run_epoch", "Trainer.train_batches",
            "Trainer.train_step", "Trainer.record_step", "Trainer.end_epoch"]
    late = {name: defs[name].end_lineno for name in idea if defs[name].end_lineno > 260}
    assert not late, f"train.py's idea should be read in its first ~260 lines: {late}"
    for name in idea[1:]:  # each a screen or less
        node = defs[name]
        assert node.end_lineno - node.lineno < 45, (name, node.end_lineno - node.lineno)
    # the setup first, then the loop in the order it runs (nanoGPT's reading order)
    methods = [item.name for node in tree.body if isinstance(node, ast.ClassDef)
               and node.name == "Trainer" for item in node.body
               if isinstance(item, ast.FunctionDef)
               and (item.name == "__init__" or not item.name.startswith("_"))]
    assert methods[:len(idea) - 3] == [name.split(".")[1] for name in idea[3:]]
    # a step is its own method: no closure handed to the optimizer step
    step = defs["Trainer.train_step"]
    assert not [n for n in ast.walk(step) if isinstance(n, ast.FunctionDef | ast.Lambda)
                and n is not step]


def test_the_trainer_state_is_the_dataclass_and_checkpoints_store_its_fields(tmp_path):
    """Every field, the optional ones included (a time budget and a final model set them), and
    nothing else, under the names checkpoints always used."""
    out = tmp_path / "run"
    result = _run(out, TINY.replace(max_minutes=60, average_last=2))
    stored = load_checkpoint(out / "last.pt")["train_state"]
    fields = [f.name for f in dataclasses.fields(TrainState)]
    assert [k for k in stored if k not in STORED_BESIDE] == fields
    state = TrainState.from_dict(stored)
    assert state.to_dict() == {k: v for k, v in stored.items() if k not in STORED_BESIDE}
    assert state.step == result.steps and len(state.history) == 2
    # the Trainer writes no state outside the dataclass: its code never indexes self.state
    source = TRAIN_PY.read_text(encoding="utf-8")
    assert not re.search(r"\b(state|s)\[", source), "the state is indexed like a dict"


def test_unset_optional_fields_are_not_stored_as_none():
    assert set(TrainState().to_dict()) == {f.name for f in dataclasses.fields(TrainState)} - {
        "final_costs", "final_costs_epoch"}
    assert TrainState(final_costs_epoch=2).to_dict()["final_costs_epoch"] == 2


def test_a_train_state_without_the_fields_added_later_resumes(tmp_path):
    """A last.pt from before snapshots and the final reserve were stored continues exactly
    like the run that never stopped, and is written back with every field. So does one that
    stored notebook 05's attention snapshots itself (``watched``, each row's ``attention``):
    the rows keep theirs, the run layer ignores the rest."""
    out = tmp_path / "old"
    _run(out, TINY.replace(epochs=1))
    ckpt = load_checkpoint(out / "last.pt")
    for key in ("snapshots", "final_reserve"):
        del ckpt["train_state"][key]
    ckpt["train_state"]["watched"] = {"src": ["ein", "hund"], "trg": ["a", "dog", "<eos>"]}
    ckpt["train_state"]["history"][0]["attention"] = [[[0.5, 0.5]] * 3]
    save_checkpoint(out / "last.pt", ckpt)
    resumed = _run(out, resume=True)
    full = _run(tmp_path / "full")
    for k, v in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[k], v, rtol=0, atol=0, msg=k)
    stored = load_checkpoint(out / "last.pt")["train_state"]
    assert stored["snapshots"] == [] and stored["final_reserve"] == 0.0
    assert "watched" not in stored and stored["history"][0]["attention"] == [[[0.5, 0.5]] * 3]
    assert "attention" not in stored["history"][1]  # the run layer records none itself


def test_optimizer_step_is_the_scaled_clipped_update_in_two_halves():
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 3)
    b = torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    x = torch.randn(5, 4)
    opt_a = torch.optim.AdamW(a.parameters(), lr=1.0)
    opt_b = torch.optim.AdamW(b.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    # by hand: what the trainer and the baselines did before they shared the step
    loss = (b(x) ** 2).sum() * 100
    opt_b.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(b.parameters(), 0.1)
    for group in opt_b.param_groups:
        group["lr"] = 0.01
    opt_b.step()
    optimizer_step((a(x) ** 2).sum() * 100, opt_a, scaler, a.parameters(), 0.1, 0.01)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=0, atol=0)
    # the trainer's two halves (the second, with its record, while signals wait) are the same
    c = torch.nn.Linear(4, 3)
    c.load_state_dict(a.state_dict())
    opt_a, opt_c = (torch.optim.AdamW(m.parameters(), lr=1.0) for m in (a, c))
    for _ in range(2):
        optimizer_step((a(x) ** 2).sum() * 100, opt_a, scaler, a.parameters(), 0.1, 0.01)
        clipped_gradients((c(x) ** 2).sum() * 100, opt_c, scaler, c.parameters(), 0.1)
        update(opt_c, scaler, 0.01)
    for pa, pc in zip(a.parameters(), c.parameters(), strict=True):
        torch.testing.assert_close(pa, pc, rtol=0, atol=0)


def test_the_baselines_train_with_the_shared_optimizer_step(monkeypatch):
    from convs2s.course import baselines

    calls = []
    real = baselines.optimizer_step
    monkeypatch.setattr(baselines, "optimizer_step", lambda *a, **k: (calls.append(a[5]),
                                                                      real(*a, **k)))
    torch.manual_seed(0)
    model = baselines.RNNAttentionSeq2Seq(12, 12, emb_dim=8, enc_hid_dim=8, dec_hid_dim=8,
                                          attn_dim=8, dropout=0.0, src_pad_idx=0, trg_pad_idx=0)
    batch = (torch.randint(1, 12, (2, 5)), torch.randint(1, 12, (2, 6)))
    baselines.train_side_by_side({"rnn": model}, [batch], pad_idx=0, steps=3, lr=1e-3,
                                 warmup_steps=2)
    assert calls == [5e-4, 1e-3, 1e-3]  # the warm-up's rates
