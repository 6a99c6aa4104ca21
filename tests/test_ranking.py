"""Retrieval metrics and normalizers against hand-computed examples."""

import math

import pytest
import torch

from pnd.scoring.ranking import dual_softmax, inverted_softmax, ranks, rerank, retrieval_metrics, sinkhorn

SCORES = torch.tensor([[3.0, 1.0, 2.0], [1.0, 2.0, 0.0], [0.0, 5.0, 4.0]])


def test_ranks_and_metrics_by_hand():
    assert ranks(SCORES).tolist() == [1, 1, 2]
    assert ranks(SCORES, torch.tensor([2, 0, 0])).tolist() == [2, 2, 3]
    m = retrieval_metrics(SCORES)
    assert m["R@1"] == pytest.approx(200 / 3) and m["R@5"] == 100 and m["R@10"] == 100
    assert m["MedR"] == 1 and m["MeanR"] == pytest.approx(4 / 3)


def test_ties_count_against_the_target():
    assert ranks(torch.zeros(2, 4)).tolist() == [4, 4]


def test_dual_softmax_by_hand():
    column = [3.0, 1.0, 0.0]  # scores of candidate 0 over the three queries
    z = sum(math.exp(v / 2) for v in column)
    out = dual_softmax(SCORES, temperature=2.0)
    assert out[0, 0].item() == pytest.approx(3.0 * math.exp(1.5) / z)
    assert out[2, 0].item() == pytest.approx(0.0)


def test_dual_softmax_of_log_scores_by_hand():
    column = [3.0, 1.0, 0.0]
    out = dual_softmax(SCORES, temperature=2.0, log_scores=True)
    assert out[0, 0].item() == pytest.approx(3.0 + 1.5 - math.log(sum(math.exp(v / 2) for v in column)))
    # the log of the product on probabilities: a hub's shrink keeps its sign, unlike the plain product
    hub = torch.tensor([[-1.0, -2.0], [-1.5, -1.8]])  # caption 0 wins both videos by raw score
    assert dual_softmax(hub, log_scores=True).argmax(1).tolist() == [0, 1]
    # the plain product on negative scores: a small prior shrinks a score towards 0, i.e. raises it; hub keeps both
    assert dual_softmax(hub).argmax(1).tolist() == [0, 0]


def test_inverted_softmax_by_hand():
    out = inverted_softmax(SCORES)
    column = [1.0, 2.0, 5.0]
    assert out[1, 1].item() == pytest.approx(2.0 - math.log(sum(math.exp(v) for v in column)))
    bank = torch.tensor([[0.0, 0.0, 0.0]])
    assert torch.allclose(inverted_softmax(SCORES, bank, temperature=0.5), SCORES / 0.5)


def test_inverted_softmax_fixes_a_hub():
    # candidate 0 is a hub: it wins every query by raw score; normalization restores the diagonal
    scores = torch.tensor([[5.0, 1.0, 0.0], [4.5, 4.0, 0.0], [4.5, 0.0, 4.0]])
    assert retrieval_metrics(scores)["R@1"] == pytest.approx(100 / 3)
    assert retrieval_metrics(inverted_softmax(scores))["R@1"] == 100


def test_rerank_scores_only_top_k_and_fuses():
    first = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.7]])
    calls = []

    def score_fn(query, candidates):
        calls.append((query, candidates))
        return torch.tensor([10.0 * c for c in candidates])

    out = rerank(first, top_k=2, score_fn=score_fn, fuse=1.0)
    assert calls == [(0, [0, 2]), (1, [1, 2])]
    assert out[0].tolist() == [pytest.approx(0.9), float("-inf"), pytest.approx(20.5)]
    assert out[1].tolist() == [float("-inf"), pytest.approx(10.8), pytest.approx(20.7)]


K = torch.tensor([[4.0, 1.0], [1.0, 1.0]])  # exp(scores) of a 2x2 example worked out by hand


