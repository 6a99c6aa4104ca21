"""How the benchmarks time a method: `generate` with a clock as the last logits processor, the time between its
steps, peak memory, and round-robin runs of several methods (`measure_all`)."""

from __future__ import annotations

import gc
import math
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import LogitsProcessor


@torch.no_grad()
def generate(model, inputs, processors, tokens, clock=None, **kwargs):
    if kwargs.get("do_sample"):
        torch.manual_seed(0)
    return model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens,
                          logits_processor=processors + ([clock] if clock else []), **kwargs)


class StepClock(LogitsProcessor):
    """Last in the logits processors: records when each decoding step's scores are ready."""

    def __init__(self, device):
        self.device, self.times = device, []

    def __call__(self, input_ids, scores):
        sync(self.device)
        self.times.append(time.perf_counter())
        return scores


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def peak_memory(run, device) -> float:
    """Peak memory in MB during `run()`: CUDA's allocations, or the process's resident set on CPU."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM, the peak resident set
    run()
    return int(re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024


@dataclass(frozen=True)
class Measured:
    """One method's timings: seconds to the first step's scores, median seconds per step, peak memory (MB), and the
    median seconds per step of each timed run, in the order of the rounds (`measure_all`)."""

    prefill: float
    token: float
    peak: float
    rounds: tuple[float, ...] = ()


@dataclass(frozen=True)
class Failed:
    """A method that raised on this model (a peer that breaks is a result too)."""

    error: str


def measure_all(runs: dict, device, repeats: int, prefill_repeats: int = 3, warmup: int = 2) -> dict:
    """Time every method of `runs` ({name: (run, tokens)}) round-robin, so that drifts of the machine hit all alike.

    First a warm-up run of each method (`warmup` tokens, not recorded). Per token: the median time between steps over
    `repeats` runs, and each run's own median (`Measured.rounds`: methods compared round by round); prefill: the time
    to the first step's scores, best of those and `prefill_repeats` more 1-token runs; peak memory of one more run.
    Returns {name: Measured or Failed}.
    """
    prefill = {name: math.inf for name in runs}
    steps: dict[str, list[float]] = {name: [] for name in runs}
    rounds: dict[str, list[float]] = {name: [] for name in runs}
    failed: dict[str, Failed] = {}

    def attempt(name: str, tokens: int, record: bool = True) -> None:
        clock = StepClock(device)
        sync(device)
        start = time.perf_counter()
        try:
            runs[name][0](tokens, clock)
        except Exception as error:
            failed[name] = Failed(f"{type(error).__name__}: {str(error).splitlines()[0][:80]}")
            return
        if record:
            prefill[name] = min(prefill[name], clock.times[0] - start)
            intervals = [later - earlier for earlier, later in zip(clock.times, clock.times[1:])]
            steps[name] += intervals
            rounds[name] += [statistics.median(intervals)] if intervals else []

    for name in runs:
        attempt(name, warmup, record=False)
    for i in range(repeats + prefill_repeats):
        for name, (_, tokens) in runs.items():
            if name not in failed:
                attempt(name, tokens if i < repeats else 1)
    return {name: failed.get(name) or Measured(prefill[name], statistics.median(steps[name]),
                                               peak_memory(lambda: run(tokens, StepClock(device)), device),
                                               tuple(rounds[name]))
            for name, (run, tokens) in runs.items()}
