"""Issue 6: on the bundled demo model, prior normalization measurably fixes prior-biased captions.

Everything is computed here from the shipped weights; no number is copied from a run.
"""

import pathlib
import subprocess
import sys
from unittest import mock

import pytest
import torch

import pnd
from pnd.cli import main
from pnd.demo import ALPHAS, ATTRIBUTES, evaluate, load_demo_model, prior_shares
from pnd.demo.moving import PLANTED
from pnd.io.video import list_videos, read_video

SCRIPT = pathlib.Path(sys.executable).with_name("pnd")


@pytest.fixture(scope="module")
def demo():
    model, processor = load_demo_model()
    return pnd.attach(model), processor


def test_normalization_raises_balanced_accuracy_on_the_uniform_test_set(demo):
    table = evaluate(*demo)
    plain, full = table[0.0], table[1.0]
    assert max(plain.values()) < 0.9  # plain decoding falls back on the planted prior on noisy clips
    for attribute in ATTRIBUTES:
        assert max(table[a][attribute] for a in ALPHAS if a > 0) >= plain[attribute] + 0.08
    assert sum(full.values()) / 2 >= sum(plain.values()) / 2 + 0.1


def test_measured_prior_concentrates_on_the_planted_attributes(demo):
    model, processor = demo
    shares = prior_shares(model, processor)
    for kind, planted in zip(ATTRIBUTES, PLANTED):
        assert max(shares[kind], key=shares[kind].get) == planted and shares[kind][planted] > 0.5
        assert sum(shares[kind].values()) == pytest.approx(1.0, abs=1e-4)

    # Independently: greedy decoding of the prior alone, token by token, says "small red", whatever the pixels.
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}],
        add_generation_prompt=True)
    inputs = processor(text=[prompt], videos=[read_video(list_videos([pnd.demo.SAMPLE_VIDEOS])[0], 8)],
                       return_tensors="pt")
    for _ in range(8):
        token = pnd.prior_logits(model, **inputs)[:, None].argmax(-1)
        inputs["input_ids"] = torch.cat([inputs["input_ids"], token], 1)
        inputs["attention_mask"] = torch.cat([inputs["attention_mask"], torch.ones_like(token)], 1)
    words = processor.decode(inputs["input_ids"][0, -8:]).split()
    assert words[:3] == ["a", PLANTED[1], PLANTED[0]]


def test_pnd_demo_command(tmp_path):
    out = tmp_path / "plots" / "demo.png"  # a folder that does not exist yet
    result = subprocess.run([SCRIPT, "demo", "--out", out], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    for name in ("medium_blue_square_moves_right.mp4", "| alpha | colour balanced accuracy", "| 0.0 (plain) |", "| 1.0 |"):
        assert name in result.stdout
    assert out.stat().st_size > 1000


def test_demo_compares_the_methods(demo, tmp_path, capsys):
    """`pnd demo --methods`: one table, plain first, each method at the paper's defaults and at a second setting; the
    plain row is `evaluate`'s alpha 0 on the same clips."""
    from pnd.demo import DEMO_METHODS, compare_methods

    rows = compare_methods(*demo, ["pai", "only", "vista"], per_pair=1)
    assert [label for label, _ in rows] == ["plain", "pai start_layer=0", "pai start_layer=0 alpha=1.0 gamma=2.0",
                                            "only", "only layer=1", "vista", "vista steer_strength=0.2"]
    assert rows[0][1] == evaluate(*demo, alphas=(0.0,), per_pair=1)[0.0]
    assert set(DEMO_METHODS) == {"cpn", "vcd", "icd", "m3id", "pai", "only", "vista"}
    capsys.readouterr()
    assert main(["demo", "--methods", "m3id,vista", "--per-pair", "1", "--out", str(tmp_path / "d.png")]) == 0
    printed = capsys.readouterr().out
    assert "| method | colour balanced accuracy | size balanced accuracy |\n|---|---|---|\n| plain |" in printed
    assert "| m3id forgetting_rate=0.2 gate=1.0 |" in printed and "| vista steer_strength=0.2 |" in printed
    with mock.patch("pnd.cli.demo.load_demo_model", side_effect=AssertionError("the demo model loaded")):
        assert main(["demo", "--methods", "dola"]) == 2  # refused before anything loads or prints
    printed = capsys.readouterr()
    assert printed.out == "" and printed.err.startswith("pnd demo: --methods takes names of cpn, vcd")


@pytest.mark.parametrize("argv, message", [
    (["--per-pair", "0"], "--per-pair takes a whole number of clips >= 1, got 0."),
    (["--noise", "7"], "--noise takes a level from 0 to 1, got 7.0."),
    (["--noise", "nan"], "--noise takes a level from 0 to 1, got nan."),
    (["--out", "{afile}/demo.png"], "{afile} is a file, not a folder; pick another --out."),
])
def test_demo_arguments_are_checked_before_anything_loads(tmp_path, capsys, argv, message):
    """--per-pair 0 failed in transformers after the sample captions; --out under a file after the whole table."""
    afile = tmp_path / "afile"
    afile.touch()
    argv = [arg.format(afile=afile) for arg in argv]
    with mock.patch("pnd.cli.demo.load_demo_model", side_effect=AssertionError("the demo model loaded")):
        assert main(["demo", *argv]) == 2
    assert capsys.readouterr().err == f"pnd demo: {message.format(afile=afile)}\n"

