"""`pnd caption` through the real console script (and `pnd.cli.main`), on the bundled demo model and real video files.

Captions are checked against `model.generate` with `PriorNormalized` run here on the same frames.
"""

import csv
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
import torch

import pnd
from pnd.demo import load_demo_model
from pnd.demo.moving import make_moving_clip
from pnd.io.video import read_video, write_video

from helpers import interruptible, refusal

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


def records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def reference():
    """reference(path, alpha) -> the caption of model.generate on the video's frames, built here."""
    model, processor = load_demo_model()
    pnd.attach(model)

    def run(path, alpha, plausibility=None, prompt="Describe the video.", max_new_tokens=32):
        prompt = processor.apply_chat_template(
            [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}],
            add_generation_prompt=True)
        inputs = processor(text=[prompt], videos=[read_video(path, 8)], return_tensors="pt")
        extra = {} if alpha is None else {"logits_processor": [pnd.PriorNormalized(alpha, plausibility=plausibility)]}
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, **extra)
        return processor.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True).strip()
    return run


def test_jsonl_named_failure_and_resume(videos, reference, tmp_path, capfd):
    out = tmp_path / "captions.jsonl"
    assert main_caption(videos / "videos", "--alpha", 0.5, "--plausibility", 0.1, "--batch-size", 2, "--out", out) == 1
    assert "broken.mp4: cannot be decoded" in capfd.readouterr().err  # broken.mp4 failed, the run went on
    rows = records(out)
    assert [pathlib.Path(r["video"]).name for r in rows] == ["a.mp4", "b.webm", "c.mp4"]
    for row in rows:
        assert row["alpha"] == 0.5 and row["caption"] == reference(row["video"], 0.5, 0.1)

    # An interrupted run: the first line kept (its caption marked), the second cut mid-line.
    lines = out.read_text().splitlines(keepends=True)
    out.write_text(json.dumps({**rows[0], "caption": "KEPT"}) + "\n" + lines[1][:10])
    assert main_caption(videos / "videos", "--alpha", 0.5, "--plausibility", 0.1, "--out", out) == 1
    again = capfd.readouterr().err
    assert "already has 1 of these video(s)" in again and "unfinished last line" in again
    resumed = records(out)
    assert [pathlib.Path(r["video"]).name for r in resumed] == ["a.mp4", "b.webm", "c.mp4"]
    assert resumed[0]["caption"] == "KEPT" and resumed[1:] == rows[1:]


def test_compare_and_missing_file(videos, reference, tmp_path, capfd):
    out = tmp_path / "compare.jsonl"
    video = videos / "videos" / "a.mp4"
    assert main_caption(video, tmp_path / "missing.mp4", "--compare", "--alpha", 1.0, "--out", out) == 1
    result = capfd.readouterr()
    assert "missing.mp4: no such file" in result.err
    [row] = records(out)
    plain, normalized = reference(str(video), None), reference(str(video), 1.0)
    assert row == {"id": str(video.resolve()), "video": str(video), "caption": normalized, "alpha": 1.0,
                   "prompt": "Describe the video.", "model": "pnd-demo", "method": "cpn",
                   "settings": {"alpha": 1.0, "prior": "masked", "plausibility": None}, "frames": 8,
                   "max_new_tokens": 32, "dtype": "auto", "attn_implementation": None, "quantization": None,
                   "plain": plain}
    assert f"| a.mp4 | {plain} | {normalized} |" in result.out


def main_caption(*args):
    """`pnd caption` in this process (fast: no interpreter start)."""
    from pnd.cli import main

    return main(["caption", *map(str, args)])


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "-1"], "--batch-size must be at least 1, got -1"),
    (["--batch-size", "0"], "--batch-size must be at least 1, got 0"),
    (["--frames", "0"], "--frames must be at least 1, got 0"),
    (["--frames", "-3"], "--frames must be at least 1, got -3"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1, got 0"),
    (["--workers", "-1"], "--workers must be 0"),
    (["--alpha", "2"], "alpha must be"),
    (["--load-in-4bit", "--load-in-8bit"], "choose one of --load-in-4bit and --load-in-8bit"),
    (["--device", "bogus"], "--device bogus: not a device name; pass cpu, cuda, cuda:1, mps"),
    (["--device", "cuda:99"], "--device cuda:99: this machine has"),
])
def test_bad_arguments_are_refused_before_any_model_loads(videos, tmp_path, no_model, args, message):
    with pytest.raises(SystemExit, match=re.escape(message)):
        main_caption(videos / "videos" / "a.mp4", "--out", tmp_path / "c.jsonl", *args)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text", ["l1\nl2", "l1", "l1\n", '{"video": "a.mp4"}\n', "\x80\x81"])
