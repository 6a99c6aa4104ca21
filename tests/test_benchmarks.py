"""Issue 7: the benchmark scripts run (tiny shapes), check pnd's tokens, and build the 7B shapes they claim."""

import sys
from pathlib import Path

import pytest
import torch

import pnd

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import bench_decode  # noqa: E402
import bench_prefill  # noqa: E402


def test_decode_benchmark_runs_and_reports_every_method(tmp_path):
    out = tmp_path / "RESULTS.md"
    bench_decode.main(["--size", "tiny", "--frames", "2", "--tokens", "3", "--naive-tokens", "2", "--modes-frames", "2",
                       "--modes-tokens", "2", "--repeats", "1", "--static", "skip", "--out", str(out)])
    text = out.read_text()
    for row in ("| plain |", "| plain, 2 rows |", "| pnd |", "| cfg |", "| mitigv VCD |", "| naive |",
                "| beam (4) | 8 |", "| sampling | 1 |"):
        assert row in text


def test_decode_benchmark_static_cache_part_keeps_the_other_sections(tmp_path):
    out = tmp_path / "RESULTS.md"
    out.write_text("# Results\n\n## Decoding: llava_onevision, tiny, CPU (2 threads)\n\nparts 1-2\n")
    bench_decode.main(["--size", "tiny", "--frames", "2", "--tokens", "3", "--repeats", "1", "--static", "only",
                       "--compile-backend", "eager", "--out", str(out)])
    text = out.read_text()
    assert "parts 1-2" in text and "## Decoding, static cache and torch.compile: llava_onevision, tiny" in text
    for row in ("| plain, static |", "| pnd, static |", "| plain, 2 rows, static, compiled |",
                "| pnd, static, compiled |"):
        assert row in text


def test_prefill_benchmark_runs_every_variant(tmp_path):
    out = tmp_path / "RESULTS.md"
    medians = bench_prefill.main(["--size", "tiny", "--frames", "2", "--repeats", "1", "--out", str(out)])
    assert list(medians) == list(bench_prefill.variants()) and all(t > 0 for t in medians.values())
    assert "| pnd (prior packed into the conditioned call) |" in out.read_text()


def test_token_check_is_not_vacuous():
    """The benchmark checks pnd's greedy tokens against the naive recompute: on its model they differ from plain's."""
    model = pnd.attach(bench_decode.build_model("llava_onevision", "tiny"))
    inputs, _ = bench_decode.video_inputs(model, "tiny", frames=2)
    bench_decode.check_tokens(model, inputs, 8)
    plain = bench_decode.generate(model, inputs, [], 8, do_sample=False)
    ours = bench_decode.generate(model, inputs, [pnd.PriorNormalized(bench_decode.ALPHA)], 8, do_sample=False)
    assert not torch.equal(plain, ours)


@pytest.mark.parametrize("arch, billions", [("llava_onevision", 8.0), ("qwen2_vl", 8.3)])
def test_7b_shapes(arch, billions):
    model = bench_decode.build_model(arch, "7b", device="meta", dtype=torch.bfloat16)
    assert abs(sum(p.numel() for p in model.parameters()) / 1e9 - billions) < 0.1


def test_caption_benchmark_runs_each_setting(tmp_path):
    import bench_caption

    out = tmp_path / "RESULTS.md"
    table = bench_caption.main(["--videos", "2", "--frames-per-video", "4", "--side", "32", "--max-new-tokens", "2",
                                "--settings", "1x0,1x1", "--out", str(out)])
    assert list(table) == [(1, 0), (1, 1)] and all(r["videos_per_s"] > 0 for r in table.values())
    assert "| 1 | 1 |" in out.read_text()
