"""The lmms-eval models through the real `lmms-eval` command line, checked against the brute-force reference.

One tiny LLaVA-OneVision on disk and tiny local tasks with the real MME and MVBench schemas and utils
functions (tests/lmms_eval_fixtures.py). Every check reads the results and samples files lmms-eval writes;
the exit code is never trusted (lmms-eval 0.7.3 exits 0 when a run crashes).
"""

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from datasets import load_dataset
from lmms_eval.tasks.mme.utils import mme_aggregate_results, mme_doc_to_text, mme_process_results
from lmms_eval.tasks.mvbench.utils import mvbench_aggregate_results, mvbench_doc_to_text, mvbench_process_results
from transformers import AutoModelForImageTextToText, AutoProcessor

from pnd.attachment import attachment_of
from pnd.io.prompts import pixel_values_kwargs
from pnd.testing import FINDER_IMAGE_ARCHITECTURES, FINDER_VIDEO_ARCHITECTURES
from pnd.testing.reference import forced_scores, greedy

from lmms_eval_fixtures import (
    MME_KWARGS,
    MVBENCH_FOLDER,
    MVBENCH_KWARGS,
    RETRIEVAL_DOCS,
    build,
    mme_image,
    run_lmms_eval,
)

ALPHA = 0.5
TASKS = "tiny_mme,tiny_mvbench,tiny_mvbench_mc,pnd_retrieval"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return build(tmp_path_factory.mktemp("lmms_eval"))


@pytest.fixture(scope="module")
def pnd_run(root):
    """One single-process run of pnd_llava_ov at alpha=0.5 on all three tasks: (results, samples)."""
    results, samples, _ = run_lmms_eval(root, "pnd", "pnd_llava_ov", model_args(root, ALPHA), TASKS)
    return results, samples


def model_args(root, alpha):
    return f"pretrained={root / 'model'},alpha={alpha},max_frames_num=4,device=cpu"


def docs(root, name):
    return list(load_dataset("parquet", data_files={"test": str(root / f"{name}.parquet")}, split="test"))


def read_all_frames(path):
    """Every frame of a video with PyAV directly (the videos have 4 frames, the runs take 4)."""
    with av.open(str(path)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)


class Reference:
    """The saved model loaded with plain transformers; prompts as lmms-eval's chat models build them."""

    def __init__(self, root):
        self.model = AutoModelForImageTextToText.from_pretrained(root / "model").eval()
        self.processor = AutoProcessor.from_pretrained(root / "model")
        # Chameleon's processor drops its saved chat template on loading (no chat_template argument); its tokenizer has it
        self.processor.chat_template = self.processor.chat_template or self.processor.tokenizer.chat_template
        attachment_of(self.model, create=True).processor = self.processor  # the reference reads a TEXT_EXPANDED family's expansion with it

    def inputs(self, text, image=None, video=None):
        kind = "image" if image is not None else "video"
        prompt = self.processor.apply_chat_template(
            [{"role": "user", "content": [{"type": kind}, {"type": "text", "text": text}]}], add_generation_prompt=True)
        visual = {"images": [image]} if image is not None else {"videos": [video]}
        return self.processor(text=[prompt], **visual, return_tensors="pt", **pixel_values_kwargs(self.processor))

    def generate(self, inputs, alpha, steps=6):
        """Brute-force normalized greedy decoding, cut after the end-of-turn token as generate stops there."""
        tokens = greedy(self.model, inputs, alpha, steps)[0][0].tolist()
        eos = self.processor.tokenizer.eos_token_id
        tokens = tokens[: tokens.index(eos) + 1] if eos in tokens else tokens
        return self.processor.tokenizer.decode(tokens, skip_special_tokens=True)

    def loss(self, inputs, continuation, alpha):
        """-(mean over the continuation's tokens of log P(t|v) - alpha log P(t)), forced after the prompt."""
        ids = self.processor.tokenizer(continuation, add_special_tokens=False, return_tensors="pt").input_ids
        scores = forced_scores(self.model, inputs, ids, alpha)[0]
        return -scores.gather(1, ids[0, :, None]).mean().item()


