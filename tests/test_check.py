"""Issue 46's `pnd check`: pnd against the brute-force reference on this machine, one row per family."""

import subprocess
import sys

import pytest

from pnd.architectures.registry import Architecture
from pnd.cli import main
from pnd.testing.check import DEFAULT_FAMILIES

COLUMNS = ["family", "result", "greedy", "beam", "scorer", "floor", "tolerance"]


def rows_of(output: str) -> dict[str, list[str]]:
    lines = output.strip().splitlines()
    header = next(i for i, line in enumerate(lines) if line.split() == COLUMNS)
    return {line.split()[0]: line.split()[1:] for line in lines[header + 1:]}


def test_pnd_check_passes_on_the_default_families(capsys):
    assert main(["check"]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert list(rows) == list(DEFAULT_FAMILIES)
    for family, (result, *numbers) in rows.items():
        gaps, floor, tolerance = [float(n) for n in numbers if n != "-"][:-2], *map(float, numbers[-2:])
        assert result == "pass" and max(gaps) <= tolerance, family
        assert 0 < floor < tolerance < 1e-3, family  # float32: a floor of a few roundings, the suite's tolerance


def test_pnd_check_compares_a_family_with_forbidden_tokens_at_float32s_tolerance(capsys):
    """Chameleon's forward sets its image tokens' logits to the dtype's minimum: they are forbidden in pnd's scores and
    the reference's alike, and left out of the gaps and of the floor's rounding step (else a 1e38 gap, a 1e31
    floor)."""
    assert main(["check", "--families", "chameleon"]) == 0
    [(result, *numbers)] = rows_of(capsys.readouterr().out).values()
    assert result == "pass" and float(numbers[-1]) < 1e-3


def test_pnd_check_in_bfloat16_from_the_command_line():
    """The installed command, in bf16: its tolerance comes from bf16's floor, far above float32's."""
    result = subprocess.run([sys.executable, "-m", "pnd.cli", "check", "--dtype", "bfloat16", "--families",
                             "llava_onevision,qwen2_vl"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bfloat16" in result.stdout.splitlines()[0]
    rows = rows_of(result.stdout)
    assert list(rows) == ["llava_onevision", "qwen2_vl"]
    assert all(row[0] == "pass" and float(row[-2]) >= 2 ** -8 for row in rows.values())  # at least bf16's eps


def test_pnd_check_fails_on_a_planted_leak(capsys, monkeypatch):
    """A prior that sees one visual token (the expansion shifted by one) is caught: the row fails, the command
    exits 1."""
    expansion = Architecture.expansion
    monkeypatch.setattr(Architecture, "expansion", lambda self, *a, **k: expansion(self, *a, **k).roll(1, -1))
    assert main(["check", "--families", "llava_onevision"]) == 1
    [(result, *_)] = rows_of(capsys.readouterr().out).values()
    assert result == "FAIL"


@pytest.mark.parametrize("argv, message", [
    (["--families", "llava_onevision,nope"], "no tiny model of nope"),
    (["--device", "gpu"], "--device gpu: not a device name"),
    (["--families", ","], "--families: no tiny model of ','; pass some of: "),  # a TypeError after the header
    (["--families", ""], "--families: no tiny model of ''; pass some of: "),
])
def test_pnd_check_refuses_what_it_cannot_run(capsys, argv, message):
    assert main(["check", *argv]) == 2
    assert message in capsys.readouterr().err


def test_tiny_model_names_the_families_it_builds_for_one_it_does_not():
    """`tiny_model("llava_next")` (a supported type with no tiny builder) failed on an internal module import."""
    from pnd.testing import tiny_model

    with pytest.raises(ValueError, match=r"tiny_model builds no 'llava_next' model; it builds: llava_onevision, "):
        tiny_model("llava_next")
