"""Tests of greedy decoding and beam search."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from conftest import padded_batch

from convs2s.course.baselines import RNNAttentionSeq2Seq
from convs2s.model import ConvS2S
from convs2s.model.search import beam_search, beam_search_alphas, greedy_decode, never_generated

PAD, BOS, EOS = 0, 1, 2


def tiny_model(seed: int = 0, vocab: int = 20, **overrides) -> ConvS2S:
    torch.manual_seed(seed)
    kwargs = dict(
        emb_dim=16,
        hid_dim=32,
        enc_layers=3,
        dec_layers=3,
        kernel_size=3,
        dropout=0.1,
        max_positions=32,
        src_pad_idx=PAD,
        trg_pad_idx=PAD,
    )
    kwargs.update(overrides)
    return ConvS2S(vocab, vocab, **kwargs).eval()



def hypothesis_score(model, src_row, tokens, *, max_len, length_penalty=1.0) -> float:
    """Score of one hypothesis as beam search defines it, by teacher forcing.

    A hypothesis shorter than max_len ended with <eos>, which is scored too; one of max_len
    tokens ran out of steps and has no <eos>.
    """
    targets = tokens + [EOS] if len(tokens) < max_len else tokens
    trg_in = torch.tensor([[BOS] + targets[:-1]])
    with torch.no_grad():
        logits, _ = model(src_row.unsqueeze(0), trg_in)
    log_probs = F.log_softmax(logits[0].float(), dim=-1)
    total = log_probs[torch.arange(len(targets)), torch.tensor(targets)].sum().item()
    return total / len(targets) ** length_penalty


# ------------------------------------------------------------------------------------------
# Greedy decoding
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_greedy_equals_full_recompute(seed):
    model = tiny_model(seed, kernel_size=[3, 5, 1][seed], weight_norm=seed != 1)
    src = padded_batch([6, 3, 5, 1], seed=seed)
    fast = greedy_decode(model, src, max_len=12, bos_idx=BOS, eos_idx=EOS)
    slow = greedy_decode(model, src, max_len=12, bos_idx=BOS, eos_idx=EOS, incremental=False)
    assert fast == slow
    assert all(EOS not in t and len(t) <= 12 for t in fast)
    # decoding a sentence alone gives the same as decoding it inside a padded batch
    for b in range(src.size(0)):
        real = src[b][src[b] != PAD].unsqueeze(0)
        assert greedy_decode(model, real, max_len=12, bos_idx=BOS, eos_idx=EOS) == [fast[b]]


def test_greedy_restores_training_mode_and_returns_attention():
    model = tiny_model().train()
    src = padded_batch([5, 3])
    tokens, attentions = greedy_decode(
        model, src, max_len=6, bos_idx=BOS, eos_idx=EOS, return_attention=True
    )
    assert model.training
    for b, n_src in enumerate([5, 3]):
        assert attentions[b].shape == (3, len(tokens[b]), n_src)  # [dec_layers, out, src]
        torch.testing.assert_close(attentions[b].sum(-1), torch.ones(3, len(tokens[b])))


def test_greedy_stops_at_eos():
    model = tiny_model()
    with torch.no_grad():  # make <eos> the most likely token everywhere
        model.decoder.fc_out.bias[EOS] = 100.0
    assert greedy_decode(model, padded_batch([4, 2]), max_len=5, bos_idx=BOS, eos_idx=EOS) == [
        [],
        [],
    ]


# ------------------------------------------------------------------------------------------
# Beam search
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy(seed):
    model = tiny_model(seed)
    src = padded_batch([6, 2, 4], seed=seed)
    greedy = greedy_decode(model, src, max_len=10, bos_idx=BOS, eos_idx=EOS)
    beam = beam_search(model, src, beam_size=1, max_len=10, bos_idx=BOS, eos_idx=EOS)
    assert beam == greedy


def beam_and_greedy(seed: int, max_len: int = 8):
    model = tiny_model(seed, vocab=8)
    src = padded_batch([5, 3], vocab=8, seed=seed)
    greedy = greedy_decode(model, src, max_len=max_len, bos_idx=BOS, eos_idx=EOS)
    ranked = beam_search(
        model, src, beam_size=5, max_len=max_len, bos_idx=BOS, eos_idx=EOS, return_all=True
    )
    return model, src, greedy, ranked


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_beam_of_five_ranks_by_the_teacher_forced_score(seed):
    model, src, _, ranked = beam_and_greedy(seed)
    for b in range(src.size(0)):
        scores = [score for _, score in ranked[b]]
        assert scores == sorted(scores, reverse=True)  # best first
        best_tokens, best_score = ranked[b][0]
        # the reported score is the teacher-forced score of the returned tokens
        assert best_score == pytest.approx(
            hypothesis_score(model, src[b], best_tokens, max_len=8), abs=1e-4
        )
    best_only = beam_search(model, src, beam_size=5, max_len=8, bos_idx=BOS, eos_idx=EOS)
    assert best_only == [r[0][0] for r in ranked]


def test_beam_of_five_usually_scores_at_least_greedy():
    # Not a theorem: beam search can prune the greedy path (it does for 2 of these 20 random
    # sentences, by at most 0.01 per token), but a bug in scoring or reordering would make it
    # lose far more often.
    wins = 0
    for seed in range(10):
        model, src, greedy, ranked = beam_and_greedy(seed)
        for b in range(src.size(0)):
            greedy_score = hypothesis_score(model, src[b], greedy[b], max_len=8)
            wins += ranked[b][0][1] >= greedy_score - 1e-5
            assert ranked[b][0][1] >= greedy_score - 0.02
    assert wins >= 16


@pytest.mark.parametrize("length_penalty", [0.0, 1.0, 2.0])
def test_wide_beam_finds_the_exact_best_hypothesis(length_penalty):
    """With a beam wider than the search space, beam search must be exhaustive search."""
    vocab, max_len = 5, 3
    model = tiny_model(4, vocab=vocab)
    src = padded_batch([4, 2], vocab=vocab, seed=5)
    ranked = beam_search(
        model,
        src,
        beam_size=128,
        max_len=max_len,
        bos_idx=BOS,
        eos_idx=EOS,
        length_penalty=length_penalty,
        return_all=True,
    )
    # <pad> and <bos> are never generated; the other tokens keep their log-probabilities
    non_eos = [t for t in range(vocab) if t not in (EOS, PAD, BOS)]
    # every hypothesis: 0..max_len-1 non-<eos> tokens then <eos>, or max_len without <eos>
    space = [list(p) for n in range(max_len + 1) for p in itertools.product(non_eos, repeat=n)]
    for b in range(src.size(0)):
        found = {tuple(tokens): score for tokens, score in ranked[b]}
        assert set(found) == {tuple(h) for h in space}
        for h in space:
            expected = hypothesis_score(
                model, src[b], h, max_len=max_len, length_penalty=length_penalty
            )
            assert found[tuple(h)] == pytest.approx(expected, abs=1e-4)


def test_beam_search_restores_mode_and_checks_arguments():
    model = tiny_model().train()
    src = padded_batch([3])
    beam_search(model, src, beam_size=2, max_len=4, bos_idx=BOS, eos_idx=EOS)
    assert model.training
    with pytest.raises(ValueError, match="beam_size must be a positive integer, got 0"):
        beam_search(model, src, beam_size=0, max_len=4, bos_idx=BOS, eos_idx=EOS)
    with pytest.raises(ValueError, match=r"max_len=40 .*max_positions=32"):
        greedy_decode(model, src, max_len=40, bos_idx=BOS, eos_idx=EOS)


# ------------------------------------------------------------------------------------------
# <pad> and <bos> are never generated
# ------------------------------------------------------------------------------------------


def tiny_rnn(seed: int = 0, vocab: int = 20) -> RNNAttentionSeq2Seq:
    torch.manual_seed(seed)
    return RNNAttentionSeq2Seq(vocab, vocab, emb_dim=16, enc_hid_dim=24, dec_hid_dim=32,
                               attn_dim=20, dropout=0.1, max_positions=32, src_pad_idx=PAD,
                               trg_pad_idx=PAD).eval()


def random_sources(n: int, vocab: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return padded_batch(torch.randint(1, 9, (n,), generator=g).tolist(), vocab=vocab, seed=seed)


DECODERS = {
    "greedy": lambda m, src, **kw: greedy_decode(m, src, **kw),
    "greedy_full": lambda m, src, **kw: greedy_decode(m, src, incremental=False, **kw),
    "beam": lambda m, src, **kw: beam_search(m, src, beam_size=4, **kw),
}


def specials_in(outputs) -> dict:
    tokens = [t for out in outputs for t in out]
    return {"pad": tokens.count(PAD), "bos": tokens.count(BOS), "tokens": len(tokens)}


@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize(("init", "vocab"), [("paper", 50), ("pytorch", 8)])
def test_random_convs2s_never_generates_pad_or_bos(decoder, init, vocab):
    outputs = []
    for seed in range(3):
        model = tiny_model(seed, vocab=vocab, init=init, enc_layers=2, dec_layers=2)
        src = random_sources(100, vocab, seed)
        outputs += DECODERS[decoder](model, src, max_len=20, bos_idx=BOS, eos_idx=EOS)
    counts = specials_in(outputs)
    assert len(outputs) == 300 and counts["tokens"] > 1000
    assert counts["pad"] == counts["bos"] == 0, counts


@pytest.mark.parametrize("decoder", list(DECODERS))
def test_random_rnn_baseline_never_generates_pad_or_bos(decoder):
    outputs = []
    for seed in range(3):
        src = random_sources(100, 8, seed)
        outputs += DECODERS[decoder](tiny_rnn(seed, vocab=8), src, max_len=20, bos_idx=BOS,
                                     eos_idx=EOS)
    counts = specials_in(outputs)
    assert len(outputs) == 300 and counts["tokens"] > 1000
    assert counts["pad"] == counts["bos"] == 0, counts


class PadBosBoosted(torch.nn.Module):
    """A model whose <pad> and <bos> logits are raised by ``boost``: the model they would win."""

    def __init__(self, model, boost: float):
        super().__init__()
        self.model, self.boost = model, boost
        self.config, self.decoder = model.config, model.decoder

    def encode(self, src):
        return self.model.encode(src)

    def decode(self, trg_in, encoded, incremental_state=None):
        logits, attention = self.model.decode(trg_in, encoded, incremental_state)
        logits = logits.clone()
        logits[..., [PAD, BOS]] += self.boost  # logits = [batch, len, vocab]
        return logits, attention


@pytest.mark.parametrize("make", [tiny_model, tiny_rnn], ids=["convs2s", "rnn"])
def test_pad_and_bos_masked_even_when_most_likely_others_unchanged(make):
    model = make(3)
    src = padded_batch([6, 3, 5, 1])
    kw = dict(max_len=10, bos_idx=BOS, eos_idx=EOS)
    expected = greedy_decode(model, src, **kw)
    boosted = PadBosBoosted(model, 100.0)  # <pad>/<bos> now the argmax everywhere
    assert greedy_decode(boosted, src, **kw) == expected
    assert greedy_decode(boosted, src, incremental=False, **kw) == expected
    assert beam_search(boosted, src, beam_size=1, **kw) == expected
    for out in beam_search(boosted, src, beam_size=3, return_all=True, **kw):
        assert out and all(PAD not in t and BOS not in t for t, _ in out)


def test_never_generated_ids():
    model = tiny_model()
    assert never_generated(model, bos_idx=BOS, eos_idx=EOS) == [PAD, BOS]
    assert never_generated(model, bos_idx=BOS, eos_idx=EOS, pad_idx=5) == [BOS, 5]
    # a vocabulary that starts the decoder with <eos> (fairseq's way): <eos> stays allowed
    assert never_generated(model, bos_idx=EOS, eos_idx=EOS) == [PAD]
    assert never_generated(model, bos_idx=BOS, eos_idx=-1) == [PAD, BOS]


# ------------------------------------------------------------------------------------------
# A tiny model learns a tiny task
# ------------------------------------------------------------------------------------------


def test_tiny_model_overfits_a_reversal_task():
    vocab = 12
    model = tiny_model(
        0,
        vocab=vocab,
        emb_dim=32,
        hid_dim=64,
        enc_layers=2,
        dec_layers=2,
        dropout=0.0,
        max_positions=16,
    ).train()
    g = torch.Generator().manual_seed(0)
    sources = [torch.randint(3, vocab, (n,), generator=g) for n in (5, 6, 4, 6)]
    targets = [torch.cat([torch.tensor([BOS]), s.flip(0), torch.tensor([EOS])]) for s in sources]
    src = torch.nn.utils.rnn.pad_sequence(sources, batch_first=True, padding_value=PAD)
    trg = torch.nn.utils.rnn.pad_sequence(targets, batch_first=True, padding_value=PAD)

    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        logits, _ = model(src, trg[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), trg[:, 1:].reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.02:
            break
    assert loss.item() < 0.02

    expected = [s.flip(0).tolist() for s in sources]
    assert greedy_decode(model, src, max_len=10, bos_idx=BOS, eos_idx=EOS) == expected
    assert beam_search(model, src, beam_size=3, max_len=10, bos_idx=BOS, eos_idx=EOS) == expected


@pytest.mark.parametrize("seed", [0, 3])
def test_one_search_for_every_length_penalty_equals_a_search_per_alpha(seed):
    """The length penalty only re-ranks finished hypotheses, so beam_search_alphas (one
    search) gives, for every α, exactly the tokens of beam_search with that α; with max_len
    small enough that some hypotheses run out of steps (finished without <eos>)."""
    model = tiny_model(seed, vocab=12)
    src = padded_batch([5, 3, 7, 2, 6], vocab=12, seed=seed)
    alphas = [0.0, 0.5, 1.0, 1.5, 2.0, 4.0]
    for max_len in (4, 12):
        kw = dict(beam_size=4, max_len=max_len, bos_idx=BOS, eos_idx=EOS, pad_idx=PAD)
        together = beam_search_alphas(model, src, alphas=alphas, **kw)
        apart = [beam_search(model, src, length_penalty=a, **kw) for a in alphas]
        assert together == apart
    # the sweep does change the winner somewhere, or this test would prove little
    kw = dict(beam_size=4, max_len=12, bos_idx=BOS, eos_idx=EOS, pad_idx=PAD)
    per_alpha = beam_search_alphas(model, src, alphas=[0.0, 4.0], **kw)
    assert per_alpha[0] != per_alpha[1]


def test_beam_search_alphas_checks_every_alpha():
    model = tiny_model(0)
    src = padded_batch([3])
    with pytest.raises(ValueError, match="length_penalty must be between"):
        beam_search_alphas(model, src, alphas=[1.0, -1.0], beam_size=2, max_len=5,
                           bos_idx=BOS, eos_idx=EOS, pad_idx=PAD)