def test_an_out_that_is_not_a_captions_file_is_refused_untouched(videos, tmp_path, no_model, text):
    out = tmp_path / "notes.txt"
    out.write_bytes(text.encode("latin-1"))
    with pytest.raises(SystemExit, match="is not a caption"):
        main_caption(videos / "videos" / "a.mp4", "--out", out)
    assert out.read_bytes() == text.encode("latin-1") and list(tmp_path.iterdir()) == [out]


def test_a_folder_or_read_only_out_is_refused(videos, tmp_path, no_model):
    with pytest.raises(SystemExit, match="is a folder; name a file"):
        main_caption(videos / "videos" / "a.mp4", "--out", tmp_path)
    read_only = tmp_path / "done.jsonl"
    read_only.write_text("")
    read_only.chmod(0o444)
    with pytest.raises(SystemExit, match="done.jsonl is read-only"):
        main_caption(videos / "videos" / "a.mp4", "--out", read_only)
    (tmp_path / "locked").mkdir(mode=0o555)
    with pytest.raises(SystemExit, match="locked is read-only"):
        main_caption(videos / "videos" / "a.mp4", "--out", tmp_path / "locked" / "c.jsonl")


@pytest.mark.parametrize("workers", [0, 2])
def test_a_bad_video_never_stops_the_others(videos, reference, tmp_path, capsys, workers):
    from PIL import Image

    mixed = tmp_path / "mixed"  # a frame folder with two frame sizes
    mixed.mkdir()
    for i, size in enumerate([16, 16, 32]):
        Image.new("RGB", (size, size)).save(mixed / f"{i}.png")
    a, c = videos / "videos" / "a.mp4", videos / "videos" / "c.mp4"
    out = tmp_path / "new folder" / "captions.jsonl"  # a missing folder is created
    code = main_caption(a, mixed, c, "--out", out, "--workers", workers, "--batch-size", 2, "--max-new-tokens", 8)
    assert code == 1 and "mixed: frames have different sizes" in capsys.readouterr().err
    rows = records(out)
    assert [r["video"] for r in rows] == [str(a), str(c)]
    assert [r["caption"] for r in rows] == [reference(str(v), 0.5, max_new_tokens=8) for v in (a, c)]


