"""A class's own version of the graded exercises: ``make student VARIANT=<name>``.

The public course notebooks show every solution (folded) and every measurement, so a graded copy
built from them is answered by them. A *variant* changes, for every predict and derive exercise,
what the public material answers: a predict exercise gets new numbers (kernel width, layers,
lengths, dimensions, a fraction), a derive exercise, whose answer is a formula the public
solution writes in general, gets a change of the thing it counts (blocks of several
convolutions, a grouped convolution, a beam, ...). The change is made in the task's text, in the
values the hidden test grades against (the exercise's ``variant`` in ``grading.json``) and in
the instructor's solution.

Every exercise draws its version uniformly from an explicit finite list, :data:`CHOICES`: at
least 20 choices, chosen so that two classes with independent secrets share an answer (one
class's right answer passes the other's hidden test) with probability at most 0.05
(``tests/coursework/test_class_variants.py`` computes that probability exactly from every
choice's answer and the exercises' acceptance). No choice of a predict exercise is answered by
the public solution or the public measurement.

Implement and debug exercises have no variant here (a public solution exists): the README's
instructor section lists them as practice. Nor has a predict exercise graded on its form only
(``speed_crossover``, whose answer depends on the machine): the README lists it as practice too.

The name seeds everything: the same name gives the same variant on any machine (sha256 of the
name), so an instructor can rebuild a class's copy. The public version (no name) holds the
notebook's own numbers.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction


@dataclass(frozen=True)
class Variant:
    """One exercise's version: what its hidden test reads, and what changes in its cells.

    Attributes:
        params: the values the hidden test grades against (the exercise's ``variant``).
        replace: (text in the task, its replacement), each found exactly once in the task.
        answer_replace: the same for the answer cell (a comment naming the numbers).
        note: a paragraph added to the task ("In this class's version ...").
        solution: the instructor's solution (the answer cell's code) for this version; "" keeps
            the notebook's.
    """

    params: dict
    replace: tuple[tuple[str, str], ...] = ()
    answer_replace: tuple[tuple[str, str], ...] = ()
    note: str = ""
    solution: str = ""
    public: bool = field(default=False)


class VariantError(ValueError):
    """A variant that cannot be applied (a text it should change is not in the notebook)."""


def _rng(name: str, exercise: str) -> random.Random:
    seed = hashlib.sha256(f"{name}\0{exercise}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def _tex(f: Fraction) -> str:
    """``f`` in the notebooks' LaTeX: ``\\tfrac{1}{2}``, or a whole number."""
    if f.denominator == 1:
        return str(f.numerator)
    return f"\\tfrac{{{f.numerator}}}{{{f.denominator}}}"


_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve")
_PARTS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters"),
          5: ("fifth", "fifths"), 6: ("sixth", "sixths"), 7: ("seventh", "sevenths"),
          8: ("eighth", "eighths"), 9: ("ninth", "ninths"), 10: ("tenth", "tenths"),
          11: ("eleventh", "elevenths"), 12: ("twelfth", "twelfths")}


def fraction_words(kept: int, parts: int) -> str:
    """``kept/parts`` in words: "a third", "three sevenths"."""
    one, many = _PARTS[parts]
    return f"a {one}" if kept == 1 else f"{_NUMBERS[kept]} {many}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# --------------------------------------------------------------------------------------------
# The choices: each exercise's version is drawn uniformly from its tuple
# --------------------------------------------------------------------------------------------


def moved_outputs(k: int, layers: int, length: int, changed: int) -> list[int]:
    """The outputs of ``layers`` "same"-padded blocks of width ``k`` over ``length`` positions
    that move when input ``changed`` changes: those within layers·(k - 1)/2 of it (the formula
    that ``nb01._measured_moves`` measures)."""
    reach = layers * (k - 1) // 2
    return list(range(max(0, changed - reach), min(length - 1, changed + reach) + 1))


