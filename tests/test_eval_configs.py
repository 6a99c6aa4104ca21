"""Every run config in eval_configs/ is one `lmms-eval --config` accepts, for a task lmms-eval registers and pnd's model."""

import inspect
import sys
from pathlib import Path

import pytest
import yaml

CONFIGS = sorted((Path(__file__).parent.parent / "eval_configs").glob("*.yaml"))
PND_MODELS = ("pnd_llava_ov", "pnd_qwen2_vl", "pnd_hf")


def entries(path):
    """The runs of one config file: lmms-eval reads a mapping or a list of mappings."""
    loaded = yaml.safe_load(path.read_text())
    runs = loaded if isinstance(loaded, list) else [loaded]
    assert runs and all(isinstance(run, dict) for run in runs), f"{path.name}: not a mapping or a list of mappings"
    return runs


@pytest.fixture(scope="module")
def task_index():
    """Tasks of the installed lmms-eval plus eval_configs/tasks (what --include_path adds): name -> where."""
    from lmms_eval.tasks import TaskManager

    return TaskManager("ERROR", include_path=str(CONFIGS[0].parent / "tasks")).task_index


@pytest.fixture(scope="module")
def registered_tasks(task_index):
    return set(task_index)


@pytest.fixture(scope="module")
def cli_options(monkeypatch_module):
    """The option names of lmms-eval's command line (what a config's keys must be)."""
    from lmms_eval.__main__ import parse_eval_args

    monkeypatch_module.setattr(sys, "argv", ["lmms-eval"])
    parser, _ = parse_eval_args()
    return {action.dest for action in parser._actions} - {"help"}


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_there_is_a_config_per_benchmark():
    names = {path.stem for path in CONFIGS}
    assert {"mvbench", "videomme", "videomme_w_subtitle", "mme", "mmbench", "seedbench", "seedbench_ppl", "mlvu",
            "nextqa", "pope", "retrieval"} <= names
    # BLiM's Table 9 (captioning) and the hallucination benchmarks lmms-eval registers
    assert {"coco_cap", "nocaps", "llava_in_the_wild", "youcook2", "vdc", "temporalbench", "coco_cap_chair", "amber_g",
            "hallusion_bench"} <= names
    assert {"videohallucer", "eventhallusion", "vidhalluc"} <= names  # video hallucination tasks of eval_configs/tasks


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_runs_a_registered_task_with_pnds_model(path, registered_tasks, cli_options):
    from lmms_eval.models import get_model
    from lmms_eval.utils import simple_parse_args_string

    from pnd.integrations.lmms_eval import PndHf

    parameters = set(inspect.signature(PndHf.__init__).parameters) - {"self", "unknown"}
    for run in entries(path):
        assert set(run) <= cli_options, f"{path.name}: keys {sorted(set(run) - cli_options)} are not lmms-eval options"
        assert run["model"] in PND_MODELS, f"{path.name}: model {run['model']!r} is not one of pnd's {PND_MODELS}"
        assert issubclass(get_model(run["model"]), PndHf)
        for task in run["tasks"].split(","):
            assert task in registered_tasks, f"{path.name}: lmms-eval registers no task {task!r}"
        args = simple_parse_args_string(run["model_args"])
        assert set(args) <= parameters, f"{path.name}: model_args {sorted(set(args) - parameters)} unknown to PndHf"
        assert "pretrained" in args and 0 <= args["alpha"] <= 1, f"{path.name}: needs pretrained and alpha in [0, 1]"
        assert run.get("include_path") in (None, "eval_configs/tasks"), f"{path.name}: include_path is relative to the repo"


JUDGES = {  # what a task's own code calls to score answers -> what its config must tell the user to set up
    "OPENAI_API_KEY": ("OPENAI_API_KEY", "AZURE_API_KEY", "llm_judge"),
    "SGLang": ("RuntimeEndpoint",),
}


def judges_of(task: str, task_index) -> set[str]:
    """What the judge of `task` needs, read from the Python files next to its yaml in lmms-eval."""
    sources = "".join(p.read_text() for p in Path(task_index[task]["yaml_path"]).parent.glob("*.py"))
    return {need for need, calls in JUDGES.items() if any(call in sources for call in calls)}


def test_judges_are_found_in_lmms_evals_code(task_index):
    assert judges_of("llava_in_the_wild", task_index) == judges_of("hallusion_bench_image", task_index) == {"OPENAI_API_KEY"}
    assert judges_of("short_test", task_index) == {"SGLang"}  # VDC
    assert judges_of("pope", task_index) == judges_of("coco2014_cap_val", task_index) == set()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_judged_tasks_say_what_their_judge_needs(path, task_index):
    """A task scored by a GPT (or a served LLM) judge in lmms-eval's own code: its config names the key/server."""
    text = path.read_text()
    for task in {t for run in entries(path) for t in run["tasks"].split(",")}:
        for need in judges_of(task, task_index):
            assert need in text, f"{path.name}: {task} is scored by a judge; say that it needs {need}"
