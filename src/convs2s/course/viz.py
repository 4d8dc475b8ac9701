"""Measured pictures of what convolution stacks see and how signals flow through them.

Notebooks 01 and 02 draw their figures and widgets with these functions, so that every picture
is a *measurement* of the package's real layers, never a drawing made by hand:

- :func:`receptive_field` -- the formula r = 1 + L·(k-1) for L stacked convolutions of width k.
- :func:`measure_dependency` -- which inputs each output of any function depends on, measured
  with autograd (True where the gradient of output i with respect to input j is non-zero).
- :func:`dependency_map` -- that measurement on a real stack of :class:`~convs2s.model.layers.
  ConvGLUBlock` layers (:func:`conv_glu_stack`, :func:`run_stack`) with padding ``"none"``
  (valid), ``"same"`` (encoder) or ``"causal"`` (decoder); :func:`pad_sequence` pads by hand.
- :func:`future_leaks`, :func:`dependency_summary`, :func:`describe_dependency` -- where an
  output sees inputs to its right ("the future"), and how far.
- :func:`plot_dependency_map`, :func:`dependency_legend_handles`,
  :func:`draw_dependency_explorer` -- the pictures (and the logic of notebook 01's widget).
- :func:`gate`, :func:`gate_gradient_norms`, :func:`gate_activation_stds` -- GLU and GTU, and
  gradient norms and activation scales through a deep stack gated by either.
- :func:`residual_stack_activations`, :func:`activation_variances` -- activations through
  residual blocks with and without the √0.5 scale.

Conventions: stacks work in ``Conv1d`` layout ``[batch, channels, length]``; a dependency map is a
bool tensor ``[n_outputs, n_inputs]`` indexed ``[output position i, input position j]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from convs2s.model.layers import RESIDUAL_SCALE, ConvGLUBlock

PADDINGS = ("none", "same", "causal")
"""``"none"``: no padding (a "valid" convolution; every layer shortens the sequence by k-1).
``"same"``: (k-1)/2 zeros on each side (the encoder). ``"causal"``: k-1 zeros on the left (the
decoder)."""

GATES = ("glu", "gtu")
"""``"glu"``: A ⊗ σ(B) (the paper's gated linear unit). ``"gtu"``: tanh(A) ⊗ σ(B) (the gated
tanh unit of WaveNet/PixelCNN that Dauphin et al. 2017 compare it with)."""

# Colours of a dependency map: no dependence, dependence on the present or past, on the future.
MAP_COLOURS = ("#ffffff", "#4c72b0", "#e4572e")
MAP_LABELS = ("no dependence", "depends (past or present)", "depends on the FUTURE (j > i)")

ENCODER_INPUT_STD = 0.14
"""The scale the encoder's first block sees at initialisation: token and position embeddings are
both drawn from N(0, 0.1²) (paper §3.5), so e = w + p has variance 0.02 (std ≈ 0.14), and the
emb->hid projection is initialised to keep it. GLU is not scale-invariant (σ(B) ≈ 0.5 only for
small B), so the measurements below default to this scale."""


# --------------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------------


def _check_stack(kernel_size: int, n_layers: int, padding: str | None = None) -> None:
    if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1:
        raise ValueError(f"kernel_size={kernel_size!r} must be a whole number >= 1.")
    if isinstance(n_layers, bool) or not isinstance(n_layers, int) or n_layers < 0:
        raise ValueError(f"n_layers={n_layers!r} must be a whole number >= 0.")
    if padding is None:
        return
    if padding not in PADDINGS:
        raise ValueError(f"padding={padding!r} is not known; choose one of {PADDINGS}.")
    if padding == "same" and kernel_size % 2 == 0:
        raise ValueError(
            f"kernel_size={kernel_size} is even, but padding='same' needs an odd kernel size: "
            "(k-1)/2 zeros on each side must be a whole number. Use 1, 3, 5, ..."
        )


def _check_map(dep_map: Tensor) -> None:
    if not isinstance(dep_map, Tensor) or dep_map.dtype != torch.bool or dep_map.dim() != 2:
        raise TypeError(
            "a dependency map is a 2-D bool tensor [n_outputs, n_inputs], e.g. from "
            "dependency_map(...)."
        )


# --------------------------------------------------------------------------------------------
# Receptive field and dependency maps
# --------------------------------------------------------------------------------------------


def receptive_field(kernel_size: int, n_layers: int) -> int:
    """How many input positions one output of ``n_layers`` stacked width-``k`` convolutions sees.

    One layer sees k inputs; every further layer widens the window by k-1 (its k inputs are
    outputs whose windows overlap in all but one position): r = 1 + L·(k-1).
    """
    _check_stack(kernel_size, n_layers)
    return 1 + n_layers * (kernel_size - 1)


def pad_sequence(x: Tensor, kernel_size: int, padding: str) -> Tensor:
    """``x`` (``[batch, channels, length]``) with the zeros a width-``k`` convolution needs.

    ``"none"``: unchanged. ``"same"``: (k-1)/2 zeros on each side. ``"causal"``: k-1 zeros on the
    left. With ``"same"`` or ``"causal"`` the convolution's output has ``x``'s length.
    """
    _check_stack(kernel_size, 0, padding)
    k = kernel_size
    if padding == "same":
        return F.pad(x, ((k - 1) // 2, (k - 1) // 2))
    if padding == "causal":
        return F.pad(x, (k - 1, 0))
    return x


def conv_glu_stack(
    kernel_size: int,
    n_layers: int,
    padding: str,
    *,
    hid_dim: int = 4,
    residual: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> list[ConvGLUBlock]:
    """``n_layers`` freshly initialised :class:`ConvGLUBlock` s (eval mode, paper init).

    The weights depend only on ``seed``; torch's global random state is left untouched. For
    ``padding="none"`` the blocks are built as causal blocks, but :func:`run_stack` calls their
    convolution without any padding.
    """
    _check_stack(kernel_size, n_layers, padding)
    block_padding = "causal" if padding == "none" else padding
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        blocks = [
            ConvGLUBlock(hid_dim, kernel_size, padding=block_padding, residual=residual)
            for _ in range(n_layers)
        ]
    return [b.to(dtype).eval() for b in blocks]


def run_stack(blocks: Sequence[ConvGLUBlock], x: Tensor, padding: str) -> Tensor:
    """Apply ``blocks`` in turn to ``x`` (``[batch, hid_dim, length]``).

    ``"same"``/``"causal"``: each block's own ``forward`` (padding, convolution, GLU and, if the
    block has one, the √0.5 residual). ``"none"``: convolution + GLU without padding and without
    residual (the output is k-1 shorter than the input, so ``x`` cannot be added to it).
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding={padding!r} is not known; choose one of {PADDINGS}.")
    for block in blocks:
        if padding == "none":
            x = F.glu(block.conv(x), dim=1)  # x = [batch, hid_dim, length - (k-1)]
        else:
            x = block(x)  # x = [batch, hid_dim, length]
    return x