def test_sinkhorn_one_iteration_by_hand():
    # columns of K sum to (5, 2): [[4/5, 1/2], [1/5, 1/2]]; its rows then sum to (13/10, 7/10)
    expected = torch.tensor([[8 / 13, 5 / 13], [2 / 7, 5 / 7]])
    assert torch.allclose(sinkhorn(K.log(), iterations=1).exp(), expected, atol=1e-6)
    assert torch.allclose(sinkhorn(3 * K.log(), temperature=3.0, iterations=1).exp(), expected, atol=1e-6)


def test_sinkhorn_converges_to_the_closed_form():
    # Row/column scalings keep the cross ratio q11 q22 / (q12 q21) = 4; the doubly stochastic matrix with it
    # is [[p, 1-p], [1-p, p]] with (p / (1-p))^2 = 4: p = 2/3.
    expected = torch.tensor([[2 / 3, 1 / 3], [1 / 3, 2 / 3]])
    assert torch.allclose(sinkhorn(K.log(), iterations=60).exp(), expected, atol=1e-6)


def test_sinkhorn_marginals_after_enough_iterations():
    scores = torch.randn(2, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    q = sinkhorn(scores, temperature=0.7, iterations=500).exp()
    assert torch.allclose(q.sum(1), torch.ones(2, dtype=torch.float64), atol=1e-9)  # each query: one unit
    assert torch.allclose(q.sum(0), torch.full((3,), 2 / 3, dtype=torch.float64), atol=1e-6)  # shared evenly


def test_sinkhorn_one_iteration_ranks_like_inverted_softmax():
    shift = sinkhorn(SCORES, temperature=0.5, iterations=1) - inverted_softmax(SCORES, temperature=0.5)
    assert torch.allclose(shift, shift[:, :1].expand_as(shift), atol=1e-6)  # a constant per row


def test_sinkhorn_fixes_a_hub_and_keeps_minus_inf():
    scores = torch.tensor([[5.0, 1.0, 0.0], [4.5, 4.0, 0.0], [4.5, 0.0, 4.0]])
    assert retrieval_metrics(sinkhorn(scores, iterations=10))["R@1"] == 100
    scores[0, 2] = scores[1, 2] = scores[2, 2] = float("-inf")  # a column rerank left out entirely
    out = sinkhorn(scores)
    assert torch.isneginf(out[:, 2]).all() and torch.isfinite(out[:, :2]).all()


def test_sinkhorn_refuses_bad_arguments():
    with pytest.raises(ValueError, match="temperature"):
        sinkhorn(SCORES, temperature=0.0)
    with pytest.raises(ValueError, match="iterations"):
        sinkhorn(SCORES, iterations=0)


def scores_with_ranks(wanted):
    """A (queries x 4) score matrix whose target (candidate 0) has rank `wanted[q]` for query q: the target scores 0
    and rank - 1 other candidates score 1."""
    return torch.tensor([[0.0] + [1.0 if j < rank - 1 else -1.0 for j in range(3)] for rank in wanted])


@pytest.mark.parametrize("wanted", [[1, 1, 4, 4], [2, 1], [3, 1, 2], [4, 2, 1, 3, 2, 1], [2]])
def test_median_rank_of_an_even_count_is_the_mean_of_the_two_middle_ranks(wanted):
    targets = torch.zeros(len(wanted), dtype=torch.long)
    assert ranks(scores_with_ranks(wanted), targets).tolist() == wanted
    middle = sorted(wanted)[(len(wanted) - 1) // 2 : len(wanted) // 2 + 1]  # one rank (odd count) or two (even)
    assert retrieval_metrics(scores_with_ranks(wanted), targets)["MedR"] == sum(middle) / len(middle)


def test_a_nan_score_is_no_score():
    """A NaN target had rank 0 (an R@1 hit, MeanR below 1) and NaN distractors did not count: NaN ranks lowest, ties
    with it counting against the target, as -inf does."""
    nan = float("nan")
    assert ranks(torch.tensor([[nan, 1.0, 2.0]]), torch.tensor([0])).tolist() == [3]
    assert ranks(torch.tensor([[1.0, nan, 2.0]]), torch.tensor([0])).tolist() == [2]
    assert retrieval_metrics(torch.tensor([[nan, 1.0], [0.0, 2.0]])) == {"R@1": 50.0, "R@5": 100.0, "R@10": 100.0,
                                                                         "MedR": 1.5, "MeanR": 1.5}


def test_candidates_rerank_left_out_stay_out_of_every_normalizer():
    """`rerank` gives -inf to candidates outside a query's top-k, and a candidate no query kept has a column of -inf:
    dual_softmax (-inf x 0) and inverted_softmax (-inf - -inf) made NaN of them, which ranked first. Worked by hand:
    the kept scores of each column are normalized over the queries that kept them."""
    minus = float("-inf")
    reranked = torch.tensor([[0.0, minus, minus], [minus, 0.0, minus], [minus, 0.0, minus]])
    half = math.log(0.5)
    want = torch.tensor([[0.0, minus, minus], [minus, half, minus], [minus, half, minus]])
    for out in (dual_softmax(reranked, log_scores=True), inverted_softmax(reranked)):  # (sinkhorn: its own test)
        assert torch.equal(torch.isneginf(out), torch.isneginf(want)) and not out.isnan().any()
        torch.testing.assert_close(out[torch.isfinite(out)], want[torch.isfinite(want)])
    assert torch.equal(torch.isneginf(dual_softmax(reranked)), torch.isneginf(want))  # 0 x softmax: 0, -inf kept
    assert not dual_softmax(reranked).isnan().any()
    assert retrieval_metrics(dual_softmax(reranked, log_scores=True))["R@1"] == pytest.approx(200 / 3)


def test_rerank_at_fuse_zero_is_the_new_scores_alone_and_checks_them():
    """fuse=0 multiplied the first stage in: 0 x -inf (a candidate the first stage masked) was NaN. A score_fn that
    returns another number of scores than candidates was broadcast; a NaN first stage ranked its candidate first."""
    first = torch.tensor([[3.0, float("-inf"), 1.0]])
    assert rerank(first, 3, lambda q, chosen: torch.tensor([-1.0, -3.0, -2.0])).tolist() == [[-1.0, -2.0, -3.0]]
    with pytest.raises(ValueError, match=r"one score per candidate, shape \(2,\)"):
        rerank(torch.tensor([[3.0, 2.0, 1.0]]), 2, lambda q, chosen: torch.tensor([7.0]))
    with pytest.raises(ValueError, match="NaN"):
        rerank(torch.tensor([[float("nan"), 2.0, 1.0]]), 1, lambda q, chosen: torch.zeros(len(chosen)))
    with pytest.raises(ValueError, match="top_k must be an integer"):
        rerank(first, 1.5, lambda q, chosen: torch.zeros(len(chosen)))


@pytest.mark.parametrize("call, message", [
    (lambda: retrieval_metrics(torch.zeros(3, 1)), "default targets are the diagonal"),
    (lambda: retrieval_metrics(torch.zeros(2, 2), torch.tensor([0, 2])), r"candidate indices in \[0, 2\)"),
    (lambda: retrieval_metrics(torch.zeros(2, 2), torch.tensor([0, -1])), r"candidate indices in \[0, 2\)"),
    (lambda: retrieval_metrics(torch.zeros(3, 3), torch.tensor([0, 1])), "one integer candidate index per query"),
    (lambda: retrieval_metrics(torch.zeros(2, 2), torch.tensor([0.0, 1.0])), "one integer candidate index per query"),
    (lambda: retrieval_metrics(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)), "no query"),
    (lambda: retrieval_metrics(torch.zeros(3)), r"\(queries, candidates\) matrix"),
    (lambda: dual_softmax(SCORES, temperature=0), "temperature must be a number > 0"),
    (lambda: dual_softmax(SCORES, temperature=-1.0), "temperature must be a number > 0"),
    (lambda: inverted_softmax(SCORES, temperature=0), "temperature must be a number > 0"),
])
def test_bad_ranking_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    assert retrieval_metrics(SCORES, [0, 1, 1])["R@1"] == 100  # targets as a list are indices too