def brevity_bleu(kept: int, parts: int) -> float:
    """BLEU of outputs that are the first ``kept/parts`` of their references: every n-gram of a
    prefix is in its reference, so 100 × the brevity penalty exp(1 - parts/kept)."""
    return 100 * math.exp(1 - parts / kept)


def scaled_variance(m: int, first: Fraction) -> Fraction:
    """m · Σ a² for the weights (first, rest, ..., rest) over m tokens."""
    rest = (1 - first) / (m - 1)
    return m * (first**2 + (m - 1) * rest**2)


#: Every exercise's choices (a version is one of them, drawn uniformly from the class's name).
CHOICES: dict[str, tuple] = {
    # (kernel width k, blocks L, sentence length, changed position, not at an end): 1,081
    # stacks whose window reaches past at most one end of the sentence and whose moved outputs
    # are not the public [5, ..., 9]; 140 different moved sets
    "same_padding_moves": tuple(
        (k, layers, length, changed)
        for k in (3, 5, 7) for layers in (2, 3, 4) for length in range(11, 21)
        for changed in range(1, length - 1)
        if (changed >= layers * (k - 1) // 2 or changed + layers * (k - 1) // 2 < length)
        and moved_outputs(k, layers, length, changed) != [5, 6, 7, 8, 9]),
    # (residual factor s, blocks N): (2 s²)^N = 2^6, 2^3, 2^-3, 2^-6, ..., 2^-60, each 8 times
    # the next. s = 1 is the notebook's "without √0.5": its 2^N holds within the factor 5 only
    # up to ~10 blocks (GLU saturates as the activations grow), so the other choices shrink
    # them, with s = 1/2, 1/4 or 1/8 in place of √0.5 (measured within 1.4x of (2 s²)^N)
    "residual_variance": tuple((Fraction(s), blocks) for s, blocks in (
        (1, 6), (1, 3), ("1/2", 3), ("1/2", 6), ("1/4", 3), ("1/2", 12), ("1/8", 3), ("1/4", 6),
        ("1/4", 7), ("1/4", 8), ("1/4", 9), ("1/8", 6), ("1/4", 11), ("1/4", 12), ("1/4", 13),
        ("1/4", 14), ("1/8", 9), ("1/4", 16), ("1/4", 17), ("1/4", 18), ("1/4", 19),
        ("1/8", 12))),
    # (m, the first token's weight): m·Σa² from 1.02 to 12.97, each > 8 % from the others and
    # from the public 16/7
    "scaled_context_variance": tuple((m, Fraction(a, b)) for m, (a, b) in (
        (5, (1, 4)), (5, (1, 3)), (5, (2, 5)), (12, (1, 4)), (14, (1, 4)), (10, (1, 3)),
        (6, (1, 2)), (5, (3, 5)), (9, (1, 2)), (10, (1, 2)), (11, (1, 2)), (9, (3, 5)),
        (14, (1, 2)), (9, (2, 3)), (12, (3, 5)), (6, (9, 10)), (12, (2, 3)), (16, (3, 5)),
        (10, (4, 5)), (11, (4, 5)), (12, (4, 5)), (15, (3, 4)), (15, (4, 5)), (15, (5, 6)),
        (14, (9, 10)), (16, (9, 10)))),
    # (kept, parts): outputs kept/parts as long; BLEU 1.8 ... 90.5, each > 1.5 points from the
    # others and from the public 36.8
    "brevity_prediction": (
        (1, 5), (1, 4), (3, 11), (3, 10), (1, 3), (4, 11), (3, 8), (2, 5), (5, 12), (3, 7),
        (4, 9), (6, 11), (4, 7), (7, 12), (3, 5), (5, 8), (7, 11), (2, 3), (7, 10), (5, 7),
        (8, 11), (3, 4), (7, 9), (4, 5), (9, 11), (5, 6), (6, 7), (7, 8), (8, 9), (10, 11)),
    # (decoder lengths, decoder layers): 8 length triples x 6 layer counts
    "training_steps": tuple(
        (lengths, layers)
        for lengths in ((5, 10, 20), (6, 18, 54), (7, 21, 35), (8, 16, 32), (9, 27, 45),
                        (11, 22, 44), (12, 24, 48), (15, 30, 60))
        for layers in (2, 4, 5, 6, 7, 8)),
    # (d, k): crossovers d·k from 128 to 4,608, each > 5 % from the others and from 768
    "attention_vs_conv": (
        (64, 2), (64, 3), (64, 4), (96, 3), (64, 5), (64, 6), (64, 7), (96, 5), (128, 4),
        (64, 9), (128, 5), (96, 9), (160, 6), (256, 4), (160, 7), (256, 5), (160, 9), (256, 6),
        (192, 9), (320, 6), (512, 4), (320, 7), (512, 5), (320, 9), (512, 6), (384, 9),
        (448, 9), (512, 9)),
    # derive: the thing counted changes
    "my_receptive_field": tuple(range(2, 22)),  # convolutions per block
    "block_parameters": tuple(range(2, 22)),  # the convolution's groups
    "cache_floats": tuple(range(2, 22)),  # hypotheses in the beam
    "attention_macs": tuple(range(2, 22)),  # every n-th layer attends
    "perplexity_from_loss": tuple(range(3, 31)),  # a third unit, "base<b>"
    "path_length": tuple(range(2, 22)),  # convolutions per block
    # (U_a has a bias, maxout pieces); the GRUs have no bias
    "baseline_parameters": tuple((u_bias, pieces) for u_bias in (True, False)
                                 for pieces in range(2, 12)),
    "separable_params": tuple(range(2, 22)),  # the depth multiplier
}


# --------------------------------------------------------------------------------------------
# predict: new numbers, the expected value measured with the package, as the check measures it
# --------------------------------------------------------------------------------------------


def _same_padding_moves(choice: tuple | None) -> Variant:
    from convs2s.course.checks import nb01

    k, layers, length, changed = (nb01.SAME_K, nb01.SAME_LAYERS, nb01.SAME_LENGTH,
                                  nb01.SAME_CHANGED) if choice is None else choice
    moved = nb01._measured_moves(changed, k, layers, length)
    params = {"k": k, "layers": layers, "length": length, "changed": changed, "expected": moved}
    if choice is None:
        return Variant(params, public=True)
    step, reach = (k - 1) // 2, layers * (k - 1) // 2
    return Variant(params, replace=(
        ("$L = 3$ blocks", f"$L = {layers}$ blocks"),
        ("kernel width $k = 3$", f"kernel width $k = {k}$"),
        ("10 positions, $0, \\dots, 9$", f"{length} positions, $0, \\dots, {length - 1}$"),
        ("position **8**", f"position **{changed}**"),
    ), solution=(
        f"# Each \"same\" block of width {k} reaches ({k} - 1)/2 = {step} to each side, {layers} "
        f"blocks reach\n# {layers} · {step} = {reach}: inputs {changed} - {reach} ... {changed} "
        f"+ {reach}, cut at the sentence's ends 0 and {length - 1}.\n"
        f"moved_outputs = list(range(max(0, {changed} - {reach}), "
        f"min({length - 1}, {changed} + {reach}) + 1))"))


def measured_variance(blocks: int, scale: Fraction) -> float:
    """Var(after ``blocks`` blocks) / Var(input) of a ``convs2s.Encoder``'s blocks run as
    (GLU(conv(x)) + x)·``scale``, measured as ``nb02.measured_unscaled_variance`` measures it at
    scale 1 (the same toy encoders and batches, the median of its seeds)."""
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import nb02
    from convs2s.course.stacks import pad_sequence, stack_activations

    ratios = []
    for seed in range(nb02.VARIANCE_SEEDS):
        enc = nb02._tiny_encoder(blocks, seed=seed, emb_dim=32, hid_dim=64, vocab=100)
        tokens = torch.randint(4, 100, (16, 20), generator=nb02._gen(seed))  # [batch, src_len]
        with torch.no_grad():
            e = enc.tok_embedding(tokens) + enc.pos_embedding(torch.arange(20))
            x0 = enc.emb2hid(e).transpose(1, 2)  # x0 = [batch, hid_dim, src_len]
            layers = [lambda h, b=block: F.glu(  # as normalisation.residual_stack_activations
                b.conv(pad_sequence(b.dropout(h), b.kernel_size, b.padding)), dim=1)
                for block in enc.blocks]
            out = stack_activations(layers, x0, residual_scale=float(scale))[-1]
        ratios.append(float(out.var() / x0.var()))
    return float(torch.tensor(ratios).median())


def _residual_variance(choice: tuple | None) -> Variant:
    from convs2s.course.checks import nb02

    if choice is None:
        blocks = nb02.VARIANCE_BLOCKS
        return Variant({"blocks": blocks, "expected": nb02.measured_unscaled_variance(blocks)},
                       public=True)
    scale, blocks = choice
    measured = (nb02.measured_unscaled_variance(blocks) if scale == 1  # the check's own
                else measured_variance(blocks, scale))
    params = {"blocks": blocks, "scale": str(scale), "expected": measured}
    replace = (("freshly initialised 10-block", f"freshly initialised {blocks}-block"),
               ("output of block 10", f"output of block {blocks}"))
    why = ("# At initialisation GLU(conv(x)) has about the variance of x (the factor 4 of §3.5, "
           "section 8)\n# and the two are nearly independent: GLU(conv(x)) + x has twice the "
           "variance of x.\n")
    if scale == 1:
        return Variant(params, replace=replace, solution=(
            f"{why}# Every block doubles the variance, {blocks} blocks give 2**{blocks}.\n"
            f"variance_ratio = 2**{blocks}"))
    s = _tex(scale)
    return Variant(params, replace=(
        ("the variance without $\\sqrt{0.5}$", f"the variance with ${s}$ in place of "
                                               "$\\sqrt{0.5}$"),
        ("run its blocks **without** the $\\sqrt{0.5}$, i.e. $\\text{GLU}(\\text{conv}(x)) + x$",
         f"run its blocks with ${s}$ **in place of** the $\\sqrt{{0.5}}$, i.e. "
         f"$(\\text{{GLU}}(\\text{{conv}}(x)) + x)\\cdot{s}$"),
        *replace,
    ), solution=(
        f"{why}# The factor {scale} multiplies a variance by ({scale})², so every block "
        f"multiplies it by\n# 2 · ({scale})² = {2 * scale**2}, and {blocks} blocks by "
        f"({2 * scale**2})**{blocks}.\n"
        f"variance_ratio = (2 * ({scale.numerator} / {scale.denominator}) ** 2) ** {blocks}"))


def _scaled_context_variance(choice: tuple | None) -> Variant:
    import torch

    from convs2s.course.checks import nb04

    m, first = (nb04.PREDICT_M, Fraction(1, 2)) if choice is None else choice
    rest = (1 - first) / (m - 1)
    weights = [float(first)] + [float(rest)] * (m - 1)
    measured = nb04._measured_scaled_variance(torch.tensor(weights, dtype=torch.float64))
    params = {"m": m, "weights": weights, "expected": measured}
    if choice is None:
        return Variant(params, public=True)
    exact = scaled_variance(m, first)
    return Variant(params, replace=(
        ("$m = 8$ real source tokens", f"$m = {m}$ real source tokens"),
        ("$a = (\\tfrac12, \\tfrac1{14}, \\dots, \\tfrac1{14})$",
         f"$a = ({_tex(first)}, {_tex(rest)}, \\dots, {_tex(rest)})$"),
        ("(half the weight on one token, the other half\nspread evenly over the other 7)",
         f"({first} of the weight on one token, the other {1 - first}\nspread evenly over the "
         f"other {m - 1})"),
    ), solution=(
        "# For independent values of variance 1, Var(Σ_j a_j v_j) = Σ_j a_j²; multiplying by √m\n"
        f"# multiplies a variance by m: m · Σ_j a_j² = {m} · (({first})² + {m - 1} · ({rest})²)"
        f" = {exact}.\n"
        f"m = {m}\n"
        f"weights = [{first.numerator} / {first.denominator}] + [{rest.numerator} / "
        f"{rest.denominator}] * {m - 1}\n"
        "predicted_variance = m * sum(w**2 for w in weights)"))


def _brevity_prediction(choice: tuple | None) -> Variant:
    from convs2s.course.checks import nb06

    kept, parts = (1, 2) if choice is None else choice
    measured = nb06._halved_outputs_bleu(kept, parts).score
    params = {"kept": kept, "parts": parts, "expected": measured}
    if choice is None:
        return Variant(params, public=True)
    words = fraction_words(kept, parts)
    multiple = "an even number of" if parts == 2 else f"a multiple of {parts}"
    return Variant(params, replace=(
        ("outputs half as long", f"outputs {words} as long"),
        ("each with an even number of tokens", f"each with {multiple} tokens"),
        ("the first half of each reference", f"the first {words} of each reference"),
    ), answer_replace=(("half-length outputs", f"outputs {words} as long"),), solution=(
        "# Every n-gram of a prefix occurs in its reference, so all four clipped precisions are\n"
        f"# 100%: BLEU is 100 × the brevity penalty, with c = r · {kept}/{parts}: "
        f"exp(1 - r / c) = exp(1 - {parts}/{kept}).\n"
        f"prediction = 100 * math.exp(1 - {parts} / {kept})  # {brevity_bleu(kept, parts):.1f}"))


def _training_steps(choice: tuple | None) -> Variant:
    from convs2s.course.checks import nb07

    lengths, layers = ((nb07.TRAINING_STEP_LENGTHS, nb07._DEC_LAYERS) if choice is None
                       else choice)
    measured = nb07._measured_training_steps(tuple(lengths), layers)
    params = {"lengths": list(lengths), "layers": layers, "expected": measured}
    if choice is None:
        return Variant(params, public=True)
    a, b, c = lengths
    return Variant(params, replace=(
        ("**10, 20 and 40 tokens**", f"**{a}, {b} and {c} tokens**"),
        ("with **3 layers**", f"with **{layers} layers**"),
    ), answer_replace=(
        ("decoder lengths 10, 20, 40", f"decoder lengths {a}, {b}, {c}"),
        ("(3 decoder layers) at 10, 20, 40", f"({layers} decoder layers) at {a}, {b}, {c}"),
    ), solution=(
        "# The GRUCell runs once per position forward and once more backward: 2·n calls. "
        f"ConvS2S\n# runs each of its {layers} decoder layers once forward and once backward, "
        "whatever n is.\n"
        f'prediction = {{"GRU + attention": [2 * n for n in ({a}, {b}, {c})], '
        f'"ConvS2S": [2 * {layers}] * 3}}'))


def _attention_vs_conv(choice: tuple | None) -> Variant:
    from convs2s.course.checks import nb08

    d, k = (nb08.ATTENTION_CHANNELS, nb08.ATTENTION_KERNEL) if choice is None else choice
    params = {"d": d, "k": k, "expected": nb08._crossover(d, k)[0]}
    if choice is None:
        return Variant(params, public=True)
    return Variant(params, replace=(("For $d = 256$ and $k = 3$", f"For $d = {d}$ and $k = {k}$"),),
                   solution=(
        "# per position the convolution does d·2d·k multiply-adds, attention n·d + n·d: equal\n"
        "# when 2·d²·k = 2·n·d, i.e. n = k·d.\n"
        f"prediction = {k} * {d}"))


# --------------------------------------------------------------------------------------------
# derive: the thing counted changes; the hidden test computes with these parameters
# --------------------------------------------------------------------------------------------

NOTE = "**In this class's version:** "


def _my_receptive_field(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"convs_per_layer": 1}, public=True)
    c = choice
    return Variant({"convs_per_layer": c}, note=(
        f"{NOTE}each of the `n_layers` layers is a block of **{c} stacked width-`k` "
        "convolutions** (as a residual block holds several), so `n_layers` blocks hold "
        f"{c}·`n_layers` convolutions. Count the input positions one output of the whole stack "
        "depends on."), answer_replace=(
        ("one output of n_layers stacked width-k convolutions depends on",
         f"one output of n_layers blocks of {c} stacked width-k convolutions depends on"),),
        solution=(
        "def my_receptive_field(k, n_layers):\n"
        f"    return 1 + {c} * n_layers * (k - 1)  # every convolution adds k - 1 positions"))


