"""A pytest plugin that writes each test's CPU time: what `--durations` (wall time) cannot tell on a busy machine.

Each test's worker CPU (`RUSAGE_SELF`) and that of the subprocesses it waited for (`RUSAGE_CHILDREN`), one JSON line
per test in `$PND_CPU_LOG/<pid>.jsonl` (one file per pytest-xdist worker), then a table by file:

    PND_CPU_LOG=/tmp/cpu PYTHONPATH=tools .venv/bin/python -m pytest -p cpu_per_test
    .venv/bin/python tools/cpu_per_test.py /tmp/cpu
"""

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path

import pytest


def _now() -> tuple[float, float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime, time.time()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Around each test's setup, call and teardown, in the process that runs it."""
    start = _now()
    yield
    end = _now()
    row = {"id": item.nodeid, "self": end[0] - start[0], "children": end[1] - start[1], "wall": end[2] - start[2]}
    folder = Path(os.environ.get("PND_CPU_LOG", "cpu_per_test"))
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{os.getpid()}.jsonl", "a") as log:
        log.write(json.dumps(row) + "\n")


def by_file(rows: list[dict]) -> list[tuple[str, float, float, float]]:
    """(file, own CPU, subprocesses' CPU, wall) summed over its tests, most CPU first.

    >>> by_file([{"id": "t.py::a", "self": 1, "children": 2, "wall": 3}, {"id": "u.py::b", "self": 5, "children": 0, "wall": 5}])
    [('u.py', 5, 0, 5), ('t.py', 1, 2, 3)]
    """
    files = collections.defaultdict(lambda: [0, 0, 0])
    for row in rows:
        totals = files[row["id"].split("::")[0]]
        for i, key in enumerate(("self", "children", "wall")):
            totals[i] += row[key]
    return sorted(((name, *totals) for name, totals in files.items()), key=lambda r: -(r[1] + r[2]))


if __name__ == "__main__":
    rows = [json.loads(line) for path in Path(sys.argv[1]).glob("*.jsonl") for line in path.read_text().splitlines()]
    print(f"{len(rows)} tests: {sum(r['self'] for r in rows):.0f} CPU-s in the workers, "
          f"{sum(r['children'] for r in rows):.0f} in their subprocesses")
    print("| file | CPU-s | subprocesses' CPU-s | wall s |\n|---|---|---|---|")
    for name, own, children, wall in by_file(rows):
        print(f"| {name} | {own:.1f} | {children:.1f} | {wall:.1f} |")
