"""VidHalluc for lmms-eval: action (binary QA, multiple choice) and temporal-sequence hallucination questions.

Prompts and scoring follow the authors' kit (github.com/Vid-Halluc/VidHalluc, eval/inference/video_hallu_*.py and
eval/evaluation/eval_{bqa,mcq,tsh}.py):
- binary QA: a question is asked on each clip of a video pair; the answer's text up to the first "." or ","
  must equal the clip's "Yes" / "No" (any case), and a question counts only when every clip's answer is right;
- multiple choice: the option letters A-D standing alone in the answer (case kept), or else the first option whose
  text the answer contains (any case), must be exactly the correct letters;
- temporal sequence: the answer is read as "AB", "BA", "A", "B" or "None" by the kit's rules and must equal "AB" / "BA".

The json files are objects keyed by index, which `datasets`' json reader turns into columns (one row, or one row per
list item, depending on the file's size and shape), so the tasks read them as text and parse them here. The videos
are the hub's data/ACH_videos.zip and data/TSH_videos.zip, downloaded and unpacked on first use.

Example:
    >>> docs = [{"question_id": "0/0", "answer": "Yes"}, {"question_id": "0/0", "answer": "No"}]
    >>> results = [binaryqa_process_results(d, [a]) for d, a in zip(docs, ["Yes, he is.", "No"])]
    >>> accuracy([r["accuracy"] for r in results]), tsh_prediction("Action B happens before action A.")
    (1.0, 'BA')
"""

import functools
import glob
import json
import os
import re
import sys
import zipfile

from datasets import Dataset

HUB = "chaoyuli/VidHalluc"

BINARYQA_PROMPT = " Only answer with a single word 'Yes' or 'No'."  # video_hallu_bqa.py, after the question
MCQ_PROMPT = " Please select the correct answer (one or more options), only return your answer(s). (e.g., ABCD)"
TSH_PROMPT = ("Sort these two actions in the order they occur in the video, and return the order you detect (i.e., AB "
              "or BA). If you only detect one action of these two in the video, return that action.")  # no space before
BINARY_CHOICES = ["Yes", "No"]


def annotations(dataset) -> dict:
    """The authors' json, {index: entry}, from the text lines lmms-eval read (the `text` column, in file order)."""
    return json.loads("\n".join(dataset["text"]))


def _documents(rows: list[dict], part: str):
    if rows:
        ensure_videos(part, rows[0]["clip"])
    return Dataset.from_list(rows)


def binaryqa_process_docs(dataset):
    """ach_binaryqa.json, {index: [{"q": question, "a": {clip: "Yes" / "No"}}]}: one document per (question, clip)."""
    return _documents([{"question_id": f"{index}/{i}", "clip": clip, "question": entry["q"], "answer": answer}
                       for index, entries in annotations(dataset).items()
                       for i, entry in enumerate(entries) for clip, answer in entry["a"].items()], "ACH")


def mcq_process_docs(dataset):
    """ach_mcq.json, {index: {clip: {"Question", "Choices": {letter: text}, "Correct Answer"}}}: one document per clip."""
    return _documents([{"index": index, "clip": clip, "question": entry["Question"], "letters": list(entry["Choices"]),
                        "options": list(entry["Choices"].values()), "answer": entry["Correct Answer"]}
                       for index, clips in annotations(dataset).items() for clip, entry in clips.items()], "ACH")


def tsh_process_docs(dataset):
    """tsh.json, {index: {"video", "Question", "Correct Answer": "AB" / "BA"}}: one document per entry."""
    return _documents([{"index": index, "clip": entry["video"], "question": entry["Question"],
                        "answer": entry["Correct Answer"]} for index, entry in annotations(dataset).items()], "TSH")


def videos_folder() -> str:
    """$VIDHALLUC_VIDEOS, default $HF_HOME/vidhalluc (where ensure_videos unpacks the hub's data/<part>_videos.zip)."""
    home = os.path.expanduser(os.environ.get("HF_HOME", "~/.cache/huggingface"))
    return os.environ.get("VIDHALLUC_VIDEOS", os.path.join(home, "vidhalluc"))


@functools.lru_cache(maxsize=4)
def _video_index(root: str) -> dict:
    """{file name: [paths]} of every video under root: the zips' inner folders differ, so the kit walks them too."""
    index = {}
    for folder, _, files in sorted(os.walk(root, followlinks=True)):
        for name in sorted(files):
            index.setdefault(name, []).append(os.path.join(folder, name))
    return index


def find_video(name: str, part: str, root: str | None = None) -> str:
    """<name>.mp4 under root, in a folder named `part` (ACH, TSH) if several; where it should be if nowhere (pnd then
    reports the document and scores its empty answer, as the kit scores a clip it has no answer for)."""
    root = root or videos_folder()
    file = name if name.endswith(".mp4") else f"{name}.mp4"
    found = _video_index(root).get(file, [])
    preferred = [path for path in found if part in os.path.relpath(path, root).split(os.sep)[:-1]]
    return (preferred or found or [os.path.join(root, part, file)])[0]


