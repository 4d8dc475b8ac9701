"""Hidden tests of notebook 07's exercises.

The conventions are those of ``01.py``. The ``explain`` exercise (``cpu_speed``) is graded by
hand and has none. ``speed_crossover`` is practice: where the crossover lies depends on the
machine, so its hidden test, like its check, accepts any of the sweep's lengths as an int.
"""

from convs2s.course.checks import nb07
from convs2s.course.checks.testing import Case, as_int, assert_equal, call, predicted, value


def training_steps(variant):
    return predicted("prediction", nb07.accept_training_steps, variant)


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