def mme_expected(reference, root, alpha):
    texts = [reference.generate(reference.inputs(mme_doc_to_text(doc, MME_KWARGS), image=doc["image"].convert("RGB")),
                                alpha) for doc in docs(root, "mme")]
    return texts, aggregate(docs(root, "mme"), texts, mme_process_results, mme_aggregate_results)


def mvbench_video(root, doc):
    return read_all_frames(root / "hf_home" / MVBENCH_FOLDER / doc["video"])


def mvbench_expected(reference, root, alpha):
    texts = [reference.generate(reference.inputs(mvbench_doc_to_text(doc, MVBENCH_KWARGS), video=mvbench_video(root, doc)),
                                alpha) for doc in docs(root, "mvbench")]
    return texts, aggregate(docs(root, "mvbench"), texts, mvbench_process_results, mvbench_aggregate_results)


def aggregate(documents, texts, process_results, aggregate_results):
    """{metric: value} as lmms-eval computes it from per-document results, with the task's own functions."""
    per_metric = {}
    for doc, text in zip(documents, texts):
        for metric, value in process_results(doc, [text.strip()]).items():
            per_metric.setdefault(metric, []).append(value)
    return {metric: aggregate_results(values) for metric, values in per_metric.items()}


def responses(samples, task):
    return [sample["filtered_resps"] for sample in sorted(samples[task], key=lambda s: s["doc_id"])]


def test_generate_until_equals_the_reference_decoding(root, pnd_run):
    results, samples = pnd_run
    reference = Reference(root)
    for task, expected in [("tiny_mme", mme_expected), ("tiny_mvbench", mvbench_expected)]:
        texts, metrics = expected(reference, root, ALPHA)
        assert responses(samples, task) == texts, f"{task}: pnd_llava_ov's generations differ from the reference"
        for metric, value in metrics.items():
            assert results["results"][task][f"{metric},none"] == pytest.approx(value), (task, metric)


def test_loglikelihood_equals_the_reference_scores(root, pnd_run):
    results, samples = pnd_run
    reference = Reference(root)
    correct = []
    for doc, losses in zip(docs(root, "mvbench"), responses(samples, "tiny_mvbench_mc")):
        inputs = reference.inputs(mvbench_doc_to_text(doc, MVBENCH_KWARGS), video=mvbench_video(root, doc))
        expected = [reference.loss(inputs, " " + choice, ALPHA) for choice in doc["candidates"]]
        logged = [float(loss) for loss, _ in losses]
        np.testing.assert_allclose(logged, expected, atol=1e-4, err_msg="tiny_mvbench_mc: logged losses")
        correct.append(float(np.argmin(expected) == doc["candidates"].index(doc["answer"])))
    assert results["results"]["tiny_mvbench_mc"]["acc,none"] == pytest.approx(statistics.mean(correct))


def test_retrieval_task_ranks_by_the_reference_scores(root, pnd_run):
    results, samples = pnd_run
    reference = Reference(root)
    ranks = []
    for doc, losses in zip(RETRIEVAL_DOCS, responses(samples, "pnd_retrieval")):
        inputs = reference.inputs("Describe the video.", video=read_all_frames(root / "hf_home" / MVBENCH_FOLDER / doc["video"]))
        expected = [reference.loss(inputs, caption, ALPHA) for caption in doc["candidates"]]
        np.testing.assert_allclose([float(loss) for loss, _ in losses], expected, atol=1e-4)
        order = list(np.argsort(expected))
        ranks.append(order.index(doc["answer"]) + 1 if doc["answer"] >= 0 else math.inf)  # not among them: no hit
    metrics = results["results"]["pnd_retrieval"]
    assert metrics["r1,none"] == pytest.approx(100 * statistics.mean(rank == 1 for rank in ranks))
    assert metrics["r5,none"] == pytest.approx(100 * statistics.mean(rank <= 5 for rank in ranks))
    assert metrics["median_rank,none"] == pytest.approx(statistics.median(ranks))


