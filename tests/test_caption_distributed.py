"""`pnd caption` data parallel: 2 CPU processes over gloo under torchrun and accelerate launch, and a killed rank.

Each check compares with the records of one process (`pnd.cli.main` here) on the same videos.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch

from pnd.demo.moving import make_moving_clip
from pnd.io.video import write_video

from helpers import rank_process

BIN = pathlib.Path(sys.executable).parent
ARGS = ["--max-new-tokens", "8", "--batch-size", "2"]
TORCHRUN = [str(BIN / "torchrun"), "--nproc_per_node", "2", "-m", "pnd.cli", "caption"]
ACCELERATE = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
              "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "pnd.cli", "caption"]


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("distributed")
    (root / "videos").mkdir()
    generator = torch.Generator().manual_seed(3)
    for i, (colour, size) in enumerate([("blue", "small"), ("green", "medium"), ("yellow", "big"), ("red", "small"),
                                        ("blue", "big")]):
        write_video(root / "videos" / f"{i}.mp4", make_moving_clip(colour, size, generator, noise=0.6, frames=8))
    (root / "videos" / "broken.mp4").write_bytes(b"not a video")
    return root


@pytest.fixture(scope="module")
def single(videos):
    """{id: record} of one process."""
    from pnd.cli import main

    out = videos / "single.jsonl"
    assert main(["caption", str(videos / "videos"), "--out", str(out), *ARGS]) == 1  # broken.mp4
    return {r["id"]: r for r in records(out)}


@pytest.mark.parametrize("launcher", [TORCHRUN, ACCELERATE], ids=["torchrun", "accelerate"])
def test_two_processes_give_the_records_of_one(videos, single, tmp_path, launcher):
    out = tmp_path / "captions.jsonl"
    result = subprocess.run([*launcher, str(videos / "videos"), "--out", str(out), *ARGS], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode != 0 and "broken.mp4: cannot be decoded" in result.stderr, result.stderr
    got = records(out)
    assert got == list(single.values()) and len(got) == 5  # the same records in the same order
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captions.jsonl"]  # the parts were merged and removed


def test_a_killed_rank_then_a_rerun_with_another_process_count_gives_every_video_once(videos, single, tmp_path):
    """Rank 1 of 2 is killed while it reads a video that never arrives (a FIFO: its fifth, after its first window
    of four batches is written, so the rank is still running on any machine); a one-process re-run captions only
    what is missing."""
    many = tmp_path / "many"
    many.mkdir()
    source = {}
    for i in range(12):  # hard links: distinct paths, so distinct videos
        if i != 9:
            os.link(videos / "videos" / f"{i % 5}.mp4", many / f"{i:02d}.mp4")
        source[str(many / f"{i:02d}.mp4")] = str(videos / "videos" / f"{i % 5}.mp4")
    os.mkfifo(many / "09.mp4")  # rank 1 takes 01, 03, 05, 07, 09, 11
    out = tmp_path / "captions.jsonl"
    job = psutil.Popen([*TORCHRUN, str(many), "--out", str(out), "--batch-size", "1", "--workers", "0",
                        "--max-new-tokens", "8"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = tmp_path / "captions.jsonl.part-00001"
    deadline = time.time() + 180
    while not (part.exists() and part.read_text().count("\n") >= 4) and time.time() < deadline:
        time.sleep(0.05)
    assert [r["video"] for r in records(part)] == [str(many / f"{i:02d}.mp4") for i in (1, 3, 5, 7)]
    rank1 = rank_process(job, "1")
    rank1.send_signal(signal.SIGKILL)
    assert job.wait(timeout=120) != 0
    assert not out.exists() or len(records(out)) < 12  # the job never merged everything
    (many / "09.mp4").unlink()
    os.link(videos / "videos" / "4.mp4", many / "09.mp4")
    assert main_caption_count(many, out) == 12
    got = records(out)
    assert sorted(r["video"] for r in got) == sorted(source)
    assert all(r["caption"] == single[source[r["id"]]]["caption"] for r in got)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captions.jsonl", "many"]


def main_caption_count(folder, out):
    from pnd.cli import main

    assert main(["caption", str(folder), "--out", str(out), "--max-new-tokens", "8"]) == 0
    return len(records(out))