def test_workers_send_frames_by_value_not_through_the_resource_sharer(videos):
    """A worker sends what `VideoFrames` gives with torch's pickler: a tensor would travel as a file descriptor through
    the worker's multiprocessing resource sharer, whose thread prints a traceback when a signal stops the run
    mid-transfer. A numpy array goes by value, and no resource sharer starts."""
    code = f"""
import torch.multiprocessing  # torch's reductions, as in a DataLoader worker
from multiprocessing import resource_sharer
from multiprocessing.reduction import ForkingPickler
from pnd.cli.inputs import VideoFrames
item = VideoFrames([{str(videos / "videos" / "a.mp4")!r}], 4, str)[0]
ForkingPickler.dumps(item)
print(type(item[1]).__name__, resource_sharer._resource_sharer._listener is None)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.stdout.split() == ["ndarray", "True"], result.stderr


def test_resume_keys_on_the_resolved_path_from_any_folder(videos, tmp_path, monkeypatch, capsys):
    out = tmp_path / "captions.jsonl"
    monkeypatch.chdir(videos)
    assert main_caption("videos/a.mp4", "./videos/a.mp4", "--out", out, "--max-new-tokens", 4) == 0
    assert "1 video(s) named more than once" in capsys.readouterr().err
    monkeypatch.chdir(videos / "videos")
    assert main_caption("a.mp4", "c.mp4", "--out", out, "--max-new-tokens", 4) == 0
    assert "already has 1 of these video(s); captioning the other 1" in capsys.readouterr().err
    assert [r["id"] for r in records(out)] == [str(videos / "videos" / n) for n in ("a.mp4", "c.mp4")]
    assert main_caption(videos / "videos" / "a.mp4", "--out", out, "--max-new-tokens", 4) == 0
    assert len(records(out)) == 2


def test_one_id_for_two_videos_is_refused_naming_both_rows(videos, tmp_path):
    """ids key the records: two different videos under one id would lose one, so the run stops before it starts and
    names both rows; the same video under one id twice stays a warning."""
    manifest = tmp_path / "dup.jsonl"
    manifest.write_text(json.dumps({"video": str(videos / "videos" / "a.mp4"), "id": "a"}) + "\n"
                        + json.dumps({"video": str(videos / "videos" / "c.mp4"), "id": "a"}) + "\n")
    out = tmp_path / "o.jsonl"
    message = refusal("caption", manifest, "--out", out)
    assert f"{manifest}, row 1 and {manifest}, row 2 both have the id 'a'" in message
    assert "a.mp4" in message and "c.mp4" in message and not out.exists()
    manifest.write_text(json.dumps({"video": str(videos / "videos" / "a.mp4"), "id": "a"}) + "\n"
                        + json.dumps({"video": "videos/../videos/a.mp4", "id": "a"}) + "\n")
    os.symlink(videos / "videos", tmp_path / "videos")
    from pnd.cli.inputs import read_inputs

    assert [item.id for item in read_inputs([manifest])] == ["a"]


@pytest.mark.parametrize("name, text", [
    ("list.txt", "videos/a.mp4\r\n# a comment\r\nvideos/c.mp4\r\n"),
    ("rows.csv", "video,prompt\r\nvideos/a.mp4,\r\nvideos/c.mp4,What colour?\r\n"),
    ("rows.jsonl", '{"video": "videos/a.mp4"}\n{"video": "videos/c.mp4", "prompt": "What colour?"}\n'),
])
def test_list_files_and_manifests_saved_with_a_byte_order_mark_read_as_without(videos, name, text):
    """Excel's "CSV UTF-8" and Notepad write a byte order mark first: it was read into the first path or header."""
    from pnd.cli.inputs import read_inputs

    plain, marked = videos / f"plain-{name}", videos / f"marked-{name}"
    plain.write_bytes(text.encode())
    marked.write_bytes(text.encode("utf-8-sig"))
    expected = [(pathlib.Path(videos / "videos" / v).resolve(), p) for v, p in
                [("a.mp4", None), ("c.mp4", None if name.endswith(".txt") else "What colour?")]]
    for source in (plain, marked):
        assert [(pathlib.Path(item.video).resolve(), item.prompt) for item in read_inputs([source])] == expected


def test_a_prompt_that_holds_the_processors_video_placeholder_is_refused_before_any_video(videos, tmp_path):
    """The demo model's processor counts "<video>" typed in the text as one more video: every video failed with
    transformers' own error (the run stopped at the first, naming none)."""
    out = tmp_path / "o.jsonl"
    message = refusal("caption", videos / "videos" / "a.mp4", "--prompt", "Is the <video> blue?", "--out", out,
                      "--workers", 0)  # a refusal in this process: no reader process left holding the part file
    assert message.startswith("pnd caption: --prompt: the prompt 'Is the <video> blue?' holds '<video>'")
    manifest = tmp_path / "rows.jsonl"
    manifest.write_text(json.dumps({"video": str(videos / "videos" / "c.mp4"), "prompt": "Where is <image>?"}) + "\n")
    message = refusal("caption", manifest, "--out", out, "--workers", 0)
    assert message.startswith(f"pnd caption: the prompt of {videos / 'videos' / 'c.mp4'}: the prompt 'Where is "
                              "<image>?' holds '<image>'")
    assert sorted(tmp_path.iterdir()) == [manifest]  # no --out, and no empty part file left either


