#!/usr/bin/env bash
# Regenerate benchmarks/RESULTS.md on this machine (CPU: about 13 minutes on 2 cores; keep the machine idle).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[bench]"  # mitigv, the packaged peer
"$python" benchmarks/bench_decode.py --out benchmarks/RESULTS.md
"$python" benchmarks/bench_prefill.py --out benchmarks/RESULTS.md
"$python" benchmarks/bench_prefill.py --arch qwen2_vl --out benchmarks/RESULTS.md
"$python" benchmarks/bench_retrieval.py --out benchmarks/RESULTS.md
