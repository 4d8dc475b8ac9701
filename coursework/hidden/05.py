"""Hidden tests of notebook 05's exercises.

The conventions are those of ``01.py``. The ``explain`` exercise (``optimizer_choice``) is
graded by hand and has none.
"""

import math
from collections import Counter
from textwrap import dedent

import torch
import torch.nn.functional as F

from convs2s.course.checks.class_variants import NOTE, Variant, Versions
from convs2s.course.checks.nb05 import LOSS_ATOL, LOSS_RTOL, PERPLEXITY_REL_TOL
from convs2s.course.checks.testing import (
    Case,
    Samples,
    as_items,
    as_tensor,
    assert_close,
    assert_equal,
    assert_number_close,
    call,
    probe,
)


def perplexity_from_loss(variant):
    base = variant.get("base", 0)  # a third unit "base<b>" in a class's variant, else 0
    units = [("nats", math.e), ("bits", 2.0)] + ([(f"base{base}", float(base))] if base else [])
    cases = []

    def holds(expected):  # the visible check's tolerance (checks/nb05.py), stated in the task
        return lambda got: assert_number_close(got, expected, rel=PERPLEXITY_REL_TOL, abs_tol=0.0)

    for loss in (0.01, 1.0, 1.567, 4.16, 9.0):
        expected = math.exp(loss)
        cases.append(Case(f"perplexity_from_loss({loss})", call("perplexity_from_loss", loss),
                          holds(expected)))
        for unit, b in units:
            loss_in_unit = loss / math.log(b)  # the same loss in that unit
            cases.append(Case(f"perplexity_from_loss({loss_in_unit:.4g}, {unit!r})",
                              call("perplexity_from_loss", loss_in_unit, unit), holds(expected)))
    return cases


def token_loss(variant):
    g = torch.Generator().manual_seed(505)
    cases = []
    for pad in (1, 0, 7):
        trg = torch.randint(8, 50, (5, 9), generator=g)
        trg[0, 3:] = pad
        trg[2, 6:] = pad
        logits = torch.randn(5, 9, 50, generator=g)
        expected = F.cross_entropy(logits.reshape(-1, 50), trg.reshape(-1), ignore_index=pad)
        cases.append(Case(f"token_loss(logits of shape [5, 9, 50], trg_out with padding, "
                          f"pad_idx={pad})", call("token_loss", logits, trg, pad),
                          lambda got, e=expected: assert_close(got, e, name="the loss",
                                                               atol=LOSS_ATOL, rtol=LOSS_RTOL)))
        # ten more pad columns, whatever the logits there: the same loss
        more = torch.cat([trg, torch.full((5, 10), pad)], dim=1)
        more_logits = torch.cat([logits, 5 * torch.randn(5, 10, 50, generator=g)], dim=1)
        cases.append(Case(f"token_loss(the same batch with 10 more pad columns, pad_idx={pad})",
                          call("token_loss", more_logits, more, pad),
                          lambda got, e=expected: assert_close(got, e, name="the loss with "
                                                               "more padding", atol=LOSS_ATOL,
                                                               rtol=LOSS_RTOL)))
    # gradients reach the logits of real tokens only (the visible check's last case)
    trg = torch.randint(8, 50, (3, 7), generator=g)
    trg[1, 4:] = 1
    logits = torch.randn(3, 7, 50, generator=g)
    cases.append(Case("the gradient of token_loss(logits of shape [3, 7, 50], trg_out with "
                      "padding, pad_idx=1) with respect to the logits",
                      probe("convs2s.course.checks.nb05:probe_token_loss_gradient",
                            logits=logits, trg=trg, pad=1),
                      lambda got, pads=(trg == 1): _only_real_tokens(got, pads)))
    return cases


def _only_real_tokens(grad, pads) -> None:
    if grad is None:
        raise AssertionError("no gradient reached the logits")
    grad = as_tensor(grad, "the gradient")
    if grad.shape != pads.shape + (50,) or bool(grad[pads].abs().sum() > 0) \
            or not bool(grad[~pads].abs().sum() > 0):
        raise AssertionError("the gradient must reach the real tokens' logits, and only them")