def test_a_video_its_processor_refuses_is_named_and_the_others_of_its_batch_are_captioned(videos, tmp_path, capfd):
    """Qwen2-VL's processor refuses a frame whose aspect ratio is over 200: that video is named and left out, as one
    that cannot be read (exit 1, retried by a rerun); the others of its batch are captioned one at a time, as alone.
    The whole run stopped there with the processor's error, which named no video."""
    from PIL import Image

    from pnd.testing import tiny_model

    model, processor = tiny_model("qwen2_vl")
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    (tmp_path / "in" / "thin").mkdir(parents=True)
    for i in range(4):
        Image.new("RGB", (1000, 3), (60 * i, 0, 0)).save(tmp_path / "in" / "thin" / f"{i}.png")
    for name in ("a.mp4", "c.mp4"):
        (tmp_path / "in" / name).symlink_to(videos / "videos" / name)
    common = ("--model", tmp_path / "model", "--workers", 0, "--max-new-tokens", 3)
    together = tmp_path / "together.jsonl"
    assert main_caption(tmp_path / "in", "--batch-size", 3, "--out", together, *common) == 1
    err = capfd.readouterr().err
    assert f"failed {tmp_path / 'in' / 'thin'}: the processor refused the video: absolute aspect ratio" in err
    alone = tmp_path / "alone.jsonl"
    assert main_caption(tmp_path / "in" / "a.mp4", tmp_path / "in" / "c.mp4", "--batch-size", 1, "--out", alone,
                        *common) == 0
    assert records(together) == records(alone) and len(records(alone)) == 2


@pytest.fixture(scope="module")
def text_only_model(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("llama")
    config = LlamaConfig(vocab_size=100, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_model_folders_are_resolved_before_anything_is_written(videos, tmp_path, text_only_model, monkeypatch):
    """--model is resolved before any load or write: a missing folder (absolute or relative), a file, a text-only
    model are one line naming the path and what was expected; --out under a file is one line too."""
    (tmp_path / "afile").write_text("")
    cases = [(["--model", tmp_path / "missing"], "missing: no such folder"),
             (["--model", "./missing"], "--model ./missing: no such folder"),
             (["--model", tmp_path / "afile"], "afile: is a file, not a model folder"),
             (["--model", text_only_model], "is a 'llama' model (not an image or video-text-to-text model pnd "
                                             "supports); pnd needs an image or video-text-to-text model"),
             (["--out", tmp_path / "afile" / "x.jsonl"], "afile is a file, not a folder; pick another --out")]
    monkeypatch.chdir(tmp_path)
    for args, message in cases:
        said = refusal("caption", videos / "videos" / "a.mp4", "--out", tmp_path / "out" / "c.jsonl", *args)
        assert message in said, said
        assert not (tmp_path / "out").exists()


def test_a_second_run_on_the_same_out_is_refused(videos, tmp_path, no_model):
    from pnd.cli.records import PartWriter

    out = tmp_path / "captions.jsonl"
    with PartWriter(out, rank=0):  # what a running `pnd caption` holds
        with pytest.raises(SystemExit, match="being written by another running pnd command on the same --out"):
            main_caption(videos / "videos" / "a.mp4", "--out", out)


@pytest.mark.parametrize("manifest", ["jsonl", "csv", "parquet"])
def test_manifests_with_per_row_prompts_and_parquet_output(videos, reference, tmp_path, manifest):
    import pyarrow
    import pyarrow.parquet

    rows = [{"video": "../videos/a.mp4", "prompt": "What colour is it?"},  # relative to the manifest's folder
            {"video": str(videos / "videos" / "b.webm")}, {"video": "../videos/c.mp4", "id": "clip-c"}]
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / f"manifest.{manifest}"
    columns = ["video", "prompt", "id"]
    if manifest == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif manifest == "csv":
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, columns)
            writer.writeheader()
            writer.writerows(rows)
    else:
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist([{k: r.get(k) for k in columns} for r in rows]), path)
    os.symlink(videos / "videos", tmp_path / "videos")
    out = tmp_path / "captions.parquet"
    assert main_caption(path, "--out", out, "--alpha", 1.0, "--max-new-tokens", 6, "--compare") == 0
    got = pyarrow.parquet.read_table(out).to_pylist()
    assert [r["id"] for r in got] == [str(videos / "videos" / "a.mp4"), str(videos / "videos" / "b.webm"), "clip-c"]
    for row, given in zip(got, rows):
        prompt = given.get("prompt", "Describe the video.")
        assert row["prompt"] == prompt and row["model"] == "pnd-demo" and row["alpha"] == 1.0
        assert row["caption"] == reference(row["video"], 1.0, prompt=prompt, max_new_tokens=6)
        assert row["plain"] == reference(row["video"], None, prompt=prompt, max_new_tokens=6)
    assert main_caption(path, "--out", out, "--alpha", 1.0, "--max-new-tokens", 6) == 0  # resumed from the Parquet file
    assert pyarrow.parquet.read_table(out).num_rows == 3


