"""Mixed precision, the same way everywhere: training, the baselines, the benchmarks; and the
optimizer step that goes with it (:func:`optimizer_step`: :func:`clipped_gradients`, then
:func:`update`), shared by the trainer and the baselines.

On a CUDA GPU the forward pass runs under ``torch.autocast``: in bfloat16 where the GPU computes
it natively (Ampere and later: A100, L4, H100, RTX 30xx), which needs no loss scaling; in float16
with a gradient scaler on older GPUs such as Colab's free T4 (compute capability 7.5), whose
tensor cores do float16 and only emulate bfloat16. The weights, the optimizer and the loss stay in
float32. On a CPU (and Apple's MPS) training runs in float32: CPU autocast exists, but it is slower
than float32 on most CPUs. ``CPU_AUTOCAST = True`` turns bfloat16 autocast on for a CPU anyway,
so that tests execute the mixed-precision code path on machines without a GPU.

This is fairseq's and this course's engineering, not the paper's (the paper trained in float32).
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch

__all__ = ["CPU_AUTOCAST", "MixedPrecision", "clipped_gradients", "mixed_precision",
           "optimizer_step", "update"]

#: Tests set this to run the CPU's bfloat16 autocast (the code path a GPU takes).
CPU_AUTOCAST = False


@dataclass(frozen=True)
class MixedPrecision:
    """How one device runs: ``autocast()`` around the forward pass, ``scaler()`` for the loss."""

    enabled: bool
    device_type: str
    dtype: torch.dtype

    def autocast(self) -> AbstractContextManager:
        return torch.autocast(self.device_type, dtype=self.dtype, enabled=self.enabled)

    def scaler(self) -> torch.amp.GradScaler:
        """A gradient scaler, active only for float16 (bfloat16 has float32's range)."""
        scaling = self.enabled and self.dtype == torch.float16
        return torch.amp.GradScaler(self.device_type if scaling else "cpu", enabled=scaling)

    def describe(self) -> str:
        """What this device's training computes in, and why, in one line (notebook 05 prints
        it, so that what it says is true on a CPU, a T4 and an A100 alike)."""
        if not self.enabled:
            why = ("on a CPU autocast is slower than float32" if self.device_type == "cpu"
                   else "mixed precision is off")
            return f"float32 ({why})"
        if self.dtype == torch.bfloat16:
            why = ("this GPU computes bfloat16 natively: Ampere or newer"
                   if self.device_type == "cuda" else "CPU autocast, as the tests ask")
            return (f"bfloat16 autocast on {self.device_type} ({why}); weights, optimizer and "
                    "loss in float32")
        return (f"float16 autocast on {self.device_type} with a gradient scaler (this GPU has "
                "no native bfloat16, e.g. a T4); weights, optimizer and loss in float32")


def mixed_precision(device: torch.device | str, enabled: bool = True) -> MixedPrecision:
    """The mixed precision ``device`` gets (see the module's text); ``enabled=False``: none."""
    device = torch.device(device)
    if enabled and device.type == "cuda":
        native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        return MixedPrecision(True, "cuda", torch.bfloat16 if native_bf16 else torch.float16)
    if enabled and device.type == "cpu" and CPU_AUTOCAST:
        return MixedPrecision(True, "cpu", torch.bfloat16)
    return MixedPrecision(False, device.type if device.type in ("cuda", "cpu") else "cpu",
                          torch.float32)


def clipped_gradients(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                      scaler: torch.amp.GradScaler, parameters: Iterable[torch.Tensor],
                      clip_norm: float) -> None:
    """The gradients of ``loss`` (scaled by ``scaler``, which is inactive unless float16),
    unscaled and clipped to norm ``clip_norm``: the first half of :func:`optimizer_step`."""
    optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # clip the true gradients, not scaled ones
    torch.nn.utils.clip_grad_norm_(parameters, clip_norm)


def update(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, lr: float) -> None:
    """The optimizer's step at learning rate ``lr`` and the scaler's update: the second half of
    :func:`optimizer_step` (the trainer records the step with it, while signals wait)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    scaler.step(optimizer)
    scaler.update()


def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer,
                   scaler: torch.amp.GradScaler, parameters: Iterable[torch.Tensor],
                   clip_norm: float, lr: float) -> None:
    """One update from ``loss``: :func:`clipped_gradients`, then :func:`update` at learning rate
    ``lr``."""
    clipped_gradients(loss, optimizer, scaler, parameters, clip_norm)
    update(optimizer, scaler, lr)