def _block_parameters(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"groups": 1}, public=True)
    groups = choice
    return Variant({"groups": groups}, note=(
        f"{NOTE}the block's convolution is a **grouped** convolution with `groups={groups}` "
        f"(each output channel reads only `hid_dim / {groups}` input channels); `hid_dim` is a "
        f"multiple of {groups}. Bias and weight normalisation as in the package's block."),
        answer_replace=(
        ("Parameters of ConvGLUBlock(hid_dim, kernel_size, weight_norm=True).",
         f"Parameters of ConvGLUBlock(hid_dim, kernel_size, weight_norm=True) whose convolution "
         f"has groups={groups}."),),
        solution=(
        "def block_parameters(hid_dim, kernel_size):\n"
        "    out_channels = 2 * hid_dim\n"
        f"    v = out_channels * (hid_dim // {groups}) * kernel_size  # grouped kernels\n"
        "    return v + out_channels + out_channels  # + bias + weight norm's g"))


def _cache_floats(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"beam": 1}, public=True)
    beam = choice
    return Variant({"beam": beam}, note=(
        f"{NOTE}count the floats for one sentence decoded with **a beam of {beam} "
        "hypotheses** (each hypothesis keeps a cache of its own)."), answer_replace=(
        ("cache per sentence after", f"cache per sentence (a beam of {beam} hypotheses) after"),),
        solution=(
        "def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
        f"    return {beam} * n_layers * (kernel_size - 1) * hid_dim"))


