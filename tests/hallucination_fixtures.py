"""Tiny VideoHallucer, EventHallusion and VidHalluc data in the real schemas, and local copies of their tasks.

The task folders are copied from eval_configs/tasks with the hub / GitHub data sources replaced by the local files
written here (the utils.py and metric code are the real ones); videos are 4-frame mp4 files where the tasks look
for them: $HF_HOME/videohallucer/<subset>/videos/, $HF_HOME/eventhallusion/<split>/ and under $HF_HOME/vidhalluc/
(ACH clips in ACH/, TSH videos one folder deeper, STH videos in STH/: the tasks find them by name and download
nothing); a tiny random-weight RoBERTa stands in for VidHalluc's SimCSE judge (tiny_simcse, $PND_SIMCSE_MODEL).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from helpers import write_mp4

TASKS = Path(__file__).parent.parent / "eval_configs" / "tasks"
SUBSETS = ("object_relation", "temporal", "semantic_detail", "external_factual", "external_nonfactual")
SPLITS = ("entire", "interleave", "misleading")  # the `eventhallusion` group; eventhallusion_mix asks about interleave's
FAILING = {  # videos left out on purpose: each document on them fails, and was counted right by its first choice before
    "videohallucer/object_relation/videos/object_relation0_a.mp4",  # pair 0 of object_relation: basic "yes"
    "eventhallusion/interleave/interleave_000.mp4",  # interleave's and mix's first question: "Yes."
    "vidhalluc/ACH/p1_clip_1.mp4"}  # binary QA "Yes" and multiple choice "A"


PLANTED = {  # (basic, hallucination) answers of the two pairs; the tiny model answers "yes" by loglikelihood
    subset: [("yes", "no"), ("no" if subset == "temporal" else "yes", "yes")] for subset in SUBSETS}
EVENT_ANSWERS = {split: ["Yes.", "Yes.", "No."] if split == "interleave" else ["No.", "Yes.", "No."] for split in SPLITS}
EVENT_ANSWERS["mix"] = ["Yes.", "No.", "Yes."]


VIDHALLUC_BINARYQA = {  # ach_binaryqa.json: {index: [{"q", "a": {clip: answer}}]}, one video pair per index
    "0": [{"q": "Is the man slicing bread?", "a": {"p0_clip_1": "Yes", "p0_clip_2": "No"}},
          {"q": "Is the man spreading butter?", "a": {"p0_clip_1": "No", "p0_clip_2": "Yes"}}],
    "1": [{"q": "Is someone riding a bike?", "a": {"p1_clip_1": "Yes", "p1_clip_2": "Yes"}}]}
VIDHALLUC_MCQ = {  # ach_mcq.json: {index: {clip: {"Question", "Choices", "Correct Answer"}}}
    "0": {"p0_clip_1": {"Question": "What is the man doing?", "Choices": {"A": "slicing bread", "B": "spreading butter",
                                                                          "C": "washing a plate", "D": "pouring milk"},
                        "Correct Answer": "A"},
          "p0_clip_2": {"Question": "What is the man doing?", "Choices": {"A": "slicing bread", "B": "spreading butter",
                                                                          "C": "washing a plate", "D": "pouring milk"},
                        "Correct Answer": "B"}},
    "1": {"p1_clip_1": {"Question": "What is the person riding?", "Choices": {"A": "a horse", "B": "a bike", "C": "a bus"},
                        "Correct Answer": "A"}}}
VIDHALLUC_TSH = {  # tsh.json: {index: {"video", "Question", "Correct Answer"}}
    "0": {"video": "t0_clip", "Question": "Action A: pour water. Action B: stir the cup. ", "Correct Answer": "AB"},
    "1": {"video": "t1_clip", "Question": "Action A: open the door. Action B: turn on the light. ",
          "Correct Answer": "BA"}}

VIDHALLUC_STH = {  # sth.json: {video: {"Scene change": "Yes" / "No", "Locations": "from ... to ...." / "None"}}
    "s0_clip": {"Scene change": "Yes", "Locations": "from a kitchen to a busy street."},
    "s1_clip": {"Scene change": "No", "Locations": "None"},
    "s2_clip": {"Scene change": "Yes", "Locations": "From a park to a beach."}}
SIMCSE_SENTENCES = ("the cat sat in the kitchen", "a dog ran on a road", "a red car in the park near the beach")


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
    key = "unexpected" if split in ("interleave", "mix") else "bias"
    return [{"id": f"{split}_00{i}", "category": "pet&animal", "length": "00:02",
             "event_info": {"object": ["dog"], "scene": "A yard.", "caption": "A dog runs.", key: "The dog sleeps."},
             "questions": [{"type": "hallucination", "question": question, "answer": answer} for question, answer in qas]}
            for i, qas in enumerate([[("Is the dog sleeping in the video?", EVENT_ANSWERS[split][0])],
                                     [("Did anything unexpected happen?", EVENT_ANSWERS[split][1]),
                                      ("Is the dog calm?", EVENT_ANSWERS[split][2])]])]


GENERATION_LIMIT = [("max_new_tokens: 1024", "max_new_tokens: 16")]  # the kits' 1024 tokens of a tiny random model: slow


def build(root: Path) -> Path:
    """Write the data, videos and task copies under root/hf_home and root/tasks; returns root."""
    home, tasks = root / "hf_home", root / "tasks"
    for subset in SUBSETS:
        (home / "videohallucer" / subset / "videos").mkdir(parents=True)
        pairs = videohallucer_pairs(subset)
        (home / "videohallucer" / subset / f"{subset}.json").write_text(json.dumps(pairs))
        for video in {row[role]["video"] for row in pairs for role in ("basic", "hallucination")}:
            write_mp4(home / "videohallucer" / subset / "videos" / video, 4)
    for split in (*SPLITS, "mix"):
        videos = eventhallusion_videos(split)
        (home / "eventhallusion" / split).mkdir(parents=True, exist_ok=True)
        (home / "eventhallusion" / f"{split}_questions.json").write_text(json.dumps(videos))
        for video in videos if split != "mix" else []:  # mix_00N asks about interleave_00N
            write_mp4(home / "eventhallusion" / split / f"{video['id']}.mp4", 4)
    hub = home / "vidhalluc_hub"  # the hub repository's top level: the json files, as the authors' scripts write them
    hub.mkdir()
    for name, data in [("ach_binaryqa", VIDHALLUC_BINARYQA), ("ach_mcq", VIDHALLUC_MCQ), ("tsh", VIDHALLUC_TSH),
                       ("sth", VIDHALLUC_STH)]:
        (hub / f"{name}.json").write_text(json.dumps(data, indent=4))
    ach = {clip for entries in VIDHALLUC_BINARYQA.values() for entry in entries for clip in entry["a"]}
    ach |= {clip for clips in VIDHALLUC_MCQ.values() for clip in clips}
    for folder, videos in [("ACH", ach), ("TSH_videos/TSH", {entry["video"] for entry in VIDHALLUC_TSH.values()}),
                           ("STH", set(VIDHALLUC_STH))]:
        (home / "vidhalluc" / folder).mkdir(parents=True)
        for clip in videos:
            write_mp4(home / "vidhalluc" / folder / f"{clip}.mp4", 4)
    local = {"videohallucer": [("dataset_path: bigai-nlco/VideoHallucer", "dataset_path: json"),
                               ("{test: ", f"{{test: {home / 'videohallucer'}/"),
                               (", cache_dir: videohallucer, video: true, create_link: true", "")],
             "eventhallusion": [(re.compile(r"https://raw\.githubusercontent\.com/Stevetich/EventHallusion/[0-9a-f]{40}/questions"),
                                 str(home / "eventhallusion")), *GENERATION_LIMIT],
             "vidhalluc": [("https://huggingface.co/datasets/chaoyuli/VidHalluc/resolve/main", str(hub)), *GENERATION_LIMIT]}
    local["videohallucer"] += GENERATION_LIMIT
    for name, replacements in local.items():
        shutil.copytree(TASKS / name, tasks / name)
        for path in (tasks / name).iterdir():
            text = path.read_text()
            for old, new in replacements:
                text = old.sub(new, text) if isinstance(old, re.Pattern) else text.replace(old, new)
            path.write_text(text)
    for video in FAILING:
        (home / video).unlink()
    tiny_simcse(root / "simcse")
    return root


def tiny_simcse(folder: Path) -> Path:
    """A tiny random-weight RoBERTa and a locally trained tokenizer that starts each sentence with <s> (as RoBERTa's
    does: SimCSE pools the first token), saved where AutoModel / AutoTokenizer load them; returns folder."""
    import torch
    from tokenizers import processors
    from transformers import RobertaConfig, RobertaModel

    from pnd.testing import tiny_tokenizer

    places = tuple(place for entry in VIDHALLUC_STH.values() for place in entry["Locations"].split(" to "))
    tokenizer = tiny_tokenizer(["<s>", "</s>"], vocab_size=400, corpus=places + SIMCSE_SENTENCES)
    start, end = tokenizer.convert_tokens_to_ids(["<s>", "</s>"])
    tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", start), ("</s>", end)])
    tokenizer.model_max_length = 64
    config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=72, pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=start, eos_token_id=end, initializer_range=0.5)  # wide: cosines spread out
    with torch.random.fork_rng():
        torch.manual_seed(0)
        RobertaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
