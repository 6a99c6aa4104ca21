"""VidHalluc for lmms-eval: action (binary QA, multiple choice), temporal-sequence and scene-transition questions.

Prompts and scoring follow the authors' kit (github.com/Vid-Halluc/VidHalluc, eval/inference/video_hallu_*.py and
eval/evaluation/eval_{bqa,mcq,tsh,sth}.py):
- binary QA: a question is asked on each clip of a video pair; the answer's text up to the first "." or ","
  must equal the clip's "Yes" / "No" (any case), and a question counts only when every clip's answer is right;
- multiple choice: the option letters A-D standing alone in the answer (case kept), or else the first option whose
  text the answer contains (any case), must be exactly the correct letters;
- temporal sequence: the answer is read as "AB", "BA", "A", "B" or "None" by the kit's rules and must equal "AB" / "BA";
- scene transition: "Scene change: Yes/No" is scored over all videos by the Matthews correlation (as ((mcc + 1) / 2)^2),
  the "from <place> to <place>." of videos where both say Yes by a SimCSE model's cosine similarity of each place
  (0 up to 0.5, then sigmoid-scaled to 1), 0.6 and 0.4 of the score. The SimCSE model
  (princeton-nlp/sup-simcse-roberta-large, or $PND_SIMCSE_MODEL) is loaded with transformers the first time a
  description is scored.

The json files are objects keyed by index, which `datasets`' json reader turns into columns (one row, or one row per
list item, depending on the file's size and shape), so the tasks read them as text and parse them here. The videos
are the hub's data/ACH_videos.zip, data/TSH_videos.zip and data/STH_videos.zip, downloaded and unpacked on first use.

Example:
    >>> docs = [{"question_id": "0/0", "answer": "Yes"}, {"question_id": "0/0", "answer": "No"}]
    >>> results = [binaryqa_process_results(d, [a]) for d, a in zip(docs, ["Yes, he is.", "No"])]
    >>> accuracy([r["accuracy"] for r in results]), tsh_prediction("Action B happens before action A.")
    (1.0, 'BA')
"""

import functools
import glob
import json
import math
import os
import re
import sys
import zipfile

from datasets import Dataset

from pnd.integrations.failed_documents import document_failed, failed_count, failed_in_subtasks  # noqa: F401

HUB = "chaoyuli/VidHalluc"
VIDEOS = "$VIDHALLUC_VIDEOS (default $HF_HOME/vidhalluc), found by file name (the hub's <part>_videos.zip)"

BINARYQA_PROMPT = " Only answer with a single word 'Yes' or 'No'."  # video_hallu_bqa.py, after the question
MCQ_PROMPT = " Please select the correct answer (one or more options), only return your answer(s). (e.g., ABCD)"
TSH_PROMPT = ("Sort these two actions in the order they occur in the video, and return the order you detect (i.e., AB "
              "or BA). If you only detect one action of these two in the video, return that action.")  # no space before
STH_PROMPT = ("Watch the given video and determine if a scene change occurs. If no change occurs, respond: 'Scene "
              "change: No, Locations: None'. If there is a scene change, respond in the format: 'Scene change: Yes, "
              "Locations: from [location1] to [location2].'")  # video_hallu_sth.py: the whole prompt, no question
BINARY_CHOICES = ["Yes", "No"]
SIMCSE_MODEL = "princeton-nlp/sup-simcse-roberta-large"  # eval_sth.py's; $PND_SIMCSE_MODEL overrides it
SIMILARITY_LOW = 0.5  # eval_sth.py's main() passes similarity_threshold_low=0.5 (its functions default to 0.3)


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


def sth_process_docs(dataset):
    """sth.json, {video: {"Scene change": "Yes" / "No", "Locations": "from ... to ...." / "None"}}: one document per
    video (eval_sth.py reads these two fields; video_hallu_sth.py finds <video>.mp4)."""
    return _documents([{"index": video, "clip": video, "scene_change": entry["Scene change"],
                        "locations": entry["Locations"],
                        "answer": f"Scene change: {entry['Scene change']}, Locations: {entry['Locations']}"}
                       for video, entry in annotations(dataset).items()], "STH")


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
    reports the document, which counts as wrong and in `failed`)."""
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


def sth_doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return STH_PROMPT


def _chosen(results, choices):
    """Generation: the text; loglikelihood: the choice with the lowest loss."""
    if isinstance(results[0], str):
        return results[0]
    return choices[min(range(len(choices)), key=lambda i: float(results[i][0]))]


def binaryqa_right(answer: str, prediction: str) -> bool:
    """eval_bqa.py: the prediction up to its first "." and then its first ",", stripped, equals the answer (any case)."""
    return prediction.strip().split(".")[0].split(",")[0].strip().upper() == answer.strip().upper()


def binaryqa_process_results(doc, results):
    failed = document_failed(results)
    right = not failed and binaryqa_right(doc["answer"], _chosen(results, BINARY_CHOICES))
    return {"accuracy": (doc["question_id"], right), "clip_acc": float(right), "failed": int(failed)}


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
    if document_failed(results):
        return {"accuracy": 0.0, "failed": 1}
    choices = dict(zip(doc["letters"], doc["options"]))
    prediction = mcq_prediction(_chosen(results, list(doc["letters"])), choices)
    return {"accuracy": float(prediction == set(re.findall(r"[A-D]", doc["answer"].strip().upper()))), "failed": 0}


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
    if document_failed(results):
        return {"accuracy": 0.0, "failed": 1}
    return {"accuracy": float(tsh_prediction(_chosen(results, [])) == doc["answer"]), "failed": 0}


def sth_prediction(answer: str) -> tuple[str, str]:
    """eval_sth.py's main(): (scene change, locations) of the stripped answer; the scene change is the text after the
    first ": " of what precedes ", Locations: ", up to its first ",", and the locations what follows ("" if absent)."""
    answer = answer.strip()
    if ", Locations: " in answer:
        change, locations = answer.split(", Locations: ", 1)
        return change.split(": ", 1)[-1].split(",")[0].strip(), locations.strip()
    return answer.split(": ", 1)[-1].split(",")[0].strip(), ""


def extract_scenes(description: str) -> tuple[str | None, str | None]:
    """eval_sth.py: the places of "from <place> to <place>." at the start of the description (any case), or None."""
    found = re.match(r"from (.+?) to (.+?)\.", description, re.IGNORECASE)
    return (found.group(1).strip(), found.group(2).strip()) if found else (None, None)


def simcse_name() -> str:
    """$PND_SIMCSE_MODEL (a hub name or a local folder), default eval_sth.py's princeton-nlp/sup-simcse-roberta-large."""
    return os.environ.get("PND_SIMCSE_MODEL") or SIMCSE_MODEL


