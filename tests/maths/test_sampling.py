"""Choosing the next token (app.maths.sampling): temperature, top-k and top-p against the tokens counted by hand
on a made-up vocabulary of 8; generation over a real model is tested with it (tests/maths/test_llama.py)."""

from pathlib import Path

import numpy as np
import pytest

from app.maths.sampling import draw, generate, sampling_distribution, temperature_softmax, top_candidates

LOGITS = np.array([2.0, -1.0, 0.5, 3.0, 0.5, -2.0, 1.0, 2.5])  # a made-up vocabulary of 8


@pytest.mark.parametrize("k", range(1, 9))
def test_top_k_keeps_exactly_the_k_most_likely(k: int) -> None:
    p = sampling_distribution(LOGITS, 1.0, top_k=k)
    kept = set(np.flatnonzero(p))
    assert len(kept) == k
    assert kept == set(np.argsort(-LOGITS, kind="stable")[:k].tolist())
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    softmax = np.exp(LOGITS) / np.exp(LOGITS).sum()
    np.testing.assert_allclose(p[list(kept)], softmax[list(kept)] / softmax[list(kept)].sum(), rtol=1e-12)


def fewest_reaching(probabilities: list[float], top_p: float) -> int:
    """How many of the most likely a loop must take for their probabilities to add up to top_p."""
    total, n = 0.0, 0
    for p in sorted(probabilities, reverse=True):
        total += p
        n += 1
        if total >= top_p:
            break
    return n


@pytest.mark.parametrize("top_p", [1e-6, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1.0])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_top_p_keeps_the_fewest_tokens_whose_probability_reaches_p(top_p: float, temperature: float) -> None:
    p_all = np.exp(LOGITS / temperature) / np.exp(LOGITS / temperature).sum()
    p = sampling_distribution(LOGITS, temperature, top_p=top_p)
    kept = np.flatnonzero(p)
    n = fewest_reaching(p_all.tolist(), top_p)
    assert len(kept) == n
    assert set(kept.tolist()) == set(np.argsort(-p_all, kind="stable")[:n].tolist())
    assert int(np.argmax(LOGITS)) in kept
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(p[kept], p_all[kept] / p_all[kept].sum(), rtol=1e-12)


def test_top_p_after_top_k_reads_the_probabilities_top_k_left() -> None:
    # transformers' TopPLogitsWarper takes its softmax after TopKLogitsWarper's −∞: 0.4 and 0.3 become 4/7 and
    # 3/7, and 4/7 alone reaches 0.5. Of the whole vocabulary 0.4 would not, and two tokens would stay.
    logits = np.log([0.4, 0.3, 0.2, 0.1])
    np.testing.assert_allclose(sampling_distribution(logits, 1.0, top_k=2, top_p=0.5), [1, 0, 0, 0], atol=1e-12)
    np.testing.assert_allclose(sampling_distribution(logits, 1.0, top_p=0.5), [4 / 7, 3 / 7, 0, 0], atol=1e-12)
    np.testing.assert_allclose(sampling_distribution(logits, 1.0, top_k=3, top_p=0.8), [4 / 9, 3 / 9, 2 / 9, 0],
                               atol=1e-12)


def test_temperature_softmax_equals_its_formula_and_a_tiny_temperature_gives_the_argmax() -> None:
    for tau in (0.25, 1.0, 3.0):
        e = np.exp(LOGITS / tau)
        np.testing.assert_allclose(temperature_softmax(LOGITS, tau), e / e.sum(), rtol=1e-12)
    p = temperature_softmax(LOGITS, 5e-324)
    assert p[3] == 1.0 and p.sum() == 1.0


def test_top_candidates_orders_by_probability_then_by_the_lower_id() -> None:
    p = temperature_softmax(LOGITS, 1.0)
    assert top_candidates(p, 4).tolist() == [3, 7, 0, 6]
    assert top_candidates(p, 6).tolist()[4:] == [2, 4]  # 0.5 twice: id 2 before id 4
    assert top_candidates(p, 100).tolist() == np.argsort(-LOGITS, kind="stable").tolist()


