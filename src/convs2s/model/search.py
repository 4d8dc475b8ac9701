"""Turning a trained ConvS2S into translations: greedy decoding and beam search.

Both functions take a batch of right-padded source sentences, put the model in eval mode under
``torch.no_grad()`` (restoring its previous mode afterwards) and return, per sentence, the list
of generated token ids **without** <bos> and <eos>.

Neither ever generates <pad> or <bos>: their log-probabilities are set to −inf before a token
is chosen. For <pad> this is what fairseq's generator does (``lprobs[:, pad] = -inf``); <bos>
is this course's addition (fairseq starts the decoder with <eos>, so has no separate <bos> to
mask): here <bos> is only ever a decoder *input*, never a target, so an untrained or badly
trained model could otherwise pick it. The model's computation is untouched and the other
tokens keep their log-probabilities (no renormalisation, as in fairseq), so a hypothesis
without <pad>/<bos> gets exactly the score it had before.

Both decode *incrementally* by default: the decoder is fed one new token per step and keeps the
last k-1 inputs of each convolution in a cache, so a step costs the same at position 100 as at
position 1. ``greedy_decode(..., incremental=False)`` recomputes the whole prefix every step
instead (same tokens, quadratic cost) for timing comparisons.

Greedy decoding's loop (:func:`greedy_loop`) takes its steps from a function, so that
:mod:`convs2s.run.compiled_decoding` can run the same loop with each step compiled by
``torch.compile`` (an engineering option of this course, kept out of the model layer).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.nn.utils import parametrize

from convs2s.model.convs2s import ConvS2S
from convs2s.model.encoder import EncoderOut
from convs2s.system.arguments import MAX_BEAM_SIZE, brief, check_size


@contextmanager
def _inference(model: ConvS2S) -> Iterator[None]:
    """eval mode + no_grad + weight-norm weights computed once, then the old mode back."""
    was_training = model.training
    model.eval()
    try:
        # parametrize.cached(): W = g·v/‖v‖ is computed once for the whole decoding instead of
        # at every step (the weights do not change while decoding).
        with torch.no_grad(), parametrize.cached():
            yield
    finally:
        model.train(was_training)


def check_decoding_inputs(model, src, *, bos_idx, eos_idx, who: str) -> None:
    """A one-line ``TypeError`` for what a learner may pass by mistake to ``who`` (a decoding
    function): a Translator (or anything else) for the model, a list for ``src``, a token
    (a string) or None for an id."""
    if not all(hasattr(model, name) for name in ("config", "encode", "decode")):
        inner = getattr(model, "model", None)
        hint = (": pass its .model (translator.model)" if inner is not None
                and all(hasattr(inner, name) for name in ("config", "encode", "decode")) else "")
        raise TypeError(f"{who} takes a ConvS2S model, not {type(model).__name__}{hint}.")
    if not isinstance(src, Tensor):
        raise TypeError(f"{who} takes src as a tensor of token ids [batch, src_len] (e.g. "
                        f"torch.tensor([src_vocab.encode(tokens)])), not {type(src).__name__}.")
    for name, value in (("bos_idx", bos_idx), ("eos_idx", eos_idx)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"{who}: {name} must be a token id (an int, e.g. "
                            f"trg_vocab.{name}), not {value!r}.")


def check_max_len(model: ConvS2S, max_len) -> int:
    """``max_len`` if the model can decode that many tokens (1 to its ``max_positions``), else
    ``ValueError`` (one line)."""
    limit = model.config["max_positions"]
    return check_size(max_len, "max_len", limit, why=(
        f" (it needs up to {brief(max_len)} decoder positions, but the model was built with "
        f"max_positions={limit}): use max_len <= {limit}, or build the model with a larger "
        "max_positions"))


#: The length penalties α beam search accepts (this course's bounds): 0 (no normalisation) to
#: 10. A negative α favours short outputs even more than none, and a very negative one makes
#: len ** α underflow to 0.0 (a division by zero); a very large one overflows a float. Useful
#: values are about 0 to 2; within the bounds nothing changes what is computed.
LENGTH_PENALTY_RANGE = (0.0, 10.0)


def check_length_penalty(value) -> float:
    """``value`` as a float if it is a usable length penalty, else ``ValueError`` saying why."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"length_penalty must be a finite number, not {value!r}.")
    low, high = LENGTH_PENALTY_RANGE
    if not low <= value <= high:
        raise ValueError(
            f"length_penalty must be between {low:g} and {high:g}, not {value!r}: 0 ranks "
            "outputs by total log-probability, 1 (fairseq's default) by log-probability per "
            "token, larger values favour longer outputs (useful: about 0 to 2); a negative one "
            "favours short outputs even more than 0 and makes len ** length_penalty reach 0.0 "
            "(-400: a division by zero), a large one overflows (400: from 6 tokens on).")
    return float(value)


