"""Training on several processes under ``torchrun`` (``WORLD_SIZE`` > 1), or on one.

Each process trains on its own shard of the bucketed batches (gloo on a CPU, nccl on GPUs);
``DistributedDataParallel`` averages the gradients, so every replica keeps identical weights.
The main process (rank 0) writes the checkpoints and prints. torchrun's variables are checked
first: a ``WORLD_SIZE``, ``RANK`` or ``LOCAL_RANK`` that cannot be is one line, not a process
group waiting forever for processes that never come.
"""

from __future__ import annotations

import os

import torch

from convs2s.system import environment

__all__ = ["STOP_REASONS", "Distributed"]

STOP_REASONS = ("", "epochs", "early stop", "time budget", "max_steps")
"""Why a run stops (``""``: it goes on), in rising precedence when processes differ."""


class Distributed:
    """torchrun's environment, or a single process."""

    def __init__(self, device: torch.device | None):
        self.world = _whole("WORLD_SIZE", "1", least=1)
        self.rank = _whole("RANK", "0", least=0)
        self.local_rank = _whole("LOCAL_RANK", "0", least=0)
        if self.rank >= self.world:  # no process group would ever complete: wait forever
            raise ValueError(f"RANK={self.rank} is not below WORLD_SIZE={self.world}: each of "
                             "torchrun's processes has a rank from 0 to WORLD_SIZE - 1 (unset "
                             "both to train on one process).")
        self.active = self.world > 1
        if device is None:
            device = environment.device()
        if self.active and device.type == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        self.device = device
        self.started_here = False
        if self.active and not torch.distributed.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            torch.distributed.init_process_group(backend=backend)
            self.started_here = True

    @property
    def main(self) -> bool:
        return self.rank == 0

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """``model`` as the training steps call it: wrapped in ``DistributedDataParallel``
        (which averages the gradients) when there are several processes."""
        if not self.active:
            return model
        ids = [self.device.index] if self.device.type == "cuda" else None
        return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def agree(self, reason: str) -> str:
        """One stopping decision for every process: the first of ``STOP_REASONS`` any of them
        gives (``""``: all go on). Each process times its own run, and only the main one keeps
        time for the final choices, so left alone they would stop at different steps and the
        others would wait forever in the next gradient all-reduce."""
        if not self.active:
            return reason
        code = torch.tensor([STOP_REASONS.index(reason)], device=self.device)
        torch.distributed.all_reduce(code, op=torch.distributed.ReduceOp.MAX)
        return STOP_REASONS[int(code.item())]

    def share(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """The main process's ``tensors`` (1-D, int32) on every process, on the CPU; the other
        processes' own are not read, only their count. Each process draws its own subword
        samples for the same seed (:func:`convs2s.data.subword.seeded_sampling`), so the main one's
        are shared."""
        if not self.active:
            return tensors
        sizes = torch.tensor([t.numel() for t in tensors], dtype=torch.int64, device=self.device)
        torch.distributed.broadcast(sizes, src=0)
        shared = []
        for t, n in zip(tensors, sizes.tolist(), strict=True):
            buf = (t.to(self.device, torch.int32) if self.main
                   else torch.empty(n, dtype=torch.int32, device=self.device))
            torch.distributed.broadcast(buf, src=0)
            shared.append(buf.cpu())
        return shared

    def close(self) -> None:
        if self.started_here and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _whole(name: str, default: str, least: int) -> int:
    """The environment variable ``name`` (torchrun sets it) as a whole number >= ``least``;
    ``ValueError`` (one line) otherwise."""
    text = os.environ.get(name, default)
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < least:
        raise ValueError(f"{name}={text!r} is not a whole number >= {least} (torchrun sets it; "
                         "unset it to train on one process).")
    return value