def test_an_upper_case_parquet_out_is_written_and_resumed_as_parquet(videos, tmp_path, capsys):
    """--out captions.PARQUET was written as JSON lines (the suffix was compared case-sensitively)."""
    import pyarrow.parquet

    a, c = videos / "videos" / "a.mp4", videos / "videos" / "c.mp4"
    out = tmp_path / "captions.PARQUET"
    common = ("--out", out, "--max-new-tokens", 4, "--workers", 0)
    assert main_caption(a, *common) == 0
    assert [r["id"] for r in pyarrow.parquet.read_table(out).to_pylist()] == [str(a.resolve())]
    assert main_caption(a, c, *common) == 0
    assert "already has 1 of these video(s); captioning the other 1" in capsys.readouterr().err
    assert [r["id"] for r in pyarrow.parquet.read_table(out).to_pylist()] == [str(a.resolve()), str(c.resolve())]


def test_a_method_the_model_cannot_run_is_one_line_as_pnd_explain_says_it(videos, tmp_path):
    """PAI at its paper's layers (2 to 32) on the demo model's 2 decoder layers ended in a traceback and left an empty
    part file: now one line, as `pnd explain` refuses the same, no caption file and no part file."""
    a, c = videos / "videos" / "a.mp4", videos / "videos" / "c.mp4"
    explained = refusal("explain", a, "--method", "pai", "--out", tmp_path / "why")
    assert "PAI acts in no layer" in explained
    message = refusal("caption", a, c, "--method", "pai", "--out", tmp_path / "c.jsonl", "--batch-size", 2,
                      "--max-new-tokens", 4, "--workers", 0)
    assert message == explained.replace("pnd explain:", "pnd caption:")
    assert list(tmp_path.iterdir()) == []


def test_resuming_with_other_settings_is_refused_naming_the_setting(videos, tmp_path, monkeypatch):
    """Records were matched on the video only: a re-run with another alpha added its captions to those of the first
    alpha, silently. Each record now holds its settings; a run with others is refused before any model loads, naming
    the setting both ways, and leaves --out as it was. A new video may still come with its own prompt."""
    import pnd.io.loading

    a, c = videos / "videos" / "a.mp4", videos / "videos" / "c.mp4"
    out = tmp_path / "c.jsonl"
    common = ("--out", out, "--max-new-tokens", 4, "--workers", 0)
    assert main_caption(a, *common) == 0
    [record] = records(out)
    assert record["settings"]["alpha"] == 0.5 and record["max_new_tokens"] == 4 and record["frames"] == 8
    before = out.read_bytes()
    load_model = pnd.io.loading.load_model

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")
    monkeypatch.setattr(pnd.io.loading, "load_model", refuse)
    for args, said in [(["--alpha", "1.0"], "--alpha 0.5; this run: --alpha 1.0"),
                       (["--plausibility", "0.1"], "--plausibility none; this run: --plausibility 0.1"),
                       (["--method", "vcd"], '--method "cpn"; this run: --method "vcd"'),
                       (["--method-args", "prior=text"], '--method-args prior="masked"; this run: --method-args '
                                                         'prior="text"'),
                       (["--frames", "4"], "--frames 8; this run: --frames 4"),
                       (["--prompt", "What colour?"], 'prompt "Describe the video."; this run: prompt "What colour?"')]:
        message = refusal("caption", a, c, *common, *args)
        assert message == (f"pnd caption: {out} holds captions made with other settings ({a}'s: {said}). Pass another "
                           f"--out for this run's captions, or run with {out}'s settings to finish it.")
        assert out.read_bytes() == before and list(tmp_path.iterdir()) == [out]
    message = refusal("caption", a, c, "--out", out, "--max-new-tokens", 8)
    assert "--max-new-tokens 4; this run: --max-new-tokens 8" in message
    monkeypatch.setattr(pnd.io.loading, "load_model", load_model)
    assert main_caption(c, *common, "--prompt", "What colour?") == 0  # another video: its own prompt
    assert [(r["id"], r["prompt"]) for r in records(out)] == [(str(a.resolve()), "Describe the video."),
                                                             (str(c.resolve()), "What colour?")]