def _attention_macs(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"every": 1}, public=True)
    every = choice
    return Variant({"every": every}, note=(
        f"{NOTE}only **every {_ordinal(every)} layer** attends (layers {every}, {2 * every}, "
        f"{3 * every}, …; the other layers have no attention, and a decoder of fewer than "
        f"{every} layers has none)."), answer_replace=(
        ("of all layers' attention", f"of the attending layers' attention (every "
                                     f"{_ordinal(every)} layer)"),),
        solution=(
        "def attention_macs(n_layers, trg_len, src_len, emb_dim):\n"
        f"    return (n_layers // {every}) * 2 * trg_len * src_len * emb_dim"))


def _perplexity_from_loss(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"base": 0}, public=True)
    base = choice
    return Variant({"base": base}, note=(
        f"{NOTE}`unit` may also be `\"base{base}\"`: a loss computed with base-{base} "
        "logarithms."), answer_replace=(
        ('("nats" or "bits")', f'("nats", "bits" or "base{base}")'),),
        solution=(
        "def perplexity_from_loss(loss, unit=\"nats\"):\n"
        "    if unit == \"nats\":\n"
        "        return math.exp(loss)\n"
        "    if unit == \"bits\":\n"
        "        return 2.0 ** loss\n"
        f"    if unit == \"base{base}\":\n"
        f"        return float({base}) ** loss\n"
        "    raise ValueError(f\"unknown unit {unit!r}\")"))


