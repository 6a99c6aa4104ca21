"""`pnd sweep`: run lmms-eval tasks at several alphas with one model; one table and one plot, plain vs normalized.

    pnd sweep --model pnd_llava_ov --model-args pretrained=llava-hf/llava-onevision-qwen2-7b-ov-hf,max_frames_num=32 \
        --tasks videohallucer,eventhallusion --alphas 0,0.25,0.5,0.75,1 --include-path eval_configs/tasks --out sweep/
    pnd sweep ... --launcher "accelerate launch --num_processes 8 -m lmms_eval"     # data parallel
    pnd sweep ... --methods cpn,vcd,icd,m3id --alphas 0.5,1        # other decoding methods too (docs/methods.md)

`--check` loads each task's documents and looks for the first N videos (and the question files), and stops with
the missing file, URL or environment variable named, in seconds and before any model loads: run it before a long
sweep. Each alpha is one lmms-eval command line (`--log_samples`, output in OUT/runs/alpha<A>/, its log in lmms_eval.log
there; A is the alpha exactly, as passed in model_args: 0.5, 1, 0.9999999) over the tasks not finished at that alpha:
a re-run of the same command runs only what is missing (a task is finished when a results file in that folder holds
it). A folder whose results files record another --model or --model-args is refused before anything runs: use
another --out, or delete that folder. alpha 0 (the plain model) is always run. Then:
OUT/sweep.csv, OUT/sweep.md and OUT/sweep.png hold each task's headline metric per alpha (the first metric of
its metric_list, or --metric TASK=METRIC; a group's is its first subtask's) read from lmms-eval's results files
(a group without aggregate_metric_list has none of its own: its row is the first subtask holding the metric, named
in the metric column), the agreement: the share of documents whose answer (generated text, or the choice of lowest
loss) at that alpha is the plain model's answer, and the documents that failed (pnd's marker: they count as wrong),
read from the samples files. A metric that no results file holds shows as a dash (an empty value in sweep.csv): the
table is written, the task named, and the command exits 1.

--methods (default cpn): each method of `pnd.decoding.methods` at each alpha, or once at the paper's defaults for a
method without one (m3id); a method other than cpn runs in OUT/runs/<method>-alpha<A>/ (OUT/runs/<method>/) with
model_args method=<method>, and its rows name it. Loglikelihood tasks score each choice with the method's own score
of its tokens (one generate call per choice; docs/methods.md, Limits).

Example:
    >>> from pnd.cli import main
    >>> main(["sweep", "--model", "pnd_hf", "--model-args", "pretrained=m", "--tasks", "videohallucer",
    ...       "--alphas", "0,0.5,1", "--include-path", "eval_configs/tasks", "--out", "sweep"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import csv
import json
import math
import shlex
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

from ..decoding.methods import METHODS
from ..extras import pyplot, require
from ..integrations.failed_documents import document_failed
from .data_check import check_tasks


def alpha_text(alpha: float) -> str:
    """The shortest text that reads back as exactly `alpha`, so distinct alphas never share a name.

    >>> alpha_text(1.0), alpha_text(0.25), alpha_text(0.9999999), alpha_text(0.1234567)
    ('1', '0.25', '0.9999999', '0.1234567')
    """
    short = f"{alpha:g}"
    return short if float(short) == alpha else repr(alpha)


class Run(NamedTuple):
    """One lmms-eval run of the sweep: a method at an alpha (None: the method's defaults, it has no alpha)."""

    method: str
    alpha: float | None

    @property
    def name(self) -> str:  # folder under OUT/runs, and the label of a table column
        alpha = "" if self.alpha is None else f"alpha{alpha_text(self.alpha)}"
        return alpha if self.method == "cpn" else f"{self.method}-{alpha}" if alpha else self.method

    @property
    def label(self) -> str:
        if self.method == "cpn":
            return "alpha 0 (plain)" if self.alpha == 0 else f"alpha {alpha_text(self.alpha)}"
        return self.method if self.alpha is None else f"{self.method} alpha {alpha_text(self.alpha)}"

    @property
    def model_args(self) -> str:
        alpha = "" if self.alpha is None else f"alpha={alpha_text(self.alpha)}"
        return alpha if self.method == "cpn" else ",".join(filter(None, (f"method={self.method}", alpha)))


def add_arguments(parser) -> None:
    parser.add_argument("--model", required=True, help="lmms-eval model name: pnd_hf, pnd_llava_ov or pnd_qwen2_vl")
    parser.add_argument("--model-args", required=True, help="lmms-eval --model_args without alpha, e.g. "
                        "pretrained=llava-hf/llava-onevision-qwen2-7b-ov-hf,max_frames_num=32")
    parser.add_argument("--tasks", required=True, help="comma-separated lmms-eval tasks or groups")
    parser.add_argument("--alphas", default="0,0.25,0.5,0.75,1", help="comma-separated alphas in [0, 1] (0 is "
                        "always added; default 0,0.25,0.5,0.75,1)")
    parser.add_argument("--methods", default="cpn", help=f"comma-separated decoding methods ({', '.join(METHODS)}; "
                        "default cpn): each at every alpha, or once at its defaults (m3id)")
    parser.add_argument("--out", required=True, help="folder for runs/, sweep.md, sweep.csv and sweep.png")
    parser.add_argument("--include-path", help="lmms-eval --include_path (e.g. eval_configs/tasks)")
    parser.add_argument("--batch-size", type=int, default=1, help="lmms-eval --batch_size (default 1)")
    parser.add_argument("--metric", action="append", default=[], metavar="TASK=METRIC",
                        help="headline metric of a task (repeatable); default: the first of its metric_list")
    parser.add_argument("--check", nargs="?", const=5, type=int, metavar="N",
                        help="only check the data: load each task's documents and find the first N videos (default 5), "
                             "then stop; no model is loaded")
    parser.add_argument("--launcher", default=f"{shlex.quote(sys.executable)} -m lmms_eval",
                        help="the command that runs lmms-eval (default: this Python's -m lmms_eval)")


def parse_alphas(text: str) -> list[float]:
    """Sorted alphas with 0 first; an error names a value that is not a number in [0, 1], or one listed twice.

    >>> parse_alphas("1, 0.5")
    [0.0, 0.5, 1.0]
    """
    alphas = {}
    for item in text.split(","):
        try:
            alpha = float(item) + 0.0  # -0.0 is 0.0
        except ValueError:
            alpha = math.nan
        if not 0 <= alpha <= 1:
            raise SystemExit(f"pnd sweep: --alphas takes numbers in [0, 1] separated by commas, got {item.strip()!r}")
        if alpha in alphas:
            raise SystemExit(f"pnd sweep: --alphas lists {alphas[alpha]!r} and {item.strip()!r}, the same alpha "
                             f"{alpha_text(alpha)}; list each alpha once")
        alphas[alpha] = item.strip()
    return sorted(set(alphas) | {0.0})


def parse_methods(text: str, alphas: list[float]) -> list[Run]:
    """The runs of --methods at `alphas` (0 first): the plain model (cpn at alpha 0), then each method's.

    >>> [run.name for run in parse_methods("cpn, m3id, vcd", [0.0, 1.0])]
    ['alpha0', 'alpha1', 'm3id', 'vcd-alpha1']
    """
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in METHODS]
    if unknown or not names:
        raise SystemExit(f"pnd sweep: --methods takes names among {', '.join(METHODS)} separated by commas, got "
                         f"{text!r}")
    runs = [Run("cpn", 0.0)]
    for name in names:
        runs += [Run(name, a) for a in alphas if a > 0] if "alpha" in METHODS[name].defaults else [Run(name, None)]
    return runs


