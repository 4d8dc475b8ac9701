"""A class's own version of the graded exercises: ``make student VARIANT=<name>``.

The public course notebooks show every solution (folded) and every measurement, so a graded copy
built from them is answered by them. A *variant* changes, for every predict and derive exercise,
what the public material answers: a predict exercise gets new numbers (kernel width, layers,
lengths, dimensions, a fraction), a derive exercise, whose answer is a formula the public
solution writes in general, gets a change of the thing it counts (two convolutions per block,
a grouped convolution, a beam, ...). The change is made in the task's text, in the values the
hidden test grades against (``_variant`` in the test cell) and in the instructor's solution.

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
        params: the values the hidden test grades against (``_variant`` in its test cell).
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


# --------------------------------------------------------------------------------------------
# predict: new numbers, the expected value measured with the package, as the check measures it
# --------------------------------------------------------------------------------------------


def _same_padding_moves(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb01

    k, layers, length, changed = nb01.SAME_K, nb01.SAME_LAYERS, nb01.SAME_LENGTH, 8
    if rng is not None:
        k, layers = rng.choice([3, 5]), rng.choice([2, 3, 4])
        length = rng.randint(11, 16)
        changed = rng.choice([p for p in range(1, length - 1) if p != 8])
    moved = nb01._measured_moves(changed, k, layers, length)
    params = {"k": k, "layers": layers, "length": length, "changed": changed, "expected": moved}
    if rng is None:
        return Variant(params, public=True)
    return Variant(params, replace=(
        ("$L = 3$ blocks", f"$L = {layers}$ blocks"),
        ("kernel width $k = 3$", f"kernel width $k = {k}$"),
        ("10 positions, $0, \\dots, 9$", f"{length} positions, $0, \\dots, {length - 1}$"),
        ("position **8**", f"position **{changed}**"),
    ), solution=f"moved_outputs = {moved}")


def _residual_variance(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb02

    blocks = nb02.VARIANCE_BLOCKS
    if rng is not None:  # 2**N within 5x of the measurement, 2**10 and its measurement not
        blocks = rng.choice([3, 4, 5, 6])
    params = {"blocks": blocks, "expected": nb02.measured_unscaled_variance(blocks)}
    if rng is None:
        return Variant(params, public=True)
    return Variant(params, replace=(
        ("freshly initialised 10-block", f"freshly initialised {blocks}-block"),
        ("output of block 10", f"output of block {blocks}"),
    ), solution=f"variance_ratio = 2**{blocks}")


def _scaled_context_variance(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb04

    m, first = 8, Fraction(1, 2)
    if rng is not None:
        m, first = rng.choice([5, 6, 10, 12]), rng.choice([Fraction(1, 3), Fraction(2, 3),
                                                           Fraction(3, 4)])
    rest = (1 - first) / (m - 1)
    weights = [float(first)] + [float(rest)] * (m - 1)
    import torch

    measured = nb04._measured_scaled_variance(torch.tensor(weights, dtype=torch.float64))
    params = {"m": m, "weights": weights, "expected": measured}
    if rng is None:
        return Variant(params, public=True)

    def tex(f: Fraction) -> str:
        return f"\\tfrac{{{f.numerator}}}{{{f.denominator}}}"

    exact = m * (first**2 + (m - 1) * rest**2)
    return Variant(params, replace=(
        ("$m = 8$ real source tokens", f"$m = {m}$ real source tokens"),
        ("$a = (\\tfrac12, \\tfrac1{14}, \\dots, \\tfrac1{14})$",
         f"$a = ({tex(first)}, {tex(rest)}, \\dots, {tex(rest)})$"),
        ("(half the weight on one token, the other half\nspread evenly over the other 7)",
         f"({first} of the weight on one token, the other {1 - first}\nspread evenly over the "
         f"other {m - 1})"),
    ), solution=f"predicted_variance = {float(exact)!r}  # m · Σ a² = {exact}")


_FRACTIONS = {(1, 3): "a third", (2, 3): "two thirds", (1, 4): "a quarter",
              (3, 4): "three quarters"}


def _brevity_prediction(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb06

    kept, parts = 1, 2
    if rng is not None:
        kept, parts = rng.choice(sorted(_FRACTIONS))
    measured = nb06._halved_outputs_bleu(kept, parts).score
    params = {"kept": kept, "parts": parts, "expected": measured}
    if rng is None:
        return Variant(params, public=True)
    words = _FRACTIONS[kept, parts]
    multiple = {3: "a multiple of 3", 4: "a multiple of 4"}[parts]
    return Variant(params, replace=(
        ("outputs half as long", f"outputs {words} as long"),
        ("each with an even number of tokens", f"each with {multiple} tokens"),
        ("the first half of each reference", f"the first {words} of each reference"),
    ), answer_replace=(("half-length outputs", f"outputs {words} as long"),),
        solution=f"prediction = 100 * math.exp(1 - {parts} / {kept})  # "
                 f"{100 * math.exp(1 - parts / kept):.1f}")


def _training_steps(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb07

    lengths, layers = nb07.TRAINING_STEP_LENGTHS, nb07._DEC_LAYERS
    if rng is not None:
        first = rng.choice([6, 8, 12, 15])
        lengths, layers = (first, 2 * first, 4 * first - rng.choice([1, 3])), rng.choice([2, 4, 5])
    measured = nb07._measured_training_steps(tuple(lengths), layers)
    params = {"lengths": list(lengths), "layers": layers, "expected": measured}
    if rng is None:
        return Variant(params, public=True)
    a, b, c = lengths
    return Variant(params, replace=(
        ("**10, 20 and 40 tokens**", f"**{a}, {b} and {c} tokens**"),
        ("with **3 layers**", f"with **{layers} layers**"),
    ), answer_replace=(
        ("decoder lengths 10, 20, 40", f"decoder lengths {a}, {b}, {c}"),
        ("(3 decoder layers) at 10, 20, 40", f"({layers} decoder layers) at {a}, {b}, {c}"),
    ), solution=(f'prediction = {{"GRU + attention": [2 * n for n in ({a}, {b}, {c})], '
                 f'"ConvS2S": [2 * {layers}] * 3}}'))


def _attention_vs_conv(rng: random.Random | None) -> Variant:
    from convs2s.course.checks import nb08

    d, k = nb08.ATTENTION_CHANNELS, nb08.ATTENTION_KERNEL
    if rng is not None:
        d, k = rng.choice([128, 192, 320, 384, 512]), rng.choice([3, 5, 7])
    params = {"d": d, "k": k, "expected": nb08._crossover(d, k)[0]}
    if rng is None:
        return Variant(params, public=True)
    return Variant(params, replace=(("For $d = 256$ and $k = 3$", f"For $d = {d}$ and $k = {k}$"),),
                   solution=f"prediction = {k} * {d}")


# --------------------------------------------------------------------------------------------
# derive: the thing counted changes; the hidden test computes with these parameters
# --------------------------------------------------------------------------------------------

NOTE = "**In this class's version:** "


def _my_receptive_field(rng):
    if rng is None:
        return Variant({"convs_per_layer": 1}, public=True)
    c = rng.choice([2, 3])
    return Variant({"convs_per_layer": c}, note=(
        f"{NOTE}each of the `n_layers` layers is a block of **{c} stacked width-`k` "
        "convolutions** (as a residual block holds several), so `n_layers` blocks hold "
        f"{c}·`n_layers` convolutions. Count the input positions one output of the whole stack "
        "depends on."), solution=(
        "def my_receptive_field(k, n_layers):\n"
        f"    return 1 + {c} * n_layers * (k - 1)  # every convolution adds k - 1 positions"))


def _block_parameters(rng):
    if rng is None:
        return Variant({"groups": 1}, public=True)
    groups = rng.choice([2, 4, 8])
    return Variant({"groups": groups}, note=(
        f"{NOTE}the block's convolution is a **grouped** convolution with `groups={groups}` "
        f"(each output channel reads only `hid_dim / {groups}` input channels); `hid_dim` is a "
        f"multiple of {groups}. Bias and weight normalisation as in the package's block."),
        solution=(
        "def block_parameters(hid_dim, kernel_size):\n"
        "    out_channels = 2 * hid_dim\n"
        f"    v = out_channels * (hid_dim // {groups}) * kernel_size  # grouped kernels\n"
        "    return v + out_channels + out_channels  # + bias + weight norm's g"))


def _cache_floats(rng):
    if rng is None:
        return Variant({"beam": 1}, public=True)
    beam = rng.choice([3, 4, 5, 6, 8])
    return Variant({"beam": beam}, note=(
        f"{NOTE}count the floats for one sentence decoded with **a beam of {beam} "
        "hypotheses** (each hypothesis keeps a cache of its own)."), solution=(
        "def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
        f"    return {beam} * n_layers * (kernel_size - 1) * hid_dim"))


def _attention_macs(rng):
    if rng is None:
        return Variant({"every": 1}, public=True)
    every = rng.choice([2, 3, 4])
    return Variant({"every": every}, note=(
        f"{NOTE}only **every {every}th layer** attends (layers {every}, {2 * every}, "
        f"{3 * every}, …; the other layers have no attention)."), solution=(
        "def attention_macs(n_layers, trg_len, src_len, emb_dim):\n"
        f"    return (n_layers // {every}) * 2 * trg_len * src_len * emb_dim"))


def _perplexity_from_loss(rng):
    if rng is None:
        return Variant({"base": 0}, public=True)
    base = rng.choice([3, 4, 5, 6, 8, 10, 16])
    return Variant({"base": base}, note=(
        f"{NOTE}`unit` may also be `\"base{base}\"`: a loss computed with base-{base} "
        "logarithms."), solution=(
        "def perplexity_from_loss(loss, unit=\"nats\"):\n"
        "    if unit == \"nats\":\n"
        "        return math.exp(loss)\n"
        "    if unit == \"bits\":\n"
        "        return 2.0 ** loss\n"
        f"    if unit == \"base{base}\":\n"
        f"        return float({base}) ** loss\n"
        "    raise ValueError(f\"unknown unit {unit!r}\")"))


def _path_length(rng):
    if rng is None:
        return Variant({"convs_per_layer": 1}, public=True)
    c = rng.choice([2, 3])
    return Variant({"convs_per_layer": c}, note=(
        f"{NOTE}`conv_path_length(n, k)` counts **blocks of {c} stacked width-`k` "
        "convolutions**: the fewest such blocks after which the window of one output holds both "
        "words."), solution=(
        "def conv_path_length(n, k):\n"
        f"    return -(-n // ({c} * (k - 1)))  # each block widens the window by {c}·(k - 1)\n"
        "\n\n"
        "def rnn_path_length(n):\n"
        "    return n"))


def _baseline_parameters(rng):
    if rng is None:
        return Variant({"gru_bias": True, "u_bias": True}, public=True)
    u_bias = rng.choice([True, False])
    extra = "" if u_bias else ", and $U_a$ has **no bias** either"
    return Variant({"gru_bias": False, "u_bias": u_bias}, note=(
        f"{NOTE}every GRU (both encoder directions and the decoder's `GRUCell`) is built with "
        f"**`bias=False`**{extra}; `gru_parameters` counts such a GRU."), solution=(
        "def gru_parameters(input_size, hidden_size):\n"
        "    return 3 * hidden_size * (input_size + hidden_size)  # no bias vectors\n"
        "\n\n"
        "def baseline_parameters(config):\n"
        "    E, H, D = config[\"emb_dim\"], config[\"enc_hid_dim\"], config[\"dec_hid_dim\"]\n"
        "    A, O = config[\"attn_dim\"], config[\"out_dim\"]\n"
        "    Vs, Vt = config[\"src_vocab_size\"], config[\"trg_vocab_size\"]\n"
        "    encoder = Vs * E + 2 * gru_parameters(E, H) + (2 * H * D + D)\n"
        f"    attention = D * A + 2 * H * A + {'A' if u_bias else '0'} + A\n"
        "    decoder = Vt * E + gru_parameters(E + 2 * H, D)\n"
        "    output = (D + 2 * H + E) * 2 * O + 2 * O + O * Vt + Vt\n"
        "    return encoder + attention + decoder + output"))


def _separable_params(rng):
    if rng is None:
        return Variant({"multiplier": 1}, public=True)
    m = rng.choice([2, 3, 4])
    return Variant({"multiplier": m}, note=(
        f"{NOTE}the depthwise convolution has a **depth multiplier of {m}**: {m} filters of "
        f"width `k` per input channel ({m}·`c_in` channels out, still without bias), and the 1x1 "
        f"convolution maps those {m}·`c_in` channels to `c_out`."), solution=(
        "def separable_params(c_in, c_out, k, bias=True):\n"
        f"    return {m} * c_in * k + {m} * c_in * c_out + (c_out if bias else 0)\n"
        "\n\n"
        "def saving(c_in, c_out, k):\n"
        "    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)"))


#: Every exercise with a variant: its builder, called with a seeded generator (None: public).
BUILDERS: dict[str, Callable[[random.Random | None], Variant]] = {
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


def variant(exercise: str, name: str | None) -> Variant | None:
    """``exercise``'s version for the class ``name`` (None: the public one); None when the
    exercise has no variant (implement, debug, explain). A predict variant is drawn again
    until neither the public solution nor the public measurement passes it."""
    build = BUILDERS.get(exercise)
    if build is None:
        return None
    if name is None:
        return build(None)
    rng = _rng(name, exercise)
    version = build(rng)
    if _accepts(exercise) is not None:
        public = build(None)
        for _ in range(50):
            if not _answers_public(exercise, version, public):
                break
            version = build(rng)
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
