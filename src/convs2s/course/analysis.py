"""Measuring a trained translator: the helpers behind notebooks 05 and 06.

Used by notebooks 05 and 06; 07 and 08 use its timing (:func:`time_call`), 07
:func:`forced_attention` and 08 :func:`plot_conv_costs`.

- where the course keeps its runs: :func:`run_dir`, :func:`find_best_checkpoint`;
- how attention formed during training (notebook 05's widget): :func:`attention_by_epoch`,
  :func:`plot_attention_epoch` and the line under it, :func:`attention_epoch_line`;
- what a model is made of: :func:`parameter_groups`, :func:`plot_parameter_groups`;
- how training went: :func:`perplexity`, :func:`plot_history`;
- how fast something runs: :func:`time_call`; what a separable convolution saves (notebook
  08's widget): :func:`plot_conv_costs`;
- what a translation scores and why: :func:`sequence_logprob`, :func:`unknown_rate`,
  :func:`sentence_bleu`, :func:`bleu_by_group`, :func:`bleu_by_length`, :func:`plot_bleu_groups`;
- the interactive translator of notebook 06: :func:`forced_attention`,
  :func:`translate_for_display` (returns a dict; all-lower-case or all-caps input gets the case
  the model knows, :func:`input_casing`) and :func:`plot_translation`; its choice of direction
  (the model studied, or another shipped one): :class:`WidgetTranslators`,
  :func:`widget_directions`, :func:`widget_inputs`, :func:`translation_lines`,
  :func:`widget_outputs`; and what the
  manifest records of each shipped model: :func:`shipped_models_table`.

Everything returns plain numbers, dicts and tensors; the plotting helpers draw on axes or a
figure you pass in (or make a new one). matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from convs2s.course.attention_maps import plot_attention_grid

__all__ = [
    "PARAMETER_GROUPS",
    "runs_root",
    "in_colab",
    "keep_runs_on_drive",
    "run_dir",
    "checkpoint_search_order",
    "find_best_checkpoint",
    "find_checkpoint",
    "StudiedModel",
    "studied_model",
    "attention_by_epoch",
    "plot_attention_epoch",
    "attention_epoch_line",
    "plot_conv_costs",
    "display_path",
    "parameter_group",
    "parameter_groups",
    "plot_parameter_groups",
    "perplexity",
    "plot_history",
    "Timing",
    "time_call",
    "unknown_rate",
    "sentence_bleu",
    "length_bucket",
    "bleu_by_group",
    "bleu_by_length",
    "plot_bleu_groups",
    "sequence_logprob",
    "forced_attention",
    "input_casing",
    "translate_for_display",
    "plot_translation",
    "WIDGET_SENTENCES",
    "language_name",
    "direction_name",
    "widget_directions",
    "widget_inputs",
    "WidgetTranslators",
    "translation_lines",
    "widget_outputs",
    "shipped_models_table",
]

# --------------------------------------------------------------------------------------------
# Where runs live
# --------------------------------------------------------------------------------------------


def runs_root() -> Path:
    """The folder for training runs: ``CONVS2S_RUNS_DIR``, else ``runs`` (relative to the cwd)."""
    return Path(os.environ.get("CONVS2S_RUNS_DIR", "").strip() or "runs")


#: Where Colab mounts Google Drive, and the folder of it that keeps the course's runs.
DRIVE_MOUNT = "/content/drive"
DRIVE_RUNS = "MyDrive/convs2s/runs"


def in_colab() -> bool:
    """Whether this kernel runs on Google Colab."""
    import sys

    return "google.colab" in sys.modules


def keep_runs_on_drive(enabled: bool, *, colab: bool | None = None,
                       mount: Callable[[str], object] | None = None,
                       mount_point: str | os.PathLike = DRIVE_MOUNT) -> str:
    """The one Drive cell of notebooks 05 and 06 (off by default): on Colab with ``enabled``,
    mount Google Drive and keep the runs in ``MyDrive/convs2s/runs`` (``CONVS2S_RUNS_DIR``),
    where a later runtime, notebook 06's, finds notebook 05's run. Returns the line the cell
    prints; anywhere but Colab it changes nothing. ``mount``: Colab's ``drive.mount``."""
    colab = in_colab() if colab is None else colab
    if not enabled:
        lost = " (on Colab they are gone when the runtime ends)" if colab else ""
        return f"runs are kept in {display_path(runs_root())}{lost}"
    if not colab:
        return f"keeping runs on Google Drive is for Colab; here they stay in " \
               f"{display_path(runs_root())}"
    if mount is None:
        from google.colab import drive  # only on Colab

        mount = drive.mount
    mount(str(mount_point))
    folder = Path(mount_point) / DRIVE_RUNS
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["CONVS2S_RUNS_DIR"] = str(folder)
    return f"runs are kept on your Google Drive: {folder}"


def run_dir(preset_name: str, root: str | os.PathLike | None = None) -> Path:
    """Where notebook 05 writes the run of preset ``preset_name``: ``<root>/05_<name>``."""
    if not isinstance(preset_name, str) or not preset_name:
        raise ValueError(f"preset_name must be a preset's name such as 'quick', not "
                         f"{preset_name!r}.")
    return (Path(root) if root is not None else runs_root()) / f"05_{preset_name}"


