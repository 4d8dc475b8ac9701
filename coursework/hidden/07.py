"""Hidden tests of notebook 07's exercises.

The conventions are those of ``01.py``. The ``explain`` exercise (``cpu_speed``) is graded by
hand and has none. ``speed_crossover`` is practice: where the crossover lies depends on the
machine, so its hidden test, like its check, accepts any of the sweep's lengths as an int.
"""

from textwrap import dedent

from convs2s.course.checks import EXERCISES, nb07
from convs2s.course.checks.class_variants import NOTE, Variant, Versions
from convs2s.course.checks.testing import (
    Case,
    Samples,
    as_int,
    assert_equal,
    call,
    predicted,
    value,
)


def training_steps(variant):
    return predicted("prediction", "training_steps", variant)


def path_length(variant):
    convs = variant.get("convs_per_layer", 1)  # convolutions per block (1 in the notebook)
    cases = []
    for n, k in [(1, 9), (8, 9), (9, 9), (1000, 3), (1001, 3), (13, 6), (5, 2)]:
        expected = -(-n // (convs * (k - 1)))
        cases.append(Case(f"conv_path_length({n}, {k})", call("conv_path_length", n, k),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    for n in (1, 7, 1000):
        cases.append(Case(f"rnn_path_length({n})", call("rnn_path_length", n),
                          lambda got, e=n: assert_equal(as_int(got), e)))
    return cases


#: The configurations of baseline_parameters' hidden cases.
_CONFIGS = (dict(src_vocab_size=1000, trg_vocab_size=1200, emb_dim=256, enc_hid_dim=512,
                 dec_hid_dim=512, attn_dim=512, out_dim=256),
            dict(src_vocab_size=5, trg_vocab_size=6, emb_dim=1, enc_hid_dim=2, dec_hid_dim=3,
                 attn_dim=4, out_dim=5))


def baseline_parameters(variant):
    gru_bias = variant.get("gru_bias", True)  # the GRUs' bias vectors (True in the notebook)
    u_bias = variant.get("u_bias", True)  # U_a's bias (True in the notebook)
    pieces = variant.get("pieces", 2)  # the readout's maxout pieces (2 in the notebook)

    def gru_count(i, h):
        return 3 * h * (i + h) + (6 * h if gru_bias else 0)

    cases = []
    for i, h in [(1, 1), (10, 20), (256, 512)]:
        expected = gru_count(i, h)
        cases.append(Case(f"gru_parameters({i}, {h})", call("gru_parameters", i, h),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    for cfg in _CONFIGS:
        E, H, D = cfg["emb_dim"], cfg["enc_hid_dim"], cfg["dec_hid_dim"]
        A, O, Vs, Vt = cfg["attn_dim"], cfg["out_dim"], cfg["src_vocab_size"], cfg["trg_vocab_size"]
        expected = (Vs * E + 2 * gru_count(E, H) + 2 * H * D + D                # encoder, s_0
                    + D * A + 2 * H * A + (A if u_bias else 0) + A              # attention
                    + Vt * E + gru_count(E + 2 * H, D)                          # decoder
                    + (D + 2 * H + E) * pieces * O + pieces * O + O * Vt + Vt)  # readout, output
        cases.append(Case(f"baseline_parameters({cfg})", call("baseline_parameters", dict(cfg)),
                          lambda got, e=expected: assert_equal(as_int(got), e, name="the count")))
    return cases


def speed_crossover(variant):
    return [Case("your prediction", value("crossover_prediction"), nb07.accept_speed_crossover)]


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _training_steps_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    lengths, layers = ((nb07.TRAINING_STEP_LENGTHS, nb07.TRAINING_STEP_LAYERS) if choice is None
                       else choice)
    measured = EXERCISES["training_steps"].measure(tuple(lengths), layers)
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


def _path_length_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``convs_per_layer``."""
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


def _baseline_parameters_version(choice: tuple | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``gru_bias``,
    ``u_bias`` and ``pieces``."""
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


VERSIONS = {
    # (decoder lengths, decoder layers): 8 length triples x 6 layer counts
    "training_steps": Versions(tuple(
        (lengths, layers)
        for lengths in ((5, 10, 20), (6, 18, 54), (7, 21, 35), (8, 16, 32), (9, 27, 45),
                        (11, 22, 44), (12, 24, 48), (15, 30, 60))
        for layers in (2, 4, 5, 6, 7, 8)), _training_steps_version),
    # convolutions per block
    "path_length": Versions(tuple(range(2, 22)), _path_length_version),
    # (U_a has a bias, maxout pieces); the GRUs have no bias
    "baseline_parameters": Versions(tuple((u_bias, pieces) for u_bias in (True, False)
                                          for pieces in range(2, 12)),
                                    _baseline_parameters_version),
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "training_steps": Samples(right=[
        'prediction = {"GRU + attention": [20, 40, 80], "ConvS2S": [6, 6, 6]}',
        'prediction = {"ConvS2S": (6, 6, 6), "GRU + attention": [2 * n for n in (10, 20, 40)]}',
        "import numpy as np\n"
        'prediction = {"GRU + attention": [np.int64(n) for n in (20, 40, 80)], "ConvS2S": '
        "[np.int64(6)] * 3}",
    ], wrong=[
        'prediction = {"GRU + attention": [10, 20, 40], "ConvS2S": [3, 3, 3]}',
        'prediction = {"GRU + attention": [20, 40, 80], "ConvS2S": [20, 40, 80]}',
    ]),
    "path_length": Samples(right=[
        dedent("""\
        import math

        def conv_path_length(n, k):
            return math.ceil(n / (k - 1))

        def rnn_path_length(n):
            return n
        """),
        dedent("""\
        def conv_path_length(n, k):
            layers, seen = 0, 1
            while seen < n + 1:
                layers += 1
                seen += k - 1
            return layers

        def rnn_path_length(n):
            return int(n)
        """),
    ], wrong=[
        dedent("""\
        def conv_path_length(n, k):
            return n // (k - 1)

        def rnn_path_length(n):
            return n
        """),
        dedent("""\
        def conv_path_length(n, k):
            return -(-n // (k - 1))

        def rnn_path_length(n):
            return 1
        """),
    ], shortcut=[
        "from convs2s.course.receptive_field import conv_path_length, rnn_path_length",
        dedent("""\
        import math
        from convs2s.course.receptive_field import rnn_path_length

        def conv_path_length(n, k):
            return math.ceil(n / (k - 1))
        """),
        dedent("""\
        from convs2s.course.receptive_field import path_lengths

        def conv_path_length(n, k):
            if n == 0:
                return 0
            return path_lengths(n, kernel_sizes=(k,))[f"conv k={k}"][-1]

        def rnn_path_length(n):
            return n
        """),
    ]),
    "baseline_parameters": Samples(right=[
        dedent("""\
        def _gru_parameters(i, h):
            return 3 * (h * i + h * h + 2 * h)

        def gru_parameters(input_size, hidden_size):
            return _gru_parameters(input_size, hidden_size)

        def baseline_parameters(config):
            c = config
            E, H, D = c["emb_dim"], c["enc_hid_dim"], c["dec_hid_dim"]
            A, O = c["attn_dim"], c["out_dim"]
            total = c["src_vocab_size"] * E + 2 * _gru_parameters(E, H) + 2 * H * D + D
            total += D * A + 2 * H * A + A + A
            total += c["trg_vocab_size"] * E + _gru_parameters(E + 2 * H, D)
            total += (D + 2 * H + E + 1) * 2 * O + (O + 1) * c["trg_vocab_size"]
            return total
        """),
    ], wrong=[
        dedent("""\
        def gru_parameters(input_size, hidden_size):
            return 3 * hidden_size * (input_size + hidden_size) + 3 * hidden_size

        def baseline_parameters(config):
            return 0
        """),
    ], shortcut=[
        dedent("""\
        import torch
        from convs2s.course.baselines import rnn_parameter_count

        def gru_parameters(input_size, hidden_size):
            return sum(p.numel() for p in torch.nn.GRUCell(input_size, hidden_size).parameters())

        def baseline_parameters(config):
            return rnn_parameter_count(**config)
        """),
        dedent("""\
        from convs2s.course.baselines import rnn_parameter_count

        def gru_parameters(input_size, hidden_size):
            return 3 * hidden_size * (input_size + hidden_size + 2)

        def baseline_parameters(config):
            return rnn_parameter_count(**config)
        """),
        dedent("""\
        from types import SimpleNamespace

        import torch
        from convs2s.model.convs2s import count_parameters

        def gru_parameters(input_size, hidden_size):
            h3 = 3 * hidden_size
            shapes = [(h3, input_size), (h3, hidden_size), (h3,), (h3,)]
            weights = SimpleNamespace(parameters=lambda: [torch.empty(s) for s in shapes])
            return count_parameters(weights, trainable_only=False)  # no module built

        def baseline_parameters(config):
            c = config
            E, H, D = c["emb_dim"], c["enc_hid_dim"], c["dec_hid_dim"]
            A, O = c["attn_dim"], c["out_dim"]
            total = c["src_vocab_size"] * E + 2 * gru_parameters(E, H) + 2 * H * D + D
            total += D * A + 2 * H * A + A + A
            total += c["trg_vocab_size"] * E + gru_parameters(E + 2 * H, D)
            total += (D + 2 * H + E + 1) * 2 * O + (O + 1) * c["trg_vocab_size"]
            return total
        """),
    ]),
    "speed_crossover": Samples(right=[
        # practice: any of the sweep's six lengths, as an int, is accepted (the
        # answer depends on the machine)
        "crossover_prediction = 64  # the RNN's steps get thin",
        "crossover_prediction = 2 ** 3",
        "crossover_prediction = 256",
        "crossover_prediction = int('16')",
        "import numpy as np\ncrossover_prediction = np.int64(64)",
        "import torch\ncrossover_prediction = torch.tensor([64])",
    ], wrong=[
        "crossover_prediction = 50",
        "crossover_prediction = 64.0",
        "crossover_prediction = '64'",
        "crossover_prediction = [64]",
        "crossover_prediction = True",
    ]),
}
