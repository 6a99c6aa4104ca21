"""Quantized models (bitsandbytes, the `quant` extra): `load_model(..., load_in_4bit=True)` or `load_in_8bit=True` on a
tiny model saved locally, through `from_pretrained` as a user loads one, on the suite's device (bitsandbytes' CPU
backend by default; its CUDA kernels under `PND_TEST_DEVICE=cuda`).

pnd's greedy decoding, on the dynamic and the static cache, equals the brute-force reference run on the same
quantized model (its layers are bitsandbytes' `Linear4bit` / `Linear8bitLt`), and alpha 0 is plain `generate`.
"""

import pytest
import torch

import pnd
from pnd.io.loading import load_model
from pnd.testing import tiny_model
from pnd.testing.reference import greedy

from helpers import DEVICE, PROMPTS, assert_scores_close, tiny_inputs

STEPS = 4
LAYERS = {4: "Linear4bit", 8: "Linear8bitLt"}


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_a_quantized_model_decodes_as_the_reference(tmp_path, model_type, bits):
    pytest.importorskip("bitsandbytes")
    saved, processor = tiny_model(model_type)
    saved.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    model, processor = load_model(str(tmp_path), device=str(DEVICE), **{f"load_in_{bits}bit": True})
    assert type(model.get_decoder().layers[0].self_attn.q_proj).__name__ == LAYERS[bits]
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    length = inputs["input_ids"].shape[1]
    reference_tokens, reference_scores = greedy(model, inputs, 0.5, STEPS)

    def decode(alpha, **kwargs):
        return model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                              logits_processor=[pnd.PriorNormalized(alpha)], output_scores=True,
                              return_dict_in_generate=True, **kwargs)

    plain = model.generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False)
    pnd.attach(model, processor)
    for cache in (None, "static"):
        out = decode(0.5, cache_implementation=cache)
        assert torch.equal(out.sequences[:, length:], reference_tokens), cache
        for got, want in zip(out.scores, reference_scores, strict=True):
            assert_scores_close(got, want)
    assert torch.equal(decode(0.0).sequences, plain)
