#!/usr/bin/env bash
# Install pnd with its whole stack into a virtual environment (./.venv, or $PND_VENV). Safe to re-run.
#   bash install.sh
set -euo pipefail
cd "$(dirname "$0")"
venv=${PND_VENV:-.venv}
python=${PYTHON:-python3}

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip() { "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"; }
# torch first and alone, so the exact pin picks the local CPU wheel where the machine has one.
pip -c constraints.txt torch==2.13.0
pip -c constraints.txt -e ".[test]"
"$venv/bin/python" tools/fix_torchvision.py
"$venv/bin/python" - <<'PY'
import torch, torchvision, transformers, accelerate, lmms_eval, pnd
from transformers import LlavaOnevisionProcessor, LlavaOnevisionVideoProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor
print(f"pnd {pnd.__version__}: torch {torch.__version__}, torchvision {torchvision.__version__}, "
      f"transformers {transformers.__version__}, lmms-eval ready")
PY
