"""A tiny LLaVA-OneVision on disk and tiny local lmms-eval tasks with the real MME and MVBench schemas.

The retrieval task is eval_configs/tasks/pnd_retrieval itself, on a local top-K file.

The task YAMLs call the installed `lmms_eval.tasks.mme.utils` / `lmms_eval.tasks.mvbench.utils` functions;
data are parquet files and mp4 videos written here (no hub). MVBench's `doc_to_visual` finds videos under
`$HF_HOME/mvbench_video/<sub-task folder>/`, so `run_lmms_eval` sets HF_HOME to the fixture's folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pnd.testing import tiny_model

from helpers import write_mp4

LMMS_EVAL = Path(sys.executable).with_name("lmms-eval")
MVBENCH_FOLDER = "mvbench_video/star/Charades_segment"  # MVBench's cache_dir + action_sequence's video folder

MME_DOCS = [  # two questions per image, as MME's aggregation requires
    dict(question_id="cat.jpg", question="Is there a cat? Please answer yes or no.", answer="Yes", category="existence"),
    dict(question_id="cat.jpg", question="Is there a dog? Please answer yes or no.", answer="No", category="existence"),
    dict(question_id="sum.jpg", question="Is the answer two? Please answer yes or no.", answer="Yes",
         category="commonsense_reasoning"),
    dict(question_id="sum.jpg", question="Is the answer three? Please answer yes or no.", answer="No",
         category="commonsense_reasoning"),
]
MVBENCH_DOCS = [
    dict(video="v0.mp4", question="What did the person do first?", candidates=["a red circle", "a blue square", "the cat"],
         answer="a blue square"),
    dict(video="v1.mp4", question="What moves left?", candidates=["the dog", "a green triangle"], answer="the dog"),
]

RETRIEVAL_TASK = Path(__file__).parent.parent / "eval_configs" / "tasks" / "pnd_retrieval"
RETRIEVAL_DOCS = [
    dict(video="v0.mp4", candidates=["a red circle moves left", "a blue square", "the cat sat on the mat"], answer=2),
    dict(video="v1.mp4", candidates=["a green triangle moves up", "the dog ran in the park"], answer=-1),
]

MME_KWARGS = {"pre_prompt": "", "post_prompt": "\nAnswer the question using a single word or phrase."}
MVBENCH_KWARGS = {"sub_task": "action_sequence", "post_prompt": "Only give the best option.\n"}
MVBENCH = "lmms_eval.tasks.mvbench.utils"


def generation_task(name: str, metrics: list[str], kwargs: dict) -> str:
    """YAML body of a generate_until task on the installed `lmms_eval.tasks.<name>.utils` functions, as the real task."""
    utils = f"!function lmms_eval.tasks.{name}.utils.{name}"
    metric_list = "".join(f"  - {{metric: {m}, aggregation: {utils}_aggregate_results, higher_is_better: true}}\n"
                          for m in metrics)
    return f"""output_type: generate_until
generation_kwargs: {{max_new_tokens: 6, temperature: 0, do_sample: false}}
doc_to_visual: {utils}_doc_to_visual
doc_to_text: {utils}_doc_to_text
doc_to_target: answer
process_results: {utils}_process_results
metric_list:
{metric_list}lmms_eval_specific_kwargs: {json.dumps({"default": kwargs})}
"""


TASKS = {  # name: (data file, YAML body); JSON is YAML, so the kwargs dicts go in as json.dumps
    "tiny_mme": ("mme.parquet", generation_task("mme", ["mme_perception_score", "mme_cognition_score"], MME_KWARGS)),
    "tiny_mvbench": ("mvbench.parquet", generation_task("mvbench", ["mvbench_accuracy"], MVBENCH_KWARGS)),
    "tiny_mvbench_mc": ("mvbench.parquet", f"""output_type: multiple_choice
doc_to_visual: !function {MVBENCH}.mvbench_doc_to_visual
doc_to_text: !function {MVBENCH}.mvbench_doc_to_text
doc_to_choice: candidates
doc_to_target: answer
metric_list: [{{metric: acc}}]
lmms_eval_specific_kwargs: {json.dumps({"default": MVBENCH_KWARGS})}
"""),
}


def mme_image(i: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(i).integers(0, 256, (40, 48, 3), dtype=np.uint8))


def build(root: Path) -> Path:
    """Write the model, data and task folder under `root`; returns root."""
    from datasets import Dataset, Features, Sequence, Value
    from datasets import Image as ImageFeature

    model, processor = tiny_model("llava_onevision")
    yes, no = processor.tokenizer.convert_tokens_to_ids(["yes", "no"])
    with torch.no_grad():  # answers start with "yes" or "no" depending on the inputs, so MME scores are not all 0
        head = model.get_output_embeddings().weight
        head[yes] *= 3
        head[no] = -head[yes]
    model.save_pretrained(root / "model")
    processor.save_pretrained(root / "model")

    mme = [dict(doc, image=mme_image(i // 2)) for i, doc in enumerate(MME_DOCS)]
    features = Features({"question_id": Value("string"), "question": Value("string"), "answer": Value("string"),
                         "category": Value("string"), "image": ImageFeature()})
    Dataset.from_list(mme, features=features).to_parquet(str(root / "mme.parquet"))
    features = Features({"video": Value("string"), "question": Value("string"), "candidates": Sequence(Value("string")),
                         "answer": Value("string")})
    Dataset.from_list(MVBENCH_DOCS, features=features).to_parquet(str(root / "mvbench.parquet"))
    videos = root / "hf_home" / MVBENCH_FOLDER
    videos.mkdir(parents=True)
    for doc in MVBENCH_DOCS:
        write_mp4(videos / doc["video"], 4)  # 4 frames: max_frames_num=4 takes them all, in any reader

    tasks = root / "tasks"
    shutil.copytree(RETRIEVAL_TASK, tasks / "pnd_retrieval")  # reads ./retrieval_topk.jsonl; runs start in root
    with open(root / "retrieval_topk.jsonl", "w") as f:
        for doc in RETRIEVAL_DOCS:
            f.write(json.dumps({**doc, "video": str(videos / doc["video"])}) + "\n")
    for name, (data, body) in TASKS.items():
        files = json.dumps({"data_files": {"test": str(root / data)}})
        (tasks / f"{name}.yaml").write_text(f"task: {name}\ndataset_path: parquet\ndataset_kwargs: {files}\ntest_split: test\n{body}")
    return root


def run_lmms_eval(root: Path, out: str, model: str, model_args: str, tasks: str, launcher: list[str] | None = None):
    """Run the real command line; returns (results dict, {task: samples}, completed process). Never trusts the exit code."""
    env = {**os.environ, "HF_HOME": str(root / "hf_home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    command = [*(launcher or [str(LMMS_EVAL)]), "--model", model, "--model_args", model_args, "--tasks", tasks,
               "--include_path", str(root / "tasks"), "--batch_size", "1", "--log_samples",
               "--output_path", str(root / out)]
    process = subprocess.run(command, capture_output=True, text=True, env=env, cwd=root, timeout=600)
    results = sorted((root / out).rglob("*_results.json"))
    if not results:
        raise AssertionError(f"lmms-eval wrote no results file under {root / out} (exit code {process.returncode}).\n"
                             f"command: {' '.join(command)}\n--- output tail ---\n{(process.stdout + process.stderr)[-6000:]}")
    samples = {}
    for path in sorted((root / out).rglob("*_samples_*.jsonl")):
        task = path.stem.split("_samples_", 1)[1]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return json.loads(results[-1].read_text()), samples, process
