#!/usr/bin/env bash
# Everything a lent GPU should run, inside a time budget (default 540 s), from the repository's root on a CUDA machine
# whose python has torch and the project (docs/testing.md, "On a GPU"):
#   bash benchmarks/gpu_check.sh OUTDIR [SECONDS]
# Wheels in ./.whl (benchmarks/gpu_wheels.sh) are installed first, into /tmp/site, ahead of the machine's packages.
# 0. `pnd check` on CUDA in fp32 and bf16 (OUTDIR/check_*.txt); 1. the suite on CUDA in fp32 (PND_TEST_DEVICE=cuda),
#    in chunks, without the tests of files, CLIs and lmms-eval (they need av, an installed `pnd`, lmms-eval); each
#    prints its failures with their reasons as it ends and leaves its log in OUTDIR (OUTDIR/summary.txt
#    gathers them); 2. the bf16 and fp16 subset (tests/test_bf16.py); 3. the 7B-shape benchmark parts (benchmarks/gpu_parts.py,
#    2 repeats), each table written to OUTDIR as it ends, in the order of the open questions: static (issue 47's
#    per-step cost), vcd and icd (their prefill), peers, pai, only, vista (issue 45's cost), m3id, modes; 4. the prior's
#    prefill (benchmarks/bench_prefill.py, 5 rounds: where the packed prefill's time goes, OUTDIR/prefill.md).
# A step gets what is left of the budget, at most its own share; a step cut at its limit keeps what it wrote.
set -u
out=${1:?usage: bash benchmarks/gpu_check.sh OUTDIR [SECONDS]}
end=$((SECONDS + ${2:-540}))
python=${PYTHON:-python3}
workers=${WORKERS:-8}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false PND_TEST_DEVICE=${PND_TEST_DEVICE:-cuda} PND_TEST_DTYPE=float32
if [ -d .whl ]; then  # carried wheels of what the machine lacks (benchmarks/gpu_wheels.sh), ahead of its own packages
  site=${WHEEL_SITE:-/tmp/site}
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    > "$out/wheels.txt" 2>&1 || { echo "installing .whl failed: $out/wheels.txt"; cat "$out/wheels.txt"; exit 1; }
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}  # pnd from this checkout
io="not pnd_caption and not pnd_sweep and not lmms_eval and not videos_given_as_files"  # files, CLIs, lmms-eval
left() { local rest=$((end - SECONDS)); [ "$rest" -lt "$1" ] && echo "$rest" || echo "$1"; }

"$python" -c "import torch, transformers, pnd; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, 'pnd', pnd.__version__, torch.cuda.get_device_name() \
if torch.cuda.is_available() else 'no CUDA device')" | tee "$out/env.txt"

chunk() {  # chunk NAME SECONDS PYTEST-ARGS...: one part of the suite, its failures and reasons printed as it ends
  local name=$1 share=$2; shift 2
  local limit; limit=$(left "$share")
  [ "$limit" -gt 10 ] || { echo "$name: skipped, the budget is spent" | tee -a "$out/summary.txt"; return; }
  timeout "$limit" "$python" -m pytest -p no:cacheprovider -n "$workers" --maxprocesses "$workers" -q -rf \
    --tb=line -k "$io" "$@" > "$out/pytest_$name.txt" 2>&1
  local status=$?
  { echo "== $name (exit $status$([ "$status" -eq 124 ] && echo ', cut at its limit')): $(tail -n 1 "$out/pytest_$name.txt")"
    grep -E '^FAILED|^ERROR' "$out/pytest_$name.txt"; } | tee -a "$out/summary.txt"
}

for dtype in float32 bfloat16; do  # pnd check first: the user's own check of exactness, one row per family
  timeout "$(left 60)" "$python" -m pnd.cli check --device "$PND_TEST_DEVICE" --dtype $dtype > "$out/check_$dtype.txt" 2>&1
  echo "== pnd check $dtype (exit $?)" | cat - "$out/check_$dtype.txt" | tee -a "$out/summary.txt"
done

chunk exactness 90 tests/test_exactness.py tests/test_families.py
chunk methods 60 tests/test_methods.py tests/test_interventions.py
chunk layers 60 tests/test_hybrid.py tests/test_layer_kinds.py tests/test_generate_features.py tests/test_static_compile.py
chunk scoring 40 tests/test_scoring.py tests/test_device_guard.py tests/test_quantized.py
chunk bf16 30 tests/test_bf16.py

limit=$(left 240)
if [ "$limit" -gt 30 ]; then
  # shellcheck disable=SC2086  # BENCH_ARGS: several arguments (a CPU smoke run: --size tiny --device cpu ...)
  timeout "$limit" "$python" benchmarks/gpu_parts.py "$out/bench" --parts static,vcd,icd,peers,pai,only,vista,m3id,modes \
    ${BENCH_ARGS:---size 7b --device cuda --dtype bfloat16 --repeats 2} > "$out/bench.log" 2>&1
  echo "== benchmarks (exit $?): $(ls "$out/bench" 2>/dev/null | tr '\n' ' ')" | tee -a "$out/summary.txt"
else
  echo "benchmarks: skipped, the budget is spent" | tee -a "$out/summary.txt"
fi

limit=$(left 60)
if [ "$limit" -gt 20 ]; then
  # shellcheck disable=SC2086
  timeout "$limit" "$python" benchmarks/bench_prefill.py --out "$out/prefill.md" \
    ${PREFILL_ARGS:---size 7b --device cuda --dtype bfloat16 --repeats 5} > "$out/prefill.log" 2>&1
  echo "== prior prefill (exit $?): $(tail -n 6 "$out/prefill.log")" | tee -a "$out/summary.txt"
else
  echo "prior prefill: skipped, the budget is spent" | tee -a "$out/summary.txt"
fi
