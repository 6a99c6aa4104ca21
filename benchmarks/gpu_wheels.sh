#!/usr/bin/env bash
# Wheels of what the `device` tool's GPU machine lacks for benchmarks/gpu_check.sh, into ./.whl (git ignores it; about
# 55 MB, under the 64 MiB a call carries with the working tree). Its python 3.12 image holds torch, accelerate,
# tokenizers, huggingface-hub, safetensors, pytest and pytest-xdist, but transformers 5.17 (pnd needs 5.23) and none of
# mitigv (the benchmarks' peer), bitsandbytes (tests/test_quantized.py), num2words (SmolVLM's processor) with its
# docopt. gpu_check.sh installs ./.whl, where it is there, before anything else. Run here, once, from the root:
#   bash benchmarks/gpu_wheels.sh            # then run(..., carry=[".whl"]) on the device (docs/testing.md)
# PYTHON_VERSION=3.11 gives the same set for a python 3.11 (a CPU rehearsal of the install step).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
version=${PYTHON_VERSION:-3.12}
rm -rf .whl && mkdir .whl
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
           manylinux2014_x86_64 manylinux1_x86_64; do platforms+=(--platform "$tag"); done
"$python" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version "$version" --implementation cp "${platforms[@]}" -d .whl \
  transformers==5.23.0 mitigv==0.1.7 bitsandbytes==0.50.2 num2words==0.5.14 regex==2026.11.19
"$python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w .whl docopt==0.6.2  # an sdist only: built here
du -sh .whl
