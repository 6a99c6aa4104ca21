"""`pnd sweep` on results and samples files written here by hand in lmms-eval 0.7.3's layout (a group without
aggregate_metric_list stores `{" ": " "}`), and with lmms-eval replaced by a stand-in that records what it was given:
the table against the hand-written numbers, resuming, alphas, --out."""

import csv
import json

import pytest

from pnd.cli import main
from pnd.cli import sweep as command

GROUP = {"tiny_group": ["tiny_mvbench", "tiny_mme"], "tiny_mvbench_mc": []}
METRICS = {"tiny_mvbench": ["mvbench_accuracy"], "tiny_mme": ["mme_perception_score", "mme_cognition_score"],
           "tiny_mvbench_mc": ["acc"]}
VALUES = {  # alpha: {task: {metric: value}}, and each task's answers (text, or [loss, is_greedy] per choice)
    0: {"tiny_mvbench": {"mvbench_accuracy": 0.25}, "tiny_mme": {"mme_perception_score": 50.0, "mme_cognition_score": 40.0},
        "tiny_mvbench_mc": {"acc": 0.5}},
    1: {"tiny_mvbench": {"mvbench_accuracy": 0.75}, "tiny_mme": {"mme_perception_score": 60.0, "mme_cognition_score": 45.0},
        "tiny_mvbench_mc": {"acc": 1.0}},
}
ANSWERS = {
    0: {"tiny_mvbench": ["A", "B", "C", "D"], "tiny_mme": ["yes", "no"], "tiny_mvbench_mc": [[["2.0", "False"], ["1.0", "True"]]]},
    1: {"tiny_mvbench": ["A", " C", "C", "D "], "tiny_mme": ["no", "yes"], "tiny_mvbench_mc": [[["0.5", "True"], ["1.0", "False"]]]},
}


def write_run(folder, model, model_args, values, answers):
    """One lmms-eval results file (and its samples files) under `folder`, as lmms-eval 0.7.3 lays them out."""
    (folder / "m").mkdir(parents=True)
    groups = {group: subtasks for group, subtasks in GROUP.items() if subtasks and subtasks[0] in values}
    results = {**{group: {" ": " ", "alias": group} for group in groups},  # no aggregate_metric_list
               **{task: {"alias": task, **{f"{metric},none": value for metric, value in metrics.items()},
                         **{f"{metric}_stderr,none": "N/A" for metric in metrics}} for task, metrics in values.items()}}
    inside = {task for subtasks in groups.values() for task in subtasks}
    (folder / "m" / "20260101_000000_results.json").write_text(json.dumps({
        "results": results, "group_subtasks": {**groups, **{task: [] for task in values if task not in inside}},
        "configs": {task: {"task": task, "metric_list": [{"metric": m} for m in METRICS.get(task, ["acc"])]}
                    for task in values},
        "config": {"model": model, "model_args": model_args}}))
    for task, given in answers.items():
        lines = [json.dumps({"doc_id": i, "target": "A", "filtered_resps": answer}) for i, answer in enumerate(given)]
        (folder / "m" / f"20260101_000000_samples_{task}.jsonl").write_text("\n".join(lines) + "\n")


def finished_sweep(out, model="pnd_hf", model_args="pretrained=m"):
    """OUT with both alphas' runs already there: no lmms-eval runs."""
    for alpha in (0, 1):
        write_run(out / "runs" / f"alpha{alpha}", model, f"{model_args},alpha={alpha}", VALUES[alpha], ANSWERS[alpha])


def argv(out, *extra, tasks="tiny_group,tiny_mvbench_mc", alphas="1"):
    return ["sweep", "--model", "pnd_hf", "--model-args", "pretrained=m", "--tasks", tasks, "--alphas", alphas,
            "--out", str(out), *extra]


def rows_of(out):
    return list(csv.DictReader((out / "sweep.csv").read_text().splitlines()))


@pytest.fixture
def no_lmms_eval(monkeypatch):
    monkeypatch.setattr(command.subprocess, "run", lambda *a, **k: pytest.fail(f"lmms-eval ran: {a}"))


@pytest.mark.parametrize("metric, holder, documents, agreement", [
    ([], "mvbench_accuracy (tiny_mvbench)", 4, 0.75),  # the first subtask's first metric; A == A, B != C, C, D
    (["--metric", "tiny_group=mme_perception_score"], "mme_perception_score (tiny_mme)", 2, 0.0),
])
def test_a_group_without_aggregate_metric_list_reports_its_first_subtask_holding_the_metric(
        tmp_path, no_lmms_eval, metric, holder, documents, agreement):
    finished_sweep(tmp_path)
    assert main(argv(tmp_path, *metric)) == 0
    rows = rows_of(tmp_path)
    source = holder.split(" (")[1][:-1]
    name = holder.split(" ")[0]
    assert [(r["task"], r["metric"], float(r["value"])) for r in rows if r["task"] == "tiny_group"] == [
        ("tiny_group", holder, VALUES[a][source][name]) for a in (0, 1)]
    group = [r for r in rows if r["task"] == "tiny_group"]
    assert [float(r["agreement"]) for r in group] == [1.0, agreement]
    assert [int(r["documents"]) for r in group] == [documents, documents]
    mc = [r for r in rows if r["task"] == "tiny_mvbench_mc"]
    assert [(r["metric"], float(r["value"]), float(r["agreement"])) for r in mc] == [("acc", 0.5, 1.0), ("acc", 1.0, 0.0)]
    assert f"| tiny_group | {holder} | {VALUES[0][source][name]:.4f} (100% agree, 0 failed) |" in (
        tmp_path / "sweep.md").read_text()