def _path_length(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"convs_per_layer": 1}, public=True)
    c = choice
    return Variant({"convs_per_layer": c}, note=(
        f"{NOTE}`conv_path_length(n, k)` counts **blocks of {c} stacked width-`k` "
        "convolutions**: the fewest such blocks after which the window of one output holds both "
        "words."), answer_replace=(
        ("Fewest convolution layers of width k whose window",
         f"Fewest blocks of {c} convolutions of width k whose window"),),
        solution=(
        "def conv_path_length(n, k):\n"
        f"    return -(-n // ({c} * (k - 1)))  # each block widens the window by {c}·(k - 1)\n"
        "\n\n"
        "def rnn_path_length(n):\n"
        "    return n"))


def _baseline_parameters(choice: tuple | None) -> Variant:
    if choice is None:
        return Variant({"gru_bias": True, "u_bias": True, "pieces": 2}, public=True)
    u_bias, pieces = choice
    extra = "" if u_bias else ", and $U_a$ has **no bias** either"
    readout = (
        "The maxout readout is the notebook's: `2 * out_dim` units, the larger of each pair "
        "is kept." if pieces == 2 else
        f"The maxout readout keeps the largest of **{pieces} values** instead of 2: its linear "
        f"layer maps $[s_i; c_i; E y_{{i-1}}]$ to `{pieces} * out_dim` units (with bias), and "
        f"each of the `out_dim` outputs is the maximum of {pieces} of them.")
    return Variant({"gru_bias": False, "u_bias": u_bias, "pieces": pieces}, note=(
        f"{NOTE}every GRU (both encoder directions and the decoder's `GRUCell`) is built with "
        f"**`bias=False`**{extra}; `gru_parameters` counts such a GRU. {readout}"), answer_replace=(
        ("Parameters of one direction of torch.nn.GRU(input_size, hidden_size).",
         "Parameters of one direction of torch.nn.GRU(input_size, hidden_size, bias=False)."),
        ("Parameters of RNNAttentionSeq2Seq(**config).",
         "Parameters of RNNAttentionSeq2Seq(**config), as this class's version builds it (the "
         "note above)."),), solution=(
        "def gru_parameters(input_size, hidden_size):\n"
        "    return 3 * hidden_size * (input_size + hidden_size)  # no bias vectors\n"
        "\n\n"
        "def baseline_parameters(config):\n"
        "    E, H, D = config[\"emb_dim\"], config[\"enc_hid_dim\"], config[\"dec_hid_dim\"]\n"
        "    A, O = config[\"attn_dim\"], config[\"out_dim\"]\n"
        "    Vs, Vt = config[\"src_vocab_size\"], config[\"trg_vocab_size\"]\n"
        "    encoder = Vs * E + 2 * gru_parameters(E, H) + (2 * H * D + D)\n"
        f"    attention = D * A + 2 * H * A + {'A' if u_bias else '0'} + A"
        f"  # W_a, U_a{' with' if u_bias else ' without'} bias, v_a\n"
        "    decoder = Vt * E + gru_parameters(E + 2 * H, D)\n"
        f"    readout = (D + 2 * H + E) * {pieces} * O + {pieces} * O"
        f"  # maxout over {pieces} pieces, with bias\n"
        "    output = O * Vt + Vt\n"
        "    return encoder + attention + decoder + readout + output"))


