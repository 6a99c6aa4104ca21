"""EventHallusion for lmms-eval: the yes/no questions, scored as the authors' eval.py does.

A prediction is "Yes." when its text starts with "yes" (any case), "No." when it starts with "no", and is right when
that equals the question's answer; accuracy per split, and over all questions for the `eventhallusion` group.

Example:
    >>> doc = {"answer": "No."}
    >>> [eventhallusion_process_results(doc, [text])["accuracy"] for text in ("No, he is not.", "Nothing", "yes")]
    [1.0, 1.0, 0.0]
"""

import os

from datasets import Dataset

PROMPT = "\nPlease answer yes or no:"  # the authors' answer prompt (run_gpt4o.py, run_inference.py)
CHOICES = ["yes", "no"]


def eventhallusion_process_docs(dataset):
    """One document per question: the video's id and category, the question and its answer ("Yes." / "No.")."""
    return Dataset.from_list([{"id": row["id"], "category": row["category"], "question": q["question"], "answer": q["answer"]}
                              for row in dataset for q in row["questions"]])


def eventhallusion_doc_to_visual(doc, lmms_eval_specific_kwargs):
    """<videos>/<split>/<id>.mp4, videos being $EVENTHALLUSION_VIDEOS (default $HF_HOME/eventhallusion)."""
    home = os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface"))
    videos = os.environ.get("EVENTHALLUSION_VIDEOS", os.path.join(home, "eventhallusion"))
    return [os.path.join(videos, lmms_eval_specific_kwargs["split"], f"{doc['id']}.mp4")]


def eventhallusion_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"] + PROMPT


def extract_prediction(text: str):
    """eval.py's extract_pred: "Yes." / "No." from the start of the answer, None otherwise (leading spaces dropped)."""
    text = text.strip().lower()
    return "Yes." if text.startswith("yes") else "No." if text.startswith("no") else None


def eventhallusion_process_results(doc, results):
    """Generation: the text; loglikelihood: the choice ("yes" / "no") with the lowest loss."""
    prediction = results[0] if isinstance(results[0], str) else CHOICES[min(range(2), key=lambda i: float(results[i][0]))]
    return {"accuracy": float(extract_prediction(prediction) == doc["answer"])}