def test_alpha_zero_generates_what_lmms_evals_llava_hf_generates(root):
    # llava_hf (lmms-eval's chat path, the default) crashes on every video document (IndexError in the image
    # processor: it passes images=[]), so the comparison runs on the image task.
    hf = run_lmms_eval(root, "llava_hf", "llava_hf", f"pretrained={root / 'model'},device=cpu,device_map=cpu", "tiny_mme")
    plain = run_lmms_eval(root, "alpha0", "pnd_llava_ov", model_args(root, 0), "tiny_mme")
    assert responses(plain[1], "tiny_mme") == responses(hf[1], "tiny_mme")
    assert plain[0]["results"]["tiny_mme"] == hf[0]["results"]["tiny_mme"]
    normalized = mme_expected(Reference(root), root, ALPHA)[0]
    assert normalized != responses(plain[1], "tiny_mme"), "alpha=0.5 should change some generation of this fixture"


def test_two_processes_under_accelerate_give_the_single_process_results(root, pnd_run):
    # --multi_gpu starts the processes with torchrun; without GPUs they run on CPU over gloo (accelerate's --cpu
    # starts a single process unless MPI is set up).
    launcher = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2",
                "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "lmms_eval"]
    results, samples, process = run_lmms_eval(root, "accelerate", "pnd_llava_ov", model_args(root, ALPHA), TASKS, launcher)
    assert "Running on rank 1" in process.stdout + process.stderr, "the second process did not evaluate"
    for task in TASKS.split(","):
        assert results["results"][task] == pnd_run[0]["results"][task], task
        assert responses(samples, task) == responses(pnd_run[1], task), task


def test_bad_model_args_say_what_to_do(root):
    from pnd.integrations.lmms_eval import PndHf, PndQwen2VL

    path = str(root / "model")
    with pytest.raises(ValueError, match="takes qwen2_vl/qwen2_5_vl checkpoints.*Use --model pnd_hf"):
        PndQwen2VL(pretrained=path)
    with pytest.raises(TypeError, match=r"unknown model_args \['frames'\]"):
        PndHf(pretrained=path, frames=4)
    with pytest.raises(ValueError, match="--batch_size must be a positive integer"):
        PndHf(pretrained=path, batch_size=0)
    with pytest.raises(ValueError, match="alpha must be a finite number in"):
        PndHf(pretrained=path, alpha=2)


SCAN = """
import json, sys
import lmms_eval.models as models
print(json.dumps([sorted(m for m in sys.modules if m.split(".")[0] in ("pnd", "torch")),
                  [str(models.get_model(name)) for name in ("pnd_hf", "pnd_llava_ov", "pnd_qwen2_vl")]]))
"""