def never_generated(model: ConvS2S, *, bos_idx: int, eos_idx: int,
                    pad_idx: int | None = None) -> list[int]:
    """The token ids decoding never outputs: <pad> and <bos> (but never <eos>).

    ``pad_idx`` defaults to the model's ``config["trg_pad_idx"]``. Ids outside the target
    vocabulary (such as ``eos_idx=-1``, "no <eos>") are ignored.
    """
    if pad_idx is None:
        pad_idx = getattr(model, "config", {}).get("trg_pad_idx")
    vocab = getattr(model, "config", {}).get("trg_vocab_size")
    banned = {i for i in (pad_idx, bos_idx) if isinstance(i, int) and i >= 0 and i != eos_idx}
    return sorted(i for i in banned if vocab is None or i < vocab)


def _forbid(scores: Tensor, banned: list[int]) -> Tensor:
    """``scores [rows, vocab]`` with the ``banned`` columns set to −inf (a copy)."""
    if not banned:
        return scores
    scores = scores.clone()
    scores[:, banned] = float("-inf")  # scores = [rows, vocab]
    return scores


def greedy_decode(
    model: ConvS2S,
    src: Tensor,
    *,
    max_len: int,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int | None = None,
    incremental: bool = True,
    return_attention: bool = False,
):
    """Translate each sentence by always taking the most probable next token.

    Args:
        model: a :class:`convs2s.model.convs2s.ConvS2S`.
        src: ``[batch, src_len]`` right-padded source token ids.
        max_len: at most this many tokens are generated per sentence (counting <eos>); a
            sentence without <eos> by then is returned as it is.
        bos_idx, eos_idx: the target's begin/end-of-sentence tokens.
        pad_idx: the target's padding token (default: the model's ``trg_pad_idx``); neither
            it nor <bos> is ever generated.
        incremental: True: feed one token per step with the decoder's cache. False: recompute
            the whole prefix every step (identical tokens, for timing comparisons).
        return_attention: also return, per sentence, the attention of every decoder layer,
            ``[dec_layers, out_len, src_real_len]``: row i is the attention while producing
            output token i (``out_len = len(tokens)``, <eos> excluded), columns are the real
            (non-pad) source tokens.

    Returns:
        ``tokens`` (a list of token-id lists), or ``(tokens, attentions)``.
    """
    def steps(encoded: EncoderOut, banned: list[int]) -> StepFn:
        return _eager_steps(model, encoded, banned, incremental)

    return greedy_loop(model, src, steps, max_len=max_len, bos_idx=bos_idx, eos_idx=eos_idx,
                       pad_idx=pad_idx, return_attention=return_attention)


StepFn = Callable[[Tensor], tuple[Tensor, Tensor]]
"""``next_step(trg) -> (next_token [batch], attention [batch, dec_layers, src_len])``: ``trg``
holds <bos> and the tokens so far."""


def greedy_loop(model: ConvS2S, src: Tensor,
                steps: Callable[[EncoderOut, list[int]], StepFn], *, max_len: int,
                bos_idx: int, eos_idx: int, pad_idx: int | None, return_attention: bool):
    """:func:`greedy_decode`'s loop, whatever computes its steps: ``steps(encoded, banned)``
    gives the step function for one batch (``banned``: the token ids never to output, from
    :func:`never_generated`). The loop keeps the <eos> bookkeeping and stops once every
    sentence has ended. Arguments and result as for :func:`greedy_decode`."""
    check_decoding_inputs(model, src, bos_idx=bos_idx, eos_idx=eos_idx, who="greedy_decode")
    max_len = check_max_len(model, max_len)
    banned = never_generated(model, bos_idx=bos_idx, eos_idx=eos_idx, pad_idx=pad_idx)
    with _inference(model):
        encoded = model.encode(src)
        batch = src.size(0)
        trg = src.new_full((batch, 1), bos_idx)  # trg = [batch, 1 + steps so far]
        next_step = steps(encoded, banned)
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        lengths = torch.full((batch,), max_len, dtype=torch.long, device=src.device)
        step_attention = []
        for step in range(max_len):
            next_token, attention = next_step(trg)  # [batch], [batch, dec_layers, src_len]
            if return_attention:
                step_attention.append(attention)
            ended = (next_token == eos_idx) & ~finished
            lengths[ended] = step  # tokens before this <eos>
            finished |= ended
            trg = torch.cat([trg, next_token.unsqueeze(1)], dim=1)
            if bool(finished.all()):
                break

    lengths_list = lengths.tolist()
    tokens = [trg[b, 1 : 1 + lengths_list[b]].tolist() for b in range(batch)]
    if not return_attention:
        return tokens
    attention = torch.stack(step_attention, dim=2)  # [batch, dec_layers, steps, src_len]
    src_lens = encoded.src_mask.sum(dim=1).tolist()
    attentions = [attention[b, :, : lengths_list[b], : src_lens[b]].cpu() for b in range(batch)]
    return tokens, attentions


