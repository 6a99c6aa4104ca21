"""Ranking metrics and training-free normalizers for retrieval score matrices.

A score matrix has one row per query and one column per candidate (video->text: rows are videos).

Example:
    >>> import torch
    >>> from pnd.ranking import retrieval_metrics
    >>> retrieval_metrics(torch.tensor([[3., 1.], [0., 2.]]))["R@1"]
    100.0
"""

from __future__ import annotations

import torch


def ranks(scores: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
    """1-based rank of each query's target candidate (default: the diagonal). Ties count against it."""
    if targets is None:
        targets = torch.arange(scores.shape[0], device=scores.device)
    target_scores = scores.gather(1, targets[:, None])
    return (scores >= target_scores).sum(dim=1)


def retrieval_metrics(scores: torch.Tensor, targets: torch.Tensor | None = None) -> dict[str, float]:
    """R@1/5/10 (percent), median rank and mean rank of the target candidates."""
    r = ranks(scores, targets).double()
    metrics = {f"R@{k}": float((r <= k).double().mean() * 100) for k in (1, 5, 10)}
    metrics["MedR"] = float(r.median())
    metrics["MeanR"] = float(r.mean())
    return metrics


def dual_softmax(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Dual Softmax (Cheng et al. 2021): each score times a softmax prior over the other axis (queries).

    `scores * softmax(scores / temperature, dim=0)`: a candidate that scores high for every query gets
    its scores shrunk for the queries where it is not the best.
    """
    return scores * torch.softmax(scores / temperature, dim=0)


def inverted_softmax(scores: torch.Tensor, bank: torch.Tensor | None = None, temperature: float = 1.0) -> torch.Tensor:
    """Querybank normalization with the inverted softmax (Bogolin et al. 2022), in log space.

    `scores / T - logsumexp_b(bank[b] / T)` per candidate column, where `bank` holds the scores of a
    querybank against the same candidates (default: the queries themselves).
    """
    bank = scores if bank is None else bank
    return scores / temperature - torch.logsumexp(bank / temperature, dim=0, keepdim=True)


def rerank(first_stage: torch.Tensor, top_k: int, score_fn, fuse: float = 0.0) -> torch.Tensor:
    """Rescore each query's `top_k` first-stage candidates; the others get -inf.

    `score_fn(query_index, candidate_indices) -> scores` gives the new scores of those candidates
    (e.g. a CaptionScorer); `fuse` adds `fuse * first_stage` to them.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}.")
    out = torch.full(first_stage.shape, float("-inf"))
    candidates = first_stage.topk(min(top_k, first_stage.shape[1]), dim=1).indices
    for query, chosen in enumerate(candidates):
        out[query, chosen] = score_fn(query, chosen.tolist()).float() + fuse * first_stage[query, chosen].float()
    return out