def measure_dependency(
    fn: Callable[[Tensor], Tensor], x: Tensor, *, channels_last: bool = False, seed: int = 0
) -> Tensor:
    """Which inputs each output of ``fn`` depends on, measured with autograd.

    Args:
        fn: maps a batch ``[batch, channels, length]`` (or ``[batch, length, channels]`` with
            ``channels_last=True``) to outputs of the same layout, treating batch elements
            independently (no batch statistics; put modules in eval mode).
        x: one example, ``[1, channels, length]`` (or ``[channels, length]``; channels last if
            ``channels_last``).
        seed: for the random positive weights that combine an output's channels into one number
            (so that channels cannot cancel each other out).

    Returns:
        bool ``[n_outputs, n_inputs]``: entry ``[i, j]`` is True when output position i has a
        non-zero gradient with respect to some channel of input position j.

    One backward pass measures every row: ``x`` is copied once per output position, and copy i
    only back-propagates from output position i.
    """
    x = x.detach()
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3 or x.size(0) != 1:
        raise ValueError(f"x must be one example [1, C, T] or [C, T], got {tuple(x.shape)}.")
    time_dim = 1 if channels_last else 2
    with torch.no_grad():
        n_out = fn(x).size(time_dim)
    copies = x.expand(n_out, *x.shape[1:]).clone().requires_grad_(True)
    y = fn(copies)
    rows = torch.arange(n_out)
    picked = y[rows, rows, :] if channels_last else y[rows, :, rows]  # [n_out, out_channels]
    g = torch.Generator().manual_seed(seed)
    weights = (torch.rand(picked.shape, generator=g, dtype=torch.float64) + 0.5).to(picked)
    (grad,) = torch.autograd.grad((picked * weights).sum(), copies)
    channel_dim = 2 if channels_last else 1
    return grad.ne(0).any(dim=channel_dim)  # [n_out, n_in]


