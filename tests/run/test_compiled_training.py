"""The compiled training step (``Preset.compile``, ``--compile``) on a CPU: torch.compile's
inductor builds C++ kernels here (it needs g++ or clang++; without one the trainer refuses in a
line, and these tests fail rather than pass). Compiled and eager give the same outputs, losses and
updates; a compiled run saves the module's own keys and resumes with or without compiling; the
padding to a few shapes (what CUDA graphs need) changes neither the loss nor its gradients.

Tolerances: compiled kernels add in another order than eager ones, so float32 results agree to
rounding, not bit for bit: ``rtol=1e-4, atol=1e-5`` (float32 has about 7 significant digits;
a wrong graph would miss by whole percents)."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from conftest import TINY_PAIRS

from convs2s.data import make_loader
from convs2s.model import ConvS2S, ConvS2SConfig
from convs2s.model.loss import next_token_loss
from convs2s.run import compiled_training
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import load_checkpoint
from convs2s.run.compiled_training import (
    LENGTH_MULTIPLE,
    compile_for_training,
    compiled_loss,
    padded_rows,
    static_shapes,
)
from convs2s.run.prepare import build_model, prepare_data
from convs2s.run.presets import Preset
from convs2s.run.train import main, train

TOL = dict(rtol=1e-4, atol=1e-5)
# dropout 0: compiled dropout draws its masks with other random kernels than eager dropout
TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=2, dec_layers=2,
                                     dropout=0.0, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=1, max_steps=3, patience=100,
    label_smoothing=0.1, seed=7,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}
PAD = 1


@pytest.fixture(autouse=True)
def _compile_in_this_process():
    """Inductor compiles in this process: its pool of compile workers would outlive the test
    (conftest fails a run that leaves processes behind). Each test starts from a fresh cache of
    compiled frames."""
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    with inductor_config.patch(compile_threads=1):
        yield
    torch._dynamo.reset()


def _run(out, preset=TINY, **kw):
    return train(preset, out, data=DATA, device="cpu", progress=False, log=lambda *_: None,
                 **kw)


def _batch():
    """A padded batch: real tokens 4..29, padding (1) at the ends of some rows."""
    g = torch.Generator().manual_seed(3)
    src = torch.randint(4, 30, (3, 7), generator=g)
    trg = torch.randint(4, 30, (3, 10), generator=g)
    src[1, -2:] = PAD
    trg[0, -3:] = PAD
    return src, trg


def _model():
    torch.manual_seed(0)
    return ConvS2S(30, 30, src_pad_idx=PAD, trg_pad_idx=PAD, emb_dim=16, hid_dim=16,
                   enc_layers=2, dec_layers=2, dropout=0.0, max_positions=32).train()


def _loss_kw(static):
    return dict(src_pad=PAD, trg_pad=PAD, label_smoothing=0.1,
                autocast=torch.autocast("cpu", enabled=False), max_positions=32, static=static)


def test_compiled_and_eager_give_equal_outputs_losses_and_gradients():
    """The trainer's model and first batch (so that the run below reuses these kernels)."""
    train_ds, _, src_vocab, trg_vocab = prepare_data(TINY, DATA)
    src, trg = next(iter(make_loader(train_ds, max_tokens=TINY.max_tokens, shuffle=False)))
    pad = trg_vocab.pad_idx
    assert (trg[:, 1:] == pad).any() and (trg[:, 1:] != pad).any()  # padding and real tokens
    torch.manual_seed(0)
    eager = build_model(TINY, src_vocab, trg_vocab).train()
    twin = copy.deepcopy(eager)
    compiled = compile_for_training(twin, "default", "cpu")
    c_loss = compiled_loss(compiled, src, trg, src_pad=src_vocab.pad_idx, trg_pad=pad,
                           label_smoothing=TINY.label_smoothing,
                           autocast=torch.autocast("cpu", enabled=False),
                           max_positions=TINY.model.max_positions, static=False)
    loss = next_token_loss(eager, src, trg, pad, TINY.label_smoothing)
    torch.testing.assert_close(c_loss, loss, **TOL)
    loss.backward()
    c_loss.backward()
    grads = dict(eager.named_parameters())
    for name, p in twin.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, **TOL, msg=name)
    logits, attention = eager(src, trg[:, :-1])  # with autograd: the graph compiled above
    c_logits, c_attention = compiled(src, trg[:, :-1])
    torch.testing.assert_close(c_logits, logits, **TOL)
    torch.testing.assert_close(c_attention, attention, **TOL)
    # the compiled wrapper's keys carry a prefix; the module's own are those a checkpoint holds
    assert all(k.startswith("_orig_mod.") for k in compiled.state_dict())
    assert list(twin.state_dict()) == list(eager.state_dict())