def build_itos(variant):
    specials = ["<unk>", "<pad>", "<bos>", "<eos>"]
    lists = [["b", "a", "c"], ["a", "b"], ["a", "d", "d"], ["e"], ["c", "b"]]
    cases = []
    for min_freq in (1, 2, 3, 4):
        expected = _itos(lists, min_freq, specials)
        cases.append(Case(f"build_itos({lists}, min_freq={min_freq})",
                          call("build_itos", lists, min_freq),
                          lambda got, e=expected: assert_equal(as_items(got), e)))
    cases.append(Case("build_itos([], 1)", call("build_itos", [], 1),
                      lambda got: assert_equal(as_items(got), specials)))
    # the most frequent token last in the alphabet, and a token that is also a special: the
    # visible check's rules (Vocab.build's order, no special twice), which grading alone decides
    lists = [["z", "y", "z"], ["y", "x", "z"], ["w", "<s>"], ["y", "z"]]
    for min_freq, given in [(1, ("<s>", "<p>")), (2, ("<u>", "y", "<s>"))]:
        expected = _itos(lists, min_freq, list(given))
        cases.append(Case(f"build_itos({lists}, {min_freq}, {given})",
                          call("build_itos", lists, min_freq, given),
                          lambda got, e=expected: assert_equal(as_items(got), e)))
    return cases


def _itos(lists, min_freq, specials):
    """The specials, then the tokens seen >= min_freq times that are not specials: most
    frequent first, ties a→z (``Vocab.build``'s order)."""
    counts = Counter(t for tokens in lists for t in tokens)
    kept = sorted((t for t, n in counts.items() if n >= min_freq and t not in specials),
                  key=lambda t: (-counts[t], t))
    return specials + kept


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _perplexity_from_loss_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``base``."""
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


VERSIONS = {
    # a third unit, "base<b>"
    "perplexity_from_loss": Versions(tuple(range(3, 31)), _perplexity_from_loss_version),
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "build_itos": Samples(right=[
        dedent("""\
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            counts = Counter()
            for tokens in token_lists:
                counts.update(tokens)
            words = sorted((w for w in counts if counts[w] >= min_freq and w not in specials),
                           key=lambda w: (-counts[w], w))
            return [*specials, *words]
        """),
        dedent("""\
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            seen = {}
            for tokens in token_lists:
                for t in tokens:
                    seen[t] = seen.get(t, 0) + 1
            itos = list(specials)
            ordered = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
            itos += [t for t, n in ordered if n >= min_freq and t not in itos]
            return itos
        """),
    ], wrong=[
        dedent("""\
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            counts = Counter(t for tokens in token_lists for t in tokens)
            return list(specials) + sorted(t for t in counts if counts[t] >= min_freq)
        """),
        dedent("""\
        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            exec("from convs2s.data import Vocab")
            return list(specials)
        """),
    ], shortcut=[
        dedent("""\
        from convs2s.data import Vocab

        def build_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
            return Vocab.build(token_lists, min_freq=min_freq, specials=specials).itos
        """),
    ]),
    "token_loss": Samples(right=[
        dedent("""\
        def token_loss(logits, trg_out, pad_idx):
            criterion = torch.nn.CrossEntropyLoss(ignore_index=pad_idx)
            return criterion(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1))
        """),
        dedent("""\
        import torch.nn.functional as F

        def token_loss(logits, trg_out, pad_idx):
            each = F.cross_entropy(logits.flatten(0, 1), trg_out.flatten(), reduction="none")
            real = (trg_out.flatten() != pad_idx).float()
            return (each * real).sum() / real.sum()
        """),
    ], wrong=[
        dedent("""\
        def token_loss(logits, trg_out, pad_idx):
            criterion = torch.nn.CrossEntropyLoss()
            return criterion(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1))
        """),
        dedent("""\
        def token_loss(logits, trg_out, pad_idx):
            each = F.cross_entropy(logits.flatten(0, 1), trg_out.flatten(), reduction="none")
            return each.sum() / trg_out.numel()
        """),
    ]),
    "perplexity_from_loss": Samples(right=[
        dedent("""\
        def perplexity_from_loss(loss, unit="nats"):
            if unit == "nats":
                return math.exp(loss)
            if unit == "bits":
                return 2 ** loss
            raise ValueError(unit)
        """),
        dedent("""\
        def perplexity_from_loss(loss, unit="nats"):
            base = {"nats": math.e, "bits": 2.0}[unit]
            return base ** loss
        """),
    ], wrong=[
        "def perplexity_from_loss(loss, unit='nats'):\n    return math.exp(loss)",
        dedent("""\
        def perplexity_from_loss(loss, unit='nats'):
            return math.exp(loss) if unit == 'nats' else math.exp(loss * 2)
        """),
    ]),
}