def dependency_map(
    kernel_size: int,
    n_layers: int,
    padding: str,
    length: int = 16,
    seed: int = 0,
    *,
    hid_dim: int = 4,
) -> Tensor:
    """The measured dependency map of a stack of ``n_layers`` conv+GLU blocks.

    Builds :func:`conv_glu_stack` (the package's :class:`ConvGLUBlock`, residual included for
    ``"same"``/``"causal"``), feeds it a random ``[1, hid_dim, length]`` input and measures with
    :func:`measure_dependency`. Returns bool ``[n_outputs, length]``; entry ``[i, j]`` is True
    when output i depends on input j.

    With ``"same"`` and ``"causal"``, ``n_outputs == length`` and output i sits at input position
    i. With ``"none"`` the output is r-1 shorter (r = :func:`receptive_field`), so the map has
    only ``length - r + 1`` rows; row i is PyTorch's output i, computed from inputs i..i+r-1.
    Lined up with input position i, as a decoder would line it up, it looks r-1 steps ahead.
    """
    _check_stack(kernel_size, n_layers, padding)
    r = receptive_field(kernel_size, n_layers)
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length={length!r} must be a whole number >= 1.")
    if padding == "none" and length < r:
        raise ValueError(
            f"Without padding, {n_layers} layers of width {kernel_size} need at least r={r} "
            f"inputs to produce one output; length={length} is too short."
        )
    blocks = conv_glu_stack(kernel_size, n_layers, padding, hid_dim=hid_dim, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(1, hid_dim, length, generator=g, dtype=torch.float64)
    return measure_dependency(lambda t: run_stack(blocks, t, padding), x, seed=seed)


def future_leaks(dep_map: Tensor) -> Tensor:
    """The True entries of ``dep_map`` with j > i: output i depends on a later input j."""
    _check_map(dep_map)
    return dep_map & torch.ones_like(dep_map).triu(diagonal=1)


def dependency_summary(dep_map: Tensor) -> dict[str, int]:
    """Numbers that describe a dependency map.

    Returns a dict with
        ``n_outputs``, ``n_inputs``: the map's shape;
        ``receptive_field``: the most inputs any single output depends on;
        ``leaking_outputs``: how many outputs depend on at least one later input (j > i);
        ``max_lookahead``: the largest j - i over all dependencies (0 if none looks ahead);
        ``max_lookback``: the largest i - j (0 if none looks back).
    """
    _check_map(dep_map)
    n_out, n_in = dep_map.shape
    out = {
        "n_outputs": n_out,
        "n_inputs": n_in,
        "receptive_field": 0,
        "leaking_outputs": 0,
        "max_lookahead": 0,
        "max_lookback": 0,
    }
    if not bool(dep_map.any()):
        return out
    rows, cols = dep_map.nonzero(as_tuple=True)
    offsets = cols - rows
    out["receptive_field"] = int(dep_map.sum(dim=1).max())
    out["leaking_outputs"] = int(future_leaks(dep_map).any(dim=1).sum())
    out["max_lookahead"] = max(int(offsets.max()), 0)
    out["max_lookback"] = max(int(-offsets.min()), 0)
    return out


def describe_dependency(summary: dict[str, int]) -> str:
    """One line of text for a :func:`dependency_summary`."""
    s = summary
    text = f"receptive field {s['receptive_field']} inputs; "
    if s["leaking_outputs"]:
        text += (
            f"{s['leaking_outputs']} of {s['n_outputs']} outputs see the FUTURE "
            f"(up to {s['max_lookahead']} positions ahead)"
        )
    else:
        text += f"no output sees the future (looks back up to {s['max_lookback']} positions)"
    return text


# --------------------------------------------------------------------------------------------
# Pictures
# --------------------------------------------------------------------------------------------


def dependency_legend_handles() -> list:
    """Legend entries for the three colours of :func:`plot_dependency_map`.

    For a figure with several maps: ``fig.legend(handles=viz.dependency_legend_handles(),
    loc="lower center", ncol=3)``.
    """
    from matplotlib.patches import Patch

    return [
        Patch(facecolor=c, edgecolor="#999999", label=lab)
        for c, lab in zip(MAP_COLOURS, MAP_LABELS, strict=True)
    ]


def plot_dependency_map(
    ax,
    dep_map: Tensor,
    *,
    title: str | None = None,
    input_labels: Sequence[str] | None = None,
    output_labels: Sequence[str] | None = None,
    legend: bool = True,
):
    """Draw ``dep_map`` on the matplotlib Axes ``ax``; future leaks (j > i) in a distinct colour.

    Rows are output positions, columns input positions; the dashed line marks i = j. Optional
    ``input_labels``/``output_labels`` (e.g. tokens) label the ticks. ``legend=True`` puts the
    colour legend to the right of the Axes. Returns the ``AxesImage``.
    """
    from matplotlib.colors import ListedColormap

    _check_map(dep_map)
    n_out, n_in = dep_map.shape
    codes = dep_map.long() + future_leaks(dep_map).long()  # 0 none, 1 past/present, 2 future
    image = ax.imshow(
        codes.numpy(),
        cmap=ListedColormap(MAP_COLOURS),
        vmin=0,
        vmax=2,
        interpolation="nearest",
        origin="upper",
    )
    # Thin grid between cells and the diagonal i = j.
    ax.set_xticks([j - 0.5 for j in range(n_in + 1)], minor=True)
    ax.set_yticks([i - 0.5 for i in range(n_out + 1)], minor=True)
    ax.grid(which="minor", color="#dddddd", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    diag = min(n_out, n_in)
    ax.plot([-0.5, diag - 0.5], [-0.5, diag - 0.5], ls="--", lw=0.8, color="#555555")
    if input_labels is not None:
        ax.set_xticks(range(n_in), list(input_labels), rotation=90)
    if output_labels is not None:
        ax.set_yticks(range(n_out), list(output_labels))
    ax.set_xlabel("input position j")
    ax.set_ylabel("output position i")
    if title is not None:
        ax.set_title(title)
    if legend:
        ax.legend(
            handles=dependency_legend_handles(),
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            fontsize=9,
            frameon=False,
        )
    return image


def draw_dependency_explorer(
    ax, kernel_size: int, n_layers: int, padding: str, *, length: int = 16
) -> str:
    """Notebook 01's widget: measure the map for these settings, draw it, return a text line.

    Settings the layers reject (an even kernel with ``"same"``, a ``"none"`` stack longer than
    the sequence) are not errors here: the Axes shows the reason and the text line returns it.
    """
    try:
        dep = dependency_map(kernel_size, n_layers, padding, length=length)
    except ValueError as e:
        ax.clear()
        ax.text(0.5, 0.5, str(e), ha="center", va="center", wrap=True, fontsize=9)
        ax.set_axis_off()
        return f"not possible: {e}"
    r = receptive_field(kernel_size, n_layers)
    summary = dependency_summary(dep)
    plot_dependency_map(
        ax, dep, title=f"k={kernel_size}, L={n_layers}, padding={padding!r}", legend=True
    )
    formula = f"r = 1 + L·(k-1) = 1 + {n_layers}·{kernel_size - 1} = {r}"
    return f"{formula}; measured: {describe_dependency(summary)}"


# --------------------------------------------------------------------------------------------
# Signal flow through deep stacks
# --------------------------------------------------------------------------------------------


def gate(h: Tensor, kind: str = "glu", dim: int = 1) -> Tensor:
    """Split ``h`` into halves A, B along ``dim`` and gate: GLU A⊗σ(B) or GTU tanh(A)⊗σ(B)."""
    if kind not in GATES:
        raise ValueError(f"gate={kind!r} is not known; choose one of {GATES}.")
    a, b = h.chunk(2, dim=dim)
    return (a if kind == "glu" else torch.tanh(a)) * torch.sigmoid(b)


def gate_gradient_norms(
    kind: str = "glu",
    *,
    n_layers: int = 20,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 32,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 8,
    seed: int = 0,
) -> Tensor:
    """Relative gradient norms through a deep stack of gated convolutions WITHOUT residuals.

    Every layer is the convolution of a :class:`ConvGLUBlock` (paper initialisation) followed by
    the gate ``kind`` (:data:`GATES`); no residual connection, so the gradient has to pass
    through every gate. The input is random with standard deviation ``input_std``; the loss is a
    fixed random projection of the output. The same seed gives the same weights and input for
    both gates, so only the gate differs.

    Returns ``[n_layers + 1]``: entry l is ‖∂loss/∂(input of layer l)‖ divided by
    ‖∂loss/∂output‖; entry 0 is the stack's input, entry ``n_layers`` the output (1.0).
    """
    if kind not in GATES:
        raise ValueError(f"gate={kind!r} is not known; choose one of {GATES}.")
    blocks = conv_glu_stack(
        kernel_size,
        n_layers,
        "same",
        hid_dim=hid_dim,
        residual=False,
        seed=seed,
        dtype=torch.float64,
    )
    g = torch.Generator().manual_seed(seed + 1)
    x = input_std * torch.randn(batch, hid_dim, length, generator=g, dtype=torch.float64)
    inputs = []
    h = x.requires_grad_(True)
    for block in blocks:
        inputs.append(h)
        h = gate(block.conv(pad_sequence(h, kernel_size, "same")), kind)  # [batch, hid, length]
    inputs.append(h)
    proj = torch.randn(h.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((h * proj).sum(), inputs)
    norms = torch.stack([gr.norm() for gr in grads])
    return (norms / norms[-1]).float()


def gate_activation_stds(
    kind: str = "glu",
    *,
    n_layers: int = 20,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 32,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 8,
    seed: int = 0,
) -> Tensor:
    """The forward pass of :func:`gate_gradient_norms`'s stack: activation std per layer.

    Same weights and input as :func:`gate_gradient_norms` for the same arguments. Returns
    ``[n_layers + 1]``: entry 0 is the input's standard deviation, entry l the output's of
    layer l.
    """
    if kind not in GATES:
        raise ValueError(f"gate={kind!r} is not known; choose one of {GATES}.")
    blocks = conv_glu_stack(
        kernel_size,
        n_layers,
        "same",
        hid_dim=hid_dim,
        residual=False,
        seed=seed,
        dtype=torch.float64,
    )
    g = torch.Generator().manual_seed(seed + 1)
    h = input_std * torch.randn(batch, hid_dim, length, generator=g, dtype=torch.float64)
    stds = [h.std()]
    with torch.no_grad():
        for block in blocks:
            h = gate(block.conv(pad_sequence(h, kernel_size, "same")), kind)  # [batch, hid, len]
            stds.append(h.std())
    return torch.stack(stds).float()


def residual_stack_activations(
    blocks: Sequence[ConvGLUBlock],
    x: Tensor,
    *,
    scale: bool = True,
    mask: Tensor | None = None,
) -> list[Tensor]:
    """``x`` and the output of every block of ``x_{l+1} = (GLU(conv(x_l)) + x_l)·s``.

    ``s`` is √0.5 with ``scale=True`` (the paper; then this is exactly what blocks built with
    ``residual=True`` compute) and 1 with ``scale=False``. The blocks' own ``residual`` flag is
    ignored: their padding, dropout and convolution are used, the residual is added here.
    ``mask`` (bool ``[batch, length]``, True on real tokens) zeroes padding before each block,
    as :class:`ConvGLUBlock` does.
    """
    s = RESIDUAL_SCALE if scale else 1.0
    outs = [x]
    for block in blocks:
        if mask is not None:
            x = x.masked_fill(~mask.unsqueeze(1), 0.0)
        h = pad_sequence(block.dropout(x), block.kernel_size, block.padding)
        h = F.glu(block.conv(h), dim=1)  # h = [batch, hid_dim, length]
        x = (h + x) * s  # x = [batch, hid_dim, length]
        outs.append(x)
    return outs


def activation_variances(
    n_blocks: int = 10,
    *,
    scale: bool = True,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 64,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 16,
    seed: int = 0,
) -> Tensor:
    """Variance of the activations after each of ``n_blocks`` residual conv+GLU blocks.

    A random input with standard deviation ``input_std`` goes through ``n_blocks`` freshly
    initialised blocks (paper init, "same" padding) with residual connections, scaled by √0.5
    (``scale=True``, the paper) or not. Returns ``[n_blocks + 1]``: entry 0 is the input's
    variance, entry l the variance after block l.
    """
    blocks = conv_glu_stack(
        kernel_size,
        n_blocks,
        "same",
        hid_dim=hid_dim,
        residual=True,
        seed=seed,
        dtype=torch.float64,
    )
    g = torch.Generator().manual_seed(seed + 1)
    x = input_std * torch.randn(batch, hid_dim, length, generator=g, dtype=torch.float64)
    with torch.no_grad():
        outs = residual_stack_activations(blocks, x, scale=scale)
    return torch.stack([o.var() for o in outs]).float()
