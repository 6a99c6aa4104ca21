"""Issue 7: the benchmark scripts run (tiny shapes), check pnd's tokens, and build the 7B shapes they claim."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import torch
from transformers import LogitsProcessor

import pnd

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

import baselines  # noqa: E402
import bench_decode  # noqa: E402
import bench_prefill  # noqa: E402
import gpu_parts  # noqa: E402
import timing  # noqa: E402

AGREEMENTS = re.compile(r"Greedy tokens in bfloat16 \((\d+) tokens, batch (\d+), dynamic cache\) equal before the first "
                        r"difference: pnd against the naive recompute (\d+)/(\d+) \(\S+\), plain against a plain "
                        r"recompute without cache \(the floor\) (\d+)/(\d+) \(\S+\)\.")


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
                "| pnd, static, compiled |", "| plain, 2 rows, dynamic |", "| pnd, dynamic, padded |"):
        assert row in text
    for setting in ("dynamic", "dynamic, padded", "static", "static, compiled"):
        assert f"pnd, {setting}: " in text and f"pnd, {setting}: no fixed cost" not in text


def test_prefill_benchmark_runs_every_variant(tmp_path):
    out = tmp_path / "RESULTS.md"
    medians = bench_prefill.main(["--size", "tiny", "--frames", "2", "--repeats", "1", "--out", str(out)])
    assert list(medians) == list(bench_prefill.variants()) and all(t > 0 for t in medians.values())
    assert "| pnd (prior packed into the conditioned call) |" in out.read_text()


@pytest.mark.parametrize("arch", ["qwen3_vl", "qwen3_5"])
def test_decode_and_prefill_benchmarks_run_on_qwen3_families(arch, tmp_path, capsys):
    """Qwen3-VL and the hybrid Qwen3.5 (timestamped frames inside the template's delimiters): the token check
    against the naive recompute (the kept tokens alone for Qwen3.5's recurrent layers) passes, every row is there;
    Qwen3.5 skips the static-cache part, which pnd's static cache cannot hold."""
    out = tmp_path / "RESULTS.md"
    bench_decode.main(["--arch", arch, "--size", "tiny", "--frames", "2", "--tokens", "3", "--naive-tokens", "2",
                       "--modes-frames", "0", "--repeats", "1", "--static", "with" if arch == "qwen3_5" else "skip",
                       "--out", str(out)])
    medians = bench_prefill.main(["--arch", arch, "--size", "tiny", "--frames", "2", "--repeats", "1", "--out", str(out)])
    text = out.read_text()
    for row in ("| plain |", "| plain, 2 rows |", "| pnd |", "| naive |", "| pnd, prior in its own call |"):
        assert row in text
    assert f"## Decoding: {arch}, tiny" in text and all(t > 0 for t in medians.values())
    assert ("Part 3 skipped" in capsys.readouterr().out) == (arch == "qwen3_5")
    assert "static cache" not in text


@pytest.mark.parametrize("arch, modes_frames", [("qwen4_exp", 0), ("nemotron_h_omni", 2)])
def test_decode_benchmark_runs_on_the_new_layer_types(arch, modes_frames, tmp_path, capsys):
    """Qwen4 (Gated DeltaNet, indexed attention) and Nemotron-H Omni (Mamba-2; prompts from its own processor): the
    token check against the naive recompute on the kept tokens alone passes, every row is there, no static part.
    Qwen4 skips part 2 (beam, sampling, batch 8): over a minute on transformers' reference Gated DeltaNet kernels,
    whose beam search and padded batches `test_exactness.py` checks against the reference."""
    out = tmp_path / "RESULTS.md"
    bench_decode.main(["--arch", arch, "--size", "tiny", "--frames", "2", "--tokens", "3", "--naive-tokens", "2",
                       "--modes-frames", str(modes_frames), "--modes-tokens", "2", "--repeats", "1", "--out", str(out)])
    text = out.read_text()
    part_2 = ("| beam (4) | 8 |", "| sampling | 8 |") if modes_frames else ()
    for row in ("| plain |", "| plain, 2 rows |", "| pnd |", "| naive |", *part_2):
        assert row in text
    assert f"## Decoding: {arch}, tiny" in text and "Part 3 skipped" in capsys.readouterr().out


def test_decode_benchmark_in_bf16_reports_both_agreements(tmp_path, capsys):
    """In bf16 the token checks (batch 1, and batch 8 in part 2) report pnd's agreement with the naive recompute and
    the floor's, plain `generate` against a plain recompute without a cache, and the tables carry them."""
    out = tmp_path / "RESULTS.md"
    bench_decode.main(["--size", "tiny", "--dtype", "bfloat16", "--frames", "2", "--tokens", "3", "--naive-tokens", "2",
                       "--modes-frames", "2", "--modes-tokens", "2", "--repeats", "1", "--static", "skip",
                       "--out", str(out)])
    printed, text = capsys.readouterr().out, out.read_text()
    found = [tuple(map(int, match)) for match in AGREEMENTS.findall(text)]
    assert [(tokens, batch) for tokens, batch, *_ in found] == [(8, 1), (4, 8)]
    assert all(ours <= total == tokens * batch and floor <= total == floor_total
               for tokens, batch, ours, total, floor, floor_total in found)
    assert AGREEMENTS.match(printed) and "| pnd |" in text and "| beam (4) | 8 |" in text  # printed first
    assert "1 runs per method and mode after a warm-up run" in text


class WithoutPrior(LogitsProcessor):
    """A planted wrong naive recompute: plain scores, no prior."""

    def __init__(self, model, inputs):
        pass

    def __call__(self, input_ids, scores):
        return scores


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_token_check_stops_on_a_float32_difference_and_reports_a_bf16_one(dtype, monkeypatch):
    """A difference from the naive recompute (planted) stops the benchmark in float32; in bf16 it is reported."""
    monkeypatch.setattr(baselines, "NaivePrior", WithoutPrior)
    model = pnd.attach(bench_decode.build_model("llava_onevision", "tiny", dtype=dtype))
    inputs, _ = bench_decode.video_inputs(model, "tiny", frames=2)
    if dtype == torch.float32:
        with pytest.raises(AssertionError, match="differ from the naive recompute"):
            bench_decode.check_tokens(model, inputs, 8)
        return
    tokens, batch, ours, total, floor, floor_total = map(int, AGREEMENTS.fullmatch(
        bench_decode.check_tokens(model, inputs, 8)).groups())
    assert (tokens, batch, total, floor_total) == (8, 1, 8, 8) and ours < 8


def test_measure_all_warms_each_method_up_then_times_round_robin():
    """A warm-up run of each method (`warmup` tokens, part 2: full length), then the timed runs in rounds, the 1-token
    prefill runs, and one run for peak memory."""
    calls = []

    def method(name):
        def run(tokens, clock):
            calls.append((name, tokens))
            for _ in range(tokens):
                clock(None, None)
        return run

    measured = timing.measure_all({"a": (method("a"), 4), "b": (method("b"), 4)}, torch.device("cpu"), repeats=2,
                                  warmup=4)
    assert calls == [("a", 4), ("b", 4)] * 3 + [("a", 1), ("b", 1)] * 3 + [("a", 4), ("b", 4)]
    assert all(isinstance(m, timing.Measured) for m in measured.values())


@pytest.mark.parametrize("arch, seed", [("llava_onevision", 0), ("qwen3_vl", 0), ("qwen3_5", 2), ("qwen4_exp", 0),
                                        ("nemotron_h_omni", 1)])
def test_token_check_is_not_vacuous(arch, seed):
    """The benchmark checks pnd's greedy tokens against the naive recompute: on its model they differ from plain's
    (a seed whose random weights make the prior matter within 8 tokens)."""
    model = pnd.attach(bench_decode.build_model(arch, "tiny", seed=seed))
    inputs, _ = bench_decode.video_inputs(model, "tiny", frames=2)
    bench_decode.check_tokens(model, inputs, 8)
    plain = bench_decode.generate(model, inputs, [], 8, do_sample=False)
    ours = bench_decode.generate(model, inputs, [pnd.PriorNormalized(bench_decode.ALPHA)], 8, do_sample=False)
    assert not torch.equal(plain, ours)


# Published sizes: Qwen3-VL-8B-Instruct 8.77 B parameters; Qwen3.5-9B's language model 8.95 B (its model card:
# 32 layers, 4096 wide, 248320-token vocabulary), 9.41 B with the 27-block vision tower.
@pytest.mark.parametrize("arch, billions", [("llava_onevision", 8.0), ("qwen2_vl", 8.3), ("qwen3_vl", 8.77),
                                            ("qwen3_5", 9.41)])
def test_7b_shapes(arch, billions):
    model = bench_decode.build_model(arch, "7b", device="meta", dtype=torch.bfloat16)
    assert abs(sum(p.numel() for p in model.parameters()) / 1e9 - billions) < 0.1


@pytest.mark.parametrize("arch, layers", [
    ("qwen4_exp", {"linear_attention": 30, "indexed_attention": 10}),
    ("nemotron_h_omni", {"linear_attention": 24, "full_attention": 4, "mlp": 24}),  # Nemotron-H-8B's 52 blocks
])
def test_7b_shapes_of_the_new_layer_types(arch, layers):
    """7B-class shapes ready for a GPU run: between 7 and 9 B parameters, with the real models' layer mix."""
    model = bench_decode.build_model(arch, "7b", device="meta", dtype=torch.bfloat16)
    assert 7.0 < sum(p.numel() for p in model.parameters()) / 1e9 < 9.0
    types = model.config.get_text_config(decoder=True).layer_types
    assert {t: types.count(t) for t in set(types)} == layers


def test_qwen3_5_7b_shape_is_qwen3_5_9b_language_model():
    model = bench_decode.build_model("qwen3_5", "7b", device="meta", dtype=torch.bfloat16)
    language = sum(p.numel() for name, p in model.named_parameters() if not name.startswith("model.visual"))
    assert abs(language / 1e9 - 8.95) < 0.01
    assert model.config.text_config.layer_types.count("full_attention") == 8  # one in four layers


def test_caption_benchmark_runs_each_setting(tmp_path):
    import bench_caption

    out = tmp_path / "RESULTS.md"
    table = bench_caption.main(["--videos", "2", "--frames-per-video", "4", "--side", "32", "--max-new-tokens", "2",
                                "--settings", "1x0,1x1", "--out", str(out)])
    assert list(table) == [(1, 0), (1, 1)] and all(r["videos_per_s"] > 0 for r in table.values())
    assert "| 1 | 1 |" in out.read_text()


@pytest.mark.parametrize("method", ["vcd", "icd", "m3id", "pai", "only", "vista"])
def test_decode_benchmark_method_rows(method, tmp_path):
    """`--method`: plain, plain on 2 rows, pnd's method and mitigv's (LLaVA-OneVision), with their tokens compared and
    pnd's method set against plain on 2 rows and mitigv's."""
    out = tmp_path / "RESULTS.md"
    bench_decode.main(["--size", "tiny", "--frames", "2", "--tokens", "3", "--modes-frames", "0", "--repeats", "1",
                       "--static", "skip", "--method", method, "--out", str(out)])
    text = out.read_text()
    label = method.upper()
    assert f"## Decoding, {method}: llava_onevision, tiny" in text
    for row in ("| plain |", "| plain, 2 rows |", f"| pnd {label} |"):
        assert row in text
    assert re.search(rf"pnd's {label} against plain on 2 rows: per token \d+\.\d\dx, prefill \d+\.\d\dx\.", text)
    if importlib.util.find_spec("mitigv"):
        # mitigv's PAI prefill attends without a causal mask under SDPA (docs/methods.md, "pnd and mitigv")
        agreement = "" if method == "pai" else "the same"
        assert f"| mitigv {label} |" in text and f"Greedy tokens of pnd's {label} and mitigv's: {agreement}" in text
        assert re.search(r"mitigv's per token: \d+\.\d\dx pnd's, \d+\.\d\dx plain on 2 rows'", text)


def test_gpu_parts_writes_each_part_as_it_ends(tmp_path, monkeypatch):
    """`gpu_check.sh`'s benchmark step: one file per part; a part that fails is written down and the next still runs."""
    def broken(*args):
        raise RuntimeError("planted")

    monkeypatch.setattr(gpu_parts, "static_cache", broken)
    gpu_parts.main([str(tmp_path), "--parts", "peers,m3id,static", "--size", "tiny", "--device", "cpu", "--dtype",
                    "float32", "--frames", "2", "--tokens", "3", "--repeats", "1"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "llava_onevision_m3id.md", "llava_onevision_peers.md", "llava_onevision_static.md"]
    assert "| pnd |" in (tmp_path / "llava_onevision_peers.md").read_text()
    assert "| pnd M3ID |" in (tmp_path / "llava_onevision_m3id.md").read_text()
    assert "RuntimeError: planted" in (tmp_path / "llava_onevision_static.md").read_text()
