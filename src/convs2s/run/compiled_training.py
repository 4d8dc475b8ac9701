"""The compiled training step (``Preset.compile``, ``--compile``): the model under
``torch.compile``, and the loss computed so that one graph serves batches of every shape.

:func:`compile_for_training` compiles; :func:`compiled_loss` is the loss the eager step's
:func:`~convs2s.model.loss.next_token_loss` computes, for the compiled model;
:func:`static_shapes` pads a batch to one of a few shapes for the modes that replay CUDA graphs.
The trainer (:mod:`convs2s.run.train`) chooses between the eager and the compiled step.
"""

from __future__ import annotations

import torch
from torch.fx.experimental import _config as fx_config

from convs2s.model.loss import rdrop_loss, sequence_loss
from convs2s.system.compiling import check_compiler, check_mode

__all__ = ["LENGTH_MULTIPLE", "compile_for_training", "compiled_loss", "padded_rows",
           "static_shapes"]


# Under torch.compile's CUDA_GRAPH_MODES a graph is recorded once per input shape, and the
# loader's batches come in many shapes (every length, every batch size), so under these modes a
# batch is padded to one of a few shapes first (:func:`static_shapes`).
#: Under CUDA graphs, sentence lengths are padded up to a multiple of this (at most the model's
#: positions): 13 lengths a side for 100 positions, at the price of a few pad positions.
LENGTH_MULTIPLE = 8


def compile_for_training(net: torch.nn.Module, mode: str,
                         device: torch.device | str) -> torch.nn.Module:
    """``net`` compiled for training steps (``torch.compile``, ``mode`` one of
    :data:`~convs2s.system.compiling.COMPILE_MODES`); a ``ValueError`` line first where ``device``
    cannot run compiled kernels (no C++ compiler for a CPU, no Triton for a CUDA GPU).

    The compiled module shares ``net``'s parameters: train it, but save and load ``net``
    itself (the compiled wrapper's state_dict names every key ``_orig_mod.``...).

    ``dynamic=True``: batches differ in size and length from step to step, and a graph compiled
    for one shape (``dynamic=False``) would be compiled again for each new one, until
    torch.compile's recompilation limit sends the rest back to eager. A graph with symbolic
    sizes compiles once; under CUDA graphs each padded shape (:func:`static_shapes`) is then
    recorded once and replayed."""
    check_mode(mode)
    check_compiler(device, "train without --compile")
    return torch.compile(net, mode=mode, dynamic=True)


def compiled_loss(net: torch.nn.Module, src: torch.Tensor, trg: torch.Tensor, *, src_pad: int,
                  trg_pad: int, label_smoothing: float, autocast, max_positions: int,
                  static: bool, rdrop: float = 0.0) -> torch.Tensor:
    """The loss :func:`~convs2s.model.loss.next_token_loss` computes, for a compiled ``net``.

    The output layer runs at every target position, padding included, and the loss ignores the
    padding (``sequence_loss``; the same loss and gradients: ``tests/model/test_loss.py``):
    selecting the real positions first, as the eager step does, gives a tensor whose size
    depends on the batch's values, which splits a compiled graph and defeats CUDA graphs.
    ``static``: pad the batch to a few shapes first (:func:`static_shapes`), and tell the CUDA
    graphs that a new step begins. ``rdrop`` > 0: R-Drop's loss
    (:func:`~convs2s.model.loss.rdrop_loss`), the (padded) batch concatenated with itself.

    Sizes that happen to be equal in the batch that is compiled (as many rows as source
    positions, a source as long as the target) stay distinct symbols: torch.compile would
    otherwise assume them equal ("duck sizing") and compile again at the first batch where
    they are not."""
    if static:
        src, trg = static_shapes(src, trg, src_pad, trg_pad, max_positions)
        torch.compiler.cudagraph_mark_step_begin()
    if rdrop:  # the batch twice: src = [2 * batch, src_len], trg = [2 * batch, trg_len + 1]
        src, trg = torch.cat([src, src]), torch.cat([trg, trg])
    with autocast, fx_config.patch(use_duck_shape=False):
        logits, _ = net(src, trg[:, :-1])  # logits = [batch, trg_len, vocab]
    if rdrop:
        return rdrop_loss(logits, trg[:, 1:], trg_pad, label_smoothing, rdrop)
    return sequence_loss(logits, trg[:, 1:], trg_pad, label_smoothing)


def static_shapes(src: torch.Tensor, trg: torch.Tensor, src_pad: int, trg_pad: int,
                  max_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, trg)`` padded to one of a few shapes, with the same loss and gradients.

    Lengths: the source and the decoder input (``trg[:, :-1]``) up to a multiple of
    :data:`LENGTH_MULTIPLE`, at most ``max_positions``. The encoder masks source padding and
    the decoder is causal with the padding's targets ignored, so added positions change no
    real position's output. Rows: up to :func:`padded_rows`; an added row is the first row's
    source (an all-padding source would make its attention NaN, and NaN times a zero gradient
    is NaN) with a target of padding only, so it adds nothing to the loss or its gradients
    (rows never mix)."""
    (rows, s_len), t_len = src.shape, trg.size(1)
    s_new = max(s_len, min(_round_up(s_len, LENGTH_MULTIPLE), max_positions))
    t_new = max(t_len - 1, min(_round_up(t_len - 1, LENGTH_MULTIPLE), max_positions)) + 1
    r_new = padded_rows(rows)
    if (r_new, s_new, t_new) == (rows, s_len, t_len):
        return src, trg
    src_out = src.new_full((r_new, s_new), src_pad)
    src_out[:rows, :s_len] = src
    src_out[rows:, :s_len] = src[:1]
    trg_out = trg.new_full((r_new, t_new), trg_pad)
    trg_out[:rows, :t_len] = trg
    return src_out, trg_out


def padded_rows(n: int) -> int:
    """``n`` rounded up to one of 8 sizes per doubling (1 to 16, then 18, 20, ..., 32, 36, ...):
    at most an eighth more rows, and a few dozen sizes for any batch the loader makes."""
    return _round_up(n, 1 << max(n.bit_length() - 4, 0))


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
