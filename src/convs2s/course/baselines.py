"""Tools for comparing ConvS2S with the recurrent baseline fairly (notebook 07; 08 uses
:func:`train_side_by_side`).

Gehring et al. (2017) compare ConvS2S with recurrent translators built on the attention of
Bahdanau, Cho & Bengio (2015). The baseline model itself, :class:`RNNAttentionSeq2Seq`, lives in
:mod:`convs2s.model.rnn` (the model layer) and is re-exported here. This module holds what a fair
comparison needs:

- :func:`rnn_parameter_count` (the count as a formula) and :func:`matched_rnn_config` (the
  hidden size whose parameter count is closest to a given ConvS2S's), so that comparisons are
  at matched size.
- :func:`train_side_by_side`: trains several models in one process, interleaving their steps on
  the same sequence of batches with the same optimizer settings, for a fixed number of steps
  each (speed) or an equal training-time budget each (quality at equal wall time).
- :func:`training_flops`: the arithmetic of one training step, counted.
- :func:`decoding_speed`: sentences per second of greedy decoding or beam search.

Checkpoints of any of the course's model classes are written and read by
:class:`convs2s.run.checkpoint.Checkpoint` (its ``model_class`` entry names the class).

The recurrent decoder computes s_i from s_{i-1}: even with teacher forcing, where every input
token is known, the steps run one after the other (a Python loop over target positions).
ConvS2S's decoder has no such loop in training: all positions go through each convolution at
once.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from convs2s.model.loss import evaluate_loss, next_token_loss, sequence_loss
from convs2s.model.rnn import (
    AdditiveAttention,
    RNNAttentionSeq2Seq,
    RNNDecoder,
    RNNEncoder,
    RNNEncoderOut,
)
from convs2s.model.search import beam_search, greedy_decode
from convs2s.run.precision import mixed_precision, optimizer_step

__all__ = [
    "AdditiveAttention",
    "RNNEncoder",
    "RNNEncoderOut",
    "RNNDecoder",
    "RNNAttentionSeq2Seq",
    "rnn_parameter_count",
    "matched_rnn_config",
    "RunLog",
    "train_side_by_side",
    "decoding_speed",
    "training_flops",
]


# --------------------------------------------------------------------------------------------
# Parameter counts and matching
# --------------------------------------------------------------------------------------------


def _gru_parameters(input_size: int, hidden: int) -> int:
    # three gates (reset, update, candidate), each with input and hidden weights and two biases
    return 3 * hidden * (input_size + hidden) + 6 * hidden


def rnn_parameter_count(
    src_vocab_size: int,
    trg_vocab_size: int,
    *,
    emb_dim: int = 256,
    enc_hid_dim: int = 512,
    dec_hid_dim: int = 512,
    attn_dim: int | None = None,
    out_dim: int | None = None,
    **_ignored,
) -> int:
    """The parameter count of :class:`RNNAttentionSeq2Seq`, from the formula (accepts a config).

    encoder embedding V_s·E + bidirectional GRU 2·(3H(E + H) + 6H) + W_init (2H·D + D)
    + attention (D·A + 2H·A + A + A) + decoder embedding V_t·E + GRU cell 3D(E + 2H + D) + 6D
    + maxout readout (D + 2H + E)·2O + 2O + output layer O·V_t + V_t.
    """
    E, H, D = emb_dim, enc_hid_dim, dec_hid_dim
    A = D if attn_dim is None else attn_dim
    O = E if out_dim is None else out_dim
    encoder = src_vocab_size * E + 2 * _gru_parameters(E, H) + 2 * H * D + D
    attention = D * A + 2 * H * A + A + A
    decoder = trg_vocab_size * E + _gru_parameters(E + 2 * H, D)
    output = (D + 2 * H + E) * 2 * O + 2 * O + O * trg_vocab_size + trg_vocab_size
    return encoder + attention + decoder + output


def matched_rnn_config(
    target_parameters: int,
    src_vocab_size: int,
    trg_vocab_size: int,
    *,
    src_pad_idx: int,
    trg_pad_idx: int,
    emb_dim: int = 256,
    dropout: float = 0.25,
    max_positions: int = 128,
    multiple_of: int = 8,
) -> dict:
    """The :class:`RNNAttentionSeq2Seq` config closest in parameters to ``target_parameters``.

    Embedding size is fixed (use the ConvS2S model's ``emb_dim``), and so is the maxout
    output size (``out_dim = emb_dim``, as ConvS2S projects to ``emb_dim`` before its output
    layer); the encoder's GRU size per direction H, the decoder's D and the attention size A
    are set to one hidden size ``hid = H = D = A`` (a multiple of ``multiple_of``), the one
    whose count is closest. The result equals ``RNNAttentionSeq2Seq(**config).config``.
    """
    if target_parameters < 1:
        raise ValueError(f"target_parameters={target_parameters} must be positive.")

    def config(hid: int) -> dict:
        return dict(src_vocab_size=src_vocab_size, trg_vocab_size=trg_vocab_size,
                    emb_dim=emb_dim, enc_hid_dim=hid, dec_hid_dim=hid, attn_dim=hid,
                    out_dim=emb_dim, dropout=dropout, max_positions=max_positions,
                    src_pad_idx=src_pad_idx, trg_pad_idx=trg_pad_idx)

    best = min(range(multiple_of, 8192 + 1, multiple_of),
               key=lambda h: abs(rnn_parameter_count(**config(h)) - target_parameters))
    return config(best)


# --------------------------------------------------------------------------------------------
# Training several models under equal conditions
# --------------------------------------------------------------------------------------------


Batches = Sequence[tuple[Tensor, Tensor]] | Callable[[int], Sequence[tuple[Tensor, Tensor]]]
"""A list of ``(src, trg)`` batches (cycled), or a function ``epoch -> list of batches``."""


@dataclass
class RunLog:
    """What :func:`train_side_by_side` measured for one model."""

    name: str
    parameters: int
    steps: int = 0
    seconds: float = 0.0  # time spent in training steps only (evaluation excluded)
    tokens: int = 0  # real (non-pad) target tokens trained on
    history: list[dict] = field(default_factory=list)  # {"seconds","steps","valid_loss",...}

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_side_by_side(
    models: dict[str, nn.Module],
    batches: Batches | dict[str, Batches],
    *,
    pad_idx: int,
    seconds: float | None = None,
    steps: int | None = None,
    valid_batches: Sequence[tuple[Tensor, Tensor]] | None = None,
    eval_every: float | None = None,
    lr: float = 2e-3,
    warmup_steps: int = 100,
    weight_decay: float = 1e-4,
    clip_norm: float = 0.1,
    label_smoothing: float = 0.1,
    device: torch.device | str = "cpu",
    amp: bool = False,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, RunLog]:
    """Train every model in ``models`` under identical conditions, interleaved in one process.

    Every model sees the same sequence of ``(src, trg)`` batches (``batches``: a list that is
    cycled, or ``epoch -> list``; a dict ``{name: batches}`` gives each model its own stream,
    e.g. to compare data augmentations), with the same optimizer and settings as
    :mod:`convs2s.run.train` (AdamW, betas (0.9, 0.98), linear warm-up then constant ``lr``,
    gradient clipping at ``clip_norm``, label smoothing) and its optimizer step
    (:func:`convs2s.run.precision.optimizer_step`). Each step is timed on its own; the next step
    always goes to the model that has used the *least* training time so far, so the models'
    clocks advance together and a slow-down of the machine hits all of them alike.

    Give ``steps`` (each model does exactly that many steps on batches 0..steps-1: a speed
    measurement) and/or ``seconds`` (each model trains until it has used that much training
    time: quality at equal wall time). With ``valid_batches``, the validation loss
    (per-token cross-entropy, no smoothing) is measured every ``eval_every`` seconds of each
    model's training time and at the end; evaluation time is not counted.

    ``amp=True`` trains in mixed precision on CUDA exactly as :mod:`convs2s.run.train` does
    (:func:`convs2s.run.precision.mixed_precision`: bfloat16, or float16 with loss scaling on GPUs
    without native bfloat16 such as a T4).
    Returns ``{name: RunLog}``.
    """
    if seconds is None and steps is None:
        raise ValueError("Give steps (a speed measurement) and/or seconds (equal time budget).")
    if not models:
        raise ValueError("models is empty.")
    device = torch.device(device)
    precision = mixed_precision(device, amp)
    streams = batches if isinstance(batches, dict) else {name: batches for name in models}
    if set(streams) != set(models):
        raise ValueError(f"batches has streams for {sorted(streams)}, models are "
                         f"{sorted(models)}.")
    epochs: dict[tuple[int, int], Sequence] = {}  # (id of the stream, epoch) -> its batches

    def batch_at(name: str, i: int):
        # the i-th batch of the model's stream (cycling through epochs); shared streams are
        # computed once, so every model gets the very same tensors
        stream = streams[name]
        get_epoch = stream if callable(stream) else (lambda _epoch: stream)
        epoch, n = 0, 0
        while True:
            key = (id(stream), epoch)
            if key not in epochs:
                epochs[key] = get_epoch(epoch)
            size = len(epochs[key])
            if size == 0:
                raise ValueError(f"the batches for {name} are empty.")
            if i < n + size:
                return epochs[key][i - n]
            n += size
            epoch += 1

    torch.manual_seed(seed)
    logs, optims, scalers = {}, {}, {}
    for name, model in models.items():
        scalers[name] = precision.scaler()
        model.to(device).train()
        logs[name] = RunLog(name, sum(p.numel() for p in model.parameters() if p.requires_grad))
        optims[name] = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98),
                                         weight_decay=weight_decay)
    next_eval = {name: eval_every for name in models}

    def evaluate(name: str) -> None:
        if valid_batches is None:
            return
        model, run = models[name], logs[name]
        with precision.autocast():
            loss = evaluate_loss(model, valid_batches, pad_idx, device)
        run.history.append({"seconds": run.seconds, "steps": run.steps, "valid_loss": loss,
                            "valid_ppl": math.exp(min(loss, 50.0))})
        if log is not None:
            log(f"{name:>12}: {run.steps:5d} steps  {run.seconds:7.1f} s  valid loss "
                f"{loss:.3f}  ppl {math.exp(min(loss, 50.0)):8.2f}")

    def done(run: RunLog) -> bool:
        return (steps is not None and run.steps >= steps) or (
            seconds is not None and run.seconds >= seconds)

    if valid_batches is not None and eval_every is not None:
        for name in models:
            evaluate(name)
    while True:
        live = [name for name in models if not done(logs[name])]
        if not live:
            break
        name = min(live, key=lambda n: (logs[n].seconds, list(models).index(n)))
        model, run, optimizer = models[name], logs[name], optims[name]
        src, trg = batch_at(name, run.steps)
        _sync(device)
        t0 = time.perf_counter()
        src, trg = src.to(device), trg.to(device)
        loss = next_token_loss(model, src, trg, pad_idx, label_smoothing, precision.autocast())
        optimizer_step(loss, optimizer, scalers[name], model.parameters(), clip_norm,
                       lr * min(1.0, (run.steps + 1) / max(warmup_steps, 1)))
        loss_value = loss.item()  # also waits for the GPU
        _sync(device)
        run.seconds += time.perf_counter() - t0
        run.steps += 1
        run.tokens += int((trg[:, 1:] != pad_idx).sum())
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"{name}: the training loss became {loss_value} at step "
                                     f"{run.steps}; lower lr.")
        if next_eval[name] is not None and run.seconds >= next_eval[name] and not done(run):
            evaluate(name)
            next_eval[name] += eval_every
    for name in models:
        evaluate(name)
        models[name].eval()
    return logs


def training_flops(
    model: nn.Module, src: Tensor, trg: Tensor, *, pad_idx: int, label_smoothing: float = 0.1
) -> dict[str, float]:
    """Floating-point operations of one training step (forward + backward) on one batch.

    Counted with :class:`torch.utils.flop_counter.FlopCounterMode`, which adds up the matrix
    products and convolutions (including those inside ``nn.GRU``/``nn.GRUCell``), i.e. nearly
    all of the arithmetic; element-wise work (GLU, softmax, dropout) is not counted. The step
    runs on a CPU copy of ``model``, so the model's weights and gradients are untouched. The
    count does not depend on the device, and on the CPU the GRU runs as matrix products the
    counter sees (on a GPU, cuDNN's fused GRU kernel would be invisible to it).

    Returns ``{"flops": total, "tokens": real target tokens, "flops_per_token": ...}``. Padding
    positions are computed too, so ``flops_per_token`` is per *real* token, the same unit as the
    tokens/s of :func:`train_side_by_side`: tokens/s x flops/token = arithmetic rate achieved.
    """
    twin = copy.deepcopy(model).cpu().train()
    src, trg = src.cpu(), trg.cpu()
    trg_in, trg_out = trg[:, :-1], trg[:, 1:]
    tokens = int((trg_out != pad_idx).sum())
    if tokens == 0:
        raise ValueError("the batch has no real target tokens (all padding).")
    with FlopCounterMode(display=False) as counter:
        logits, _ = twin(src, trg_in)
        sequence_loss(logits, trg_out, pad_idx, label_smoothing).backward()
    flops = float(counter.get_total_flops())
    return {"flops": flops, "tokens": tokens, "flops_per_token": flops / tokens}


def decoding_speed(
    model: nn.Module,
    src_batches: Sequence[Tensor],
    *,
    bos_idx: int,
    eos_idx: int | None,
    max_len: int,
    beam_size: int = 1,
    device: torch.device | str = "cpu",
) -> dict:
    """Translate every batch of ``src_batches`` and measure sentences per second.

    ``beam_size=1`` uses :func:`convs2s.model.search.greedy_decode`, otherwise
    :func:`convs2s.model.search.beam_search` (both incremental). ``eos_idx=None`` switches <eos> off
    (no token can end a sentence), so every sentence gets exactly ``max_len`` output tokens:
    two models then do the same number of decoding steps, whatever they have learned (an
    undertrained model may stop much earlier or later than another one).

    Returns ``{"sentences", "seconds", "sentences_per_s", "output_tokens", "outputs"}``
    (``outputs``: token-id lists in batch order).
    """
    if eos_idx is None:
        eos_idx = -1  # no token id is -1: decoding never stops early
    device = torch.device(device)
    model.to(device)
    outputs: list[list[int]] = []
    seconds, sentences = 0.0, 0
    for src in src_batches:
        src = src.to(device)
        _sync(device)
        t0 = time.perf_counter()
        if beam_size == 1:
            ids = greedy_decode(model, src, max_len=max_len, bos_idx=bos_idx, eos_idx=eos_idx)
        else:
            ids = beam_search(model, src, beam_size=beam_size, max_len=max_len,
                              bos_idx=bos_idx, eos_idx=eos_idx)
        _sync(device)
        seconds += time.perf_counter() - t0
        sentences += src.size(0)
        outputs.extend(ids)
    return {"sentences": sentences, "seconds": seconds,
            "sentences_per_s": sentences / seconds if seconds > 0 else float("nan"),
            "output_tokens": sum(len(o) for o in outputs), "outputs": outputs}
