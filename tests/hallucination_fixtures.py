"""Tiny VideoHallucer and EventHallusion data in the real schemas, and local copies of their eval_configs tasks.

The task folders are copied from eval_configs/tasks with the hub / GitHub data sources replaced by the local files
written here (the utils.py and metric code are the real ones); videos are 4-frame mp4 files where the tasks look
for them: $HF_HOME/videohallucer/<subset>/videos/ and $HF_HOME/eventhallusion/<split>/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import write_mp4

TASKS = Path(__file__).parent.parent / "eval_configs" / "tasks"
SUBSETS = ("object_relation", "temporal", "semantic_detail", "external_factual", "external_nonfactual")
SPLITS = ("entire", "interleave", "misleading")


PLANTED = {  # (basic, hallucination) answers of the two pairs; the tiny model answers "yes" by loglikelihood
    subset: [("yes", "no"), ("no" if subset == "temporal" else "yes", "yes")] for subset in SUBSETS}
EVENT_ANSWERS = {split: ["Yes.", "Yes.", "No."] if split == "interleave" else ["No.", "Yes.", "No."] for split in SPLITS}


def videohallucer_pairs(subset: str) -> list[dict]:
    """Two pairs as the hub's json writes them (semantic_detail asks its two questions on two videos)."""
    second = "b" if subset == "semantic_detail" else "a"
    return [{"basic": {"video": f"{subset}{i}_a.mp4", "question": f"Is there a {thing} in the video?", "answer": basic},
             "hallucination": {"video": f"{subset}{i}_{second}.mp4", "question": f"Is there a {other} in the video?",
                               "answer": hallucinated},
             "type": subset}
            for i, ((thing, other), (basic, hallucinated)) in enumerate(zip([("cat", "dog"), ("red ball", "blue box")],
                                                                            PLANTED[subset]))]


def eventhallusion_videos(split: str) -> list[dict]:
    """Two videos as the authors' questions/<split>_questions.json writes them, one with two questions."""
    key = "unexpected" if split == "interleave" else "bias"
    return [{"id": f"{split}_00{i}", "category": "pet&animal", "length": "00:02",
             "event_info": {"object": ["dog"], "scene": "A yard.", "caption": "A dog runs.", key: "The dog sleeps."},
             "questions": [{"type": "hallucination", "question": question, "answer": answer} for question, answer in qas]}
            for i, qas in enumerate([[("Is the dog sleeping in the video?", EVENT_ANSWERS[split][0])],
                                     [("Did anything unexpected happen?", EVENT_ANSWERS[split][1]),
                                      ("Is the dog calm?", EVENT_ANSWERS[split][2])]])]


def build(root: Path) -> Path:
    """Write the data, videos and task copies under root/hf_home and root/tasks; returns root."""
    home, tasks = root / "hf_home", root / "tasks"
    for subset in SUBSETS:
        (home / "videohallucer" / subset / "videos").mkdir(parents=True)
        pairs = videohallucer_pairs(subset)
        (home / "videohallucer" / subset / f"{subset}.json").write_text(json.dumps(pairs))
        for video in {row[role]["video"] for row in pairs for role in ("basic", "hallucination")}:
            write_mp4(home / "videohallucer" / subset / "videos" / video, 4)
    for split in SPLITS:
        (home / "eventhallusion" / split).mkdir(parents=True)
        videos = eventhallusion_videos(split)
        (home / "eventhallusion" / f"{split}_questions.json").write_text(json.dumps(videos))
        for video in videos:
            write_mp4(home / "eventhallusion" / split / f"{video['id']}.mp4", 4)
    local = {"videohallucer": [("dataset_path: bigai-nlco/VideoHallucer", "dataset_path: json"),
                               ("{test: ", f"{{test: {home / 'videohallucer'}/"),
                               (", cache_dir: videohallucer, video: true, create_link: true", "")],
             "eventhallusion": [("https://raw.githubusercontent.com/Stevetich/EventHallusion/main/questions",
                                 str(home / "eventhallusion"))]}
    for name, replacements in local.items():
        shutil.copytree(TASKS / name, tasks / name)
        for path in (tasks / name).iterdir():
            text = path.read_text()
            for old, new in replacements:
                text = text.replace(old, new)
            path.write_text(text)
    return root