def test_merge_puts_left_parts_into_out_each_video_once(tmp_path, capsys):
    out = tmp_path / "captions.jsonl"
    record = {"id": "/v/a.mp4", "video": "a.mp4", "caption": "x", "alpha": 0.5}
    out.write_text(json.dumps(record) + "\n")
    (tmp_path / "captions.jsonl.part-00000").write_text(json.dumps(record) + "\n" + json.dumps({**record, "id": "/v/b.mp4"}) + "\n")
    (tmp_path / "captions.jsonl.part-00003").write_text(json.dumps({**record, "id": "/v/c.mp4"}) + "\n" + '{"id": "/v/d')
    from pnd.cli import main

    assert main(["merge", "--out", str(out)]) == 0
    assert "merged 2 part file(s)" in capsys.readouterr().err
    assert [r["id"] for r in records(out)] == ["/v/a.mp4", "/v/b.mp4", "/v/c.mp4"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captions.jsonl"]


def test_sigint_stops_cleanly_and_says_how_to_resume(videos, tmp_path):
    """SIGINT while the run waits on its fifth video (a FIFO that never gets a writer, so the run is still going
    on any machine), after the first window of four batches: exit 130, no traceback, those four captions kept; the
    same command again captions the rest."""
    many = tmp_path / "many"
    many.mkdir()
    for i in range(6):  # hard links: distinct paths, so distinct videos
        if i != 4:
            os.link(videos / "videos" / "a.mp4", many / f"{i:02d}.mp4")
    os.mkfifo(many / "04.mp4")
    out = tmp_path / "captions.jsonl"
    process = subprocess.Popen([SCRIPT, "caption", many, "--out", out, "--batch-size", "1", "--workers", "1"],
                               stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    part = tmp_path / "captions.jsonl.part-00000"
    deadline = time.time() + 120
    while not (part.exists() and part.read_text().count("\n") >= 4) and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    assert "interrupted" in stderr and "Run the same command again" in stderr
    assert [pathlib.Path(r["video"]).name for r in records(part)] == [f"0{i}.mp4" for i in range(4)]
    (many / "04.mp4").unlink()
    os.link(videos / "videos" / "a.mp4", many / "04.mp4")
    assert main_caption(many, "--out", out, "--max-new-tokens", 32) == 0
    assert sorted(r["video"] for r in records(out)) == sorted(str(p) for p in many.iterdir())


def test_sigterm_stops_like_sigint_with_its_workers(videos, tmp_path):
    """SIGTERM (a scheduler's stop) as SIGINT: exit 143, one line saying how to resume or merge, the captions done
    kept, and the DataLoader workers gone with the run (none orphaned)."""
    import psutil

    many = tmp_path / "many"
    many.mkdir()
    for i in range(6):
        if i != 4:
            os.link(videos / "videos" / "a.mp4", many / f"{i:02d}.mp4")
    os.mkfifo(many / "04.mp4")  # never written: the run is still going when the signal comes
    out = tmp_path / "captions.jsonl"
    process = subprocess.Popen([SCRIPT, "caption", many, "--out", out, "--batch-size", "1", "--workers", "2",
                                "--max-new-tokens", "4"], stderr=subprocess.PIPE, text=True)
    part = tmp_path / "captions.jsonl.part-00000"
    deadline = time.time() + 120
    while not (part.exists() and part.read_text().count("\n") >= 4) and time.time() < deadline:
        time.sleep(0.05)
    workers = psutil.Process(process.pid).children(recursive=True)
    assert workers, "the run has DataLoader workers"
    process.send_signal(signal.SIGTERM)
    stderr = process.communicate(timeout=60)[1]
    assert process.returncode == 143 and "Traceback" not in stderr, stderr
    assert "terminated" in stderr and "Run the same command again" in stderr and "pnd merge --out" in stderr
    assert len(records(part)) == 4  # the first window of four batches
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers left running: {alive}"


def test_batches_of_one_prompt_and_similar_length_give_the_records_of_one_video_at_a_time(videos, tmp_path,
                                                                                           monkeypatch):
    """Interleaved prompts of different lengths and videos of two frame sizes: the batched run sorts a window into
    one generate call per prompt and gives the records (and their order) of unbatched captioning."""
    import pnd.cli.caption

    names = ["a.mp4", "b.webm", "c.mp4"]
    for name in names:  # the same clips at a quarter of the pixels
        frames = read_video(videos / "videos" / name, 16)
        write_video(tmp_path / f"small-{name}", torch.nn.functional.interpolate(frames.float(), scale_factor=0.5).byte())
    paths = [videos / "videos" / n for n in names] + [tmp_path / f"small-{n}" for n in names]
    prompts = ["Describe the video.", "What colour is the moving shape? Answer with one word, please."]
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"video": str(p), "prompt": prompts[i % 2]}) + "\n" for i, p in enumerate(paths)))
    calls = []

    def spy(model, processor, frames, alpha, prompt, **kwargs):
        calls.append((prompt, len(frames)))
        return generate(model, processor, frames, alpha, prompt=prompt, **kwargs)

    generate = pnd.cli.caption.generate_captions
    monkeypatch.setattr(pnd.cli.caption, "generate_captions", spy)
    common = ["--max-new-tokens", 8, "--workers", 0]
    assert main_caption(manifest, "--out", tmp_path / "one.jsonl", "--batch-size", 1, *common) == 0
    calls.clear()
    assert main_caption(manifest, "--out", tmp_path / "batched.jsonl", "--batch-size", 4, *common) == 0
    assert sorted(calls) == [(prompts[0], 3), (prompts[1], 3)]  # in listed order: 4 calls of 2, 1, 1 and 1 video(s)
    assert records(tmp_path / "batched.jsonl") == records(tmp_path / "one.jsonl")
    assert [r["id"] for r in records(tmp_path / "batched.jsonl")] == [str(p.resolve()) for p in paths]


