"""README.md's ```python blocks run as written, in order, in one namespace, on a tiny model.

The README loads a real checkpoint by its hub id and reads a video from disk. Here the tiny LLaVA-OneVision of
`pnd.testing` is saved with `save_pretrained` into a folder that replaces the hub id, and a small mp4 is written under
the file name the README reads, in the folder the blocks run from. Nothing else of the blocks is changed, so an API
the README names that does not exist, or a call that fails, fails this test at the README's own line.
"""

import re
from pathlib import Path

import pytest
import torch

from pnd.testing import tiny_model

from helpers import write_mp4

README = Path(__file__).parents[1] / "README.md"
HUB_ID = re.compile(r"(['\"])(llava-hf/llava-onevision-qwen2-[0-9.]+b-ov-hf)\1")  # a LLaVA-OneVision checkpoint
VIDEO_FILE = re.compile(r"read_video\((['\"])([^'\"]+)\1")


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number in the file, code) of every ```python block of a Markdown text.

    Example:
        >>> python_blocks("intro\\n```python\\nx = 1\\n```\\n```bash\\nls\\n```\\n")
        [(3, 'x = 1\\n')]
    """
    return [(text[:match.start(1)].count("\n") + 1, match.group(1))
            for match in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny LLaVA-OneVision saved as a hub checkpoint is: config, weights, processor with its chat template."""
    folder = tmp_path_factory.mktemp("checkpoint")
    model, processor = tiny_model("llava_onevision")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def test_the_readme_loads_a_real_checkpoint_and_a_video_file():
    code = "".join(block for _, block in python_blocks(README.read_text()))
    assert HUB_ID.search(code), "the quickstart should load a real checkpoint by its hub id"
    assert "from_pretrained" in code and "apply_chat_template" in code and VIDEO_FILE.search(code)
    assert "PriorNormalized" in code and "CaptionScorer" in code


def test_readme_python_blocks_run_on_a_tiny_model(checkpoint, tmp_path, monkeypatch, capsys):
    blocks = python_blocks(README.read_text())
    for _, block in blocks:
        for match in VIDEO_FILE.finditer(block):
            write_mp4(tmp_path / match.group(2), frames=8)
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    for line, block in blocks:
        code = HUB_ID.sub(lambda m: repr(str(checkpoint)), block)
        # blank lines before the block: a traceback names README.md and the line the failing code has there
        exec(compile("\n" * (line - 1) + code, str(README), "exec"), namespace)

    # what the quickstart promises: plain and normalized answers after the prompt, printed
    inputs, plain, normalized = namespace["inputs"], namespace["plain"], namespace["normalized"]
    prompt = inputs["input_ids"]
    for out in (plain, normalized):
        assert torch.equal(out[:, :prompt.shape[1]], prompt) and out.shape[1] > prompt.shape[1]
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed[:2]] == ["plain", "normalized"]
    # the retrieval block: one row of scores per video, one column per caption, the best caption printed
    scores, captions = namespace["scores"], namespace["captions"]
    assert scores.shape == (1, len(captions)) and torch.isfinite(scores).all()
    assert printed[2] in captions


def test_the_readme_stays_a_short_guide():
    """At most 250 lines: tables and notes that grow with the families live in docs/families.md, linked from README."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move reference material to docs/"
    assert "(docs/families.md)" in README.read_text()