def _eager_steps(model: ConvS2S, encoded: EncoderOut, banned: list[int],
                 incremental: bool) -> StepFn:
    """The steps of eager greedy decoding: ``model.decode`` with its cache (or without:
    the whole prefix again), then the argmax of the logits without ``banned``."""
    state: dict | None = {} if incremental else None

    def next_step(trg: Tensor) -> tuple[Tensor, Tensor]:
        decoder_in = trg[:, -1:] if incremental else trg
        logits, attention = model.decode(decoder_in, encoded, state)
        # argmax of the logits = argmax of the log-probabilities: no softmax needed
        return _forbid(logits[:, -1], banned).argmax(dim=-1), attention[:, :, -1]

    return next_step


def beam_search(
    model: ConvS2S,
    src: Tensor,
    *,
    beam_size: int,
    max_len: int,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int | None = None,
    length_penalty: float = 1.0,
    return_all: bool = False,
):
    """Translate each sentence with beam search, keeping ``beam_size`` hypotheses per step.

    Every step extends each live hypothesis by every token, and keeps the ``beam_size`` best
    by total log-probability (the top 2·beam_size candidates are looked at, as in fairseq, so
    that the beam stays full even when some candidates end with <eos>). A candidate ending in
    <eos> that ranks among the top ``beam_size`` is *finished* and set aside. A sentence is
    done when it has ``beam_size`` finished hypotheses, or after ``max_len`` tokens; hypotheses
    still alive then are finished as they are (without <eos>, as greedy decoding does).

    Finished hypotheses are compared by the length-normalised score

        score = (Σ log p(token)) / len ** length_penalty

    where ``len`` counts the generated tokens including <eos>. Log-probabilities are negative,
    so without normalisation (``length_penalty=0``) short outputs win; 1.0 (the default, as
    fairseq's ``--lenpen``) compares average log-probability per token; values > 1 favour
    longer outputs. (GNMT's ((5 + len)/6) ** α is a smoother variant of the same idea.)

    The search itself ranks live hypotheses by their *raw* sums, so the length penalty only
    re-ranks the finished ones: :func:`beam_search_alphas` gets the result for several values
    from one search.

    Args:
        model, src, max_len, bos_idx, eos_idx, pad_idx: as for :func:`greedy_decode`.
        beam_size: hypotheses kept per sentence, 1 (exactly greedy decoding) to
            :data:`~convs2s.system.arguments.MAX_BEAM_SIZE`.
        length_penalty: the exponent above, 0 to 10 (:func:`check_length_penalty`).
        return_all: False: the best hypothesis's tokens per sentence. True: per sentence a
            list of ``(tokens, score)`` of all finished hypotheses, best first.
    """
    check_length_penalty(length_penalty)
    finished = _beam_finished(model, src, beam_size=beam_size, max_len=max_len,
                              bos_idx=bos_idx, eos_idx=eos_idx, pad_idx=pad_idx)
    results = []
    for hyps in finished:
        ranked = _rank(hyps, length_penalty)
        if return_all:
            results.append([(tokens_b, score) for score, tokens_b in ranked])
        else:
            results.append(ranked[0][1] if ranked else [])
    return results


def beam_search_alphas(
    model: ConvS2S,
    src: Tensor,
    *,
    alphas,
    beam_size: int,
    max_len: int,
    bos_idx: int,
    eos_idx: int,
    pad_idx: int | None = None,
) -> list[list[list[int]]]:
    """:func:`beam_search`'s best tokens for each length penalty in ``alphas``, from one search.

    Returns one list per α (in the order given), each with the best hypothesis's tokens per
    sentence: the same as calling :func:`beam_search` once per α, for the cost of one search
    (α changes no step of the search, only how the finished hypotheses are compared).
    """
    alphas = [check_length_penalty(a) for a in alphas]
    finished = _beam_finished(model, src, beam_size=beam_size, max_len=max_len,
                              bos_idx=bos_idx, eos_idx=eos_idx, pad_idx=pad_idx)
    out = []
    for alpha in alphas:
        ranked = [_rank(hyps, alpha) for hyps in finished]
        out.append([r[0][1] if r else [] for r in ranked])
    return out


