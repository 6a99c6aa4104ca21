"""VideoHallucer, EventHallusion and VidHalluc (eval_configs/tasks) through lmms-eval's real command line, and `pnd sweep`.

One `pnd sweep` of the tiny LLaVA-OneVision (tests/lmms_eval_fixtures.py) over the three benchmarks, by generation and
by loglikelihood, at alpha 0 and 1: one lmms-eval call per alpha on tiny data in the real schemas
(tests/hallucination_fixtures.py). Metrics are checked against values computed by hand from the planted answers,
and against the kits' rules re-applied here to the logged answers; the sweep's table against lmms-eval's files.
"""

import csv
import json
import math
import re
import statistics
import sys

import hallucination_fixtures
import pytest
import torch
from hallucination_fixtures import (
    EVENT_ANSWERS,
    FAILING,
    PLANTED,
    SPLITS,
    SUBSETS,
    VIDHALLUC_BINARYQA,
    VIDHALLUC_MCQ,
    VIDHALLUC_STH,
    VIDHALLUC_TSH,
)

from pnd.integrations.failed_documents import FAILED_ANSWER, FAILED_LOSS

import lmms_eval_fixtures
from helpers import write_mp4

sys.path.insert(0, str(hallucination_fixtures.TASKS))
from eventhallusion import utils as event
from pnd_retrieval import utils as retrieval
from videohallucer import utils as hallucer
from vidhalluc import utils as vidhalluc