def checkpoint_search_order(quick: bool) -> list[str]:
    """Presets whose runs notebook 06 looks for, best first: notebook 05's subword presets,
    then the word-level ones of earlier versions of it; quick mode -> only the quick ones."""
    if quick:
        return ["quick_subword", "quick"]
    return ["gpu_subword", "cpu_subword", "gpu", "cpu"]


def find_best_checkpoint(quick: bool, root: str | os.PathLike | None = None) -> Path | None:
    """The first ``best.pt`` in :func:`checkpoint_search_order`'s runs, or None if none exists."""
    for name in checkpoint_search_order(quick):
        path = run_dir(name, root) / "best.pt"
        if path.is_file():
            return path
    return None


def find_checkpoint(quick: bool, root: str | os.PathLike | None = None) -> Path | None:
    """The model the first run in :func:`checkpoint_search_order` ended with: its ``final.pt``
    (the last epochs averaged and the length penalty chosen on validation, see
    :mod:`convs2s.run.final_choices`) where it made one, else its ``best.pt``; None if there is
    no run.

    ``CONVS2S_CHECKPOINT`` names a checkpoint file to use instead of searching (your own run,
    or a trained model for a quick-mode notebook); ``ValueError`` if it is not a file."""
    chosen = os.environ.get("CONVS2S_CHECKPOINT", "").strip()
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            what = "a folder" if path.is_dir() else "not a file"
            raise ValueError(f"CONVS2S_CHECKPOINT={chosen!r} is {what}: name a checkpoint file "
                             "such as runs/05_cpu_subword/final.pt, or unset it.")
        return path
    for name in checkpoint_search_order(quick):
        for file in ("final.pt", "best.pt"):
            path = run_dir(name, root) / file
            if path.is_file():
                return path
    return None


@dataclass(frozen=True)
class StudiedModel:
    """The trained model a notebook studies (made for notebook 06), and where it came from."""

    checkpoint: object  # convs2s.run.checkpoint.Checkpoint
    path: Path
    own: bool  # the learner's own run of notebook 05 (else the model shipped with the package)
    epochs: int | None  # epochs of training behind its weights (an average: its last epoch)
    summary: str  # one line saying which model this is, for the notebook to print


def studied_model(quick: bool, root: str | os.PathLike | None = None,
                  models_dir: str | os.PathLike | None = None) -> StudiedModel:
    """The learner's own run of notebook 05 for this mode (:func:`find_checkpoint`: its
    ``final.pt``, else ``best.pt``; or ``CONVS2S_CHECKPOINT``), else the course's trained model
    shipped with the package (:func:`convs2s.run.pretrained.pretrained_checkpoint`), never a
    quick model trained on the spot; ``summary`` says which."""
    from convs2s.run import pretrained
    from convs2s.run.checkpoint import Checkpoint

    path = find_checkpoint(quick, root)
    if path is not None:
        ckpt = Checkpoint.load(path)
        epochs = ckpt.history[-1]["epoch"] if ckpt.history else ckpt.epoch
        # final.pt keeps best.pt's history; averaged weights include later epochs than that
        averaged = (ckpt.choices or {}).get("epochs") or []
        if averaged:
            epochs = max(epochs or 0, *averaged)
        return StudiedModel(ckpt, path, True, epochs,
                            f"your run of notebook 05: {display_path(path)}"
                            + (f" ({epochs} epoch{'s' if epochs != 1 else ''})"
                               if epochs else ""))
    where = {} if models_dir is None else {"models_dir": models_dir}
    ckpt = pretrained.pretrained_checkpoint("de-en", **where)
    rec = pretrained.record("de-en", **where)
    training = rec.get("training", {})
    epochs = training.get("epochs")
    done = ", ".join(x for x in (f"{epochs} epochs" if epochs else "",
                                 f"{training['hours']:g} h" if training.get("hours") else "",
                                 f"on {training['machine']}" if training.get("machine") else "")
                     if x)
    return StudiedModel(ckpt, pretrained.pretrained_path("de-en", **where), False, epochs,
                        "no run of notebook 05 here: the course's trained model, shipped with "
                        f"the package (convs2s.pretrained('de-en'), preset "
                        f"{rec.get('preset')!r}" + (f", {done}" if done else "") + ")")


def attention_by_epoch(history: Sequence[dict]) -> list[tuple[int, torch.Tensor]]:
    """``(epoch, attention [layers, trg_len, src_len])`` for each epoch of a run's history that
    recorded the watched sentence's attention (:mod:`convs2s.course.watching_attention`: the
    first validation pair under teacher forcing), in order."""
    out = []
    for row in history:
        maps = row.get("attention")
        if maps:
            out.append((int(row["epoch"]), torch.tensor(maps, dtype=torch.float32)))
    return out