def test_lmms_evals_scan_of_its_plugins_loads_neither_torch_nor_pnds_models():
    """lmms-eval imports every plugin's entry point whenever it starts, whichever model the run uses: pnd's names its
    classes by path, so they (and torch) load only when a run asks for one."""
    result = subprocess.run([sys.executable, "-c", SCAN], capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr
    before_any_model, classes = json.loads(result.stdout.splitlines()[-1])
    assert before_any_model == ["pnd", "pnd._moved", "pnd.integrations", "pnd.integrations.manifests"]
    assert classes == [f"<class 'pnd.integrations.lmms_eval.{name}'>" for name in
                       ("PndHf", "PndLlavaOnevision", "PndQwen2VL")]


def test_multiple_choice_fix_lets_loglikelihood_pairs_through_and_nothing_else(monkeypatch):
    import lmms_eval.evaluator as evaluator
    from lmms_eval.api.instance import unwrap_generation_output

    from pnd.integrations.evaluator_repairs import keep_loglikelihood_pairs

    monkeypatch.setattr(evaluator, "unwrap_generation_output", unwrap_generation_output)
    assert unwrap_generation_output((1.5, False))[0] == "(1.5, False)"  # lmms-eval 0.7.3's bug (docs/design.md §7)
    keep_loglikelihood_pairs()
    assert evaluator.unwrap_generation_output((1.5, False)) == ((1.5, False), None)
    assert evaluator.unwrap_generation_output("yes") == ("yes", None)
    assert evaluator.unwrap_generation_output(["a", "b"]) == (["a", "b"], None)


@pytest.mark.parametrize("gold", [0, 1, 2])
def test_lmms_evals_own_multiple_choice_counts_a_failed_document_wrong(tmp_path, monkeypatch, gold):
    """A multiple_choice task of lmms-eval's own kind (no process_results of its own): before pnd's fix, a failed
    document's equal losses made the first choice the answer, right whenever it is gold; with it, never right."""
    from lmms_eval.api.task import ConfigurableTask

    from pnd.integrations.evaluator_repairs import failed_choices_count_wrong
    from pnd.integrations.failed_documents import FAILED_LOSS

    (tmp_path / "docs.json").write_text(json.dumps([{"q": "Which?", "choices": ["a", "b", "c"], "gold": gold}]))
    unpatched = getattr(ConfigurableTask.process_results, "__wrapped__", ConfigurableTask.process_results)
    monkeypatch.setattr(ConfigurableTask, "process_results", unpatched)  # a PndHf of an earlier test patched it
    task = ConfigurableTask(config={
        "task": "mc", "dataset_path": "json", "dataset_kwargs": {"data_files": {"test": str(tmp_path / "docs.json")}},
        "test_split": "test", "output_type": "multiple_choice", "doc_to_text": "q", "doc_to_choice": "choices",
        "doc_to_target": "gold", "metric_list": [{"metric": "acc"}]})
    doc, failed = task.test_docs()[0], [(FAILED_LOSS, False)] * 3
    assert task.process_results(doc, failed)["acc"] == float(gold == 0)  # lmms-eval alone: the first choice
    failed_choices_count_wrong()
    assert task.process_results(doc, failed)["acc"] == 0.0
    right = [(1.0 if i != gold else 0.5, False) for i in range(3)]
    assert task.process_results(doc, right)["acc"] == 1.0  # a document that ran is scored as before


@pytest.mark.parametrize("model_type, name", [("qwen2_vl", "PndQwen2VL"), ("qwen3_vl", "PndHf"), ("qwen3_5", "PndHf"),
                                              ("gemma3", "PndHf"), ("molmo2", "PndHf"), ("internvl", "PndHf"),
                                              ("smolvlm", "PndHf"), ("video_llama_3", "PndHf"),
                                              ("glm4v", "PndHf"), ("video_llava", "PndHf"),
                                              ("perception_lm", "PndHf"), ("minicpmv4_6", "PndHf"),
                                              ("minicpmv4_7", "PndHf"), ("lfm2_vl", "PndHf"),
                                              # Cosmos 3 Edge: a saved processor lacks its defaults; InstructBLIP-Video
                                              # takes no image (the Q-Former families' and Chameleon's saved processors
                                              # load without their chat template: load_model takes the tokenizer's)
                                              *((t, "PndHf") for t in (*FINDER_VIDEO_ARCHITECTURES,
                                                                       *FINDER_IMAGE_ARCHITECTURES)
                                                if t not in ("cosmos3_edge", "instructblipvideo")),
                                              ("minimax_m3_vl", "PndHf")])
def test_pnd_model_in_process_equals_the_reference(tmp_path, monkeypatch, model_type, name):
    """The same class on a Qwen2-VL checkpoint (M-RoPE positions), and pnd_hf on a Qwen3-VL one (the prior hides
    the whole expansion), a Qwen3.5 one (hybrid: recurrent layers), a Gemma 3 one (sliding-window layers,
    bidirectional image block), a Molmo2 one (two image views, bidirectional) and every other family's, called as
    lmms-eval calls it."""
    from types import SimpleNamespace

    from pnd.integrations import lmms_eval
    from pnd.testing import tiny_model

    model, processor = tiny_model(model_type)
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    if model_type == "kosmos-2.5":  # a saved one takes its class's 4096 patches (the builder's docstring): 16, 30 s less
        from transformers import Kosmos2_5Processor

        monkeypatch.setattr(Kosmos2_5Processor, "images_kwargs", processor.images_kwargs)
    lm = getattr(lmms_eval, name)(pretrained=str(tmp_path / "model"), alpha=ALPHA, max_frames_num=4, device="cpu")
    image = mme_image(3)
    lm.task_dict = {"t": {"test": [{"image": image}]}}
    visual = lambda doc: [doc["image"]]  # noqa: E731
    question, choices = "Is there a cat? Please answer yes or no.", [" yes", " a red circle"]
    generated = lm.generate_until([SimpleNamespace(args=(question, {"max_new_tokens": 4}, visual, 0, "t", "test"))])
    losses = lm.loglikelihood([SimpleNamespace(args=(question, c, visual, 0, "t", "test")) for c in choices])
    reference = Reference(tmp_path)
    inputs = reference.inputs(question, image=image)
    assert generated == [reference.generate(inputs, ALPHA, steps=4)]
    np.testing.assert_allclose([loss for loss, _ in losses], [reference.loss(inputs, c, ALPHA) for c in choices], atol=1e-4)


def test_pnd_hf_on_a_molmo2_video_equals_the_reference(tmp_path):
    """pnd_hf on a saved Molmo2 with a video document: its timestamps (plain text) are read with the processor pnd_hf
    binds; generation and loglikelihood are the reference's (which hides the same expansion by its own pattern)."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf
    from pnd.testing import tiny_model

    from helpers import write_mp4

    model, processor = tiny_model("molmo2")
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    write_mp4(tmp_path / "v.mp4", 4)
    lm = PndHf(pretrained=str(tmp_path / "model"), alpha=ALPHA, max_frames_num=4, device="cpu")
    lm.task_dict = {"t": {"test": [{"video": str(tmp_path / "v.mp4")}]}}
    visual = lambda doc: [doc["video"]]  # noqa: E731
    question, choices = "Describe the video.", [" yes", " a red circle"]
    generated = lm.generate_until([SimpleNamespace(args=(question, {"max_new_tokens": 4}, visual, 0, "t", "test"))])
    losses = lm.loglikelihood([SimpleNamespace(args=(question, c, visual, 0, "t", "test")) for c in choices])
    reference = Reference(tmp_path)
    inputs = reference.inputs(question, video=read_all_frames(tmp_path / "v.mp4"))
    assert (inputs["input_ids"] == model.config.frame_start_token_id).sum() == 4
    assert generated == [reference.generate(inputs, ALPHA, steps=4)]
    np.testing.assert_allclose([loss for loss, _ in losses], [reference.loss(inputs, c, ALPHA) for c in choices], atol=1e-4)


def test_generate_until_in_batches_gives_what_one_document_at_a_time_gives(root):
    """Left-padded batches of documents with images of different sizes and prompts of different lengths."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf

    model = PndHf(pretrained=str(root / "model"), alpha=ALPHA, device="cpu", batch_size=3)
    docs = [{"image": mme_image(i).resize((40 + 24 * (i % 3), 48)), "question": "Is it red?" + " Answer." * i}
            for i in range(5)]
    model.task_dict = {"t": {"test": docs}}
    greedy_kwargs, longer = {"max_new_tokens": 6, "until": ["\n\n"]}, {"max_new_tokens": 8, "until": ["\n\n"]}
    requests = [SimpleNamespace(args=(doc["question"], greedy_kwargs if i < 4 else longer, lambda d: [d["image"]], i,
                                      "t", "test")) for i, doc in enumerate(docs)]
    batched = model.generate_until(requests)
    model.batch_size_per_gpu = 1
    assert batched == model.generate_until(requests)
    assert len(set(batched)) > 1, "the documents should not all give the same text"
    for request in requests:  # an empty stop string in a task's until (lmms-eval's own models skip it) stops nothing
        request.args = (request.args[0], {**request.args[1], "until": ["", "\n\n"]}, *request.args[2:])
    assert model.generate_until(requests) == batched


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_loglikelihood_in_batches_gives_what_one_document_at_a_time_gives(tmp_path, model_type):
    """Documents that share nothing (images of different sizes, questions of different lengths, 1-3 choices each)
    scored with their prompts in left-padded batches of 3: the losses of batch 1, which the reference checks."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf
    from pnd.testing import tiny_model

    model, processor = tiny_model(model_type)
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    lm = PndHf(pretrained=str(tmp_path / "model"), alpha=ALPHA, device="cpu", batch_size=3)
    docs = [{"image": mme_image(i).resize((40 + 24 * (i % 3), 48)), "question": "Is it red?" + " Answer." * i}
            for i in range(5)]
    lm.task_dict = {"t": {"test": docs}}
    choices = [[" yes", " no"], [" a red circle"], [" yes", " no", " a blue square on the left"], [" no"], [" maybe"]]
    requests = [SimpleNamespace(args=(doc["question"], choice, lambda d: [d["image"]], i, "t", "test"))
                for i, doc in enumerate(docs) for choice in choices[i]]
    batched = lm.loglikelihood(requests)
    lm.batch_size_per_gpu = 1
    single = lm.loglikelihood(requests)
    np.testing.assert_allclose([loss for loss, _ in batched], [loss for loss, _ in single], atol=1e-4)
    reference = Reference(tmp_path)
    inputs = reference.inputs(docs[0]["question"], image=docs[0]["image"])  # the most padded row of its batch
    expected = [reference.loss(inputs, choice, ALPHA) for choice in choices[0]]
    np.testing.assert_allclose([loss for loss, _ in batched[:2]], expected, atol=1e-4)


def test_pnd_hf_batches_smolvlm_documents(tmp_path):
    """SmolVLM's processor takes images per prompt: a batch of two image documents gives what each alone gives."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf
    from pnd.testing import tiny_model

    model, processor = tiny_model("smolvlm")
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    lm = PndHf(pretrained=str(tmp_path / "model"), alpha=ALPHA, device="cpu", batch_size=2)
    lm.task_dict = {"t": {"test": [{"image": mme_image(i), "question": "Is it red?" + " Answer." * i} for i in range(2)]}}
    requests = [SimpleNamespace(args=(doc["question"], {"max_new_tokens": 4}, lambda d: [d["image"]], i, "t", "test"))
                for i, doc in enumerate(lm.task_dict["t"]["test"])]
    batched = lm.generate_until(requests)
    lm.batch_size_per_gpu = 1
    assert batched == lm.generate_until(requests)


@pytest.mark.parametrize("args", [{"alpha": ALPHA}, {"alpha": 0}, {"method": "vcd"}])
def test_text_only_documents_are_answered_and_scored_by_the_plain_model(root, capsys, args):
    """A task that mixes text-only questions with image ones (ScienceQA): a text-only document has no visual input
    whose prior to remove, so the plain model answers it, in a batch with image documents too, and scores its
    choices (they failed, at alpha 0 too); the image documents decode as the reference. Said once on stderr."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf

    lm = PndHf(pretrained=str(root / "model"), device="cpu", batch_size=3, **args)
    image, question = mme_image(1), "Is there a cat? Please answer yes or no."
    lm.task_dict = {"t": {"test": [{"visuals": []}, {"visuals": [image]}, {"visuals": []}]}}
    visual = lambda doc: doc["visuals"]  # noqa: E731
    generated = lm.generate_until([SimpleNamespace(args=(question + " Why?" * i, {"max_new_tokens": 4}, visual, i, "t",
                                                         "test")) for i in range(3)])
    losses = lm.loglikelihood([SimpleNamespace(args=(question, c, visual, 0, "t", "test")) for c in (" yes", " no")])
    assert capsys.readouterr().err.count("answered by the plain model") == 1
    reference = Reference(root)

    def text_only(text):
        prompt = reference.processor.apply_chat_template([{"role": "user", "content": [{"type": "text", "text": text}]}],
                                                         add_generation_prompt=True)
        return reference.processor(text=[prompt], return_tensors="pt").input_ids

    for i in (0, 2):
        ids = text_only(question + " Why?" * i)
        plain = reference.model.generate(input_ids=ids, max_new_tokens=4, do_sample=False)[0, ids.shape[1]:]
        assert generated[i] == reference.processor.tokenizer.decode(plain, skip_special_tokens=True)
    if args == {"alpha": ALPHA}:
        assert generated[1] == reference.generate(reference.inputs(question, image=image), ALPHA, steps=4)
    for (loss, _), choice in zip(losses, (" yes", " no")):  # the mean cross-entropy of one plain forward
        answer = reference.processor.tokenizer(choice, add_special_tokens=False, return_tensors="pt").input_ids
        whole = torch.cat([text_only(question), answer], 1)
        logprobs = torch.log_softmax(reference.model(input_ids=whole).logits[0, -answer.shape[1] - 1 : -1].float(), -1)
        assert math.isclose(loss, -logprobs.gather(1, answer[0, :, None]).mean().item(), abs_tol=1e-4)


def test_generation_stops_at_the_checkpoints_own_stop_tokens(root, tmp_path):
    """A checkpoint whose generation config lists an end-of-turn token besides the tokenizer's eos (Gemma 3's 106,
    Llama 3.2 Vision's): generate_until stops there as plain `generate` does (it passed the tokenizer's eos alone)."""
    import shutil
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf

    shutil.copytree(root / "model", tmp_path / "model")
    reference = Reference(tmp_path)
    inputs, image = reference.inputs("What is shown here?", image=mme_image(0)), mme_image(0)
    length = inputs["input_ids"].shape[1]
    stop = reference.model.generate(**inputs, max_new_tokens=8, do_sample=False)[0, length + 2].item()
    config = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    (tmp_path / "model" / "generation_config.json").write_text(json.dumps(
        {**config, "eos_token_id": [reference.processor.tokenizer.eos_token_id, stop]}))
    plain = AutoModelForImageTextToText.from_pretrained(tmp_path / "model").generate(**inputs, max_new_tokens=8,
                                                                                      do_sample=False)[0, length:]
    assert plain[-1] == stop and len(plain) == 3
    lm = PndHf(pretrained=str(tmp_path / "model"), alpha=0, device="cpu")
    lm.task_dict = {"t": {"test": [{"image": image}]}}
    got = lm.generate_until([SimpleNamespace(args=("What is shown here?", {"max_new_tokens": 8}, lambda d: [d["image"]],
                                                   0, "t", "test"))])
    assert got == [reference.processor.tokenizer.decode(plain, skip_special_tokens=True)]


def test_a_context_that_holds_the_image_placeholder_places_its_images_itself(root):
    """A task whose context already holds the processor's image token ("<image>", as interleaved multi-image tasks
    write it): no image is added in front (the processor then counted two placeholders for one image, and every
    document failed); as lmms-eval's llava_hf, which adds image tokens only to a context without one."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf

    lm = PndHf(pretrained=str(root / "model"), alpha=ALPHA, device="cpu")
    images = [mme_image(1), mme_image(2)]
    lm.task_dict = {"t": {"test": [{"images": images}]}}
    context = "First: <image> second: <image> Which is brighter?"
    got = lm.generate_until([SimpleNamespace(args=(context, {"max_new_tokens": 4}, lambda d: d["images"], 0, "t",
                                                   "test"))])
    reference = Reference(root)
    prompt = reference.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "text", "text": context}]}], add_generation_prompt=True)
    inputs = reference.processor(text=[prompt], images=[images], return_tensors="pt")
    assert got == [reference.generate(inputs, ALPHA, steps=4)]