def test_captions_are_greedy_whatever_beams_the_checkpoint_sets(videos):
    """`pnd caption` says greedy: a checkpoint whose generation_config sets num_beams=3 made it beam search (and
    num_return_sequences=2 made it fail)."""
    from pnd.decoding.captioning import generate_captions
    from pnd.scoring.explain import explain

    model, processor = load_demo_model()
    pnd.attach(model)
    frames = [read_video(videos / "videos" / name, 8) for name in ("a.mp4", "c.mp4")]
    greedy = generate_captions(model, processor, frames, 0.5, max_new_tokens=8)
    model.generation_config.num_beams, model.generation_config.num_return_sequences = 3, 2
    assert generate_captions(model, processor, frames, 0.5, max_new_tokens=8) == greedy
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}],
        add_generation_prompt=True)
    inputs = processor(text=[prompt], videos=frames[:1], return_tensors="pt")
    beams = model.generate(**inputs, max_new_tokens=8, do_sample=False, logits_processor=[pnd.PriorNormalized(0.5)])
    assert beams.shape[0] == 2  # the checkpoint's defaults do reach a plain generate call
    explained = explain(model, processor, inputs, 0.5, max_new_tokens=8)  # `pnd explain`: greedy, and forced
    assert explained.normalized_text.strip() == greedy[0]
    assert explain(model, processor, inputs, 0.5, max_new_tokens=8, method=pnd.M3ID()).plain_text == \
        explained.plain_text
