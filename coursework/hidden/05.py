"""Hidden tests of notebook 05's exercises (nbgrader grading; never shown to learners).

One function per exercise id; its parameters are the names the learner's answer defines, and
the course builder copies its body (plain asserts) into the exercise's grade cell, after the
visible ``checks.<id>(...)`` call. Explain exercises are graded by hand: no function here.
"""




def perplexity_from_loss(perplexity_from_loss):
    import math as _math

    for _loss in (0.01, 1.0, 1.567, 4.16, 9.0):
        assert _math.isclose(perplexity_from_loss(_loss), _math.exp(_loss), rel_tol=1e-9)
        assert _math.isclose(perplexity_from_loss(_loss, "nats"), _math.exp(_loss),
                             rel_tol=1e-9)
        assert _math.isclose(perplexity_from_loss(_loss / _math.log(2), "bits"),
                             _math.exp(_loss), rel_tol=1e-9)
    assert _math.isclose(perplexity_from_loss(_math.log(5892)), 5892, rel_tol=1e-9)


def token_loss(token_loss):
    import torch as _torch
    import torch.nn.functional as _F

    _g = _torch.Generator().manual_seed(505)
    for _pad in (1, 0, 7):
        _trg = _torch.randint(8, 50, (5, 9), generator=_g)
        _trg[0, 3:] = _pad
        _trg[2, 6:] = _pad
        _logits = _torch.randn(5, 9, 50, generator=_g)
        _expected = _F.cross_entropy(_logits.reshape(-1, 50), _trg.reshape(-1),
                                     ignore_index=_pad)
        _torch.testing.assert_close(token_loss(_logits, _trg, _pad), _expected)
        # ten more pad columns, whatever the logits there: the same loss
        _more = _torch.cat([_trg, _torch.full((5, 10), _pad)], dim=1)
        _more_logits = _torch.cat([_logits, 5 * _torch.randn(5, 10, 50, generator=_g)], dim=1)
        _torch.testing.assert_close(token_loss(_more_logits, _more, _pad), _expected)


def build_itos(build_itos):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _build_itos = _guarded("build_itos", build_itos)

    from convs2s.data import Vocab as _Vocab

    _lists = [["b", "a", "c"], ["a", "b"], ["a", "d", "d"], ["e"], ["c", "b"]]
    for _min_freq in (1, 2, 3, 4):
        assert list(_build_itos(_lists, _min_freq)) == _Vocab.build(_lists,
                                                                   min_freq=_min_freq).itos
    assert list(_build_itos(_lists, 2))[4:] == ["a", "b", "c", "d"], "ties go alphabetically"
    assert list(_build_itos([], 1)) == ["<unk>", "<pad>", "<bos>", "<eos>"]