def _separable_params(choice: int | None) -> Variant:
    if choice is None:
        return Variant({"multiplier": 1}, public=True)
    m = choice
    return Variant({"multiplier": m}, note=(
        f"{NOTE}the depthwise convolution has a **depth multiplier of {m}**: {m} filters of "
        f"width `k` per input channel ({m}·`c_in` channels out, still without bias), and the 1x1 "
        f"convolution maps those {m}·`c_in` channels to `c_out`."), answer_replace=(
        ("Parameters of depthwise (no bias)",
         f"Parameters of depthwise with depth multiplier {m} (no bias)"),),
        solution=(
        "def separable_params(c_in, c_out, k, bias=True):\n"
        f"    return {m} * c_in * k + {m} * c_in * c_out + (c_out if bias else 0)\n"
        "\n\n"
        "def saving(c_in, c_out, k):\n"
        "    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)"))


#: Every exercise with a variant: its builder, called with one of its :data:`CHOICES` (None: the
#: public version).
BUILDERS: dict[str, Callable[[object], Variant]] = {
    "same_padding_moves": _same_padding_moves,
    "my_receptive_field": _my_receptive_field,
    "residual_variance": _residual_variance,
    "block_parameters": _block_parameters,
    "cache_floats": _cache_floats,
    "scaled_context_variance": _scaled_context_variance,
    "attention_macs": _attention_macs,
    "perplexity_from_loss": _perplexity_from_loss,
    "brevity_prediction": _brevity_prediction,
    "training_steps": _training_steps,
    "path_length": _path_length,
    "baseline_parameters": _baseline_parameters,
    "separable_params": _separable_params,
    "attention_vs_conv": _attention_vs_conv,
}


