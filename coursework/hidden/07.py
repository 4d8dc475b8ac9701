"""Hidden grading tests of notebook 07 (ConvS2S vs an RNN with attention).

One function per exercise id; its parameters are the names the learner's answer defines, its
body plain asserts (the course builder copies the body into the exercise's grade cell).
"""


def training_steps(prediction):
    assert [int(v) for v in prediction["GRU + attention"]] == [20, 40, 80]
    assert [int(v) for v in prediction["ConvS2S"]] == [6, 6, 6]


def path_length(conv_path_length, rnn_path_length):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _conv_path_length = _guarded("path_length", conv_path_length)
    _rnn_path_length = _guarded("path_length", rnn_path_length)

    assert _conv_path_length(1, 9) == 1 and _conv_path_length(8, 9) == 1
    assert _conv_path_length(9, 9) == 2
    assert _conv_path_length(1000, 3) == 500 and _conv_path_length(1001, 3) == 501
    assert _conv_path_length(13, 6) == 3
    assert isinstance(_conv_path_length(1000, 3), int)
    assert _rnn_path_length(1000) == 1000


def baseline_parameters(gru_parameters, baseline_parameters):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _gru_parameters = _guarded("baseline_parameters", gru_parameters)
    _baseline_parameters = _guarded("baseline_parameters", baseline_parameters)

    from convs2s.course.baselines import rnn_parameter_count as _count

    assert _gru_parameters(1, 1) == 12 and _gru_parameters(10, 20) == 3 * 20 * 30 + 120
    for _cfg in (dict(src_vocab_size=1000, trg_vocab_size=1200, emb_dim=256, enc_hid_dim=512,
                      dec_hid_dim=512, attn_dim=512, out_dim=256),
                 dict(src_vocab_size=5, trg_vocab_size=6, emb_dim=1, enc_hid_dim=2,
                      dec_hid_dim=3, attn_dim=4, out_dim=5)):
        assert _baseline_parameters(_cfg) == _count(**_cfg), _cfg
