import functools
import os

import pytest
import torch

from helpers import DEVICE, DTYPE, tiny_model

# one thread per pytest-xdist worker (CI's 2 cores run 2 workers), 2 in one process, unless the caller chose
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)))
if DEVICE.type == "cuda":  # bit-for-bit comparisons (alpha=0 is plain generate): deterministic kernels, no TF32
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when CUDA starts, which it has not yet
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


@pytest.fixture(autouse=True)
def _same_threads_after_each_test():
    """A test that sets torch's thread count (`bench_prefill.main` sets its `--threads`, 2 by default) would leave every
    later test of its worker with it: two workers of two threads each on CI's 2 cores spend several times the CPU."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@functools.cache
def _cached(model_type):
    return tiny_model(model_type)


@functools.cache
def _built_attention(model_type) -> str:
    """The attention implementation the cached tiny model was built with: SDPA, or eager where transformers' family
    supports no other (Inkling 2)."""
    return _cached(model_type)[0].config.get_text_config(decoder=True)._attn_implementation


@pytest.fixture
def tiny():
    """tiny("qwen2_vl") -> (model, processor); models are built once per session and detached after a test."""
    import pnd
    from pnd.architectures.reported import bind_processor

    used = []

    def get(model_type):
        model, processor = _cached(model_type)
        bind_processor(model, processor)  # as tiny_model binds it (the detach after each test unbinds it)
        used.append((model_type, model))
        return model, processor

    yield get
    for model_type, model in used:
        pnd.detach(model)
        # the cached models are shared by every later test: a test that changes one must use its own
        assert model.dtype == DTYPE, "a test left a cached tiny model in another dtype"
        assert model.config.get_text_config(decoder=True)._attn_implementation == _built_attention(model_type), \
            "a test left a cached tiny model with another attention implementation"


@pytest.fixture
def no_model(monkeypatch):
    """Any `pnd.io.loading.load_model` call fails the test: what it checks must be refused before a model loads."""
    import pnd.io.loading

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")
    monkeypatch.setattr(pnd.io.loading, "load_model", refuse)