def test_padding_to_few_shapes_keeps_the_loss_and_its_gradients():
    src, trg = _batch()
    big_src, big_trg = static_shapes(src, trg, PAD, PAD, max_positions=32)
    assert big_src.shape == (3, LENGTH_MULTIPLE) and big_trg.shape == (3, 2 * LENGTH_MULTIPLE + 1)
    torch.testing.assert_close(big_src[:, :7], src, rtol=0, atol=0)
    torch.testing.assert_close(big_trg[:, :10], trg, rtol=0, atol=0)
    assert (big_src[:, 7:] == PAD).all() and (big_trg[:, 10:] == PAD).all()
    # the cap: never more positions than the model has
    s, t = static_shapes(src, trg, PAD, PAD, max_positions=10)
    assert s.shape[1] == 8 and t.shape[1] == 11
    # rows: 8 sizes per doubling, never fewer rows, at most an eighth more
    sizes = [padded_rows(n) for n in range(1, 2000)]
    assert sizes[:16] == list(range(1, 17)) and padded_rows(17) == 18 and padded_rows(33) == 36
    assert all(n <= r <= n * 9 / 8 for n, r in zip(range(1, 2000), sizes, strict=True))
    assert len(set(sizes)) < 80
    # 5 rows become 5, 17 become 18: an added row is a real source with no target
    many_src, many_trg = src.repeat(6, 1)[:17], trg.repeat(6, 1)[:17]
    s, t = static_shapes(many_src, many_trg, PAD, PAD, max_positions=32)
    assert s.shape[0] == t.shape[0] == 18
    assert (s[17] != PAD).any() and (t[17] == PAD).all()
    # eager, so that only the padding differs: the same loss and gradients
    for batch in ((src, trg), (many_src, many_trg)):
        a, b = _model(), _model()
        kw = _loss_kw(static=True)
        la = next_token_loss(a, *batch, PAD, 0.1)
        lb = compiled_loss(b, *batch, **kw)
        torch.testing.assert_close(lb, la, **TOL)
        la.backward()
        lb.backward()
        for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(pb.grad, pa.grad, **TOL, msg=name)


def test_a_compiled_run_trains_saves_and_resumes_like_an_eager_one(tmp_path, monkeypatch):
    """Three steps eagerly; then two compiled steps resumed eagerly for the third, and two eager
    ones resumed compiled: the same weights, and the module's own keys in last.pt. The second
    compiled run pads its batches to few shapes, as under CUDA graphs ("reduce-overhead",
    "max-autotune"; a CPU has none, and their kernels here are the default mode's, so it runs
    the default mode, which the first test compiled already, to keep the test short)."""
    padded = []
    monkeypatch.setattr(compiled_training, "static_shapes",
                        lambda *a: padded.append(a[0].shape) or static_shapes(*a))
    _run(tmp_path / "eager")
    want = load_checkpoint(tmp_path / "eager" / "last.pt")["model"]
    for first, then in (("default", None), (None, "default")):
        out = tmp_path / f"{first}_then_{then}"
        _run(out, TINY.replace(compile=first, max_steps=2))
        stored = load_checkpoint(out / "last.pt")
        assert stored["train_state"]["step"] == 2
        assert list(stored["model"]) == list(want)  # no _orig_mod. prefix
        assert "compile" not in stored["preset"]  # how the steps ran is not recorded
        if then is not None:
            monkeypatch.setattr(train_mod, "CUDA_GRAPH_MODES", (then,))
        resumed = _run(out, TINY.replace(compile=then), resume=True)
        assert resumed.steps == 3 and resumed.stopped == "max_steps"
        got = load_checkpoint(out / "last.pt")["model"]
        assert list(got) == list(want)
        for k, v in want.items():
            torch.testing.assert_close(got[k], v, **TOL, msg=f"{first} then {then}: {k}")
    assert len(padded) == 1  # the one compiled step of the resumed run, padded


def test_the_command_line_takes_compile_and_refuses_a_wrong_mode_in_one_line(monkeypatch,
                                                                            capsys, tmp_path):
    asked = []
    monkeypatch.setattr(train_mod, "train", lambda preset, *a, **k: (
        asked.append(preset.compile), SimpleNamespace(best_path=None, final_path=None))[1])
    out = str(tmp_path / "x")
    for args, mode in (([], None), (["--compile"], "default"),
                       (["--compile", "reduce-overhead"], "reduce-overhead")):
        assert main(["--preset", "quick", "--out", out, *args, "--no-progress"]) == 0
        assert asked.pop() == mode
    with pytest.raises(SystemExit) as e:
        main(["--preset", "quick", "--out", out, "--compile", "fast"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "invalid choice" in err
    with pytest.raises(ValueError, match=r"^compile must be None or one of default, "):
        TINY.replace(compile="fast")


def test_compile_is_refused_in_one_line_without_a_compiler(monkeypatch):
    """No C++ compiler: one line before any step, not an inductor traceback at the first."""
    import torch._inductor.cpp_builder as cpp_builder

    def no_compiler():
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    with pytest.raises(ValueError, match=r"^compile on a CPU needs a C\+\+ compiler"):
        compile_for_training(_model(), "default", "cpu")
