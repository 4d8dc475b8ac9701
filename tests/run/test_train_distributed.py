"""Under torchrun every process must take the same stopping decision (the GPU path).

Each process times its own run, and only the main one keeps time for the final choices
(``final_costs``), so without an agreement the main process would stop first and the others
would wait forever in the next gradient all-reduce. Two real processes on the CPU (gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

WORKER = textwrap.dedent('''
    import dataclasses, json, os, sys
    import torch
    from convs2s.run.distributed import Distributed
    from convs2s.run.presets import PRESETS
    from convs2s.run.train import Trainer, TrainState

    dist = Distributed(torch.device("cpu"))  # reads RANK/WORLD_SIZE: gloo
    t = Trainer.__new__(Trainer)
    t.dist = dist
    t.preset = dataclasses.replace(PRESETS["quick_subword"], max_minutes=1,
                                   max_steps=None, epochs=100, patience=100)
    t.state = TrainState(step=5, seconds=41.0, bad_epochs=0, epoch=1)
    if dist.main:  # only the main process measured what the final choices cost
        t.state.final_costs = {"greedy": 4.0, "beam": 10.0}
    alone = t._stop_here()
    agreed = t.should_stop()
    t.state.seconds = 1.0  # now nobody wants to stop
    calm = t.should_stop()
    torch.distributed.barrier()  # both past the last collective before either leaves (BARRIER)
    dist.close()
    print(json.dumps({"rank": dist.rank, "alone": alone, "agreed": agreed, "calm": calm}))
''')


# BARRIER: the main process hosts the process group's store and may finish a broadcast before
# the other has read it; leaving then once aborted the other process at exit under load
# ("terminate called without an active exception", return code -6). Each worker waits at a
# barrier, so neither destroys the group while the other still uses it.


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_process_stops_when_one_must(tmp_path):
    port = str(_free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, CONVS2S_DEVICE="cpu",
                   OMP_NUM_THREADS="1")
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    by_rank = {r["rank"]: r for r in results}
    # alone, they disagree: the main process keeps 19 s for the final choices, the other none
    assert (by_rank[0]["alone"], by_rank[1]["alone"]) == ("time budget", "")
    assert by_rank[0]["agreed"] == by_rank[1]["agreed"] == "time budget"
    assert by_rank[0]["calm"] == by_rank[1]["calm"] == ""


SAMPLING_WORKER = textwrap.dedent('''
    import hashlib, json, sys
    from pathlib import Path
    import torch
    from convs2s.run.distributed import Distributed
    from convs2s.run.presets import Preset
    from convs2s.run.train import Trainer

    spec = json.loads(Path(sys.argv[1]).read_text())
    data = {split: [tuple(p) for p in pairs] for split, pairs in spec["data"].items()}
    dist = Distributed(torch.device("cpu"))  # reads RANK/WORLD_SIZE: gloo
    t = Trainer(Preset.from_dict(spec["preset"]), Path("run"), data, dist, progress=False,
                log=lambda *_: None)
    ds = t.loader.dataset
    ids = repr([(s.tolist(), u.tolist()) for s, u in zip(ds.src, ds.trg)]).encode()
    print(json.dumps({"rank": dist.rank, "ids": hashlib.sha256(ids).hexdigest(),
                      "batches": len(t.loader.batch_sampler), "pairs": len(ds)}))
    torch.distributed.barrier()  # both past the broadcast before either leaves (BARRIER)
    dist.close()
''')


def test_under_torchrun_every_process_trains_on_the_main_ones_subword_samples(tmp_path):
    """With ``--subword-sampling``, each process would draw other pieces for the same seed
    (sentencepiece's samples differ between processes): different lengths, so different batches
    and counts of batches, and processes that stop at different steps. The main process's
    segmentations are shared: every process holds the same ids."""
    from conftest import TINY_PAIRS

    from convs2s.model import ConvS2SConfig
    from convs2s.run.presets import Preset

    preset = Preset(name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1,
                                                     dec_layers=1, dropout=0.1,
                                                     max_positions=32),
                    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=2, patience=100,
                    label_smoothing=0.1, seed=7, vocab_size=100, tokenizer="subword",
                    subword_sampling=0.2)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"preset": preset.as_dict(), "data": {
        "train": TINY_PAIRS * 4, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}}))
    port = str(_free_port())
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, CONVS2S_DEVICE="cpu",
                   OMP_NUM_THREADS="1", CONVS2S_CACHE_DIR=str(tmp_path / f"cache{rank}"))
        procs.append(subprocess.Popen([sys.executable, "-c", SAMPLING_WORKER, str(spec)],
                                      env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert {r["rank"] for r in results} == {0, 1}
    assert results[0]["pairs"] == results[1]["pairs"] == len(TINY_PAIRS) * 4
    assert results[0]["ids"] == results[1]["ids"]
    assert results[0]["batches"] == results[1]["batches"]