TASKS = ("videohallucer,videohallucer_ll,eventhallusion,eventhallusion_ll,eventhallusion_mix,eventhallusion_mix_ll,"
         "vidhalluc,vidhalluc_ll")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(root, out): the data and model under root, one `pnd sweep` at alpha 0 and 1 into root/sweep."""
    from pnd.cli import main

    root = tmp_path_factory.mktemp("hallucination")
    hallucination_fixtures.build(lmms_eval_fixtures.build(root))
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"HF_HOME": str(root / "hf_home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                            "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1",
                            "PND_SIMCSE_MODEL": str(root / "simcse")}.items():
            patch.setenv(name, value)
        assert main(sweep_argv(root)) == 0
        yield root, root / "sweep"


def sweep_argv(root):
    return ["sweep", "--model", "pnd_hf", "--model-args", f"pretrained={root / 'model'},max_frames_num=4,device=cpu",
            "--tasks", TASKS, "--alphas", "1", "--include-path", str(root / "tasks"), "--out", str(root / "sweep")]


def run_results(out, alpha):
    """The results file lmms-eval wrote for `alpha`, and {task: [samples in doc order]}."""
    folder = out / "runs" / f"alpha{alpha}"
    (results,) = folder.rglob("*_results.json")
    samples = {path.stem.split("_samples_", 1)[1]: sorted(map(json.loads, path.read_text().splitlines()),
                                                          key=lambda s: s["doc_id"])
               for path in folder.rglob("*_samples_*.jsonl")}
    return json.loads(results.read_text()), samples


def losses(sample):
    return [float(loss) for loss, _ in sample["filtered_resps"]]


def test_videohallucer_pair_counts_only_when_both_answers_are_right():
    docs = [{"pair": p, "role": r, "answer": a} for p, r, a in
            [(0, "basic", "yes"), (0, "hallucination", "no"), (1, "basic", "yes"), (1, "hallucination", "no"),
             (2, "basic", "no"), (2, "hallucination", "yes")]]
    said = ["Yes, there is.", "No.", "YES", "yes", "There are no eyes.", "yes"]  # "eyes" is not "yes" (whole words)
    results = [hallucer.videohallucer_process_results(doc, [text]) for doc, text in zip(docs, said)]
    assert hallucer.basic_accuracy([r["basic_accuracy"] for r in results]) == 1.0
    assert hallucer.hallucination_accuracy([r["hallucination_accuracy"] for r in results]) == pytest.approx(2 / 3)
    assert hallucer.overall_accuracy([r["overall_accuracy"] for r in results]) == pytest.approx(2 / 3)
    chosen = hallucer.videohallucer_process_results(docs[1], [(2.0, False), (0.5, False)])  # "no" has the lower loss
    assert chosen["overall_accuracy"] == (0, True)


def test_eventhallusion_reads_the_first_word_as_the_authors_do():
    doc = {"answer": "Yes."}
    assert [event.eventhallusion_process_results(doc, [text])["accuracy"]
            for text in ("Yes, it did.", " yes", "The answer is yes.", "No.")] == [1.0, 1.0, 0.0, 0.0]
    assert event.eventhallusion_process_results(doc, [(1.0, False), (3.0, False)])["accuracy"] == 1.0


@pytest.mark.parametrize("module", [event, hallucer, vidhalluc, retrieval], ids=lambda m: m.__file__.split("/")[-2])
def test_the_task_utils_examples_hold(module):
    """The docstring examples of eval_configs/tasks/*/utils.py (pytest's doctest collection skips them: four modules
    named utils)."""
    import doctest

    result = doctest.testmod(module)
    assert result.attempted and not result.failed


FAILED_CHOICES = [(FAILED_LOSS, False)] * 4  # pnd's marker for a failed loglikelihood document: every choice


@pytest.mark.parametrize("results", [[FAILED_ANSWER], FAILED_CHOICES[:2]], ids=["generation", "loglikelihood"])
def test_a_failed_document_counts_wrong_in_every_metric_and_in_failed(results):
    """Each document's right answer is its first choice (what equal losses used to pick): a failed one is wrong in
    every metric of every task, and counted in `failed`."""
    said = hallucer.videohallucer_process_results({"pair": 0, "role": "basic", "answer": "yes"}, results)
    assert [said[m][1] for m in ("basic_accuracy", "overall_accuracy")] == [False, False] and said["failed"] == 1
    said = event.eventhallusion_process_results({"answer": "Yes."}, results)
    assert (said["accuracy"], said["failed"]) == (0.0, 1)
    said = vidhalluc.binaryqa_process_results({"question_id": "0/0", "answer": "Yes"}, results)
    assert (said["accuracy"], said["clip_acc"], said["failed"]) == (("0/0", False), 0.0, 1)
    mcq = {"letters": ["A", "B"], "options": ["a horse", "a bike"], "answer": "A"}
    assert vidhalluc.mcq_process_results(mcq, results) == {"accuracy": 0.0, "failed": 1}
    assert vidhalluc.tsh_process_results({"answer": "AB"}, results) == {"accuracy": 0.0, "failed": 1}
    for change in ("Yes", "No"):  # the scene change said is the opposite of the annotation: wrong in the correlation
        item = vidhalluc.sth_process_results({"scene_change": change, "locations": "None"}, results)
        assert item["mcc"] == (change == "Yes", change == "No", None) and item["failed"] == 1
    ranked = retrieval.retrieval_process_results({"answer": 0}, FAILED_CHOICES[:3])
    assert ranked == {"r1": 0.0, "r5": 0.0, "r10": 0.0, "median_rank": math.inf, "failed": 1}  # 3 candidates: not r5


def test_videohallucer_drops_exact_duplicate_pairs_keeping_the_first():
    """The kit's GitHub removed 24 exact duplicates from temporal.json (ae4c2f2): the first of each stays, in order."""
    pairs = hallucination_fixtures.videohallucer_pairs("temporal")
    near = {**pairs[1], "type": "other"}  # not an exact duplicate
    docs = hallucer.videohallucer_process_docs([pairs[0], pairs[1], pairs[0], near, pairs[1]])
    assert [(d["pair"], d["role"], d["question"]) for d in docs] == [
        (i, role, pair[role]["question"]) for i, pair in enumerate([pairs[0], pairs[1], near])
        for role in ("basic", "hallucination")]


def test_github_data_urls_name_a_commit():
    """A branch moves (EventHallusion's `main` never existed and its `master` renamed a split): every GitHub URL a task
    or run config reads names a 40-hex commit. Hub URLs name `main` only where the revision is not known here."""
    hub_main = {"chaoyuli/VidHalluc"}  # the hub's commit id of its files could not be read offline: pin it when it can
    configs = [p for p in hallucination_fixtures.TASKS.parent.rglob("*") if p.is_file() and "yaml" in p.name]
    urls = {url for path in configs for url in re.findall(r"https://[^\s}'\"]+", path.read_text())}
    github = [u for u in urls if "github" in u]
    assert github and all(re.search(r"/[0-9a-f]{40}/", u) for u in github), github
    hub = {re.search(r"datasets/([^/]+/[^/]+)/resolve/([^/]+)/", u).groups() for u in urls if "/resolve/" in u}
    assert {repo for repo, revision in hub if not re.fullmatch(r"[0-9a-f]{40}", revision)} <= hub_main


def test_vidhalluc_binaryqa_counts_a_question_only_when_every_clip_is_right():
    docs = [{"question_id": q, "answer": a} for q, a in [("0/0", "Yes"), ("0/0", "No"), ("0/1", "No"), ("0/1", "Yes"),
                                                          ("1/0", "Yes"), ("1/0", "Yes")]]
    said = ["Yes, he is.", " no.", "No", "Yes it is", "yes", "YES, clearly"]  # "Yes it is" is not "YES" (kit: . and ,)
    results = [vidhalluc.binaryqa_process_results(doc, [text]) for doc, text in zip(docs, said)]
    assert vidhalluc.accuracy([r["accuracy"] for r in results]) == pytest.approx(2 / 3)
    assert statistics.mean(r["clip_acc"] for r in results) == pytest.approx(5 / 6)
    assert vidhalluc.binaryqa_process_results(docs[1], [(2.0, False), (0.5, False)])["clip_acc"] == 1.0  # "No"


def test_vidhalluc_mcq_reads_capital_letters_then_option_text():
    doc = {"letters": ["A", "B", "C"], "options": ["a horse", "a bike", "a bus"], "answer": "B"}
    said = {"B": 1, "The answer is B.": 1, "b": 0, "A, B": 0, "AB": 0, "He rides a bike.": 1, "A bike.": 0,
            "a bike or a horse": 0, "nothing": 0}  # "A bike." has a lone capital A; options are tried A first
    assert {text: vidhalluc.mcq_process_results(doc, [text])["accuracy"] for text in said} == said
    assert vidhalluc.mcq_process_results({**doc, "answer": "AB"}, ["A, B"])["accuracy"] == 1.0  # letters as a set
    assert vidhalluc.mcq_process_results(doc, [(3.0, False), (1.0, False), (2.0, False)])["accuracy"] == 1.0


@pytest.mark.parametrize("text, order", [
    ("AB", "AB"), (" ba\n", "BA"), ("b", "B"), ("Action A happens before Action B.", "AB"),
    ("Action B, then action A.", "BA"), ("After action B, action A.", "BA"), ("Only action B.", "B"),
    ("The order is not clear.", "None"), ("The order is BA.", "None"), ("Action B. Action A.", "BA")])
def test_vidhalluc_tsh_reads_the_order_as_the_kit_does(text, order):
    assert vidhalluc.tsh_prediction(text) == order
    assert vidhalluc.tsh_process_results({"answer": "BA"}, [text])["accuracy"] == float(order == "BA")


@pytest.mark.parametrize("indent", [None, 4])
def test_vidhalluc_reads_the_authors_json_files(tmp_path, monkeypatch, indent):
    """The json files are objects keyed by index, read as text lines (as the tasks' `dataset_path: text` does)."""
    import datasets

    loaded = {}
    for name, data in [("ach_binaryqa", VIDHALLUC_BINARYQA), ("ach_mcq", VIDHALLUC_MCQ), ("tsh", VIDHALLUC_TSH),
                       ("sth", VIDHALLUC_STH)]:
        (tmp_path / f"{name}.json").write_text(json.dumps(data, indent=indent))
        loaded[name] = datasets.load_dataset("text", data_files=str(tmp_path / f"{name}.json"), split="train",
                                             cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(vidhalluc, "ensure_videos", lambda part, clip: None)
    binaryqa = vidhalluc.binaryqa_process_docs(loaded["ach_binaryqa"])
    assert [(d["question_id"], d["clip"], d["answer"]) for d in binaryqa] == [
        ("0/0", "p0_clip_1", "Yes"), ("0/0", "p0_clip_2", "No"), ("0/1", "p0_clip_1", "No"), ("0/1", "p0_clip_2", "Yes"),
        ("1/0", "p1_clip_1", "Yes"), ("1/0", "p1_clip_2", "Yes")]
    mcq = list(vidhalluc.mcq_process_docs(loaded["ach_mcq"]))
    assert [(d["clip"], d["letters"], d["answer"]) for d in mcq] == [
        ("p0_clip_1", list("ABCD"), "A"), ("p0_clip_2", list("ABCD"), "B"), ("p1_clip_1", list("ABC"), "A")]
    assert vidhalluc.mcq_doc_to_text(mcq[2]) == (
        "What is the person riding? Please select the correct answer (one or more options), only return your "
        "answer(s). (e.g., ABCD)\nChoices:\nA. a horse\nB. a bike\nC. a bus\n")
    tsh = list(vidhalluc.tsh_process_docs(loaded["tsh"]))
    assert [(d["clip"], d["answer"]) for d in tsh] == [("t0_clip", "AB"), ("t1_clip", "BA")]
    assert vidhalluc.tsh_doc_to_text(tsh[0]).startswith("Action A: pour water. Action B: stir the cup. Sort these two")
    sth = list(vidhalluc.sth_process_docs(loaded["sth"]))
    assert [(d["clip"], d["scene_change"], d["locations"]) for d in sth] == [
        ("s0_clip", "Yes", "from a kitchen to a busy street."), ("s1_clip", "No", "None"),
        ("s2_clip", "Yes", "From a park to a beach.")]
    assert sth[1]["answer"] == "Scene change: No, Locations: None"
    assert vidhalluc.sth_doc_to_text(sth[0]) == (  # video_hallu_sth.py's prompt, the same for every video
        "Watch the given video and determine if a scene change occurs. If no change occurs, respond: 'Scene change: "
        "No, Locations: None'. If there is a scene change, respond in the format: 'Scene change: Yes, Locations: from "
        "[location1] to [location2].'")


@pytest.mark.parametrize("text, change, locations", [
    ("Scene change: Yes, Locations: from a kitchen to a street.", "Yes", "from a kitchen to a street."),
    (" scene change: no, Locations: None\n", "no", "None"),
    ("Scene change: Yes, there is one, Locations: from A to B.", "Yes", "from A to B."),  # up to the first ","
    ("Yes, the scene changes.", "Yes", ""), ("Scene change: Yes. Locations: from A to B.", "Yes. Locations: from A to B.", ""),
    ("There is no scene change.", "There is no scene change.", "")])
def test_vidhalluc_sth_reads_the_answer_as_the_kit_does(text, change, locations):
    assert vidhalluc.sth_prediction(text) == (change, locations)


def test_vidhalluc_sth_reads_the_places_as_the_kit_does():
    assert vidhalluc.extract_scenes("From a dark room to the sunny beach. Then more.") == ("a dark room", "the sunny beach")
    assert vidhalluc.extract_scenes("from a room to a beach") == (None, None)  # no "."
    assert vidhalluc.extract_scenes("It goes from a room to a beach.") == (None, None)  # not at the start


@pytest.fixture(scope="module")
def simcse_folder(tmp_path_factory):
    return hallucination_fixtures.tiny_simcse(tmp_path_factory.mktemp("simcse") / "simcse")


def simcse_cosine(folder, first, second):
    """The cosine similarity of the two texts' last hidden states at <s> under the tiny RoBERTa, with torch alone."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    with torch.no_grad():
        first, second = (model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0, 0] for text in (first, second))
    return torch.nn.functional.cosine_similarity(first, second, dim=0).item()


def place_score(similarity):
    """eval_sth.py's calculate_scene_similarity with main()'s low threshold 0.5."""
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    return 0.0 if similarity <= 0.5 else (sigmoid(similarity) - sigmoid(0.5)) / (sigmoid(1) - sigmoid(0.5))


def mcc(tp, fn, fp, tn):
    denominator = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    return (tp * tn - fp * fn) / denominator if denominator else 0.0


def test_vidhalluc_sth_score_equals_the_hand_computed_value(simcse_folder, monkeypatch):
    """Planted answers: 4 true positives (two described, one undescribable, one without locations), a false negative,
    a false positive and 2 true negatives; the places compared by the tiny RoBERTa's cosine, computed here."""
    monkeypatch.setenv("PND_SIMCSE_MODEL", str(simcse_folder))
    vidhalluc.simcse.cache_clear()
    kitchen, park = "from a kitchen to a busy street.", "From a park to a beach."
    planted = [("Yes", kitchen, "Scene change: Yes, Locations: from the kitchen to a road."),
               ("Yes", park, " scene change: YES, Locations: FROM a park to dog. It is sunny."),
               ("Yes", kitchen, "Scene change: Yes, Locations: a kitchen, then a street"),  # not "from ... to ...."
               ("Yes", park, "Scene change: Yes"),  # no locations: scores 0, counted
               ("Yes", kitchen, "Scene change: No, Locations: None"),
               ("No", "None", "Scene change: Yes, Locations: from a park to a beach."),  # not described: no "yes" truth
               ("No", "None", "No scene change."), ("No", "None", "Scene change: No, Locations: None")]
    items = [vidhalluc.sth_process_results({"scene_change": truth, "locations": locations}, [text])
             for truth, locations, text in planted]
    assert {metric for item in items for metric in item} == {"score", "mcc", "classification_score", "description_score",
                                                             "failed"}
    assert not any(item["failed"] for item in items)
    similarities = [simcse_cosine(simcse_folder, *pair) for pair in [("the kitchen", "a kitchen"),
                                                                      ("a road", "a busy street"),
                                                                      ("a park", "a park"), ("dog", "a beach")]]
    assert similarities[2] == pytest.approx(1.0, abs=1e-6)
    assert any(s <= 0.5 for s in similarities) and any(0.5 < s < 0.99 for s in similarities)  # both branches taken
    first, second = place_score(similarities[0]) + place_score(similarities[1]), 1.0 + place_score(similarities[3])
    assert [item["score"][2] for item in items[:4]] == pytest.approx([first, second, 0.0, 0.0], abs=1e-5)
    assert [item["score"][2] for item in items[4:]] == [None] * 4
    classification = ((mcc(tp=4, fn=1, fp=1, tn=2) + 1) / 2) ** 2  # mcc 7/15
    description = (first + second) / (2 * 4)
    got = {metric: getattr(vidhalluc, f"sth_{metric}")([item[metric] for item in items])
           for metric in ("score", "mcc", "classification_score", "description_score")}
    assert got == pytest.approx({"mcc": 7 / 15, "classification_score": classification, "description_score": description,
                                 "score": 0.6 * classification + 0.4 * description}, abs=1e-5)
    assert (vidhalluc.simcse.cache_info().misses, vidhalluc.simcse.cache_info().hits) == (1, 7)  # loaded once, 8 uses


def test_vidhalluc_finds_a_clip_by_name_in_its_parts_folder(tmp_path):
    for path in ["x/ACH/c1.mp4", "TSH/c1.mp4", "deep/TSH/t1.mp4"]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).touch()
    assert vidhalluc.find_video("c1", "ACH", str(tmp_path)) == str(tmp_path / "x/ACH/c1.mp4")
    assert vidhalluc.find_video("c1", "TSH", str(tmp_path)) == str(tmp_path / "TSH/c1.mp4")
    assert vidhalluc.find_video("t1", "ACH", str(tmp_path)) == str(tmp_path / "deep/TSH/t1.mp4")  # only one: found
    assert vidhalluc.find_video("gone", "ACH", str(tmp_path)) == str(tmp_path / "ACH/gone.mp4")  # in the message


def test_vidhalluc_downloads_and_unpacks_a_parts_videos_once(tmp_path, monkeypatch):
    import zipfile

    import huggingface_hub

    snapshot, root, calls = tmp_path / "snapshot", tmp_path / "videos", []
    (snapshot / "data").mkdir(parents=True)
    with zipfile.ZipFile(snapshot / "data" / "TSH_videos.zip", "w") as archive:
        archive.writestr("VidHalluc/data/TSH/t9.mp4", b"video")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: calls.append((a, k)) or str(snapshot))
    for _ in range(2):
        vidhalluc.ensure_videos("TSH", "t9", str(root))
    assert calls == [(("chaoyuli/VidHalluc",), {"repo_type": "dataset", "allow_patterns": ["*TSH_videos.zip"]})]
    assert vidhalluc.find_video("t9", "TSH", str(root)) == str(root / "TSH/VidHalluc/data/TSH/t9.mp4")


FAILED_DOCS = {  # the documents on the videos hallucination_fixtures.FAILING leaves out, by generation and loglikelihood
    "videohallucer_object_relation": {0, 1},  # pair 0's two questions (one video)
    "eventhallusion_interleave": {0}, "eventhallusion_mix": {0},  # interleave_000 (mix_000 asks about it too)
    "vidhalluc_ach_binaryqa": {4}, "vidhalluc_ach_mcq": {2}}  # clip p1_clip_1 (binary QA: the fifth (question, clip))
FAILED_DOCS.update({f"{task}_ll": docs for task, docs in FAILED_DOCS.items()})


def failed(task, doc_id) -> bool:
    return doc_id in FAILED_DOCS.get(task, ())


def test_loglikelihood_metrics_equal_the_hand_computed_values(sweep):
    """At alpha 0 the tiny model gives "yes" the lower loss on every yes/no question and "B" on every VidHalluc
    multiple-choice question (checked), so the planted answers decide: a VideoHallucer pair counts only if both of
    its answers are "yes", a VidHalluc question only if it is "Yes" on all its clips. A failed document (its video
    left out) counts wrong, though its answer is the first choice, and in `failed`."""
    results, samples = run_results(sweep[1], 0)
    for task, task_samples in samples.items():
        ran = [s for s in task_samples if not failed(task, s["doc_id"])]
        if task.endswith("_ll"):
            assert all(losses(s) == [math.inf] * len(losses(s)) for s in task_samples if failed(task, s["doc_id"]))
        if task == "vidhalluc_ach_mcq_ll":
            assert all(min(losses(s)[:1] + losses(s)[2:]) > losses(s)[1] + 0.1 for s in ran)
        elif task.endswith("_ll"):
            assert all(losses(s)[0] < losses(s)[1] - (0.05 if task.startswith("vidhalluc") else 0.1) for s in ran), task
    metrics = results["results"]
    overall, basic = [], []
    for subset in SUBSETS:
        gone = [failed(f"videohallucer_{subset}_ll", 2 * i) for i in range(len(PLANTED[subset]))]  # a pair's video
        pairs = [(b == "yes" and not g, h == "yes" and not g) for (b, h), g in zip(PLANTED[subset], gone)]
        got = metrics[f"videohallucer_{subset}_ll"]
        assert got["basic_accuracy,none"] == statistics.mean(b for b, _ in pairs)
        assert got["hallucination_accuracy,none"] == statistics.mean(h for _, h in pairs)
        assert got["overall_accuracy,none"] == statistics.mean(b and h for b, h in pairs)
        assert got["failed,none"] == 2 * sum(gone)
        overall.append(statistics.mean(b and h for b, h in pairs))
        basic.append(statistics.mean(b for b, _ in pairs))
    assert metrics["videohallucer_ll"]["overall_accuracy,none"] == pytest.approx(statistics.mean(overall)) == 0.4
    assert metrics["videohallucer_ll"]["basic_accuracy,none"] == pytest.approx(statistics.mean(basic)) == 0.8
    assert metrics["videohallucer_ll"]["failed,none"] == 2
    right = {split: [a == "Yes." and not failed(f"eventhallusion_{split}_ll", i) for i, a in enumerate(EVENT_ANSWERS[split])]
             for split in (*SPLITS, "mix")}
    for split in (*SPLITS, "mix"):
        assert metrics[f"eventhallusion_{split}_ll"]["accuracy,none"] == pytest.approx(statistics.mean(right[split]))
    assert metrics["eventhallusion_ll"]["accuracy,none"] == pytest.approx(3 / 9)  # interleave's first "Yes." failed
    assert metrics["eventhallusion_ll"]["failed,none"] == 1 and metrics["eventhallusion_mix_ll"]["failed,none"] == 1
    clips = [(clip, answer) for entries in VIDHALLUC_BINARYQA.values() for entry in entries for clip, answer in entry["a"].items()]
    said = [answer == "Yes" and not failed("vidhalluc_ach_binaryqa_ll", i) for i, (_, answer) in enumerate(clips)]
    got = metrics["vidhalluc_ach_binaryqa_ll"]
    assert got["accuracy,none"] == 0.0  # each question has a "No" clip, or the failed one
    assert got["clip_acc,none"] == pytest.approx(statistics.mean(said)) == 0.5
    mcq = [entry["Correct Answer"] for clips in VIDHALLUC_MCQ.values() for entry in clips.values()]
    assert mcq[2] == "A"  # the failed clip's answer is the first letter: equal losses would have picked it
    assert metrics["vidhalluc_ach_mcq_ll"]["accuracy,none"] == pytest.approx(mcq.count("B") / len(mcq)) == 1 / 3
    assert metrics["vidhalluc_ll"]["accuracy,none"] == pytest.approx(1 / 6)  # unweighted mean of the two parts
    assert metrics["vidhalluc_ll"]["failed,none"] == 2
    assert not any("clip_acc" in key for key in metrics["vidhalluc_ll"])  # a group aggregates only what it names


@pytest.mark.parametrize("alpha", [0, 1])
def test_generation_metrics_follow_the_kits_rules(sweep, alpha):
    """The kits' rules, re-applied here to the logged answers: VideoHallucer's whole-word match, pairs both right;
    EventHallusion's first word. A failed document's answer is pnd's marker, which no rule reads as right."""
    results, samples = run_results(sweep[1], alpha)
    metrics = results["results"]
    for task, task_samples in samples.items():
        if not task.endswith("_ll"):
            assert [s["doc_id"] for s in task_samples if text_of(s) == FAILED_ANSWER] == sorted(FAILED_DOCS.get(task, ()))
            assert metrics[task]["failed,none"] == len(FAILED_DOCS.get(task, ())), task
    assert [metrics[group]["failed,none"] for group in ("videohallucer", "eventhallusion", "vidhalluc")] == [2, 1, 2]
    per_subset = []
    for subset in SUBSETS:
        texts = [s["filtered_resps"][0] if isinstance(s["filtered_resps"], list) else s["filtered_resps"]
                 for s in samples[f"videohallucer_{subset}"]]
        right = [re.search(rf"\b{answer}\b", text, re.IGNORECASE) is not None
                 for text, answer in zip(texts, [a for pair in PLANTED[subset] for a in pair])]
        overall = statistics.mean(right[i] and right[i + 1] for i in range(0, len(right), 2))
        assert metrics[f"videohallucer_{subset}"]["overall_accuracy,none"] == pytest.approx(overall), subset
        assert metrics[f"videohallucer_{subset}"]["basic_accuracy,none"] == pytest.approx(statistics.mean(right[::2]))
        per_subset.append(overall)
    assert metrics["videohallucer"]["overall_accuracy,none"] == pytest.approx(statistics.mean(per_subset))
    right = []
    for split in SPLITS:
        for sample, answer in zip(samples[f"eventhallusion_{split}"], EVENT_ANSWERS[split]):
            text = (sample["filtered_resps"][0] if isinstance(sample["filtered_resps"], list) else sample["filtered_resps"])
            right.append(text.strip().lower().startswith(answer[:-1].lower()))
    assert metrics["eventhallusion"]["accuracy,none"] == pytest.approx(statistics.mean(right))
    mix = [text_of(s).strip().lower().startswith(answer[:-1].lower())
           for s, answer in zip(samples["eventhallusion_mix"], EVENT_ANSWERS["mix"])]
    assert metrics["eventhallusion_mix"]["accuracy,none"] == pytest.approx(statistics.mean(mix))
    texts = {task: [text_of(s) for s in samples[task]] for task in ("vidhalluc_ach_binaryqa", "vidhalluc_ach_mcq", "vidhalluc_tsh")}
    questions = {}  # eval_bqa.py: text before the first "." then ",", any case; a question needs all its clips right
    for (index, i, answer), text in zip([(index, i, answer) for index, entries in VIDHALLUC_BINARYQA.items()
                                         for i, entry in enumerate(entries) for answer in entry["a"].values()],
                                        texts["vidhalluc_ach_binaryqa"]):
        right = text.strip().split(".")[0].split(",")[0].strip().lower() == answer.lower()
        questions[index, i] = questions.get((index, i), True) and right
    parts = [statistics.mean(questions.values())]
    mcq = [entry for clips in VIDHALLUC_MCQ.values() for entry in clips.values()]  # eval_mcq.py: lone capitals A-D,
    said = [set(re.findall(r"\b[A-D]\b", text)) or next(({k} for k, v in e["Choices"].items() if v in text.lower()), set())
            for e, text in zip(mcq, texts["vidhalluc_ach_mcq"])]  # else the first option whose text is in the answer
    parts.append(statistics.mean(s == set(e["Correct Answer"]) for s, e in zip(said, mcq)))
    parts.append(statistics.mean(vidhalluc.tsh_prediction(text) == entry["Correct Answer"]
                                 for text, entry in zip(texts["vidhalluc_tsh"], VIDHALLUC_TSH.values())))
    for task, part in zip(texts, parts):
        assert metrics[task]["accuracy,none"] == pytest.approx(part), task
    assert metrics["vidhalluc"]["accuracy,none"] == pytest.approx(statistics.mean(parts))  # scene transition apart
    counts, described = {}, []  # eval_sth.py: "yes" before ", Locations: "; places compared where both say yes
    for entry, text in zip(VIDHALLUC_STH.values(), [text_of(s) for s in samples["vidhalluc_sth"]]):
        head, _, locations = text.strip().partition(", Locations: ")
        truth, said = entry["Scene change"].lower() == "yes", head.split(": ", 1)[-1].split(",")[0].strip().lower() == "yes"
        counts[truth, said] = counts.get((truth, said), 0) + 1
        if truth and said:
            places = [re.match(r"from (.+?) to (.+?)\.", d, re.IGNORECASE) for d in (locations.strip(), entry["Locations"])]
            described.append(sum(place_score(simcse_cosine(sweep[0] / "simcse", a.strip(), b.strip()))
                                 for a, b in zip(places[0].groups(), places[1].groups())) if all(places) else 0.0)
    classification = ((mcc(*(counts.get(key, 0) for key in [(True, True), (True, False), (False, True), (False, False)])) + 1) / 2) ** 2
    description = sum(described) / (2 * len(described)) if described else 0.0
    got = metrics["vidhalluc_sth"]
    assert got["classification_score,none"] == pytest.approx(classification)
    assert got["description_score,none"] == pytest.approx(description, abs=1e-5)
    assert got["score,none"] == pytest.approx(0.6 * classification + 0.4 * description, abs=1e-5)


def text_of(sample):
    response = sample["filtered_resps"]
    return response[0] if isinstance(response, list) else response


def vidhalluc_mcq_doc():
    clip, entry = "p0_clip_2", VIDHALLUC_MCQ["0"]["p0_clip_2"]  # p1_clip_1's video is left out (FAILING)
    return {"clip": clip, "question": entry["Question"], "letters": list(entry["Choices"]),
            "options": list(entry["Choices"].values())}


@pytest.mark.parametrize("task, doc, video, prompt, max_new_tokens", [
    ("videohallucer_temporal", 0, "videohallucer/temporal/videos/temporal0_a.mp4",
     hallucination_fixtures.videohallucer_pairs("temporal")[0]["basic"]["question"] + hallucer.PROMPT, 16),
    ("vidhalluc_ach_mcq", 1, "vidhalluc/ACH/p0_clip_2.mp4", vidhalluc.mcq_doc_to_text(vidhalluc_mcq_doc()), 16)],
    ids=["videohallucer", "vidhalluc"])
def test_alpha_zero_is_the_plain_model(sweep, task, doc, video, prompt, max_new_tokens):
    """pnd_hf at alpha 0 generates what plain transformers generate, on a VideoHallucer and a VidHalluc document."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from pnd.io.video import read_video

    root, out = sweep
    model = AutoModelForImageTextToText.from_pretrained(root / "model").eval()
    processor = AutoProcessor.from_pretrained(root / "model")
    message = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}]
    frames = read_video(root / "hf_home" / video, 4)
    inputs = processor(text=[processor.apply_chat_template(message, add_generation_prompt=True)], videos=[frames],
                       return_tensors="pt")
    with torch.no_grad():
        tokens = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)[0, inputs["input_ids"].shape[1]:]
    assert text_of(run_results(out, 0)[1][task][doc]) == processor.decode(tokens, skip_special_tokens=True)


def test_sweep_table_and_plot_hold_lmms_evals_numbers(sweep):
    _, out = sweep
    rows = list(csv.DictReader((out / "sweep.csv").read_text().splitlines()))
    assert [(r["task"], float(r["alpha"])) for r in rows] == [(t, a) for t in TASKS.split(",") for a in (0.0, 1.0)]
    headline = {"videohallucer": "overall_accuracy", "videohallucer_ll": "overall_accuracy",
                "eventhallusion": "accuracy", "eventhallusion_ll": "accuracy", "eventhallusion_mix": "accuracy",
                "eventhallusion_mix_ll": "accuracy", "vidhalluc": "accuracy", "vidhalluc_ll": "accuracy"}
    table = (out / "sweep.md").read_text()
    for row in rows:
        alpha = int(float(row["alpha"]))
        results, samples = run_results(out, alpha)
        assert row["metric"] == headline[row["task"]]
        assert float(row["value"]) == results["results"][row["task"]][f"{row['metric']},none"]
        assert f"{float(row['value']):.4f}" in table
        plain, now = run_results(out, 0)[1], samples
        subtasks = results["group_subtasks"].get(row["task"]) or [row["task"]]
        pairs = [(task, p, n) for task in subtasks for p, n in zip(plain[task], now[task])]
        same = [answer_of(p) == answer_of(n) for task, p, n in pairs if not failed(task, p["doc_id"])]
        assert float(row["agreement"]) == pytest.approx(statistics.mean(same)) and int(row["documents"]) == len(pairs)
        assert int(row["failed"]) == sum(failed(task, p["doc_id"]) for task, p, _ in pairs)
        assert f"{int(row['failed'])} failed" in table
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def answer_of(sample):
    """Here: the choice of lowest loss (loglikelihood) or the stripped text (generation)."""
    response = sample["filtered_resps"]
    if isinstance(response, list) and isinstance(response[0], list):
        return min(range(len(response)), key=lambda i: float(response[i][0]))
    return (response[0] if isinstance(response, list) else response).strip()


def test_sweep_run_again_runs_nothing_finished(sweep, monkeypatch, capsys):
    from pnd.cli import main
    from pnd.cli import sweep as command

    root, out = sweep
    before = (out / "sweep.csv").read_text()
    monkeypatch.setattr(command.subprocess, "run", lambda *a, **k: pytest.fail(f"lmms-eval ran again: {a}"))
    assert main(sweep_argv(root)) == 0
    assert "every task is finished" in capsys.readouterr().err
    assert (out / "sweep.csv").read_text() == before


def test_sweep_names_a_crashed_run_and_its_log(tmp_path, monkeypatch):
    """lmms-eval exits 0 when it crashes: no results file is what the sweep goes by."""
    from pnd.cli import main
    from pnd.cli import sweep as command

    monkeypatch.setattr(command.subprocess, "run", lambda command, stdout, **k: stdout.write("Traceback: boom\n"))
    with pytest.raises(SystemExit, match=r"(?s)wrote no results for \['videohallucer'\] at alpha 0 .*boom"):
        main(["sweep", "--model", "pnd_hf", "--model-args", "pretrained=m", "--tasks", "videohallucer", "--alphas", "0.5",
              "--out", str(tmp_path)])


@pytest.mark.parametrize("argv, message", [
    (["--alphas", "0,1.5"], r"--alphas takes numbers in \[0, 1\].*'1.5'"),
    (["--model-args", "pretrained=m,alpha=0.5"], "sets alpha; leave it out"),
    (["--metric", "videohallucer"], "--metric takes TASK=METRIC"),
    (["--include-path", "no/such/folder"], "is not a folder"),
])
def test_sweep_refuses_bad_arguments_before_running(tmp_path, argv, message):
    from pnd.cli import main

    base = {"--model-args": "pretrained=m", "--alphas": "0,1", "--tasks": "videohallucer"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    with pytest.raises(SystemExit, match=message):
        main(["sweep", "--model", "pnd_hf", "--out", str(tmp_path), *[x for kv in base.items() for x in kv]])
    assert not (tmp_path / "runs").exists()



def test_sweep_check_names_each_missing_video_and_question_file_before_any_model(tmp_path, monkeypatch, capsys):
    """`pnd sweep --check` on the synthetic data: the videos FAILING leaves out are named with where the task looks
    for them, then a removed question file; no lmms-eval run is launched and no model is loaded (there is none)."""
    from pnd.cli import main
    from pnd.cli import sweep as command

    root = hallucination_fixtures.build(tmp_path)
    for name, value in {"HF_HOME": str(root / "hf_home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(command.subprocess, "run", lambda *a, **k: pytest.fail(f"lmms-eval ran: {a}"))
    argv = ["sweep", "--model", "pnd_hf", "--model-args", f"pretrained={tmp_path / 'no_model'}", "--tasks", TASKS,
            "--include-path", str(root / "tasks"), "--out", str(tmp_path / "sweep"), "--check"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    missing = set(re.findall(r"video (\S+) is missing", err))
    assert missing == {str(root / "hf_home" / video) for video in FAILING}
    assert "$EVENTHALLUSION_VIDEOS/<split>/<id>.mp4" in err and "$VIDHALLUC_VIDEOS" in err
    for video in FAILING:
        write_mp4(root / "hf_home" / video, 4)
    assert main(argv) == 0
    assert "task(s) load" in capsys.readouterr().err
    (root / "hf_home" / "eventhallusion" / "misleading_questions.json").unlink()
    assert main([*argv[:-1], "--check", "1"]) == 1
    assert re.search(r"eventhallusion: its documents do not load: .*misleading_questions\.json", capsys.readouterr().err)
    assert not (tmp_path / "sweep" / "runs").exists()


def test_sweep_methods_through_lmms_evals_command_line(sweep, monkeypatch):
    """`pnd sweep --methods vcd,m3id` with the real lmms-eval CLI on the synthetic EventHallusion mix split: the plain
    run, then one per method and alpha, each with its method in model_args, and one table of what each run's results
    file holds (cpn's runs: the `sweep` fixture's)."""
    from pnd.cli import main

    root, _ = sweep
    for name, value in {"HF_HOME": str(root / "hf_home"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                        "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}.items():
        monkeypatch.setenv(name, value)
    out = root / "methods"
    assert main(["sweep", "--model", "pnd_hf", "--model-args", f"pretrained={root / 'model'},max_frames_num=4,device=cpu",
                 "--tasks", "eventhallusion_mix", "--alphas", "1", "--methods", "vcd,m3id", "--include-path",
                 str(root / "tasks"), "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "sweep.csv").read_text().splitlines()))
    runs = {"alpha0": ("", "0.0"), "vcd-alpha1": ("vcd", "1.0"), "m3id": ("m3id", "")}
    assert [(r["method"], r["alpha"]) for r in rows] == list(runs.values())
    for row, folder in zip(rows, runs):
        (path,) = (out / "runs" / folder).rglob("*_results.json")
        results = json.loads(path.read_text())
        assert float(row["value"]) == results["results"]["eventhallusion_mix"]["accuracy,none"]
        assert (f"method={row['method']}" in results["config"]["model_args"]) == bool(row["method"])
        assert int(row["failed"]) == results["results"]["eventhallusion_mix"]["failed,none"] == 1
    assert "| task | metric | alpha 0 (plain) | vcd alpha 1 | m3id |" in (out / "sweep.md").read_text()
