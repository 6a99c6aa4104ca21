"""Ranking metrics and training-free normalizers for retrieval score matrices.

A score matrix has one row per query and one column per candidate (video->text: rows are videos).

Example:
    >>> import torch
    >>> from pnd.scoring.ranking import retrieval_metrics
    >>> retrieval_metrics(torch.tensor([[3., 1.], [0., 2.]]))["R@1"]
    100.0
"""

from __future__ import annotations

import math

import torch


def ranks(scores: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
    """1-based rank of each query's target candidate. Ties count against it; a NaN score is no score (the lowest).

    Args:
        scores: (queries, candidates) scores, higher is better.
        targets: the target candidate of each query (default: the diagonal, query i -> candidate i).

    Returns:
        (queries,) long tensor of ranks, 1 = the target scored highest.

    Example:
        >>> ranks(torch.tensor([[3., 1.], [0., 2.], [5., 5.], [float("nan"), 1.]]), torch.tensor([0, 1, 1, 0]))
        tensor([1, 1, 2, 2])
    """
    targets = _checked_targets(scores, targets)
    scores = scores.nan_to_num(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    target_scores = scores.gather(1, targets[:, None])
    return (scores >= target_scores).sum(dim=1)


def _checked_targets(scores: torch.Tensor, targets) -> torch.Tensor:
    """`targets` (default: the diagonal) as a long tensor of one candidate index per query, checked against `scores`."""
    if not torch.is_tensor(scores) or scores.dim() != 2:
        raise ValueError(f"scores must be a (queries, candidates) matrix, got {getattr(scores, 'shape', type(scores))}.")
    queries, candidates = scores.shape
    if targets is None:
        if queries > candidates:
            raise ValueError(f"The default targets are the diagonal (query i -> candidate i), but scores has {queries} "
                             f"queries and {candidates} candidates: pass targets, one candidate index per query.")
        return torch.arange(queries, device=scores.device)
    targets = torch.as_tensor(targets, device=scores.device)
    if targets.shape != (queries,) or targets.is_floating_point() or targets.is_complex() or targets.dtype == torch.bool:
        raise ValueError(f"targets must hold one integer candidate index per query ({queries}), got "
                         f"{targets.dtype} of shape {tuple(targets.shape)}.")
    if queries and not bool(((targets >= 0) & (targets < candidates)).all()):
        raise ValueError(f"targets must be candidate indices in [0, {candidates}), got {targets.tolist()}.")
    return targets.long()


def retrieval_metrics(scores: torch.Tensor, targets: torch.Tensor | None = None) -> dict[str, float]:
    """R@1/5/10 (percent), median rank and mean rank of the target candidates.

    The median rank of an even number of queries is the mean of the two middle ranks, as in the retrieval papers
    (`numpy.median`): ranks 1 and 2 give 1.5.

    Args:
        scores: (queries, candidates) scores, higher is better.
        targets: the target candidate of each query (default: the diagonal).

    Returns:
        {"R@1", "R@5", "R@10", "MedR", "MeanR"} as floats.

    Example:
        >>> retrieval_metrics(torch.tensor([[3., 1.], [2., 0.]]))
        {'R@1': 50.0, 'R@5': 100.0, 'R@10': 100.0, 'MedR': 1.5, 'MeanR': 1.5}
    """
    r = ranks(scores, targets).double()
    if not len(r):
        raise ValueError("scores has no query: retrieval metrics need at least one.")
    metrics = {f"R@{k}": float((r <= k).double().mean() * 100) for k in (1, 5, 10)}
    metrics["MedR"] = float(r.quantile(0.5))  # torch.median would take the lower middle rank
    metrics["MeanR"] = float(r.mean())
    return metrics


def dual_softmax(scores: torch.Tensor, temperature: float = 1.0, log_scores: bool = False) -> torch.Tensor:
    """Dual Softmax (Cheng et al. 2021): each score times a softmax prior over the other axis (queries).

    `scores * softmax(scores / temperature, dim=0)`: a candidate that scores high for every query gets
    its scores shrunk for the queries where it is not the best. That product ranks correctly for the positive
    similarities the method was made for; for log-probabilities (negative, as pnd's scores are) pass
    `log_scores=True`: the result is then the logarithm of the same product taken on the probabilities,
    `scores + log_softmax(scores / temperature, dim=0)`.

    Args:
        scores: (queries, candidates) scores.
        temperature: softmax temperature of the prior over queries.
        log_scores: whether `scores` are log-probabilities (combine in log space).

    Returns:
        The rescaled (queries, candidates) scores.

    Example:
        >>> dual_softmax(torch.tensor([[0., 0.], [0., 0.]]) + 1)
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000]])
        >>> dual_softmax(torch.tensor([[0., 0.], [0., 0.]]), log_scores=True).exp()
        tensor([[0.5000, 0.5000],
                [0.5000, 0.5000]])
    """
    _check_temperature(temperature)
    log_prior = scores / temperature - _log_sum(scores / temperature, dim=0)
    rescaled = scores + log_prior if log_scores else scores * log_prior.exp()
    return rescaled.masked_fill(torch.isneginf(scores), -math.inf)  # a candidate `rerank` left out stays out


def inverted_softmax(scores: torch.Tensor, bank: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Querybank normalization with the inverted softmax (Bogolin et al. 2022), in log space.

    `scores / T - logsumexp_b(bank[b] / T)` per candidate column, where `bank` holds the scores of a
    querybank against the same candidates (default: the queries themselves).

    Args:
        scores: (queries, candidates) scores.
        bank: (bank queries, candidates) scores of a querybank; default `scores`.
        temperature: T above.

    Returns:
        The normalized (queries, candidates) scores (log-probabilities over the bank per candidate).

    Example:
        >>> inverted_softmax(torch.zeros(2, 3)).exp()
        tensor([[0.5000, 0.5000, 0.5000],
                [0.5000, 0.5000, 0.5000]])
    """
    _check_temperature(temperature)
    bank = scores if bank is None else bank
    return scores / temperature - _log_sum(bank / temperature, dim=0)  # -inf (left out by `rerank`) stays -inf


def sinkhorn(scores: torch.Tensor, temperature: float = 1.0, iterations: int = 3) -> torch.Tensor:
    """Sinkhorn-Knopp marginal correction (KDProR, Zhuang et al. ECCV 2024, Eq. 3), in log space.

    KDProR aligns videos and captions by the entropy-regularised optimal transport plan
    `Q* = argmax_Q <Q, S> + eps H(Q)` with uniform marginals, solved by Sinkhorn-Knopp (Cuturi 2013):
    `Q* = diag(u) exp(S / eps) diag(v)`, alternately rescaling columns and rows. Here `eps` is the
    `temperature`; each iteration makes every column sum to `rows / columns` (a candidate that scores
    high for every query, a hub, is shared out), then every row sum to 1. Returns `log Q` after
    `iterations`; a square matrix becomes doubly stochastic as the iterations grow. One iteration ranks
    each row as `inverted_softmax` does (the row step adds a constant per row). `-inf` scores (e.g.
    candidates `rerank` left out) stay `-inf`.

    Args:
        scores: (queries x candidates) scores.
        temperature: the entropy weight `eps` (> 0); smaller sharpens the plan.
        iterations: column-then-row normalization rounds (>= 1).

    Returns:
        `log Q`, the same shape as `scores`.

    Example:
        >>> import torch
        >>> q = sinkhorn(torch.tensor([[4.0, 1.0], [1.0, 1.0]]).log(), iterations=1).exp()
        >>> [[round(v, 4) for v in row] for row in q.tolist()]  # [[8/13, 5/13], [2/7, 5/7]]
        [[0.6154, 0.3846], [0.2857, 0.7143]]
    """
    _check_temperature(temperature)
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be an integer >= 1, got {iterations!r}.")
    if not scores.numel():
        return scores / temperature
    log_q = scores / temperature
    column_mass = math.log(scores.shape[0] / scores.shape[1])
    for _ in range(iterations):
        log_q = log_q - _log_sum(log_q, dim=0) + column_mass
        log_q = log_q - _log_sum(log_q, dim=1)
    return log_q


def _check_temperature(temperature) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 < temperature < math.inf:
        raise ValueError(f"temperature must be a number > 0, got {temperature!r}.")


def _log_sum(log_q: torch.Tensor, dim: int) -> torch.Tensor:
    """logsumexp along dim, 0 where a whole row/column is -inf (it stays -inf instead of becoming NaN)."""
    total = torch.logsumexp(log_q, dim=dim, keepdim=True)
    return total.masked_fill(torch.isneginf(total), 0.0)


def rerank(first_stage: torch.Tensor, top_k: int, score_fn, fuse: float = 0.0) -> torch.Tensor:
    """Rescore each query's `top_k` first-stage candidates; the others get -inf.

    Args:
        first_stage: (queries, candidates) scores of a first stage (e.g. a dual encoder).
        top_k: how many candidates per query to rescore.
        score_fn: `score_fn(query_index, candidate_indices) -> scores`, the new scores of those candidates
            (e.g. from a CaptionScorer).
        fuse: adds `fuse * first_stage` to the new scores (0: the new scores alone, whatever the first stage).

    Returns:
        (queries, candidates) scores: the new ones for each query's top-k, -inf elsewhere.

    Example:
        >>> rerank(torch.tensor([[3., 2., 1.]]), 2, lambda q, chosen: torch.tensor(chosen, dtype=torch.float))
        tensor([[0., 1., -inf]])
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}.")
    if torch.isnan(first_stage).any():
        raise ValueError(f"first_stage holds {int(torch.isnan(first_stage).sum())} NaN score(s), which topk would "
                         "rank first: fix them (or give them -inf to leave those candidates out).")
    out = torch.full(first_stage.shape, float("-inf"), dtype=torch.float32, device=first_stage.device)
    candidates = first_stage.topk(min(top_k, first_stage.shape[1]), dim=1).indices
    for query, chosen in enumerate(candidates):
        new = torch.as_tensor(score_fn(query, chosen.tolist())).to(out.device, torch.float32)
        if new.shape != chosen.shape:
            raise ValueError(f"score_fn({query}, <{len(chosen)} candidates>) returned scores of shape "
                             f"{tuple(new.shape)}: it must return one score per candidate, shape ({len(chosen)},).")
        out[query, chosen] = new if fuse == 0 else new + fuse * first_stage[query, chosen].float()
    return out