class Bigram:
    """A model whose next token's scores are a row of a table, chosen by the last token read: what generation
    writes from it is counted by hand."""

    eos_id = 3

    def __init__(self, table: np.ndarray, first: int) -> None:
        self.table, self.last, self.read_tokens = table, first, []

    def logits(self) -> np.ndarray:
        return self.table[self.last]

    def read(self, token: int) -> None:
        self.read_tokens.append(token)
        self.last = token


TABLE = np.log(np.array([[0.1, 0.6, 0.2, 0.1],    # after 0: most likely 1
                         [0.1, 0.1, 0.7, 0.1],    # after 1: 2
                         [0.05, 0.05, 0.1, 0.8],  # after 2: 3, the end
                         [0.25, 0.25, 0.25, 0.25]]))


def test_greedy_generation_follows_the_argmax_and_stops_after_the_end_token() -> None:
    model = Bigram(TABLE, first=0)
    steps = generate(model, 10, temperature=0)
    assert [s.id for s in steps] == [1, 2, 3]
    assert [s.probability for s in steps] == pytest.approx([0.6, 0.7, 0.8], rel=1e-12)
    assert model.read_tokens == [1, 2]  # the end token is written, never read
    assert len(generate(Bigram(TABLE, first=0), 2, temperature=0)) == 2


def test_sampling_draws_only_what_the_cut_offs_keep_and_repeats_with_its_seed() -> None:
    runs = [[s.id for s in generate(Bigram(TABLE, first=0), 6, temperature=1.0, top_k=1, seed=seed)]
            for seed in range(5)]
    assert all(run == [1, 2, 3] for run in runs)  # top_k = 1 is greedy whatever the seed
    first = [s.id for s in generate(Bigram(TABLE, first=0), 8, temperature=2.0, seed=7)]
    assert first == [s.id for s in generate(Bigram(TABLE, first=0), 8, temperature=2.0, seed=7)]


REFERENCE = Path(__file__).resolve().parents[1] / "fixtures" / "sampling_reference.npz"
with np.load(REFERENCE) as npz:
    WARPED = dict(npz)
CASES = range(int(WARPED["n_cases"]))


@pytest.mark.parametrize("c", CASES)
def test_the_cuts_equal_transformers_warpers(c: int) -> None:
    """transformers' TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper and MinPLogitsWarper, in
    generate's order, on SmolLM2's own logits and on made-up ones (scripts/sampling_reference.py)."""
    s, tau, k, p, m = WARPED[f"case_{c}"]
    got = sampling_distribution(WARPED[f"logits_{int(s)}"], tau, int(k) or None, p or None, m or None)
    kept = WARPED[f"kept_{c}"]
    assert np.flatnonzero(got).tolist() == kept.tolist()
    np.testing.assert_allclose(got[kept], WARPED[f"p_{c}"], rtol=1e-5, atol=1e-9)


def test_min_p_keeps_the_tokens_at_least_min_p_times_the_likeliest() -> None:
    p_all = np.exp(LOGITS) / np.exp(LOGITS).sum()
    for min_p in (0.1, 0.3, 0.6, 1.0):
        kept = set(np.flatnonzero(sampling_distribution(LOGITS, 1.0, min_p=min_p)).tolist())
        assert kept == {i for i in range(8) if p_all[i] >= min_p * p_all.max()}  # counted token by token


def test_twenty_draws_repeat_with_their_seed_and_follow_the_distribution() -> None:
    p = sampling_distribution(TABLE[0], 1.0, top_p=0.85)  # keeps 1, 2 and 0 (ties: the lower id), cuts 3
    assert draw(p, 20, seed=4).tolist() == draw(p, 20, seed=4).tolist()
    assert draw(p, 20, seed=4).tolist() != draw(p, 20, seed=5).tolist()
    assert 3 not in draw(p, 2000, seed=1)
    counts = np.bincount(draw(p, 200_000, seed=2), minlength=4) / 200_000
    np.testing.assert_allclose(counts, p, atol=0.005)  # 0.005 is above 4 standard errors of a share here
    for seed in range(1, 6):  # the first draw is the token generate writes first with that seed
        assert draw(p, 20, seed)[0] == generate(Bigram(TABLE, first=0), 1, 1.0, top_p=0.85, seed=seed)[0].id
