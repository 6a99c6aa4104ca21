"""`pnd retrieve` through the real console script, on a tiny model saved to disk and real mp4 files."""

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import torch

from pnd.scoring.ranking import retrieval_metrics, sinkhorn
from pnd.testing import tiny_model

from helpers import interruptible, rank_process, refusal, write_mp4

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


@pytest.mark.parametrize("command", ["retrieve", "caption"])
def test_each_process_loads_its_model_with_the_dtype_and_attention_asked(setup, command):
    """`--dtype` and `--attn-implementation` (shared by `pnd retrieve` and `pnd caption`) reach `from_pretrained`."""
    import argparse

    from pnd.cli import caption, retrieve
    from pnd.cli.launch import Launch, load_for_rank

    parser = argparse.ArgumentParser()
    {"retrieve": retrieve, "caption": caption}[command].add_arguments(parser)
    required = ["--captions", "c.txt", "--model", "m"] if command == "retrieve" else []
    args = parser.parse_args(["v.mp4", *required, "--device", "cpu", "--dtype", "bfloat16",
                              "--attn-implementation", "eager"])
    model, _ = load_for_rank(args, str(setup / "model"), Launch())
    assert model.dtype == torch.bfloat16 and model.config._attn_implementation == "eager"


def retrieve(setup, out, *extra):
    """`pnd retrieve` in-process (the console script: test_sigint_stops_cleanly_keeps_the_rows_and_says_how_to_resume)."""
    return main_retrieve(setup, "--reduction", "sum", "--alpha", "0.8", "--out", setup / out, *extra)


def test_full_matrix_rankings_metrics_and_plot(setup, capfd):
    assert retrieve(setup, "full", "--plot") == 1  # one video could not be read
    assert "broken.mp4: cannot be decoded" in capfd.readouterr().err
    saved = torch.load(setup / "full" / "scores.pt")
    assert saved["videos"] == ["v0.mp4", "v1.mp4", "v2.mp4"] and saved["normalized"].shape == (3, 3)
    torch.testing.assert_close(saved["normalized"], saved["conditional"] - 0.8 * saved["prior"])
    rankings = [json.loads(line) for line in (setup / "full" / "rankings.jsonl").read_text().splitlines()]
    assert [r["ranking"][0]["caption_index"] for r in rankings] == saved["normalized"].argmax(1).tolist()
    table = (setup / "full" / "metrics.md").read_text()
    r1 = retrieval_metrics(saved["normalized"])["R@1"]
    assert f"| prior-normalized (alpha=0.8) | {r1:.1f} |" in table and "text->video" in table
    assert f"| prior-normalized + Sinkhorn | {retrieval_metrics(sinkhorn(saved['normalized']))['R@1']:.1f} |" in table
    assert (setup / "full" / "scores.png").stat().st_size > 1000


def test_a_prompt_that_holds_the_processors_video_placeholder_is_one_line(setup, tmp_path):
    """The processor would count "<video>" typed in --prompt as one more video: refused in one line, not a traceback
    from the first video's scores."""
    message = refusal("retrieve", setup / "videos", "--captions", setup / "captions.jsonl", "--model",
                      setup / "model", "--frames", 4, "--workers", 0, "--prompt", "What is in the <video>?",
                      "--out", tmp_path / "out")
    assert message.startswith("pnd retrieve: the prompt 'What is in the <video>?' holds '<video>'")


def test_first_stage_reranking(setup):
    first = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.7], [0.1, 0.2, 0.3], [0.0, 0.0, 0.0]], dtype=np.float32)
    np.save(setup / "first.npy", first)  # rows follow the listed videos: broken.mp4 first (sorted)
    retrieve(setup, "rerank", "--first-stage", str(setup / "first.npy"), "--top-k", "2")
    saved = torch.load(setup / "rerank" / "scores.pt")
    assert torch.isinf(saved["normalized"]).sum(1).tolist() == [1, 1, 1]
    assert saved["normalized"][0, 0].isinf()  # broken.mp4's row was dropped: v0 uses row 1 -> top-2 {1, 2}
    assert "reranked" in (setup / "rerank" / "metrics.md").read_text()