def check_arguments(args) -> tuple[list[Run], list[str], dict[str, str]]:
    alphas, tasks = parse_alphas(args.alphas), [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks:
        raise SystemExit("pnd sweep: --tasks is empty; name lmms-eval tasks, e.g. --tasks videohallucer,eventhallusion")
    for setting, option in (("alpha=", "--alphas"), ("method=", "--methods")):
        if setting in args.model_args:
            raise SystemExit(f"pnd sweep: --model-args {args.model_args!r} sets {setting[:-1]}; leave it out ({option} "
                             "sets it)")
    runs = parse_methods(args.methods, alphas)
    if args.batch_size < 1:
        raise SystemExit(f"pnd sweep: --batch-size must be a positive integer, got {args.batch_size}")
    metrics = dict(item.split("=", 1) for item in args.metric if "=" in item)
    if len(metrics) != len(args.metric):
        raise SystemExit(f"pnd sweep: --metric takes TASK=METRIC, e.g. videohallucer=overall_accuracy; got {args.metric}")
    if args.include_path and not Path(args.include_path).is_dir():
        raise SystemExit(f"pnd sweep: --include-path {args.include_path} is not a folder; e.g. eval_configs/tasks")
    return runs, tasks, metrics


def run_folder(out: Path, run: Run) -> Path:
    return out / "runs" / run.name


def lmms_eval_model_args(args, run: Run) -> str:
    return f"{args.model_args},{run.model_args}"


def check_same_model(args, out: Path, runs: list[Run]) -> None:
    """Refuse an OUT whose results files record another --model or --model-args: resuming would report their numbers."""
    for run in runs:
        folder, wanted = run_folder(out, run), (args.model, lmms_eval_model_args(args, run))
        for path in sorted(folder.rglob("*_results.json")):
            config = json.loads(path.read_text()).get("config", {})
            if (config.get("model"), config.get("model_args")) != wanted:
                raise SystemExit(f"pnd sweep: {path} is a run of --model {config.get('model')} with model_args "
                                 f"{config.get('model_args')!r}, not this command's --model {wanted[0]} with "
                                 f"{wanted[1]!r} ({run.label}); use another --out, or delete {folder} to run it again")


def finished(folder: Path) -> dict:
    """{task: (results dict of the newest results file holding it)} over the results files under `folder`."""
    done = {}
    for path in sorted(folder.rglob("*_results.json"), key=lambda p: p.name):
        results = json.loads(path.read_text())
        done.update({task: results for task in results.get("results", {})})
    return done


def run_lmms_eval(args, run: Run, tasks: list[str], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    command = [*shlex.split(args.launcher), "--model", args.model, "--model_args", lmms_eval_model_args(args, run),
               "--tasks", ",".join(tasks), "--batch_size", str(args.batch_size), "--log_samples",
               "--output_path", str(folder), *(["--include_path", args.include_path] if args.include_path else [])]
    print(f"pnd sweep: {run.label}: {' '.join(map(shlex.quote, command))}", file=sys.stderr)
    with open(folder / "lmms_eval.log", "a") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    missing = [task for task in tasks if task not in finished(folder)]
    if missing:  # lmms-eval exits 0 when a run crashes: the results files are what counts
        tail = (folder / "lmms_eval.log").read_text()[-3000:]
        raise SystemExit(f"pnd sweep: lmms-eval wrote no results for {missing} at {run.label} (log: "
                         f"{folder / 'lmms_eval.log'}); fix the error below and run the same command again:\n{tail}")


def headline(results: dict, task: str, metrics: dict[str, str]) -> str:
    """The task's metric to report: --metric, else the first metric of its (first subtask's) metric_list."""
    if task in metrics:
        return metrics[task]
    first = (results.get("group_subtasks", {}).get(task) or [task])[0]
    return headline(results, first, {}) if first != task else results["configs"][task]["metric_list"][0]["metric"]


def metric_value(results: dict, task: str, metric: str) -> tuple[float | None, str]:
    """(value, task holding it): the task's own, else its first subtask's that holds it (a group without
    aggregate_metric_list stores no metric of its own); (None, task) where none does."""
    own = results["results"].get(task, {}).get(f"{metric},none")
    if own is not None:
        return own, task
    for subtask in results.get("group_subtasks", {}).get(task) or []:
        value, holder = metric_value(results, subtask, metric)
        if value is not None:
            return value, holder
    return None, task


def metric_names(results: dict, task: str) -> list[str]:
    """The metrics the task and its subtasks hold in `results`."""
    names = {key.split(",")[0] for key in results["results"].get(task, {}) if key.endswith(",none")}
    for subtask in results.get("group_subtasks", {}).get(task) or []:
        names.update(metric_names(results, subtask))
    return sorted(name for name in names if not name.endswith(("_stderr", "_stderr_clt", "_stderr_clustered")))


def answers(folder: Path, results: dict, task: str) -> dict:
    """{(subtask, doc_id): answer}: the generated text, the index of the lowest loss for loglikelihood tasks, or None
    for a document that failed."""
    subtasks = results.get("group_subtasks", {}).get(task) or [task]
    found = {}
    for subtask in subtasks:
        files = sorted(folder.rglob(f"*_samples_{subtask}.jsonl"), key=lambda p: p.name)
        if subtask != task and results.get("group_subtasks", {}).get(subtask):  # a nested group (a task lists no subtasks)
            found.update(answers(folder, results, subtask))
        elif files:
            for line in files[-1].read_text().splitlines():
                sample = json.loads(line)
                response = sample["filtered_resps"]
                failed = document_failed(response if isinstance(response, list) else [response])
                found[subtask, sample["doc_id"]] = None if failed else answer_of(response)
    return found


def answer_of(response):
    """A loglikelihood response (a list of [loss, is_greedy]) -> index of the lowest loss; text -> stripped text."""
    if isinstance(response, list) and response and isinstance(response[0], list):
        losses = [float(loss) for loss, _ in response]
        return losses.index(min(losses))
    return (response[0] if isinstance(response, list) else response).strip()


def collect(out: Path, runs: list[Run], tasks: list[str], metrics: dict[str, str]) -> tuple[list[dict], list[str]]:
    """(rows, problems): a row per task and run, its value None (and a problem naming it) where no metric was found;
    a row's documents are those of the task holding the value."""
    rows, problems = [], []
    for task in tasks:
        plain = None
        for run in runs:
            folder = run_folder(out, run)
            results = finished(folder)[task]
            metric = headline(results, task, metrics)
            value, holder = metric_value(results, task, metric)
            if value is None:
                problems.append(f"pnd sweep: {task} has no metric {metric!r} at {run.label}; its metrics: "
                                f"{metric_names(results, task)}; choose one with --metric {task}=METRIC")
            given = answers(folder, results, holder)
            plain = given if plain is None else plain
            answered = [key for key in given if given[key] is not None and plain.get(key) is not None]
            agreement = sum(given[key] == plain[key] for key in answered) / len(answered) if answered else math.nan
            rows.append({"task": task, "metric": metric if holder == task else f"{metric} ({holder})", "alpha": run.alpha,
                         "value": value, "agreement": agreement, "documents": len(given),
                         "failed": sum(answer is None for answer in given.values()),
                         **({} if run.method == "cpn" else {"method": run.method})})
    return rows, problems


def write_table(out: Path, rows: list[dict], runs: list[Run]) -> None:
    with open(out / "sweep.csv", "w", newline="") as f:  # a "method" column where a method other than cpn ran
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows(rows)
    header = "| task | metric | " + " | ".join(run.label for run in runs) + " |"
    lines = [header, "|---|---|" + "---|" * len(runs)]
    for task in dict.fromkeys(row["task"] for row in rows):
        cells = [f"{'-' if r['value'] is None else format(r['value'], '.4f')} ({r['agreement']:.0%} agree, "
                 f"{r['failed']} failed)" for r in rows if r["task"] == task]
        metric = next(r["metric"] for r in rows if r["task"] == task)
        lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    note = ("Each cell: the metric (-: not found); the share of documents answered as the plain model (alpha 0) answers them, over the "
            "documents that failed at neither alpha; the documents that failed (counted as wrong in the metric).")
    (out / "sweep.md").write_text("\n".join(lines) + f"\n\n{note}\n")


def write_plot(out: Path, rows: list[dict]) -> None:
    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for task in dict.fromkeys(row["task"] for row in rows):
        mine = [r for r in rows if r["task"] == task and "method" not in r]  # the other methods: sweep.md
        values = [math.nan if r["value"] is None else r["value"] for r in mine]
        line, = left.plot([r["alpha"] for r in mine], values, marker="o", label=f"{task} ({mine[0]['metric']})")
        left.plot([0], values[:1], marker="*", markersize=14, color=line.get_color(), linestyle="none")
        right.plot([r["alpha"] for r in mine], [r["agreement"] for r in mine], marker="o", color=line.get_color(), label=task)
    left.set(xlabel="alpha (0 = plain, star)", ylabel="metric", title="metric vs alpha")
    right.set(xlabel="alpha", ylabel="share of answers equal to plain", title="agreement with the plain model", ylim=(0, 1.05))
    left.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out / "sweep.png", dpi=120)
    plt.close(figure)


def run(args) -> int:
    runs, tasks, metrics = check_arguments(args)
    require("lmms_eval", "eval")
    if args.check is not None:
        return check_tasks(tasks, args.include_path, args.check)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file there, or above it
        raise SystemExit(f"pnd sweep: --out {out} cannot be a folder ({error.strerror}); name a new or existing folder") from None
    check_same_model(args, out, runs)
    for run in runs:
        folder = run_folder(out, run)
        missing = [task for task in tasks if task not in finished(folder)]
        if missing:
            run_lmms_eval(args, run, missing, folder)
        else:
            print(f"pnd sweep: {run.label}: every task is finished (in {folder}); skipped", file=sys.stderr)
    rows, problems = collect(out, runs, tasks, metrics)
    write_table(out, rows, runs)
    write_plot(out, rows)
    print((out / "sweep.md").read_text())
    print(f"pnd sweep: wrote {out / 'sweep.md'}, {out / 'sweep.csv'} and {out / 'sweep.png'}", file=sys.stderr)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0
