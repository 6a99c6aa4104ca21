"""EventHallusion for lmms-eval: the yes/no questions, scored as the authors' eval.py does.

A prediction is "Yes." when its text starts with "yes" (any case), "No." when it starts with "no" (a prefix, as
eval.py tests it: "Nothing" reads as "No."), and is right when that equals the question's answer; accuracy per split,
and over all questions for the `eventhallusion` group. A document pnd could not run counts as wrong and in `failed`.

Example:
    >>> doc = {"answer": "No."}
    >>> [eventhallusion_process_results(doc, [text])["accuracy"] for text in ("No, he is not.", "Nothing", "yes")]
    [1.0, 1.0, 0.0]
    >>> eventhallusion_process_results(doc, [(FAILED_LOSS, False), (FAILED_LOSS, False)])
    {'accuracy': 0.0, 'failed': 1}
"""

import os

from datasets import Dataset

from pnd.integrations.failed_documents import FAILED_LOSS, document_failed, failed_count, failed_in_subtasks  # noqa: F401

PROMPT = "\nPlease answer yes or no:"  # the authors' answer prompt (run_gpt4o.py, run_inference.py)
CHOICES = ["yes", "no"]
VIDEOS = "$EVENTHALLUSION_VIDEOS/<split>/<id>.mp4 (default $HF_HOME/eventhallusion; the authors' Google Drive)"


def eventhallusion_process_docs(dataset):
    """One document per question: the video's id and category, the question and its answer ("Yes." / "No.")."""
    return Dataset.from_list([{"id": row["id"], "category": row["category"], "question": q["question"], "answer": q["answer"]}
                              for row in dataset for q in row["questions"]])


def video_of(split: str, video_id: str) -> tuple[str, str]:
    """(folder, id) of a question's video: the kit's <split>/<id>; the mix split asks about the interleave videos, mix_NNN
    being interleave_NNN (the same event and category, index for index: f91c827 rewrote interleave's questions as mix).

    >>> video_of("mix", "mix_007"), video_of("entire", "entire_007")
    (('interleave', 'interleave_007'), ('entire', 'entire_007'))
    """
    return ("interleave", "interleave_" + video_id.removeprefix("mix_")) if split == "mix" else (split, video_id)


def eventhallusion_doc_to_visual(doc, lmms_eval_specific_kwargs):
    """<videos>/<split>/<id>.mp4 (`video_of`), videos being $EVENTHALLUSION_VIDEOS (default $HF_HOME/eventhallusion)."""
    home = os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface"))
    videos = os.environ.get("EVENTHALLUSION_VIDEOS", os.path.join(home, "eventhallusion"))
    folder, video_id = video_of(lmms_eval_specific_kwargs["split"], doc["id"])
    return [os.path.join(videos, folder, f"{video_id}.mp4")]


def eventhallusion_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"] + PROMPT


def extract_prediction(text: str):
    """eval.py's extract_pred: "Yes." / "No." from the start of the answer, None otherwise (leading spaces dropped)."""
    text = text.strip().lower()
    return "Yes." if text.startswith("yes") else "No." if text.startswith("no") else None


def eventhallusion_process_results(doc, results):
    """Generation: the text; loglikelihood: the choice ("yes" / "no") with the lowest loss; a failed document: wrong."""
    if document_failed(results):
        return {"accuracy": 0.0, "failed": 1}
    prediction = results[0] if isinstance(results[0], str) else CHOICES[min(range(2), key=lambda i: float(results[i][0]))]
    return {"accuracy": float(extract_prediction(prediction) == doc["answer"]), "failed": 0}
