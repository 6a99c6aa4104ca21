"""`pnd retrieve` through the real console script, on a tiny model saved to disk and real mp4 files."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import torch

from pnd.ranking import retrieval_metrics
from pnd.testing import tiny_model

from helpers import write_mp4

SCRIPT = pathlib.Path(sys.executable).with_name("pnd")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("retrieve")
    model, processor = tiny_model("llava_onevision")
    model.save_pretrained(root / "model")
    processor.save_pretrained(root / "model")
    (root / "videos").mkdir()
    for i in range(3):
        write_mp4(root / "videos" / f"v{i}.mp4", 4 + 2 * i)
    (root / "videos" / "broken.mp4").write_bytes(b"garbage")
    captions = ["a red circle moves left", "a blue square", "the cat sat on the mat"]
    with open(root / "captions.jsonl", "w") as f:
        for i, c in enumerate(captions):
            f.write(json.dumps({"caption": c, "video": f"v{i}.mp4"}) + "\n")
    return root


def retrieve(setup, out, *extra):
    return subprocess.run([SCRIPT, "retrieve", str(setup / "videos"), "--captions", str(setup / "captions.jsonl"),
                           "--model", str(setup / "model"), "--frames", "4", "--reduction", "sum", "--alpha", "0.8",
                           "--out", str(setup / out), *extra], capture_output=True, text=True)


def test_full_matrix_rankings_metrics_and_plot(setup):
    result = retrieve(setup, "full", "--plot")
    assert result.returncode == 1, result.stderr  # one video could not be read
    assert "broken.mp4: cannot be decoded" in result.stderr
    saved = torch.load(setup / "full" / "scores.pt")
    assert saved["videos"] == ["v0.mp4", "v1.mp4", "v2.mp4"] and saved["normalized"].shape == (3, 3)
    torch.testing.assert_close(saved["normalized"], saved["conditional"] - 0.8 * saved["prior"])
    rankings = [json.loads(line) for line in (setup / "full" / "rankings.jsonl").read_text().splitlines()]
    assert [r["ranking"][0]["caption_index"] for r in rankings] == saved["normalized"].argmax(1).tolist()
    table = (setup / "full" / "metrics.md").read_text()
    r1 = retrieval_metrics(saved["normalized"])["R@1"]
    assert f"| prior-normalized (alpha=0.8) | {r1:.1f} |" in table and "text->video" in table
    assert (setup / "full" / "scores.png").stat().st_size > 1000


def test_first_stage_reranking(setup):
    first = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.7], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]], dtype=np.float32)
    np.save(setup / "first.npy", first)  # rows follow the listed videos: broken.mp4 first (sorted)
    result = retrieve(setup, "rerank", "--first-stage", str(setup / "first.npy"), "--top-k", "2")
    saved = torch.load(setup / "rerank" / "scores.pt")
    assert torch.isinf(saved["normalized"]).sum(1).tolist() == [1, 1, 1]
    assert saved["normalized"][0, 0].isinf()  # broken.mp4's row was dropped: v0 uses row 1 -> top-2 {1, 2}
    assert "reranked" in (setup / "rerank" / "metrics.md").read_text()