def _accepts(exercise: str) -> Callable[[object, object], None] | None:
    """A predict exercise's acceptance (the check's and the hidden test's), or None."""
    from convs2s.course.checks import nb01, nb02, nb04, nb06, nb07, nb08

    return {"same_padding_moves": nb01.accept_same_padding_moves,
            "residual_variance": nb02.accept_residual_variance,
            "scaled_context_variance": nb04.accept_scaled_context_variance,
            "brevity_prediction": nb06.accept_brevity_prediction,
            "training_steps": nb07.accept_training_steps,
            "attention_vs_conv": nb08.accept_attention_vs_conv}.get(exercise)


#: The public solutions' answers to the predict exercises (the course notebooks' solution
#: cells): a variant must refuse them, as it refuses the public measurement.
PUBLIC_ANSWERS = {
    "residual_variance": [2**10],
    "scaled_context_variance": [16 / 7],
    "brevity_prediction": [100 * math.exp(1 - 2)],
    "attention_vs_conv": [3 * 256],
}


def _answers_public(exercise: str, version: Variant, public: Variant) -> bool:
    """Whether the public solution or the public measurement would pass ``version``."""
    accept = _accepts(exercise)
    if accept is None:
        return False
    for answer in [public.params["expected"], *PUBLIC_ANSWERS.get(exercise, [])]:
        try:
            accept(answer, version.params["expected"])
        except AssertionError:
            continue
        return True
    return False


