"""Helpers shared by the test modules (test modules import from here and from pnd.testing.reference, never from each
other)."""

import os
import signal
from pathlib import Path

import numpy as np
import psutil
import torch
from transformers import BatchFeature

import pnd.testing
from pnd.testing.check import PROMPTS  # noqa: F401 (the suite's prompts: those `pnd check` runs)

# the suite's device and dtype (docs/testing.md, "On a GPU"): the tiny models, their inputs and what a test builds
DEVICE = torch.device(os.environ.get("PND_TEST_DEVICE", "cpu"))
DTYPE = getattr(torch, os.environ.get("PND_TEST_DTYPE", "float32"))


def on_device(inputs):
    """Processor outputs (a BatchFeature or a dict) on DEVICE, their floating tensors (pixels) in DTYPE."""
    return BatchFeature(dict(inputs)).to(DEVICE, DTYPE)


def on_device_model(model):
    """`model` on DEVICE, in DTYPE (`pnd.testing.on_device`)."""
    return pnd.testing.on_device(model, DEVICE, DTYPE)


def tiny_model(model_type: str, **kwargs):
    """`pnd.testing.tiny_model` on DEVICE, in DTYPE (`on_device_model`)."""
    model, processor = pnd.testing.tiny_model(model_type, **kwargs)
    return on_device_model(model), processor


def tiny_inputs(*args, **kwargs):
    """`pnd.testing.tiny_inputs` on DEVICE (`on_device`)."""
    return on_device(pnd.testing.tiny_inputs(*args, **kwargs))


PND_ROOT = Path(pnd.__file__).parent


def pnd_call_site(frame, parts) -> str | None:
    """`file:line` (relative to pnd's package) of `frame` when its file lies in one of `parts` (top-level entries of
    the package: "decoding", "attachment.py", ...), else None: tells pnd's own calls from transformers' and torch's in
    a `TorchFunctionMode` (give it `inspect.currentframe().f_back`)."""
    path = Path(frame.f_code.co_filename)
    if path.is_relative_to(PND_ROOT) and path.relative_to(PND_ROOT).parts[0] in parts:
        return f"{path.relative_to(PND_ROOT)}:{frame.f_lineno}"
    return None


def assert_scores_close(got, want):
    """pnd's scores equal the reference's on every finite token; a token at the dtype's minimum in pnd's scores (a
    logit the model's forward set to it: Chameleon's image tokens, whose prior log-probability pnd floors at -1e30)
    is below -1e30 in the reference's too (there `min - alpha * min`)."""
    forbidden = got == torch.finfo(got.dtype).min
    allowed = torch.isfinite(got) & ~forbidden
    torch.testing.assert_close(got[allowed], want[allowed], atol=1e-4, rtol=0)
    assert (want[forbidden] < -1e30).all()


def write_mp4(path, frames):
    """A 32x32 mpeg4 file of `frames` grey frames, each brighter than the last."""
    import av  # here: a GPU check's machine may lack it (benchmarks/gpu_check.sh leaves out the tests that write files)

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=5)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for i in range(frames):
            image = np.full((32, 32, 3), 20 * i, dtype=np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def rank_process(job, rank: str):
    """The process of `rank` under the launcher `job` (not its DataLoader workers, which inherit RANK)."""
    def rank_of(process):
        try:
            return process.environ().get("RANK")
        except psutil.Error:  # gone or a zombie
            return None

    [process] = [p for p in job.children(recursive=True) if rank_of(p) == rank and rank_of(p.parent()) != rank]
    return process


def interruptible():
    """`preexec_fn` for a child that a test interrupts: SIGINT back to its default, so that Python raises
    KeyboardInterrupt in it even when the test run itself ignores SIGINT (a job started with `&` by a
    non-interactive shell, as CI may be)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def language_model_calls(model, run):
    """The keyword arguments of every language-model call made while `run()` runs, and its result."""
    calls = []
    hook = model.model.language_model.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(kwargs), with_kwargs=True)
    try:
        return calls, run()
    finally:
        hook.remove()


def eos(model) -> list:
    """The model's end-of-sequence token ids."""
    ids = model.generation_config.eos_token_id
    return ids if isinstance(ids, list) else [ids]


def assert_method_scores(model, got, want):
    """generate's scores (batch, steps, vocab) are a decoding method's reference scores: -inf where the reference has
    -inf, and at the end-of-sequence tokens `min_new_tokens` bans."""
    finite = torch.isfinite(want)
    cut = finite & ~torch.isfinite(got)
    assert not cut[..., [i for i in range(cut.shape[-1]) if i not in eos(model)]].any()
    finite &= ~cut
    assert torch.equal(torch.isfinite(got), finite)
    torch.testing.assert_close(got[finite], want[finite].to(got.device), atol=2e-4, rtol=0)


def refusal(*argv) -> str:
    """The message a `pnd` command, run in this process, exits with: a `SystemExit` whose message is one line (the
    console script prints it on stderr and exits 1)."""
    import pytest

    from pnd.cli import main

    with pytest.raises(SystemExit) as refused:
        main([str(arg) for arg in argv])
    message = refused.value.code
    assert isinstance(message, str) and "\n" not in message, message
    return message
