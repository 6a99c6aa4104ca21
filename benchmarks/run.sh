#!/usr/bin/env bash
# Regenerate benchmarks/RESULTS.md on this machine (CPU: 16-19 minutes on 2 cores; keep the machine idle).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[bench]"  # mitigv, the packaged peer
"$python" benchmarks/bench_decode.py --out benchmarks/RESULTS.md
"$python" benchmarks/bench_prefill.py --out benchmarks/RESULTS.md
"$python" benchmarks/bench_prefill.py --arch qwen2_vl --out benchmarks/RESULTS.md
"$python" benchmarks/bench_retrieval.py --out benchmarks/RESULTS.md
for arch in qwen3_vl qwen3_5; do  # the newer families: a shorter run (16 frames, 8 tokens)
  "$python" benchmarks/bench_decode.py --arch "$arch" --frames 16 --tokens 8 --naive-tokens 2 --modes-frames 0 \
    --static skip --out benchmarks/RESULTS.md
  "$python" benchmarks/bench_prefill.py --arch "$arch" --frames 16 --repeats 9 --out benchmarks/RESULTS.md
done
for arch in qwen4_exp nemotron_h_omni; do  # the new layer types (recurrent, indexed): decoding only
  "$python" benchmarks/bench_decode.py --arch "$arch" --frames 16 --tokens 8 --naive-tokens 2 --modes-frames 0 \
    --static skip --out benchmarks/RESULTS.md
done
