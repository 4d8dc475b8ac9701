"""How far a convolution stack sees, and the paper's argument for convolutions, as numbers.

Notebook 01 derives the receptive field, notebook 07 the paper's two reasons to prefer
convolutions over recurrent networks (Gehring et al., 2017, §1):

1. **Short paths between distant words.** One layer of width k sees k positions; every further
   layer widens the window by k-1, so one output of L stacked layers depends on
   ``1 + L·(k-1)`` consecutive positions (:func:`receptive_field`). Two words n positions apart
   therefore meet in one representation after ``ceil(n / (k-1))`` layers, O(n/k) convolution
   operations (:func:`conv_path_length`), while a recurrent network carries the first word
   through n state updates before it meets the second, O(n) (:func:`rnn_path_length`).
2. **Training parallelises over positions.** A recurrent network computes the state of
   position i from the state of position i-1, so one pass over a sentence of n words is a chain
   of n steps that must run one after the other, even in training, where every target word is
   known (teacher forcing). A convolution layer computes all positions at once; a stack of L
   layers is a chain of L steps, whatever the sentence length (:func:`sequential_steps`).

The functions here are the formulas (pure, no model involved); :func:`count_calls` measures
how often modules run in a forward (and backward) pass, so a notebook can check the counts on
real models. The measured counterparts of the formulas are the dependency maps of
:mod:`convs2s.course.dependency`; ``tests/course/test_receptive_field.py`` compares them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from torch import nn

from convs2s.system.arguments import check_choice, check_whole

__all__ = [
    "receptive_field",
    "conv_path_length",
    "rnn_path_length",
    "path_lengths",
    "sequential_steps",
    "count_calls",
]

ARCHITECTURES = ("conv", "rnn")


def receptive_field(kernel_size: int, n_layers: int) -> int:
    """How many consecutive input positions one output of ``n_layers`` stacked convolutions of
    width ``kernel_size`` depends on: ``r = 1 + n_layers·(kernel_size - 1)``.

    One layer sees k inputs; every further layer widens the window by k-1 (its k inputs are
    outputs whose windows overlap in all but one position). 0 layers: the position itself.
    Raises ``TypeError`` for an argument that is not a whole number and ``ValueError`` for
    ``kernel_size < 1`` or ``n_layers < 0``.

    Used in notebook 01; :func:`conv_path_length` (notebook 07) inverts it.
    """
    kernel_size = check_whole(kernel_size, "kernel_size")
    n_layers = check_whole(n_layers, "n_layers", least=0)
    return 1 + n_layers * (kernel_size - 1)


def conv_path_length(distance: int, kernel_size: int) -> int:
    """The fewest stacked convolutions of width ``kernel_size`` after which two words
    ``distance`` positions apart are in the window of one output: the smallest L with
    ``receptive_field(kernel_size, L) >= distance + 1``, i.e. ``ceil(distance / (k-1))``.

    In a causal (decoder) stack that output is the later word's own; in a centred (encoder)
    stack it is a position between the two. ``distance=0`` needs no layer. Width 1 never mixes
    positions, so it raises ``ValueError`` for a positive distance.

    Used in notebook 07 (and by its checks).
    """
    distance = check_whole(distance, "distance", least=0)
    kernel_size = check_whole(kernel_size, "kernel_size")
    if distance == 0:
        return 0
    if kernel_size == 1:
        raise ValueError("kernel_size=1 never connects two different positions: use k >= 2.")
    # 1 + L·(k-1) >= distance + 1  <=>  L >= distance / (k-1): the ceiling, without floats
    return -(-distance // (kernel_size - 1))


def rnn_path_length(distance: int) -> int:
    """Recurrent steps between two words ``distance`` positions apart: the earlier word's
    information reaches the later one through ``distance`` state updates.

    Used in notebook 07 (and by its checks).
    """
    return check_whole(distance, "distance", least=0)


def path_lengths(max_distance: int, kernel_sizes: Iterable[int] = (3, 5)) -> dict[str, list[int]]:
    """Path lengths for distances ``1..max_distance``: ``{"distance": [...], "RNN": [...],
    "conv k=3": [...], ...}`` (one list per kernel size, in the order given).

    Used in notebook 07.
    """
    max_distance = check_whole(max_distance, "max_distance")
    distances = list(range(1, max_distance + 1))
    table = {"distance": distances, "RNN": [rnn_path_length(n) for n in distances]}
    for k in kernel_sizes:
        table[f"conv k={k}"] = [conv_path_length(n, k) for n in distances]
    return table


def sequential_steps(architecture: str, src_len: int, trg_len: int, *, enc_layers: int = 1,
                     dec_layers: int = 1) -> int:
    """Layer applications that must run one after another in one teacher-forced forward pass.

    ``"rnn"`` (one recurrent layer in the encoder and one in the decoder, as
    :class:`convs2s.course.baselines.RNNAttentionSeq2Seq`): the encoder steps through the
    ``src_len`` source positions (the two directions of a bidirectional encoder can run side by
    side), then the decoder through the ``trg_len`` target positions: ``src_len + trg_len``.
    ``"conv"`` (ConvS2S): each layer processes every position at once:
    ``enc_layers + dec_layers``, independent of the lengths. The backward pass walks the same
    chain in reverse, so a whole training step has twice as many.

    Used in notebook 07.
    """
    check_choice(architecture, "architecture", ARCHITECTURES)
    src_len = check_whole(src_len, "src_len")
    trg_len = check_whole(trg_len, "trg_len")
    if architecture == "rnn":
        return src_len + trg_len
    return check_whole(enc_layers, "enc_layers") + check_whole(dec_layers, "dec_layers")


def count_calls(modules: nn.Module, module_types: type | tuple[type, ...],
                run: Callable[[], object]) -> dict[str, int]:
    """Run ``run()`` and count the calls of every submodule of ``modules`` that is an instance
    of ``module_types``: ``{"forward": ..., "backward": ...}``.

    Forward calls are counted with forward hooks, backward ones with full backward hooks (one
    per forward call that gradients flow back through, e.g. when ``run`` calls
    ``loss.backward()``). The hooks are removed afterwards, also when ``run`` raises.

    Used in notebook 07 (and by its checks).
    """
    counts = {"forward": 0, "backward": 0}

    def on_forward(*_args) -> None:
        counts["forward"] += 1

    def on_backward(*_args) -> None:
        counts["backward"] += 1

    handles = []
    try:
        for module in modules.modules():
            if isinstance(module, module_types):
                handles.append(module.register_forward_hook(on_forward))
                handles.append(module.register_full_backward_hook(on_backward))
        run()
    finally:
        for handle in handles:
            handle.remove()
    return counts