def test_vcd_decodes_each_document_alone_whatever_the_batch_size(root):
    """VCD's noise is drawn for a call's whole pixel tensor, so a document decoded beside others got other noise:
    its answer depended on --batch_size and its neighbours. Two identical documents now get one answer."""
    from types import SimpleNamespace

    from pnd.integrations.lmms_eval import PndHf

    lm = PndHf(pretrained=str(root / "model"), method="vcd", device="cpu", batch_size=3)
    lm.task_dict = {"t": {"test": [{"image": mme_image(0)}, {"image": mme_image(0)}, {"image": mme_image(1)}]}}
    requests = [SimpleNamespace(args=("What is shown here?", {"max_new_tokens": 5}, lambda d: [d["image"]], i, "t",
                                      "test")) for i in range(3)]
    batched = lm.generate_until(requests)
    assert batched[0] == batched[1]
    lm.batch_size_per_gpu = 1
    assert lm.generate_until(requests) == batched


def test_a_failing_document_neither_stops_nor_changes_the_others(tmp_path, capsys):
    """A document whose video cannot be read, batched with good ones: the others get the answers and losses they get
    alone, the bad one pnd's failure marker (FAILED_ANSWER / infinite losses), and each call names it and says how many
    failed."""
    from types import SimpleNamespace

    from pnd.integrations.failed_documents import FAILED_ANSWER
    from pnd.integrations.lmms_eval import PndHf
    from pnd.testing import tiny_model

    from helpers import write_mp4

    model, processor = tiny_model("llava_onevision")
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    for name in ("a.mp4", "c.mp4"):
        write_mp4(tmp_path / name, 4)
    (tmp_path / "b.mp4").write_bytes(b"not a video")
    lm = PndHf(pretrained=str(tmp_path / "model"), alpha=ALPHA, max_frames_num=4, device="cpu", batch_size=3)
    lm.task_dict = {"t": {"test": [{"video": str(tmp_path / n)} for n in ("a.mp4", "b.mp4", "c.mp4")]}}
    visual = lambda doc: [doc["video"]]  # noqa: E731
    question, choices = "What is shown?", [" a grey square", " nothing"]

    def generate(docs):
        return lm.generate_until([SimpleNamespace(args=(question, {"max_new_tokens": 3}, visual, d, "t", "test"))
                                  for d in docs])

    def losses(docs):
        return [loss for loss, _ in lm.loglikelihood([SimpleNamespace(args=(question, c, visual, d, "t", "test"))
                                                      for d in docs for c in choices])]

    answers, scored = generate([0, 1, 2]), losses([0, 1, 2])
    err = capsys.readouterr().err
    assert "pnd: document t/test/1 failed" in err and "b.mp4" in err
    assert "pnd generate_until: 1 document(s) of 3 request(s) failed" in err
    assert "pnd loglikelihood: 1 document(s) of 6 request(s) failed" in err
    assert answers == [generate([0])[0], FAILED_ANSWER, generate([2])[0]]
    assert scored[2:4] == [float("inf")] * 2
    np.testing.assert_allclose(scored[:2] + scored[4:], losses([0]) + losses([2]), atol=1e-5)