def main_retrieve(setup, *extra, captions=None, videos=None):
    from pnd.cli import main

    return main(["retrieve", str(videos or setup / "videos"), "--captions", str(captions or setup / "captions.jsonl"),
                 "--model", str(setup / "model"), "--frames", "4", *map(str, extra)])


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--frames", "-3"], "--frames must be at least 1, got -3"),
    (["--first-stage", "sims.npy", "--top-k", "0"], "--top-k must be at least 1, got 0"),
    (["--first-stage", "sims.npy", "--fuse", "nan"], "--fuse must be a finite number"),
    (["--first-stage", "sims.npy", "--fuse", "inf"], "--fuse must be a finite number"),
    (["--top-k", "5"], "--top-k sets the reranking of --first-stage, which is not given"),
    (["--fuse", "0.5"], "--fuse sets the reranking of --first-stage, which is not given"),
    (["--workers", "-1"], "--workers must be 0 (decode in the main process) or more, got -1"),
    (["--alpha", "nan"], "alpha must be a finite number"),
    (["--device", "bogus"], "--device bogus: not a device name; pass cpu, cuda, cuda:1, mps"),
    (["--device", "cuda:99"], "--device cuda:99: this machine has"),
    (["--plot", "--first-stage", "sims.npy"], "--plot draws the full score matrices, which --first-stage reranking"),
])
def test_bad_arguments_are_refused_before_any_model_loads(setup, tmp_path, no_model, args, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        main_retrieve(setup, "--out", tmp_path / "out", *args)
    assert not (tmp_path / "out").exists()


def test_bad_out_captions_and_aligned_counts_are_refused_before_any_model_loads(setup, tmp_path, no_model):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="--out .*file is a file"):
        main_retrieve(setup, "--out", tmp_path / "file")
    (tmp_path / "locked").mkdir(mode=0o555)
    with pytest.raises(SystemExit, match="locked is read-only"):
        main_retrieve(setup, "--out", tmp_path / "locked" / "out")
    out = ["--out", tmp_path / "out"]
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(SystemExit, match="empty.txt holds no caption"):
        main_retrieve(setup, *out, captions=tmp_path / "empty.txt")
    (tmp_path / "blank.jsonl").write_text('{"caption": "a dog"}\n\n{"caption": ""}\n')
    with pytest.raises(SystemExit, match=r"blank.jsonl, line 3: the caption '' is empty"):
        main_retrieve(setup, *out, captions=tmp_path / "blank.jsonl")
    (tmp_path / "bad.jsonl").write_text('{"caption": "a dog"}\n["a cat"]\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl, line 2 is not a JSON object with a 'caption'"):
        main_retrieve(setup, *out, captions=tmp_path / "bad.jsonl")
    with pytest.raises(SystemExit, match="no such file"):
        main_retrieve(setup, *out, captions=tmp_path / "missing.txt")
    (tmp_path / "two.txt").write_text("a dog\na cat\n")
    with pytest.raises(SystemExit, match=r"there are 2 caption\(s\) and 4 video\(s\)"):
        main_retrieve(setup, *out, "--aligned", captions=tmp_path / "two.txt")
    assert not (tmp_path / "out").exists()


def write_first_stage(path, value):
    if path.suffix == ".npy":
        np.save(path, value)
    elif isinstance(value, str):
        path.write_text(value)
    else:
        torch.save(value, path)


@pytest.mark.parametrize("name, value, message", [
    ("nan.npy", np.full((4, 3), np.nan, dtype=np.float32), "has 12 NaN or infinite value"),
    ("extra_rows.npy", np.zeros((5, 3), dtype=np.float32), r"is \(5, 3\); it must be \(4, 3\)"),
    ("vector.pt", torch.zeros(12), r"holds a \(12,\) torch.float32 tensor; it must be a 2-D matrix"),
    ("bools.pt", torch.zeros(4, 3, dtype=torch.bool), "torch.bool tensor"),
    ("dict.pt", {"sims": torch.zeros(4, 3)}, "holds dict"),
    ("text.npy", "not numpy", "cannot be read"),
    ("missing.npy", None, "cannot be read"),
])
def test_bad_first_stage_matrices_are_refused_before_any_model_loads(setup, tmp_path, no_model, name, value, message):
    path = tmp_path / name
    if value is not None:
        write_first_stage(path, value)
    with pytest.raises(SystemExit, match=message):
        main_retrieve(setup, "--out", tmp_path / "out", "--first-stage", path)


@pytest.mark.parametrize("extra", [[], ["--first-stage", "first.npy", "--top-k", "2"]], ids=["full", "rerank"])
def test_two_processes_under_torchrun_give_the_single_process_matrix_and_metrics(setup, extra, tmp_path):
    np.save(setup / "first.npy", np.arange(12, dtype=np.float32).reshape(4, 3) % 5)
    extra = [str(setup / e) if e.endswith(".npy") else e for e in extra]
    # one process decoding in its main loop; two with the default 2 DataLoader workers each
    assert main_retrieve(setup, "--reduction", "sum", "--workers", "0", "--out", tmp_path / "one", *extra) == 1
    torchrun = [str(SCRIPT.with_name("torchrun")), "--nproc_per_node", "2", "-m", "pnd.cli", "retrieve"]
    result = subprocess.run([*torchrun, str(setup / "videos"), "--captions", str(setup / "captions.jsonl"), "--model",
                             str(setup / "model"), "--frames", "4", "--reduction", "sum", "--out", str(tmp_path / "two"),
                             *extra], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "broken.mp4: cannot be decoded" in result.stderr, result.stderr
    assert_same_results(tmp_path / "one", tmp_path / "two", ["v0.mp4", "v1.mp4", "v2.mp4"])
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["metrics.md", "rankings.jsonl", "rows.jsonl",
                                                                   "scores.pt"]


def assert_same_results(expected, got, videos):
    one, two = torch.load(expected / "scores.pt"), torch.load(got / "scores.pt")
    assert one.keys() == two.keys() and one["videos"] == two["videos"] == videos
    for key in one:
        if torch.is_tensor(one[key]):
            torch.testing.assert_close(two[key], one[key], atol=1e-4, rtol=1e-4)
    assert (got / "metrics.md").read_text() == (expected / "metrics.md").read_text()


def test_inverted_softmax_row_normalizes_each_caption_over_the_videos():
    """A hub caption (0) that scores high for both videos: QB-Norm over the videos (the queries) takes it back.
    Worked by hand: column logsumexps -0.526 and -1.202 give rows [-0.474, -0.798] and [-0.974, -0.598]."""
    from pnd.cli.retrieval_report import metrics_table

    scores = torch.tensor([[-1.0, -2.0], [-1.5, -1.8]])
    table = metrics_table({"conditional": scores, "normalized": scores}, torch.arange(2), alpha=0.5)
    r_at_1 = {line.split(" | ")[0].strip("| "): float(line.split(" | ")[1]) for line in table.splitlines()[2:]}
    assert r_at_1["prior-normalized (alpha=0.5)"] == 50.0
    assert r_at_1["prior-normalized + inverted softmax"] == 100.0
    # Dual softmax, over the videos and in log space: rows [-1.474, -2.798] and [-2.474, -2.398]
    assert r_at_1["prior-normalized + dual softmax"] == 100.0


def test_a_killed_rank_then_a_rerun_with_another_process_count_gives_the_single_process_matrix(setup, tmp_path):
    """Rank 1 of 2 is killed while it waits on a video that never arrives (a FIFO), after writing 3 rows; the same
    command under 3 processes scores only the 3 videos without rows; a rank other than 0 with a broken video exits 1."""
    many = tmp_path / "many"
    many.mkdir()
    for i in range(11):  # hard links: distinct paths, so distinct videos
        if i != 7:
            os.link(setup / "videos" / f"v{i % 3}.mp4", many / f"{i:02d}.mp4")
    os.mkfifo(many / "07.mp4")  # rank 1's 4th video (rank 1 takes 01, 03, 05, 07, 09, broken)
    (many / "broken.mp4").write_bytes(b"garbage")
    command = ["-m", "pnd.cli", "retrieve", str(many), "--captions", str(setup / "captions.jsonl"), "--model",
               str(setup / "model"), "--frames", "4", "--out", str(tmp_path / "out")]
    job = psutil.Popen([str(SCRIPT.with_name("torchrun")), "--nproc_per_node", "2", *command],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = [tmp_path / "out" / f"rows.jsonl.part-0000{rank}" for rank in (0, 1)]
    deadline = time.time() + 240
    while [lines(p) for p in parts] != [6, 3] and time.time() < deadline:
        time.sleep(0.1)
    assert [lines(p) for p in parts] == [6, 3]
    rank1 = rank_process(job, "1")
    workers = rank1.children(recursive=True)  # its DataLoader workers, one of them blocked on the FIFO
    rank1.send_signal(signal.SIGKILL)
    for worker in workers:
        worker.kill()
    assert job.wait(timeout=120) != 0
    assert not (tmp_path / "out" / "scores.pt").exists()
    from pnd.cli import main

    assert main(["merge", "--out", str(tmp_path / "out")]) == 0  # the parts into rows.jsonl; the re-run reads it
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rows.jsonl"]
    assert lines(tmp_path / "out" / "rows.jsonl") == 9
    (many / "07.mp4").unlink()
    os.link(setup / "videos" / "v1.mp4", many / "07.mp4")
    rerun = subprocess.run([str(SCRIPT.with_name("torchrun")), "--nproc_per_node", "3", *command], capture_output=True,
                           text=True, timeout=300)
    assert "already has the rows of 9 of these video(s); scoring the other 3 over 3 processes" in rerun.stderr
    assert rerun.returncode != 0 and "1 video(s) of rank 2 failed" in rerun.stderr, rerun.stderr
    assert main_retrieve(setup, "--out", tmp_path / "one", videos=many) == 1  # broken.mp4
    one, two = torch.load(tmp_path / "one" / "scores.pt"), torch.load(tmp_path / "out" / "scores.pt")
    assert one["videos"] == two["videos"] == [f"{i:02d}.mp4" for i in range(11)]
    for key in ("normalized", "conditional", "prior"):
        torch.testing.assert_close(two[key], one[key], atol=1e-4, rtol=1e-4)
    rows = [json.loads(line) for line in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == [str(many / f"{i:02d}.mp4") for i in range(11)]  # each video once
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rankings.jsonl", "rows.jsonl", "scores.pt"]


def lines(path):
    return path.read_text().count("\n") if path.exists() else 0


def test_a_rerun_scores_nothing_again_and_refuses_rows_of_other_settings(setup, tmp_path, monkeypatch):
    assert main_retrieve(setup, "--out", tmp_path / "out") == 1  # broken.mp4
    first = torch.load(tmp_path / "out" / "scores.pt")
    (tmp_path / "out" / "scores.pt").unlink()
    import pnd.io.loading

    monkeypatch.setattr(pnd.io.loading, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))
    monkeypatch.chdir(tmp_path)  # the keys are resolved paths: another folder finds the same rows
    assert main_retrieve(setup, "--out", "out") == 1  # broken.mp4 is retried, fails again, loads nothing
    again = torch.load(tmp_path / "out" / "scores.pt")
    assert again["videos"] == first["videos"] and torch.equal(again["normalized"], first["normalized"])
    with pytest.raises(SystemExit, match="holds score rows computed with other settings"):
        main_retrieve(setup, "--out", "out", "--alpha", "0.5")
    with pytest.raises(SystemExit, match="other settings .*quantization --load-in-4bit/8bit"):  # named, as caption's
        main_retrieve(setup, "--out", "out", "--load-in-8bit")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["metrics.md", "rankings.jsonl", "rows.jsonl",
                                                                   "scores.pt"]  # the refused run left no empty part


@pytest.mark.parametrize("stop, status, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_sigint_stops_cleanly_keeps_the_rows_and_says_how_to_resume(setup, tmp_path, stop, status, word):
    """SIGINT (or SIGTERM) while the run waits on its third video (a FIFO that never gets a writer, so the run is still
    going on any machine): exit 130 (143), no traceback, two rows kept; the same command again scores the rest."""
    many = tmp_path / "many"
    many.mkdir()
    for i in range(6):  # hard links: distinct paths, so distinct videos
        if i != 2:
            os.link(setup / "videos" / f"v{i % 3}.mp4", many / f"{i:02d}.mp4")
    os.mkfifo(many / "02.mp4")
    out = tmp_path / "out"
    process = subprocess.Popen([SCRIPT, "retrieve", many, "--captions", setup / "captions.jsonl", "--model",
                                setup / "model", "--frames", "4", "--out", out], stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    part = out / "rows.jsonl.part-00000"
    deadline = time.time() + 120
    while lines(part) < 2 and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(stop)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == status and "Traceback" not in stderr, stderr
    assert word in stderr and "Run the same command again" in stderr
    assert lines(part) == 2
    (many / "02.mp4").unlink()
    os.link(setup / "videos" / "v2.mp4", many / "02.mp4")
    assert main_retrieve(setup, "--out", out, videos=many) == 0
    assert lines(out / "rows.jsonl") == 6 and torch.load(out / "scores.pt")["normalized"].shape == (6, 3)


@pytest.mark.parametrize("command", ["retrieve", "explain"])
def test_a_missing_model_folder_is_one_line_before_any_write(setup, tmp_path, command):
    """As for pnd caption: --model is resolved before anything loads or is written."""
    out = tmp_path / "out"
    args = {"retrieve": [setup / "videos", "--captions", setup / "captions.jsonl"],
            "explain": [setup / "videos" / "v0.mp4"]}[command]
    said = refusal(command, *args, "--model", tmp_path / "missing", "--out", out)
    assert "missing: no such folder" in said, said
    assert not out.exists()


def test_captions_files_are_utf8_with_or_without_a_byte_order_mark_and_any_suffix_case(setup, tmp_path, no_model):
    """As `pnd caption` reads its list files and manifests: a BOM is dropped, `.JSONL` is JSON lines, and a file that is
    not UTF-8 is one line naming it and the fix."""
    from pnd.cli.retrieval_inputs import read_captions

    (tmp_path / "bom.txt").write_text("a red circle\na blue square\n", encoding="utf-8-sig")
    assert read_captions(tmp_path / "bom.txt") == (["a red circle", "a blue square"], [None, None])
    rows = [{"caption": "a red circle", "video": "v0.mp4"}, {"caption": "a blue square"}]
    expected = (["a red circle", "a blue square"], ["v0.mp4", None])
    for name, encoding in [("bom.jsonl", "utf-8-sig"), ("upper.JSONL", "utf-8")]:
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding=encoding)
        assert read_captions(tmp_path / name) == expected
    (tmp_path / "latin1.txt").write_bytes("un caf\u00e9\n".encode("latin-1"))
    message = refusal("retrieve", setup / "videos", "--captions", tmp_path / "latin1.txt", "--model", setup / "model",
                      "--out", tmp_path / "o")
    assert message.startswith(f"pnd retrieve: --captions {tmp_path / 'latin1.txt'} is not UTF-8 text") and \
        message.endswith("save it as UTF-8."), message


def brute_force_r_at_1(scores, targets):
    """Percent of rows whose target scores above every other caption (a tie counts against it)."""
    hits = [all(row[t] > s for j, s in enumerate(row) if j != t) for row, t in zip(scores.tolist(), targets)]
    return 100 * sum(hits) / len(hits)


def two_clips(setup, root):
    """`root/a/clip.mp4` and `root/b/clip.mp4`: two videos of one file name."""
    for folder, source in (("a", "v0.mp4"), ("b", "v2.mp4")):
        (root / folder).mkdir(parents=True)
        os.link(setup / "videos" / source, root / folder / "clip.mp4")
    return root


def test_a_caption_video_that_could_mean_two_videos_is_refused_before_any_model_loads(setup, tmp_path, no_model):
    ambiguous = tmp_path / "ambiguous.jsonl"
    ambiguous.write_text(json.dumps({"caption": "a red circle", "video": "clip.mp4"}) + "\n")
    with pytest.raises(SystemExit, match="names the video 'clip.mp4', which could be any of .*a/clip.mp4, .*b/clip.mp4"):
        main_retrieve(setup, "--out", tmp_path / "out", captions=ambiguous, videos=two_clips(setup, tmp_path / "dup"))
    assert not (tmp_path / "out").exists()


def test_ground_truth_matches_the_path_a_caption_names_not_just_its_file_name(setup, tmp_path):
    """Each caption's "video" (relative to the captions file) names its own clip.mp4; the outputs name both apart."""
    two_clips(setup, tmp_path / "dup")
    captions = tmp_path / "dup" / "caps.jsonl"
    captions.write_text(json.dumps({"caption": "a red circle", "video": "a/clip.mp4"}) + "\n" +
                        json.dumps({"caption": "a blue square", "video": "b/clip.mp4"}) + "\n")
    assert main_retrieve(setup, "--out", tmp_path / "out", captions=captions, videos=tmp_path / "dup") == 0
    saved = torch.load(tmp_path / "out" / "scores.pt")
    assert saved["videos"] == ["a/clip.mp4", "b/clip.mp4"]
    rankings = [json.loads(line)["video"] for line in (tmp_path / "out" / "rankings.jsonl").read_text().splitlines()]
    assert rankings == ["a/clip.mp4", "b/clip.mp4"]
    r1 = brute_force_r_at_1(saved["normalized"], [0, 1])
    assert f"| prior-normalized (alpha=0.9) | {r1:.1f} |" in (tmp_path / "out" / "metrics.md").read_text()


def test_videos_without_a_ground_truth_caption_are_named_and_no_metrics_are_written(setup, tmp_path, capfd):
    captions = tmp_path / "caps.jsonl"
    captions.write_text(json.dumps({"caption": "a red circle", "video": "elsewhere/v0.mp4"}) + "\n" +
                        json.dumps({"caption": "a blue square"}) + "\n")
    assert main_retrieve(setup, "--out", tmp_path / "out", captions=captions, videos=setup / "videos" / "v1.mp4") == 0
    err = capfd.readouterr().err
    assert "1 of the 1 video(s) have no ground-truth caption (v1.mp4), so no metrics are computed" in err, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rankings.jsonl", "rows.jsonl", "scores.pt"]
