"""Video->text retrieval over top-K candidates for lmms-eval: video paths and per-video recall/rank.

A true caption that is not among the candidates (answer -1), or a video pnd could not run, ranks after every candidate
(rank inf): never a hit at any K; a failed video is counted in `failed` too.

Example:
    >>> retrieval_process_results({"answer": 1}, [(2.5, False), (1.0, False), (3.0, False)])
    {'r1': 100.0, 'r5': 100.0, 'r10': 100.0, 'median_rank': 1, 'failed': 0}
    >>> retrieval_process_results({"answer": 1}, [(FAILED_LOSS, False)] * 3)
    {'r1': 0.0, 'r5': 0.0, 'r10': 0.0, 'median_rank': inf, 'failed': 1}
"""

import math
import os
import statistics

from pnd.integrations.failed_documents import FAILED_LOSS, document_failed, failed_count  # noqa: F401

VIDEOS = "$PND_RETRIEVAL_VIDEOS/<video> (the video column of retrieval_topk.jsonl)"


def retrieval_doc_to_visual(doc):
    """The video's path, relative to $PND_RETRIEVAL_VIDEOS (or as written when that is unset)."""
    return [os.path.join(os.environ.get("PND_RETRIEVAL_VIDEOS", ""), doc["video"])]


def retrieval_process_results(doc, results):
    """Rank of the true caption among the candidates by loss (lower first); answer -1 (not among them) or a failed
    video: inf, after all of them."""
    losses = [float(loss) for loss, _ in results]
    answer, failed = doc["answer"], document_failed(results)
    rank = 1 + sum(loss < losses[answer] for loss in losses) if answer >= 0 and not failed else math.inf
    return {"r1": 100.0 * (rank <= 1), "r5": 100.0 * (rank <= 5), "r10": 100.0 * (rank <= 10), "median_rank": rank,
            "failed": int(failed)}


def median(ranks):
    return statistics.median(ranks)
