"""VideoHallucer for lmms-eval: adversarial pairs of a basic and a hallucinated yes/no question on one video.

Each pair of the hub's json becomes two documents (basic, hallucinated) sharing a `pair`; a pair counts as right
only when both answers are (VideoHallucerKit's `cal_score`, evaluations/evaluation_utils.py). An answer is right
when the expected word appears in it as a whole word, case-insensitive, as the kit's regex does. A document pnd could
not run counts as a wrong answer (its pair too) and in `failed`. Exact duplicate pairs are dropped, the first kept,
as the kit's GitHub did in temporal.json (ae4c2f2: 200 pairs on the hub, 176 in the kit).

Example:
    >>> results = [videohallucer_process_results(d, [a]) for d, a in zip(
    ...     [{"pair": 0, "role": "basic", "answer": "yes"}, {"pair": 0, "role": "hallucination", "answer": "no"}],
    ...     ["Yes.", "Yes, it is."])]
    >>> overall_accuracy([r["overall_accuracy"] for r in results]), basic_accuracy([r["basic_accuracy"] for r in results])
    (0.0, 1.0)
"""

import json
import os
import re

from datasets import Dataset

from pnd.integrations.failed_documents import document_failed, failed_count, failed_in_subtasks  # noqa: F401

PROMPT = "\nAnswer the question using 'yes' or 'no'."  # the kit's instruction, after each question
CHOICES = ["yes", "no"]
VIDEOS = "$HF_HOME/videohallucer/<subset>/videos/ (lmms-eval downloads the hub's snapshot there)"


def distinct_pairs(rows) -> list[dict]:
    """The pairs without exact duplicates, the first of each kept (the kit's temporal.json since ae4c2f2)."""
    first = {}
    for row in rows:
        first.setdefault(json.dumps(row, sort_keys=True), row)
    return list(first.values())


def videohallucer_process_docs(dataset):
    """One document per question: the pair's index, its role (basic / hallucination), video, question, answer."""
    return Dataset.from_list([{"pair": i, "role": role, "type": row["type"], **{k: row[role][k] for k in ("video", "question", "answer")}}
                              for i, row in enumerate(distinct_pairs(dataset)) for role in ("basic", "hallucination")])


def videohallucer_doc_to_visual(doc, lmms_eval_specific_kwargs):
    """The video under $HF_HOME/<cache_dir>/<subset>/videos/, where lmms-eval puts the hub's snapshot."""
    home = os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface"))
    return [os.path.join(home, "videohallucer", lmms_eval_specific_kwargs["subset"], "videos", doc["video"])]


def videohallucer_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"] + PROMPT


def is_right(answer: str, prediction: str) -> bool:
    """The kit's match: the expected word as a whole word anywhere in the prediction, any case."""
    return re.search(r"\b(" + re.escape(answer) + r")\b", prediction, re.IGNORECASE) is not None


def videohallucer_process_results(doc, results):
    """Generation: the text; loglikelihood: the choice ("yes" / "no") with the lowest loss; a failed document: wrong."""
    failed = document_failed(results)
    if failed:
        right = False
    else:
        prediction = results[0] if isinstance(results[0], str) else CHOICES[min(range(2), key=lambda i: float(results[i][0]))]
        right = is_right(doc["answer"], prediction)
    return {"basic_accuracy": (doc["role"], right), "hallucination_accuracy": (doc["role"], right),
            "overall_accuracy": (doc["pair"], right), "failed": int(failed)}


def basic_accuracy(items):
    return _mean([right for role, right in items if role == "basic"])


def hallucination_accuracy(items):
    return _mean([right for role, right in items if role == "hallucination"])


def overall_accuracy(items):
    """A pair counts when both of its questions are answered right."""
    pairs = {}
    for pair, right in items:
        pairs[pair] = pairs.get(pair, True) and right
    return _mean(list(pairs.values()))


def _mean(values):
    return sum(values) / len(values) if values else 0.0
