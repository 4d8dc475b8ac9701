"""Hidden tests of notebook 07's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``cpu_speed``) is graded by
hand and has none. ``speed_crossover`` is practice: where the crossover lies depends on the
machine, so its hidden test, like its check, accepts any of the sweep's lengths as an int.
"""


def training_steps(prediction):
    from convs2s.course.checks import nb07

    nb07.accept_training_steps(prediction, _variant["expected"])  # noqa: F821


def path_length(conv_path_length, rnn_path_length):
    from convs2s.course.checks import _core, guarded

    conv = guarded("path_length", conv_path_length)
    rnn = guarded("path_length", rnn_path_length)
    convs = _variant["convs_per_layer"]  # noqa: F821 - 1 in the notebook
    for n, k in [(1, 9), (8, 9), (9, 9), (1000, 3), (1001, 3), (13, 6), (5, 2)]:
        _core._assert_equal(_core._assert_int(conv(n, k)), -(-n // (convs * (k - 1))),
                            name=f"conv_path_length({n}, {k})")
    for n in (1, 7, 1000):
        _core._assert_equal(_core._assert_int(rnn(n)), n, name=f"rnn_path_length({n})")


def baseline_parameters(gru_parameters, baseline_parameters):
    from convs2s.course.checks import _core, guarded

    gru = guarded("baseline_parameters", gru_parameters)
    total = guarded("baseline_parameters", baseline_parameters)
    gru_bias, u_bias = _variant["gru_bias"], _variant["u_bias"]  # noqa: F821

    def gru_count(i, h):
        return 3 * h * (i + h) + (6 * h if gru_bias else 0)

    for i, h in [(1, 1), (10, 20), (256, 512)]:
        _core._assert_equal(_core._assert_int(gru(i, h)), gru_count(i, h),
                            name=f"gru_parameters({i}, {h})")
    for cfg in (dict(src_vocab_size=1000, trg_vocab_size=1200, emb_dim=256, enc_hid_dim=512,
                     dec_hid_dim=512, attn_dim=512, out_dim=256),
                dict(src_vocab_size=5, trg_vocab_size=6, emb_dim=1, enc_hid_dim=2,
                     dec_hid_dim=3, attn_dim=4, out_dim=5)):
        E, H, D = cfg["emb_dim"], cfg["enc_hid_dim"], cfg["dec_hid_dim"]
        A, O, Vs, Vt = cfg["attn_dim"], cfg["out_dim"], cfg["src_vocab_size"], cfg["trg_vocab_size"]
        expected = (Vs * E + 2 * gru_count(E, H) + 2 * H * D + D            # encoder, s_0
                    + D * A + 2 * H * A + (A if u_bias else 0) + A          # attention
                    + Vt * E + gru_count(E + 2 * H, D)                      # decoder
                    + (D + 2 * H + E) * 2 * O + 2 * O + O * Vt + Vt)        # readout, output
        _core._assert_equal(_core._assert_int(total(dict(cfg))), expected,
                            name="baseline_parameters(config)")


def speed_crossover(crossover_prediction):
    from convs2s.course.checks import nb07

    nb07.accept_speed_crossover(crossover_prediction)