def test_a_missing_metric_leaves_a_dash_the_other_tasks_and_exit_1(tmp_path, no_lmms_eval, capsys):
    finished_sweep(tmp_path)
    assert main(argv(tmp_path, "--metric", "tiny_mvbench_mc=nope")) == 1
    rows = rows_of(tmp_path)
    assert [r["value"] for r in rows] == ["0.25", "0.75", "", ""]
    table = (tmp_path / "sweep.md").read_text()
    assert "| tiny_mvbench_mc | nope | - (100% agree, 0 failed) | - (0% agree, 0 failed) |" in table
    assert "| tiny_group | mvbench_accuracy (tiny_mvbench) | 0.2500 " in table
    assert (tmp_path / "sweep.png").exists()
    err = capsys.readouterr().err
    assert "tiny_mvbench_mc has no metric 'nope' at alpha 0 (plain); its metrics: ['acc']; choose one with --metric" in err


@pytest.mark.parametrize("option, value, recorded", [
    ("--model", "pnd_qwen2_vl", "--model pnd_hf with model_args 'pretrained=m,alpha=0'"),
    ("--model-args", "pretrained=other", "--model pnd_hf with model_args 'pretrained=m,alpha=0'"),
])
def test_resuming_into_another_models_runs_is_refused(tmp_path, no_lmms_eval, option, value, recorded):
    finished_sweep(tmp_path)
    changed = argv(tmp_path)
    changed[changed.index(option) + 1] = value
    with pytest.raises(SystemExit, match=rf"alpha0/m/\S+_results.json is a run of {recorded}, not this command's .*"
                                         rf"use another --out, or delete {tmp_path / 'runs' / 'alpha0'}"):
        main(changed)
    assert not (tmp_path / "sweep.csv").exists()


def fake_lmms_eval(command_line, stdout, **kwargs):
    """Stands in for lmms-eval: the metric of each task is the alpha it was given in --model_args, read as a number."""
    options = {key: value for key, value in zip(command_line, command_line[1:]) if key.startswith("--")}
    model_args = options["--model_args"]
    alpha = float(dict(item.split("=") for item in model_args.split(","))["alpha"])
    tasks = options["--tasks"].split(",")
    folder = command.Path(options["--output_path"])
    write_run(folder, options["--model"], model_args, {t: {"acc": alpha} for t in tasks}, {t: ["x"] for t in tasks})


def test_each_alpha_runs_exactly_as_given_in_its_own_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(command.subprocess, "run", fake_lmms_eval)
    alphas = [0.0, 0.1234567, 0.5, 0.9999999, 1.0]
    assert main(argv(tmp_path, tasks="t", alphas="1,0.9999999,0.1234567,0.5")) == 0
    assert [(float(r["alpha"]), float(r["value"])) for r in rows_of(tmp_path)] == [(a, a) for a in alphas]
    folders = sorted(path.name for path in (tmp_path / "runs").iterdir())
    assert folders == ["alpha0", "alpha0.1234567", "alpha0.5", "alpha0.9999999", "alpha1"]
    assert "| alpha 0.9999999 | alpha 1 |" in (tmp_path / "sweep.md").read_text()


@pytest.mark.parametrize("alphas, message", [
    ("0.5,1,0.50", r"--alphas lists '0.5' and '0.50', the same alpha 0.5; list each alpha once"),
    ("0,1,0.0", r"--alphas lists '0' and '0.0', the same alpha 0; list each alpha once"),
    ("1,1e0", r"--alphas lists '1' and '1e0', the same alpha 1; list each alpha once"),
])
def test_an_alpha_listed_twice_is_refused(tmp_path, no_lmms_eval, alphas, message):
    with pytest.raises(SystemExit, match=message):
        main(argv(tmp_path, alphas=alphas))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("below, reason", [("", "File exists"), ("below", "Not a directory")])
def test_out_on_a_file_is_refused_in_one_line(tmp_path, no_lmms_eval, below, reason):
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / "file" / below if below else tmp_path / "file"
    with pytest.raises(SystemExit, match=rf"^pnd sweep: --out {out} cannot be a folder \({reason}\); name a new"):
        main(argv(out))
