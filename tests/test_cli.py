import json
import os
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


HELP = """
import contextlib, io, json, sys
from pnd.cli import main
shown = {}
for argv in (["--help"], ["--version"], ["merge", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
        main(argv)
    shown[" ".join(argv)] = [out.getvalue(), "torch" in sys.modules]
print(json.dumps(shown))
"""


def test_help_and_version_load_no_torch_and_a_commands_help_shows_its_arguments():
    """`pnd --help` and `pnd --version` answer at once: only the command asked for is imported."""
    result = subprocess.run([sys.executable, "-c", HELP], capture_output=True, text=True, check=True)
    shown = json.loads(result.stdout.splitlines()[-1])
    text, torch_loaded = shown["--help"]
    assert not torch_loaded
    for command in ("models", "retrieve", "caption", "merge", "demo", "explain", "sweep", "check"):
        assert command in text
    assert shown["--version"] == [f"pnd {pnd.__version__}\n", False]
    assert "--out OUT" in shown["merge --help"][0]
    assert not shown["merge --help"][1]  # merging part files needs no torch


def test_a_reader_that_leaves_early_ends_the_command_without_a_traceback():
    """`pnd models | head`: the list's rest had no reader, and Python printed a BrokenPipeError traceback."""
    reader, writer = os.pipe()
    os.close(reader)  # the reader has left before anything is written
    result = subprocess.run([SCRIPT, "models", "--families"], stdout=writer, stderr=subprocess.PIPE, text=True)
    os.close(writer)
    assert result.returncode == 1 and result.stderr == ""
