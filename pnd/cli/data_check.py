"""`pnd sweep --check`: every task's documents load and its first videos exist, checked before any model loads.

lmms-eval finds a missing video only when a model reads it, hours into a run, and counts that document as failed.
This loads each task as lmms-eval would (its question files: a missing file or URL is named) and looks for the
videos of the first N documents of every subtask; a missing one is named with where the task looks for its videos
(the `VIDEOS` line of the task's utils.py, e.g. `$EVENTHALLUSION_VIDEOS/<split>/<id>.mp4`).

Example:
    >>> missing_videos([["/no/such/video.mp4"], [], ["/no/such/video.mp4"]])
    ['/no/such/video.mp4']
"""

from __future__ import annotations

import os
import sys


def missing_videos(visuals_per_document) -> list[str]:
    """The video paths (strings) among the documents' visuals that are no file, each once, in order."""
    paths = (visual for visuals in visuals_per_document for visual in visuals or [] if isinstance(visual, str))
    return [path for path in dict.fromkeys(paths) if not os.path.isfile(path)]


def subtasks(task_dict: dict):
    """The (name, task) leaves of lmms-eval's task dict (groups nest dicts)."""
    for value in task_dict.values():
        if isinstance(value, dict):
            yield from subtasks(value)
        else:
            yield value.config.task, value


def where_videos_are(task) -> str:
    """The `VIDEOS` line of the module that defines the task's doc_to_visual, or a generic hint."""
    return getattr(task.config.doc_to_visual, "__globals__", {}).get("VIDEOS") or "the paths its doc_to_visual returns"


def first_cause(error: BaseException) -> BaseException:
    """The error under tenacity's RetryError (lmms-eval retries a dataset's download), which names nothing itself."""
    last = getattr(error, "last_attempt", None)
    return first_cause(last.exception()) if last is not None and last.exception() is not None else error


def check_tasks(tasks: list[str], include_path: str | None, first: int) -> int:
    """Load each task and look for the first `first` documents' videos; exit 1 naming every problem, else 0."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager("ERROR", include_path=include_path)
    unknown = [task for task in tasks if task not in manager.all_tasks]
    if unknown:
        raise SystemExit(f"pnd sweep --check: lmms-eval knows no task {unknown}"
                         + ("" if include_path else "; pnd's tasks need --include-path eval_configs/tasks"))
    problems, checked = [], 0
    for task in tasks:
        try:
            loaded = get_task_dict([task], manager)
        except Exception as error:  # datasets and lmms-eval raise many kinds; the message names the file or URL
            error = first_cause(error)
            problems.append(f"{task}: its documents do not load: {type(error).__name__}: {error}")
            continue
        for name, subtask in subtasks(loaded):
            documents = list(subtask.eval_docs)
            if not documents:
                problems.append(f"{name}: no documents")
            visuals = [subtask.doc_to_visual(document) for document in documents[:first]]
            checked += len(visuals)
            for path in missing_videos(visuals):
                problems.append(f"{name}: video {path} is missing (the task looks for its videos in "
                                f"{where_videos_are(subtask)})")
    if problems:
        print("pnd sweep --check: the data is not ready:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"pnd sweep --check: {len(tasks)} task(s) load; the first {first} video(s) of each subtask exist "
          f"({checked} documents checked)", file=sys.stderr)
    return 0
