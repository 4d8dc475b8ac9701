"""Hidden grading tests of notebook 07 (ConvS2S vs an RNN with attention).

One function per exercise id; its parameters are the names the learner's answer defines, its
body plain asserts (the course builder copies the body into the exercise's grade cell).
"""


def training_steps(prediction):
    assert [int(v) for v in prediction["GRU + attention"]] == [20, 40, 80]
    assert [int(v) for v in prediction["ConvS2S"]] == [6, 6, 6]


def path_length(conv_path_length, rnn_path_length):
    assert conv_path_length(1, 9) == 1 and conv_path_length(8, 9) == 1
    assert conv_path_length(9, 9) == 2
    assert conv_path_length(1000, 3) == 500 and conv_path_length(1001, 3) == 501
    assert conv_path_length(13, 6) == 3
    assert isinstance(conv_path_length(1000, 3), int)
    assert rnn_path_length(1000) == 1000


def baseline_parameters(gru_parameters, baseline_parameters):
    from convs2s.course.baselines import rnn_parameter_count as _count

    assert gru_parameters(1, 1) == 12 and gru_parameters(10, 20) == 3 * 20 * 30 + 120
    for _cfg in (dict(src_vocab_size=1000, trg_vocab_size=1200, emb_dim=256, enc_hid_dim=512,
                      dec_hid_dim=512, attn_dim=512, out_dim=256),
                 dict(src_vocab_size=5, trg_vocab_size=6, emb_dim=1, enc_hid_dim=2,
                      dec_hid_dim=3, attn_dim=4, out_dim=5)):
        assert baseline_parameters(_cfg) == _count(**_cfg), _cfg
