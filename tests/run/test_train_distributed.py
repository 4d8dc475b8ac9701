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
    dist.close()
    print(json.dumps({"rank": dist.rank, "alone": alone, "agreed": agreed, "calm": calm}))
''')


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