def build(exercise: str, choice: object) -> Variant:
    """``exercise``'s version for one of its :data:`CHOICES` (None: the public version)."""
    if choice is not None and choice not in CHOICES[exercise]:
        raise VariantError(f"{exercise}: {choice!r} is not one of its choices")
    return BUILDERS[exercise](choice)


def draw(exercise: str, name: str) -> object:
    """The choice the class ``name`` draws for ``exercise`` (uniformly from its
    :data:`CHOICES`, seeded by sha256 of the name and the exercise)."""
    return _rng(name, exercise).choice(CHOICES[exercise])


def variant(exercise: str, name: str | None) -> Variant | None:
    """``exercise``'s version for the class ``name`` (None: the public one); None when the
    exercise has no variant (implement, debug, explain). A predict variant is drawn again
    until neither the public solution nor the public measurement passes it (no choice is
    answered by them: the draw is kept, unless a measurement changed)."""
    if exercise not in BUILDERS:
        return None
    if name is None:
        return build(exercise, None)
    rng = _rng(name, exercise)
    version = build(exercise, rng.choice(CHOICES[exercise]))
    if _accepts(exercise) is not None:
        public = build(exercise, None)
        for _ in range(50):
            if not _answers_public(exercise, version, public):
                break
            version = build(exercise, rng.choice(CHOICES[exercise]))
        else:
            raise VariantError(f"{exercise}: no variant of {name!r} differs enough from the "
                               "public numbers (tools/variants.py)")
    return version


def apply_text(text: str, pairs: tuple[tuple[str, str], ...], where: str) -> str:
    """``text`` with each (old, new) replaced; VariantError when an ``old`` is not found once."""
    for old, new in pairs:
        if text.count(old) != 1:
            raise VariantError(f"{where}: the variant changes {old!r}, which the notebook's text "
                               f"holds {text.count(old)} times (it must hold it once): update "
                               "tools/variants.py with the notebook")
        text = text.replace(old, new)
    return text


def check_name(name: str) -> str:
    """A variant name as given on the command line, or VariantError (one line)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 100 or not name.isprintable():
        raise VariantError(f"--variant {name[:40]!r}: give a short printable name (e.g. the "
                           "class and term, 'ml-2027-spring')")
    return name.strip()
