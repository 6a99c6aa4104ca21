"""Helpers shared by the test modules (test modules import from here and from reference.py, never from each other)."""

import signal

import av
import numpy as np
import psutil
import torch

PROMPTS = ("Describe the video.", "what colour is the shape? answer with one word.")


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
