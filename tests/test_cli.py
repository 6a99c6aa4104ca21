import pathlib
import subprocess
import sys

import pnd

SCRIPT = pathlib.Path(sys.executable).with_name("pnd")


def test_console_script_lists_models():
    out = subprocess.run([SCRIPT, "models"], capture_output=True, text=True, check=True).stdout.split()
    assert out == pnd.supported_model_types() and "llava_onevision" in out and "qwen2_vl" in out


def test_console_script_version():
    out = subprocess.run([SCRIPT, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"pnd {pnd.__version__}"
