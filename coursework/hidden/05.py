"""Hidden tests of notebook 05's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``optimizer_choice``) is
graded by hand and has none.
"""


def perplexity_from_loss(perplexity_from_loss):
    import math

    from convs2s.course.checks import _core

    base = _variant["base"]  # noqa: F821 - a third unit "base<b>" in a class's variant, else 0
    units = [("nats", math.e), ("bits", 2.0)] + ([(f"base{base}", float(base))] if base else [])
    for loss in (0.01, 1.0, 1.567, 4.16, 9.0):
        expected = math.exp(loss)
        got = _core._float(perplexity_from_loss(loss), f"perplexity_from_loss({loss})")
        assert math.isclose(got, expected, rel_tol=1e-6), f"perplexity_from_loss({loss})"
        for unit, b in units:
            value = loss / math.log(b)  # the same loss in that unit
            got = _core._float(perplexity_from_loss(value, unit), f"in {unit}")
            assert math.isclose(got, expected, rel_tol=1e-6), \
                f"perplexity_from_loss({value:.4g}, {unit!r})"


def token_loss(token_loss):
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import _core

    g = torch.Generator().manual_seed(505)
    for pad in (1, 0, 7):
        trg = torch.randint(8, 50, (5, 9), generator=g)
        trg[0, 3:] = pad
        trg[2, 6:] = pad
        logits = torch.randn(5, 9, 50, generator=g)
        expected = F.cross_entropy(logits.reshape(-1, 50), trg.reshape(-1), ignore_index=pad)
        _core._assert_close(token_loss(logits, trg, pad), expected, name="the loss",
                            ref="the mean over real tokens")
        # ten more pad columns, whatever the logits there: the same loss
        more = torch.cat([trg, torch.full((5, 10), pad)], dim=1)
        more_logits = torch.cat([logits, 5 * torch.randn(5, 10, 50, generator=g)], dim=1)
        _core._assert_close(token_loss(more_logits, more, pad), expected,
                            name="the loss with more padding", ref="the same loss")


def build_itos(build_itos):
    from convs2s.course.checks import _core, guarded

    fn = guarded("build_itos", build_itos)
    specials = ["<unk>", "<pad>", "<bos>", "<eos>"]
    lists = [["b", "a", "c"], ["a", "b"], ["a", "d", "d"], ["e"], ["c", "b"]]
    counts = {"a": 3, "b": 3, "c": 2, "d": 2, "e": 1}
    for min_freq in (1, 2, 3, 4):
        kept = sorted((t for t, n in counts.items() if n >= min_freq),
                      key=lambda t: (-counts[t], t))
        _core._assert_equal(list(_core._answer(fn(lists, min_freq), "items")), specials + kept,
                            name=f"build_itos(lists, min_freq={min_freq})")
    _core._assert_equal(list(_core._answer(fn([], 1), "items")), specials,
                        name="build_itos([], 1)")