def _rank(hyps: list[tuple[float, int, list[int]]], alpha: float) -> list[tuple[float, list[int]]]:
    """Finished ``(Σ log p, len, tokens)`` as ``(Σ log p / len ** alpha, tokens)``, best first
    (a stable sort: of equal scores, the one finished first stays first)."""
    scored = [(total / float(length) ** alpha, tokens) for total, length, tokens in hyps]
    return sorted(scored, key=lambda item: item[0], reverse=True)


def _beam_finished(model: ConvS2S, src: Tensor, *, beam_size: int, max_len: int, bos_idx: int,
                   eos_idx: int, pad_idx: int | None) -> list[list[tuple[float, int, list[int]]]]:
    """The search of :func:`beam_search`: per sentence, its finished hypotheses as
    ``(Σ log p, len, tokens)`` in the order they finished (``len`` counts <eos>)."""
    check_decoding_inputs(model, src, bos_idx=bos_idx, eos_idx=eos_idx, who="beam_search")
    max_len = check_max_len(model, max_len)
    beam_size = check_size(beam_size, "beam_size", MAX_BEAM_SIZE)
    banned = never_generated(model, bos_idx=bos_idx, eos_idx=eos_idx, pad_idx=pad_idx)
    batch, k = src.size(0), beam_size
    finished: list[list[tuple[float, int, list[int]]]] = [[] for _ in range(batch)]
    done = [False] * batch

    with _inference(model):
        encoded = model.encode(src)
        # Row b·k + j holds hypothesis j of sentence b, so the encoder output repeats k times.
        encoded = encoded.index_select(torch.arange(batch, device=src.device).repeat_interleave(k))
        state: dict = {}
        tokens = src.new_full((batch * k, 1), bos_idx)  # tokens = [batch·k, 1 + steps]
        # Only hypothesis 0 is live at the start; -inf keeps k copies of <bos> from
        # filling the beam with the same candidates.
        scores = torch.full((batch, k), float("-inf"), device=src.device)
        scores[:, 0] = 0.0

        for step in range(max_len):
            last_step = step == max_len - 1
            logits, _ = model.decode(tokens[:, -1:], encoded, state)
            log_probs = torch.log_softmax(logits[:, -1].float(), dim=-1)  # [batch·k, vocab]
            log_probs = _forbid(log_probs, banned)  # <pad>, <bos>: -inf, the rest unchanged
            vocab = log_probs.size(-1)
            candidates = (scores.view(-1, 1) + log_probs).view(batch, k * vocab)
            n_cand = min(2 * k, k * vocab)
            top_scores, top_index = candidates.topk(n_cand, dim=1)  # [batch, n_cand]
            top_beam = (top_index // vocab).tolist()
            top_token = (top_index % vocab).tolist()
            top_scores_list = top_scores.tolist()
            prefixes = tokens[:, 1:].tolist()  # generated tokens of every row, without <bos>

            # Filled element by element on the CPU, then moved to the device once.
            new_scores = torch.full((batch, k), float("-inf"))
            new_beam = torch.zeros((batch, k), dtype=torch.long)
            new_token = torch.full((batch, k), eos_idx, dtype=torch.long)
            length = step + 1  # every candidate now has step+1 tokens, <eos> counted
            for b in range(batch):
                if done[b]:
                    continue
                live = 0
                for rank in range(n_cand):
                    score = top_scores_list[b][rank]
                    if score == float("-inf"):
                        break  # extensions of the empty initial slots, or <pad>/<bos>
                    beam, token = top_beam[b][rank], top_token[b][rank]
                    prefix = prefixes[b * k + beam]
                    if token == eos_idx:
                        if rank < k:  # only <eos> among the k best counts, as in fairseq
                            finished[b].append((score, length, prefix))
                    elif live < k:
                        if last_step:  # out of steps: finish it without <eos>
                            finished[b].append((score, length, prefix + [token]))
                        else:
                            new_scores[b, live] = score
                            new_beam[b, live] = beam
                            new_token[b, live] = token
                        live += 1
                if last_step or live == 0 or len(finished[b]) >= k:
                    done[b] = True
            if all(done):
                break

            order = (torch.arange(batch).unsqueeze(1) * k + new_beam).view(-1).to(src.device)
            model.decoder.reorder_incremental_state(state, order)
            tokens = torch.cat([tokens[order], new_token.view(-1, 1).to(src.device)], dim=1)
            scores = new_scores.to(src.device)
    return finished