@functools.lru_cache(maxsize=2)
def simcse(name: str):
    """(tokenizer, model) of a SimCSE checkpoint, loaded with transformers once per process and name (on the CPU, in
    float32, as eval_sth.py runs it)."""
    from transformers import AutoModel, AutoTokenizer

    print(f"vidhalluc: loading the SimCSE model {name} for the scene-transition descriptions", file=sys.stderr)
    return AutoTokenizer.from_pretrained(name), AutoModel.from_pretrained(name).eval()


def simcse_embedding(sentence: str):
    """eval_sth.py's get_simcse_embedding: the last hidden state at the first token ([CLS] / <s>), shape (1, hidden)."""
    import torch

    tokenizer, model = simcse(simcse_name())
    inputs = tokenizer(sentence, return_tensors="pt", truncation=True)
    with torch.no_grad():
        return model(**inputs).last_hidden_state[:, 0, :].float().numpy()


def scene_similarity(said: str, truth: str, low: float = SIMILARITY_LOW) -> float:
    """eval_sth.py's calculate_scene_similarity: the cosine similarity s of the two places' embeddings; 0 if s <= low,
    else (sigmoid(s) - sigmoid(low)) / (sigmoid(1) - sigmoid(low))."""
    from sklearn.metrics.pairwise import cosine_similarity

    similarity = float(cosine_similarity(simcse_embedding(said), simcse_embedding(truth))[0][0])
    if similarity <= low:
        return 0.0
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    return (sigmoid(similarity) - sigmoid(low)) / (sigmoid(1) - sigmoid(low))


def description_score(said: str, truth: str) -> float:
    """eval_sth.py's evaluate_description: the "from" and the "to" places' scores added (0 to 2); 0 where either
    description does not start "from <place> to <place>." (any case)."""
    said_from, said_to = extract_scenes(said)
    truth_from, truth_to = extract_scenes(truth)
    if not (said_from and said_to and truth_from and truth_to):
        return 0.0
    return scene_similarity(said_from, truth_from) + scene_similarity(said_to, truth_to)


def sth_process_results(doc, results):
    """One item for every metric: (scene change is "yes", the answer's is "yes", the description's score or None). The
    description is scored (out of 2) only where both are "yes"; an empty one scores 0 (eval_sth.py's evaluate_model).
    A failed document says the opposite of the annotation (wrong in the correlation; no description)."""
    failed = document_failed(results)
    change, locations = sth_prediction("" if failed else _chosen(results, []))
    truth = doc["scene_change"].lower() == "yes"
    said = not truth if failed else change.lower() == "yes"
    score = None
    if truth and said:
        score = description_score(locations, doc["locations"]) if locations and doc["locations"] else 0.0
    item = (truth, said, score)
    return {"score": item, "mcc": item, "classification_score": item, "description_score": item, "failed": int(failed)}


def sth_scores(items) -> dict:
    """eval_sth.py's evaluate_model: the Matthews correlation of the scene changes (sklearn's, 0 where undefined), the
    classification score ((mcc + 1) / 2) ** 2, the description score (the scored descriptions' sum over 2 per video
    where both said "yes"; 0 if none) and the overall score, 0.6 * classification + 0.4 * description."""
    from sklearn.metrics import matthews_corrcoef

    items = list(items)
    mcc = float(matthews_corrcoef([int(t) for t, _, _ in items], [int(s) for _, s, _ in items])) if items else 0.0
    scored = [score for _, _, score in items if score is not None]
    description = sum(scored) / (2 * len(scored)) if scored else 0.0
    classification = ((mcc + 1) / 2) ** 2
    return {"mcc": mcc, "classification_score": classification, "description_score": description,
            "score": 0.6 * classification + 0.4 * description}


def sth_score(items):
    return sth_scores(items)["score"]


def sth_mcc(items):
    return sth_scores(items)["mcc"]


def sth_classification_score(items):
    return sth_scores(items)["classification_score"]


def sth_description_score(items):
    return sth_scores(items)["description_score"]
