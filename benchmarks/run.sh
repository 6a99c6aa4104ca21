#!/usr/bin/env bash
# Regenerate benchmarks/RESULTS.md (CPU, about 5 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
"$python" benchmarks/bench_decode.py --tokens 32 --repeats 3 --out benchmarks/RESULTS.md
"$python" benchmarks/bench_retrieval.py --out benchmarks/RESULTS.md