def plot_attention_epoch(history: Sequence[dict], watched: dict, index: int, *, fig=None,
                         max_width: float = 7.8):
    """Notebook 05's widget: every decoder layer's attention on the watched sentence after the
    ``index``-th recorded epoch (0-based; see :func:`attention_by_epoch`), one heatmap per
    layer on one colour scale, titled with the epoch and its validation loss."""
    epochs = attention_by_epoch(history)
    if not epochs:
        raise ValueError("this run's history records no attention (trained before convs2s "
                         "recorded it); train again to watch attention learn.")
    if not 0 <= index < len(epochs):
        raise ValueError(f"index must be from 0 to {len(epochs) - 1}, not {index!r}.")
    epoch, maps = epochs[index]
    row = next(r for r in history if r.get("epoch") == epoch)
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure()
    else:
        fig.clf()  # a widget redraws into the same figure
    # as the translator's widget: constrained layout leaves room for the rotated token labels,
    # the colour bar and the titles, and the figure gets the size its heatmaps need
    fig.set_layout_engine("constrained")
    layers, trg_len, src_len = maps.shape
    cell = 0.28  # inches per token
    ncols = min(layers, max(1, int(max_width // max(cell * src_len + 1.0, 1.9))))
    nrows = math.ceil(layers / ncols)
    label_room = 0.09 * max(len(t) for t in watched["src"]) + 0.6  # rotated source labels
    fig.set_size_inches(max(2.5, cell * src_len + 1.2) * ncols,
                        (max(1.5, cell * trg_len) + label_room) * nrows + 0.5)
    fig = plot_attention_grid(maps, watched["src"], watched["trg"], fig=fig, ncols=ncols,
                              titles=[f"layer {i + 1}" for i in range(layers)])
    fig.suptitle(f"epoch {epoch} of {epochs[-1][0]}: validation loss {row['valid_loss']:.3f}")
    return fig


def attention_epoch_line(recorded: Sequence[tuple[int, torch.Tensor]], index: int) -> str:
    """The line notebook 05's widget prints under :func:`plot_attention_epoch`'s figure: each
    decoder layer's largest attention weight after the ``index``-th recorded epoch (0-based, as
    :func:`plot_attention_epoch`), then after the first recorded one, each labelled with the
    number of the epoch that recorded it (not its place in ``recorded``: a run may record only
    some epochs). ``recorded``: :func:`attention_by_epoch`'s list. Pure.

    ``"epoch 15: largest weight per layer 0.81, 1.00, 0.99, 1.00 (epoch 1: 0.83, 0.84, 0.96,
    1.00)"``."""
    if not recorded:
        raise ValueError("this run's history records no attention (trained before convs2s "
                         "recorded it); train again to watch attention learn.")
    if not 0 <= index < len(recorded):
        raise ValueError(f"index must be from 0 to {len(recorded) - 1}, not {index!r}.")

    def largest(maps) -> str:  # [layers, trg_len, src_len] -> "0.81, 1.00, ..."
        peaks = torch.as_tensor(maps).amax(dim=(1, 2)).tolist()
        return ", ".join(f"{w:.2f}" for w in peaks)

    (first_epoch, first), (epoch, now) = recorded[0], recorded[index]
    return (f"epoch {epoch}: largest weight per layer {largest(now)} "
            f"(epoch {first_epoch}: {largest(first)})")


def plot_conv_costs(channels: int, kernel_size: int):
    """Notebook 08's widget: the parameters of one convolution from ``channels`` to
    ``2 * channels`` channels of width ``kernel_size``, standard against depthwise-separable
    (:func:`convs2s.model.variants.conv_costs`), as two horizontal bars, titled with both
    ratios (:func:`convs2s.model.variants.costs_title`). Returns the new figure."""
    import matplotlib.pyplot as plt

    from convs2s.model.variants import conv_costs, costs_title

    costs = conv_costs(channels, 2 * channels, kernel_size)
    fig, ax = plt.subplots(figsize=(5.5, 2.6), dpi=100)
    ax.barh(["standard", "depthwise-separable"],
            [costs["standard_parameters"], costs["separable_parameters"]], color=["C0", "C2"])
    ax.set_xlabel(f"parameters of one conv, {channels} -> {2 * channels} channels")
    ax.set_title(costs_title(costs, kernel_size), fontsize=10)
    fig.tight_layout()
    return fig


def display_path(path: str | os.PathLike, start: str | os.PathLike | None = None) -> str:
    """``path`` as a notebook prints it, without the machine's absolute folders.

    A relative path is shown as it is (it is relative to the notebook's folder already). An
    absolute one is shown relative to ``start`` (default: the current folder, the notebook's)
    when it lies below it; else relative to ``$CONVS2S_RUNS_DIR`` when that is set and holds
    it (``$CONVS2S_RUNS_DIR/05_cpu/best.pt``); else by its file name only.
    """
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    for root, prefix in ((Path(start) if start is not None else Path.cwd(), ""),
                         (os.environ.get("CONVS2S_RUNS_DIR", "").strip(), "$CONVS2S_RUNS_DIR/")):
        if not root:
            continue
        try:
            relative = p.resolve().relative_to(Path(root).resolve())
        except ValueError:
            continue
        return prefix + relative.as_posix() if relative.parts else prefix.rstrip("/") or "."
    return p.name


# --------------------------------------------------------------------------------------------
# Parameters by component
# --------------------------------------------------------------------------------------------

#: (group name, parameter-name prefixes) in display order; names are ``ConvS2S`` module paths.
PARAMETER_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("encoder embeddings", ("encoder.tok_embedding.", "encoder.pos_embedding.")),
    ("encoder emb↔hid maps", ("encoder.emb2hid.", "encoder.hid2emb.")),
    ("encoder convolutions", ("encoder.blocks.",)),
    ("decoder embeddings", ("decoder.tok_embedding.", "decoder.pos_embedding.")),
    ("decoder emb↔hid maps", ("decoder.emb2hid.", "decoder.hid2emb.")),
    ("decoder convolutions", ("decoder.blocks.",)),
    ("attention", ("decoder.attentions.",)),
    ("output projection", ("decoder.fc_out.",)),
)


def parameter_group(name: str) -> str:
    """The :data:`PARAMETER_GROUPS` group of a parameter name (``"other"`` if none matches)."""
    for group, prefixes in PARAMETER_GROUPS:
        if name.startswith(prefixes):
            return group
    return "other"


def _check_model(model, who: str) -> None:
    """``TypeError`` (one line) unless ``model`` is a torch module: a Translator names its
    ``.model``."""
    if not isinstance(model, nn.Module):
        hint = (": pass its .model (translator.model)"
                if isinstance(getattr(model, "model", None), nn.Module) else "")
        raise TypeError(f"{who} takes the model (a ConvS2S), not {type(model).__name__}{hint}.")


def parameter_groups(model: nn.Module, trainable_only: bool = True) -> dict[str, int]:
    """Parameter counts of a ``ConvS2S`` by component, in :data:`PARAMETER_GROUPS` order.

    The values add up to ``count_parameters(model)``. Weight-normalised layers contribute both
    their direction ``v`` and their gain ``g``. A group ``"other"`` appears only if some
    parameter fits none of the groups.
    """
    _check_model(model, "parameter_groups")
    counts = {group: 0 for group, _ in PARAMETER_GROUPS}
    for name, p in model.named_parameters():
        if trainable_only and not p.requires_grad:
            continue
        group = parameter_group(name)
        counts[group] = counts.get(group, 0) + p.numel()
    return counts


def plot_parameter_groups(groups: dict[str, int], *, ax=None, title: str | None = None):
    """Horizontal bar chart of :func:`parameter_groups` (millions, with shares). Returns ax."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.5, 3.2))
    names = list(groups)
    values = [groups[n] / 1e6 for n in names]
    total = sum(groups.values()) or 1
    bars = ax.barh(range(len(names)), values, color="#1f77b4")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlabel("parameters (millions)")
    for bar, n in zip(bars, names, strict=True):
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2,
                f" {groups[n] / total:.0%}", va="center", fontsize=9)
    ax.set_xlim(0, max(values, default=1) * 1.18 or 1)
    ax.set_title(title if title is not None else f"{total:,} parameters")
    return ax


# --------------------------------------------------------------------------------------------
# Training curves
# --------------------------------------------------------------------------------------------


def perplexity(loss: float) -> float:
    """exp(mean per-token cross-entropy in nats), capped at exp(50) to stay finite."""
    return math.exp(min(float(loss), 50.0))


def plot_history(history: Sequence[dict], *, axes=None, best_epoch: int | None = None):
    """Loss (train and valid) and validation perplexity per epoch, from ``TrainResult.history``.

    ``axes``: two matplotlib axes (a new 1x2 figure otherwise). The epoch of the lowest
    validation loss (``best_epoch``, found when not given) is marked on both. Returns the axes.
    """
    if not history:
        raise ValueError("history is empty: no epoch has finished yet.")
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    ax_loss, ax_ppl = axes
    epochs = [row["epoch"] for row in history]
    if best_epoch is None:
        best_epoch = min(history, key=lambda row: row["valid_loss"])["epoch"]
    ax_loss.plot(epochs, [r["train_loss"] for r in history], "o-",
                 label="train (label-smoothed)")
    ax_loss.plot(epochs, [r["valid_loss"] for r in history], "o-", label="valid")
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("cross-entropy per token (nats)")
    ax_loss.set_title("loss")
    ax_ppl.plot(epochs, [r["valid_ppl"] for r in history], "o-", color="C1")
    ax_ppl.set_yscale("log")
    ax_ppl.set_xlabel("epoch")
    ax_ppl.set_ylabel("validation perplexity (log scale)")
    ax_ppl.set_title("perplexity = exp(valid loss)")
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.axvline(best_epoch, color="grey", linestyle=":", label=f"best (epoch {best_epoch})")
        ax.legend(fontsize=9)
    return axes


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    median: float  # seconds
    best: float
    runs: tuple[float, ...]

    def __str__(self) -> str:
        return (f"{self.median * 1e3:.1f} ms (median of {len(self.runs)}, "
                f"best {self.best * 1e3:.1f})")


def time_call(fn: Callable[[], object], *, repeat: int = 3, warmup: int = 1) -> Timing:
    """Wall-clock time of ``fn()``: ``warmup`` untimed calls, then ``repeat`` timed ones.

    CUDA work is synchronised before each clock reading, so GPU timings are real.
    """
    if repeat < 1 or warmup < 0:
        raise ValueError(f"need repeat >= 1 and warmup >= 0, got {repeat} and {warmup}.")

    def sync():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    for _ in range(warmup):
        fn()
    runs = []
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        runs.append(time.perf_counter() - t0)
    return Timing(statistics.median(runs), min(runs), tuple(runs))


# --------------------------------------------------------------------------------------------
# Error analysis
# --------------------------------------------------------------------------------------------


def unknown_rate(tokens: Sequence[str], vocab) -> float:
    """The fraction of ``tokens`` that ``vocab`` does not know (they would become ``<unk>``)."""
    if isinstance(tokens, str):
        raise TypeError("unknown_rate takes a list of tokens, not a string; tokenize first.")
    if not tokens:
        return 0.0
    return sum(t not in vocab for t in tokens) / len(tokens)


def _bleu(smooth: bool):
    import sacrebleu

    if smooth:
        return sacrebleu.metrics.BLEU(tokenize="none", smooth_method="exp",
                                      effective_order=True, force=True)
    return sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)


def sentence_bleu(hyp_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float:
    """Smoothed BLEU (0-100) of one token list against one reference token list.

    Single sentences often have no matching 4-gram, which makes unsmoothed BLEU 0; sacreBLEU's
    ``exp`` smoothing with effective order keeps the score informative. Use it to rank or
    group sentences; report corpus BLEU (:func:`convs2s.run.metrics.corpus_bleu`) as the result.
    """
    for name, x in (("hyp_tokens", hyp_tokens), ("ref_tokens", ref_tokens)):
        if isinstance(x, str):
            raise TypeError(f"{name} must be a list of tokens, not a string.")
    return _bleu(True).sentence_score(" ".join(hyp_tokens), [" ".join(ref_tokens)]).score


def length_bucket(n: int, edges: Sequence[int]) -> str:
    """The label of the bucket ``n`` falls in: ``edges=(10, 20)`` -> "≤10", "11-20", ">20"."""
    edges = sorted(edges)
    if not edges:
        return "all"
    low = None
    for e in edges:
        if n <= e:
            if low is None:
                return f"≤{e}"
            return f"{low + 1}" if low + 1 == e else f"{low + 1}-{e}"
        low = e
    return f">{edges[-1]}"


def bleu_by_group(
    hyp_tokens: Sequence[Sequence[str]],
    ref_tokens: Sequence[Sequence[str]],
    groups: Sequence[Hashable],
    *,
    order: Iterable[Hashable] | None = None,
) -> list[dict]:
    """Corpus BLEU-4 (tutorial style: tokens, no smoothing) of each group of sentences.

    ``groups[i]`` names the group of sentence ``i``. Returns one dict per group, ``{"group",
    "n", "bleu"}``, in ``order`` (default: first appearance); groups in ``order`` that have
    no sentence are left out.
    """
    if not len(hyp_tokens) == len(ref_tokens) == len(groups):
        raise ValueError(f"need one group and one reference per hypothesis; got "
                         f"{len(hyp_tokens)} hypotheses, {len(ref_tokens)} references and "
                         f"{len(groups)} groups.")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    keys = list(order) if order is not None else list(members)
    metric = _bleu(False)
    rows = []
    for g in keys:
        idx = members.get(g)
        if not idx:
            continue
        hyps = [" ".join(hyp_tokens[i]) for i in idx]
        refs = [" ".join(ref_tokens[i]) for i in idx]
        rows.append({"group": g, "n": len(idx), "bleu": metric.corpus_score(hyps, [refs]).score})
    return rows


def bleu_by_length(
    hyp_tokens: Sequence[Sequence[str]],
    ref_tokens: Sequence[Sequence[str]],
    lengths: Sequence[int],
    edges: Sequence[int] = (10, 15, 20, 25),
) -> list[dict]:
    """:func:`bleu_by_group` with groups = length buckets of ``lengths`` (e.g. source lengths)."""
    edges = sorted(edges)
    labels = [length_bucket(n, edges) for n in lengths]
    order = [length_bucket(e, edges) for e in edges] + [f">{edges[-1]}"] if edges else None
    return bleu_by_group(hyp_tokens, ref_tokens, labels, order=order)


def plot_bleu_groups(rows: Sequence[dict], *, ax=None, xlabel: str = "group",
                     title: str | None = None, color: str = "#1f77b4"):
    """Bar chart of :func:`bleu_by_group` rows, each bar labelled with its sentence count."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6, 3))
    labels = [str(r["group"]) for r in rows]
    bars = ax.bar(range(len(rows)), [r["bleu"] for r in rows], color=color)
    for bar, r in zip(bars, rows, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"n={r['n']}",
                ha="center", va="bottom", fontsize=9)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("corpus BLEU (tutorial tokens)")
    top = max((r["bleu"] for r in rows), default=0.0)
    ax.set_ylim(0, max(1.0, top * 1.2))
    if title:
        ax.set_title(title)
    return ax


# --------------------------------------------------------------------------------------------
# Scoring a given output, and the attention behind it
# --------------------------------------------------------------------------------------------


def _forced(model, src: torch.Tensor, tokens: Sequence[int], bos_idx: int):
    """Logits and attention of ``model`` reading ``<bos> + tokens`` (teacher forcing), eval mode."""
    if src.dim() != 2 or src.size(0) != 1:
        raise ValueError(f"src must be one sentence, [1, src_len]; got {tuple(src.shape)}.")
    trg_in = torch.tensor([[bos_idx, *tokens]], dtype=torch.long, device=src.device)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits, attention = model(src, trg_in)  # [1, n+1, vocab], [1, layers, n+1, src_len]
    finally:
        model.train(was_training)
    return logits, attention


def sequence_logprob(model, src: torch.Tensor, tokens: Sequence[int], *, bos_idx: int,
                     eos_idx: int, include_eos: bool = True) -> float:
    """Σ log p(token) of the output ``tokens`` (ids, no <bos>/<eos>) for source ``src [1, len]``.

    Computed in one teacher-forced pass. With ``include_eos`` the log-probability of ending
    (<eos> after the last token) is added, as beam search scores finished hypotheses; so
    ``score · (len(tokens) + 1) ** length_penalty`` from ``beam_search(..., return_all=True)``
    equals this sum.
    """
    tokens = [int(t) for t in tokens]
    logits, _ = _forced(model, src, tokens, bos_idx)
    log_probs = torch.log_softmax(logits[0].float(), dim=-1)  # [n+1, vocab]
    targets = tokens + [eos_idx] if include_eos else tokens
    picked = log_probs[torch.arange(len(targets)), torch.tensor(targets)]  # [len(targets)]
    return float(picked.sum())


def forced_attention(model, src: torch.Tensor, tokens: Sequence[int], *,
                     bos_idx: int) -> torch.Tensor:
    """Every decoder layer's attention while producing ``tokens`` (ids) from ``src [1, len]``.

    Returns ``[dec_layers, len(tokens), src_len]`` on the CPU: row i is the attention while
    predicting token i, given the tokens before it. Because the decoder is causal, this equals
    the attention recorded during decoding (``greedy_decode(..., return_attention=True)``) for
    the same output, so it shows the attention behind *any* output, e.g. a beam search result.
    """
    _check_model(model, "forced_attention")
    tokens = [int(t) for t in tokens]
    # Row i needs only <bos> and the tokens before token i: an output as long as the model's
    # max_positions still fits (the last token is never an input).
    _, attention = _forced(model, src, tokens[:-1], bos_idx)
    return attention[0, :, : len(tokens)].float().cpu()  # [layers, len(tokens), src_len]


# --------------------------------------------------------------------------------------------
# The interactive translator
# --------------------------------------------------------------------------------------------


def input_casing(translator):
    """How :func:`translate_for_display` restores the case of all-lower-case or all-caps input
    for ``translator``: None for a model that reads lower-cased words (case is lost anyway);
    for a cased one, each word's most frequent casing in the Multi30k training split of its
    source language (:func:`convs2s.data.truecase.multi30k_casing`, where the files are), else
    the casing its subword vocabulary knows best (:func:`convs2s.data.truecase.piece_casing`).
    What each gives on validation and test2016 is measured in ``benchmarks/RESULTS.md``."""
    from convs2s.data.truecase import multi30k_casing, piece_casing

    if not translator.pipeline.cased:
        return None
    table = multi30k_casing(translator.src_lang)
    if table is not None:
        return table
    return piece_casing(translator.src_tokenizer, translator.src_vocab.stoi)


def translate_for_display(translator, sentence: str, beam_size: int = 1, *,
                          casing=False) -> dict:
    """Translate one sentence for display: never raises on bad input.

    Returns ``{"ok", "message", "beam_size", "text", "source", "recased", "source_tokens",
    "tokens", "unknown", "attention"}``: ``source`` is the sentence as translated (``recased``: True
    where that is not the sentence as typed): a cased model trained on captions
    rarely saw lower-case or all-caps text (``ein hund läuft.`` rather than ``Ein Hund läuft.``;
    what that costs the shipped German→English model is measured in ``benchmarks/RESULTS.md``),
    so input that is *entirely* lower-case or upper-case gets the case the model knows
    (:func:`convs2s.data.truecase.truecase` with ``casing``; by default :func:`input_casing`,
    None: as typed); any other input is translated as typed. ``text`` is
    the detokenized translation with ``beam_size``; ``tokens`` its output tokens; ``unknown`` the
    source tokens the vocabulary does not know; ``attention`` the
    ``[dec_layers, len(tokens), len(source_tokens)]`` attention behind that output
    (:func:`forced_attention`). For input the translator refuses (empty, too long, nothing it
    knows: :meth:`~convs2s.run.translator.Translator.source_tokens`) ``ok`` is False,
    ``message`` says why and the fields after ``beam_size`` are empty.
    """
    from convs2s.data.truecase import truecase, uniform_case

    empty = {"beam_size": int(beam_size), "text": "", "source": "", "recased": False,
             "source_tokens": [], "tokens": [], "unknown": [], "attention": torch.zeros(0, 0, 0)}
    typed = sentence
    if isinstance(sentence, str) and uniform_case(sentence):
        casing = input_casing(translator) if casing is False else casing
        if casing is not None:
            sentence = truecase(sentence, casing)
    try:
        source_tokens = translator.source_tokens(sentence)
    except (TypeError, ValueError) as e:
        return {"ok": False, "message": str(e), **empty}
    tokens = translator.translate_tokens([sentence], beam_size=int(beam_size))[0]
    trg_vocab = translator.trg_vocab
    ids = trg_vocab.encode(tokens)
    src = translator._batch([source_tokens])  # [1, src_len]
    attention = forced_attention(translator.model, src, ids, bos_idx=trg_vocab.bos_idx)
    unknown = [t for t in source_tokens if t not in translator.src_vocab]
    return {"ok": True, "message": "", "beam_size": int(beam_size),
            "text": translator.detokenize(tokens), "source": sentence,
            "recased": sentence != typed, "source_tokens": source_tokens, "tokens": tokens,
            "unknown": unknown, "attention": attention}


def plot_translation(result: dict, *, fig=None, ncols: int | None = None,
                     max_width: float = 7.8):
    """Draw :func:`translate_for_display`'s result: one attention heatmap per decoder layer.

    Unknown source words are marked with a trailing ``*``; a sentence whose case was restored
    before translating (``result["recased"]``) is named under the title, as it was read.
    ``fig``: a matplotlib Figure to draw into (cleared first), else a new one. ``max_width``:
    inches the figure may take (7.8 in
    plus the inline backend's 0.1 in padding on each side is 800 px at matplotlib's 100 dpi,
    narrower than a notebook's output area in a 1280 px browser window, so the figure is never
    drawn scaled down). By default the heatmaps fill rows of equal length, as many per row as
    fit (up to 4); a sentence too long for one heatmap of normal cells gets narrower cells (not
    narrower than 0.2 in, where 9 pt labels still fit). Returns the figure.
    """
    import matplotlib.pyplot as plt

    if fig is None:
        fig = plt.figure()
    else:
        fig.clf()
    # constrained layout leaves room for the rotated token labels, the colour bar and the title
    fig.set_layout_engine("constrained")
    if not result["ok"] or not result["tokens"]:
        ax = fig.add_subplot(1, 1, 1)
        ax.axis("off")
        ax.text(0.5, 0.5, result["message"] or "(empty translation: nothing to attend)",
                ha="center", va="center", wrap=True)
        return fig
    unknown = set(result["unknown"])
    src_labels = [f"{t}*" if t in unknown else t for t in result["source_tokens"]]
    attention = result["attention"]
    layers = attention.shape[0]
    cell, margin = 0.28, 1.2  # inches per token; inches for a heatmap's labels and colour bar
    n_src = len(src_labels)
    if margin + cell * n_src > max_width:  # one heatmap would not fit at normal cell size
        cell = max(0.2, (max_width - margin) / n_src)
    column = max(2.5, cell * n_src + margin)
    if ncols is None:  # as many heatmaps per row as fit in max_width, rows as even as can be
        fit = max(1, min(layers, 4, int(max_width // column)))
        ncols = math.ceil(layers / math.ceil(layers / fit))
    nrows = math.ceil(layers / ncols)
    label_room = 0.09 * max(len(t) for t in src_labels) + 0.6  # inches for rotated labels
    fig.set_size_inches(column * ncols,
                        (max(1.5, cell * len(result["tokens"])) + label_room) * nrows + 0.4)
    plot_attention_grid(attention, src_labels, result["tokens"], fig=fig, ncols=ncols)
    for ax in fig.axes:
        ax.tick_params(labelsize=9)  # token labels readable at 100% zoom
    read_as = f"\n(read as: {result['source']})" if result.get("recased") else ""
    fig.suptitle(result["text"] + read_as, fontsize=10)
    return fig


# --------------------------------------------------------------------------------------------
# The translator's directions: the model studied, and the other shipped ones
# --------------------------------------------------------------------------------------------

#: The sentence notebook 06's translator widget starts with, by direction (a caption such as
#: Multi30k's; the website's translator starts with the same: tools/site/translator.py).
WIDGET_SENTENCES = {"de-en": "Ein kleiner Hund spielt im Schnee.",
                    "en-de": "A little dog is playing in the snow."}


def language_name(code: str) -> str:
    """``"German"`` for ``"de"`` (Multi30k's languages); any other code as it is. Pure."""
    from convs2s.data.multi30k import LANGUAGE_NAMES

    return LANGUAGE_NAMES.get(code, code)


def direction_name(direction: str) -> str:
    """``"German → English"`` for ``"de-en"``. Pure."""
    src, _, trg = direction.partition("-")
    return f"{language_name(src)} → {language_name(trg)}"


def widget_directions(first: str, shipped: Iterable[str]) -> list[tuple[str, str]]:
    """The translator widget's menu of directions as ``(label, direction)``: ``first`` (the
    direction of the model the notebook studies), then every other direction of ``shipped``
    (:func:`convs2s.run.pretrained.available`) in its order. Pure."""
    return [(direction_name(d), d) for d in dict.fromkeys([first, *shipped])]


def widget_inputs(direction: str) -> tuple[str, str]:
    """What the widget's text box shows for ``direction``: its label, the source language
    (``"German"``), and the sentence it starts with (:data:`WIDGET_SENTENCES`; empty for a
    direction without one). Pure."""
    return language_name(direction.partition("-")[0]), WIDGET_SENTENCES.get(direction, "")


class WidgetTranslators:
    """The translators of notebook 06's widget, by direction: ``studied`` (the model the notebook
    studies, the learner's run or the shipped one) for its own direction (:attr:`first`); any
    other direction is a shipped model, loaded by ``load`` (default
    :func:`convs2s.run.pretrained.pretrained`, on ``studied``'s device) the first time the
    widget asks for it, then kept: nothing of a direction is read before it is chosen."""

    def __init__(self, studied, load: Callable | None = None):
        self.first = f"{studied.src_lang}-{studied.trg_lang}"
        self._device = getattr(studied, "device", None)
        self._load = load
        self._translators = {self.first: studied}

    @property
    def loaded(self) -> list[str]:
        """The directions whose translators are at hand, in the order they were loaded."""
        return list(self._translators)

    def __call__(self, direction: str):
        """The translator for ``direction`` (loaded now if it is not yet)."""
        if direction not in self._translators:
            if self._load is None:
                from convs2s.run.pretrained import pretrained as load
            else:
                load = self._load
            self._translators[direction] = load(direction, device=self._device)
        return self._translators[direction]


def translation_lines(result: dict, direction: str) -> list[str]:
    """What the widget prints above :func:`translate_for_display`'s ``result`` for
    ``direction``: the translation after its language's name and the beam size that gave it
    (``"English (beam size 5): A dog runs."``: a new beam size often gives the same
    translation, and the label says it was applied), or the reason in parentheses for input
    that cannot be translated; then the source tokens the vocabulary does not know, if any
    (``"unknown German words: …"``). Pure."""
    src, _, trg = direction.partition("-")
    beam = f" (beam size {result['beam_size']})" if result.get("beam_size") else ""
    lines = [f"{language_name(trg)}{beam}: {result['text']}" if result["ok"]
             else f"({result['message']})"]
    if result["unknown"]:
        lines.append(f"unknown {language_name(src)} words: {', '.join(result['unknown'])}")
    return lines


def widget_outputs(lines: Sequence[str], fig) -> tuple[dict, dict]:
    """What notebook 06's translator shows, as the outputs of an ``ipywidgets.Output``: the
    ``lines`` as printed text, then ``fig`` as a PNG (what the inline backend would draw:
    a tight bounding box at the figure's dpi). The widget assigns them to the Output's
    ``outputs`` in one state update instead of printing inside ``with output:`` from the
    slider's observer: captured output is routed by the message it answers, and under
    ipykernel 7 a figure drawn from a widget's callback was sometimes dropped (the text
    redrawn, the figure gone: ipykernel#1564, ipywidgets#4020). Pure: no kernel needed."""
    import base64
    import io

    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    width, height = fig.get_size_inches() * fig.dpi
    return ({"output_type": "stream", "name": "stdout", "text": "\n".join(lines) + "\n"},
            {"output_type": "display_data", "metadata": {},
             "data": {"image/png": base64.b64encode(png.getvalue()).decode("ascii"),
                      "text/plain": f"<Figure size {width:g}x{height:g} with "
                                    f"{len(fig.axes)} Axes>"}})


def _recorded_bleu(entry: dict, split: str) -> str:
    """``"greedy / beam 5"`` sacreBLEU the record holds for the float16 weights on ``split``."""
    row = (((entry.get("scores") or {}).get("splits") or {}).get(split) or {}).get("float16")
    if not row:
        return "not recorded"
    return f"{row['beam1']['sacrebleu']:.2f} / {row['beam5']['sacrebleu']:.2f}"


def shipped_models_table(records: dict[str, dict]) -> str:
    """A Markdown table of the shipped models, one row per direction (``records``: direction ->
    :func:`convs2s.run.pretrained.record`): how it was trained (preset, epochs, hours, machine;
    for a continued run, the model it started from) and the sacreBLEU recorded for its float16
    weights, as shipped, on Multi30k's validation split and test2016 (greedy / beam 5 with its
    length penalty). Pure: every figure is the record's."""
    rows = ["| direction | trained | validation sacreBLEU (greedy / beam 5) | "
            "test2016 sacreBLEU (greedy / beam 5) |", "|---|---|---|---|"]
    for direction, entry in records.items():
        training = entry.get("training") or {}
        done = ", ".join(x for x in (
            f"preset `{entry['preset']}`" if entry.get("preset") else "",
            f"{training['epochs']} epochs" if training.get("epochs") else "",
            f"{training['hours']:g} h" if training.get("hours") else "",
            f"on {training['machine']}" if training.get("machine") else "") if x)
        start = training.get("continued_from") or {}
        if start.get("epochs"):  # a continued run (--init-from): the model it started from
            where = " on ".join(x for x in (f"{start['hours']:g} h" if start.get("hours") else "",
                                            start.get("machine") or "") if x)
            done += (f"; continued from a model of {start['epochs']} epochs"
                     + (f" ({where})" if where else ""))
        rows.append(f"| {direction_name(direction)} (`convs2s.pretrained(\"{direction}\")`) | "
                    f"{done or 'not recorded'} | {_recorded_bleu(entry, 'valid')} | "
                    f"{_recorded_bleu(entry, 'test')} |")
    return "\n".join(rows)
