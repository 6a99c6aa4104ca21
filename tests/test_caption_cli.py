"""`pnd caption` through the real console script, on the bundled demo model and real video files.

Captions are checked against `model.generate` with `PriorNormalized` run here on the same frames.
"""

import json
import pathlib
import subprocess
import sys

import pytest
import torch

import pnd
from pnd.demo import load_demo_model
from pnd.demo.moving import make_moving_clip
from pnd.video import read_video, write_video

SCRIPT = pathlib.Path(sys.executable).with_name("pnd")


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    root = tmp_path_factory.mktemp("caption")
    (root / "videos").mkdir()
    generator = torch.Generator().manual_seed(7)
    for name, colour, size in [("a.mp4", "blue", "small"), ("b.webm", "green", "medium"), ("c.mp4", "yellow", "big")]:
        write_video(root / "videos" / name, make_moving_clip(colour, size, generator, noise=0.8, frames=16))
    (root / "videos" / "broken.mp4").write_bytes(b"not a video")
    return root


def caption(*args):
    return subprocess.run([SCRIPT, "caption", *map(str, args)], capture_output=True, text=True)


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def reference():
    """reference(path, alpha) -> the caption of model.generate on the video's frames, built here."""
    model, processor = load_demo_model()
    pnd.attach(model)

    def run(path, alpha, plausibility=None):
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}],
            add_generation_prompt=True)
        inputs = processor(text=[prompt], videos=[read_video(path, 8)], return_tensors="pt")
        extra = {} if alpha is None else {"logits_processor": [pnd.PriorNormalized(alpha, plausibility=plausibility)]}
        out = model.generate(**inputs, max_new_tokens=32, do_sample=False, **extra)
        return processor.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True).strip()
    return run


def test_jsonl_named_failure_and_resume(videos, reference, tmp_path):
    out = tmp_path / "captions.jsonl"
    result = caption(videos / "videos", "--alpha", 0.5, "--plausibility", 0.1, "--batch-size", 2, "--out", out)
    assert result.returncode == 1, result.stderr  # broken.mp4 failed, the run went on
    assert "broken.mp4: cannot be decoded" in result.stderr
    rows = records(out)
    assert [pathlib.Path(r["video"]).name for r in rows] == ["a.mp4", "b.webm", "c.mp4"]
    for row in rows:
        assert row["alpha"] == 0.5 and row["caption"] == reference(row["video"], 0.5, 0.1)

    # An interrupted run: the first line kept (its caption marked), the second cut mid-line.
    lines = out.read_text().splitlines(keepends=True)
    out.write_text(json.dumps({**rows[0], "caption": "KEPT"}) + "\n" + lines[1][:10])
    again = caption(videos / "videos", "--alpha", 0.5, "--plausibility", 0.1, "--out", out)
    assert again.returncode == 1 and "already has 1 video(s)" in again.stderr and "unfinished last line" in again.stderr
    resumed = records(out)
    assert [pathlib.Path(r["video"]).name for r in resumed] == ["a.mp4", "b.webm", "c.mp4"]
    assert resumed[0]["caption"] == "KEPT" and resumed[1:] == rows[1:]


def test_compare_and_missing_file(videos, reference, tmp_path):
    out = tmp_path / "compare.jsonl"
    video = videos / "videos" / "a.mp4"
    result = caption(video, tmp_path / "missing.mp4", "--compare", "--alpha", 1.0, "--out", out)
    assert result.returncode == 1 and "missing.mp4: no such file" in result.stderr
    [row] = records(out)
    plain, normalized = reference(str(video), None), reference(str(video), 1.0)
    assert row == {"video": str(video), "caption": normalized, "alpha": 1.0, "plain": plain}
    assert f"| a.mp4 | {plain} | {normalized} |" in result.stdout
