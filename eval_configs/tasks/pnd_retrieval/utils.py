"""Video->text retrieval over top-K candidates for lmms-eval: video paths and per-video recall/rank.

Example:
    >>> retrieval_process_results({"answer": 1}, [(2.5, False), (1.0, False), (3.0, False)])
    {'r1': 100.0, 'r5': 100.0, 'r10': 100.0, 'median_rank': 1}
"""

import os
import statistics


def retrieval_doc_to_visual(doc):
    """The video's path, relative to $PND_RETRIEVAL_VIDEOS (or as written when that is unset)."""
    return [os.path.join(os.environ.get("PND_RETRIEVAL_VIDEOS", ""), doc["video"])]


def retrieval_process_results(doc, results):
    """Rank of the true caption among the candidates by loss (lower first); answer -1: not among them."""
    losses = [float(loss) for loss, _ in results]
    answer = doc["answer"]
    rank = 1 + sum(loss < losses[answer] for loss in losses) if answer >= 0 else len(losses) + 1
    return {"r1": 100.0 * (rank <= 1), "r5": 100.0 * (rank <= 5), "r10": 100.0 * (rank <= 10), "median_rank": rank}


def median(ranks):
    return statistics.median(ranks)