def ensure_videos(part: str, clip: str, root: str | None = None) -> None:
    """Where `clip` is not under root: download the hub's <part>_videos.zip and unpack it into root/<part>, once
    (a file lock keeps processes launched together from doing it twice)."""
    from filelock import FileLock

    root = root or videos_folder()
    if os.path.exists(find_video(clip, part, root)):
        return
    os.makedirs(root, exist_ok=True)
    with FileLock(os.path.join(root, f".{part}_videos.lock")):
        _video_index.cache_clear()
        if os.path.exists(find_video(clip, part, root)):
            return
        from huggingface_hub import snapshot_download

        print(f"vidhalluc: downloading {HUB}'s {part}_videos.zip and unpacking it into {root}/{part}", file=sys.stderr)
        snapshot = snapshot_download(HUB, repo_type="dataset", allow_patterns=[f"*{part}_videos.zip"])
        for archive in glob.glob(os.path.join(snapshot, "**", f"{part}_videos.zip"), recursive=True):
            with zipfile.ZipFile(archive) as opened:
                opened.extractall(os.path.join(root, part))
        _video_index.cache_clear()


def vidhalluc_doc_to_visual(doc, lmms_eval_specific_kwargs):
    return [find_video(doc["clip"], lmms_eval_specific_kwargs["part"])]


def binaryqa_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"] + BINARYQA_PROMPT


def mcq_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    """video_hallu_mcq.py's prompt: the question, the instruction, then "Choices:" and one "X. option" line each."""
    return (doc["question"] + MCQ_PROMPT + "\nChoices:\n"
            + "".join(f"{letter}. {option}\n" for letter, option in zip(doc["letters"], doc["options"])))


def tsh_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"] + TSH_PROMPT


def _chosen(results, choices):
    """Generation: the text; loglikelihood: the choice with the lowest loss."""
    if isinstance(results[0], str):
        return results[0]
    return choices[min(range(len(choices)), key=lambda i: float(results[i][0]))]


def binaryqa_right(answer: str, prediction: str) -> bool:
    """eval_bqa.py: the prediction up to its first "." and then its first ",", stripped, equals the answer (any case)."""
    return prediction.strip().split(".")[0].split(",")[0].strip().upper() == answer.strip().upper()


def binaryqa_process_results(doc, results):
    right = binaryqa_right(doc["answer"], _chosen(results, BINARY_CHOICES))
    return {"accuracy": (doc["question_id"], right), "clip_accuracy": float(right)}


def accuracy(items):
    """eval_bqa.py: a question counts when its answers on all of its clips are right."""
    questions = {}
    for question, right in items:
        questions[question] = questions.get(question, True) and right
    return sum(questions.values()) / len(questions) if questions else 0.0


def mcq_prediction(prediction: str, choices: dict) -> set:
    """eval_mcq.py: the letters A-D standing alone (case kept), else the first option whose text is in the answer."""
    letters = set(re.findall(r"\b[A-D]\b", prediction))
    if letters:
        return letters
    matched = next((letter for letter, option in choices.items() if option.lower() in prediction.lower()), None)
    return {matched.strip().upper()} if matched else set()


def mcq_process_results(doc, results):
    choices = dict(zip(doc["letters"], doc["options"]))
    prediction = mcq_prediction(_chosen(results, list(doc["letters"])), choices)
    return {"accuracy": float(prediction == set(re.findall(r"[A-D]", doc["answer"].strip().upper())))}


def tsh_prediction(answer: str) -> str:
    """eval_tsh.py's model_answer_to_correct_answer, rule for rule (its regex character classes included), on the
    stripped answer (the kit's inference strips it)."""
    answer = answer.strip().lower()
    if answer in ("ab", "ba", "a", "b"):
        return answer.upper()
    if "not clear" in answer or "no clear" in answer:
        return "None"
    has_a, has_b = "action a" in answer, "action b" in answer
    if has_a and has_b:
        for word in ("before", "then", "after"):
            if word in answer:
                found = re.search(rf"(action [ab]|[ab][\.\)])[^{word}]+{word}[^action]*?(action [ab]|[ab][\.\)])", answer)
                if found:
                    first, second = found.group(1)[-1].upper(), found.group(2)[-1].upper()
                    return second + first if word == "after" else first + second
                break
        return "".join(m.group(1)[-1].upper() for m in re.finditer(r"(action [ab]|[ab][\.\)])", answer))
    return "A" if has_a else "B" if has_b else "None"


def tsh_process_results(doc, results):
    return {"accuracy": float(tsh_prediction(_chosen(results, [])) == doc["answer"])}
