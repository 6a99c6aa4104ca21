"""The one rule for a document pnd's lmms-eval models could not run: it counts as wrong, and in a `failed` metric.

A document fails when its input does (an unreadable or missing video, an input pnd refuses): the model reports it on
stderr and answers with a marker instead of a result, `FAILED_ANSWER` for generation and `FAILED_LOSS` for every
choice of a loglikelihood document. A task's `process_results` asks `document_failed(results)` first and scores
such a document as a wrong answer in every metric (so no accuracy ever counts it as right, and the benchmark's
denominators stay whole), and as 1 in its `failed` metric, summed by `failed_count`. `pnd sweep` counts the markers
in the samples files, for any task.

Example:
    >>> document_failed([FAILED_ANSWER]), document_failed([(FAILED_LOSS, False), (FAILED_LOSS, False)])
    (True, True)
    >>> document_failed(["Yes."]), document_failed([(0.3, False), (FAILED_LOSS, False)])
    (False, False)
"""

from __future__ import annotations

import math

# No "yes", "no", lone capital letter or digit: a task's own answer parser reads nothing from it.
FAILED_ANSWER = "[pnd: this document failed, see the log]"
FAILED_LOSS = math.inf  # for every choice: a loss the model itself never gives


def document_failed(results) -> bool:
    """Whether lmms-eval's `results` for one document (the generated texts, or the (loss, is_greedy) pair of each
    choice; lists as the samples files write them too) are pnd's failure marker."""
    results = list(results)
    if not results:
        return False
    if isinstance(results[0], str):
        return results[0].strip() == FAILED_ANSWER
    return all(isinstance(r, (list, tuple)) and float(r[0]) == FAILED_LOSS for r in results)


def failed_count(items) -> int:
    """The `failed` metric's aggregation: the number of failed documents (each item is 1 or 0)."""
    return int(sum(items))


def failed_in_subtasks(counts, sizes, weight_by_size=False) -> int:
    """A group's `failed`: its subtasks' counts added (lmms-eval's group aggregation signature)."""
    return int(sum(counts))
