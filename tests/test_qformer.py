"""The Q-Former families (BLIP-2, InstructBLIP, InstructBLIP-Video, `pnd/architectures/qformer.py`): the expansion is
what the processor prepends, and the paired forward runs inside the language model's own `generate`."""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.testing import tiny_inputs
from pnd.testing.reference import forced_scores

from helpers import PROMPTS

QFORMER = ("instructblipvideo", "instructblip", "blip-2")


def _visual_kwargs(model_type, n):
    from pnd.testing import random_video

    if model_type == "instructblipvideo":
        return {"images": [random_video(i) for i in range(n)]}  # its processor takes the frames as `images=`
    return {"images": [random_video(i, frames=1)[0] for i in range(n)]}


@pytest.mark.parametrize("model_type", QFORMER)
def test_expansion_is_what_the_processor_prepends(tiny, model_type):
    """The rule's mask is exactly the tokens the processor adds to the text's own tokens when given the visual input
    (processing_instructblipvideo.py / processing_blip_2.py prepend them to every row, before its left padding)."""
    model, processor = tiny(model_type)
    texts = [f"<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n" for p in PROMPTS]
    with_visual = processor(text=texts, padding=True, return_tensors="pt", **_visual_kwargs(model_type, len(texts)))
    text_only = processor.tokenizer(texts, padding=True, return_tensors="pt")["input_ids"]
    added = with_visual["input_ids"].shape[1] - text_only.shape[1]
    assert torch.equal(with_visual["input_ids"][:, added:], text_only)
    expected = torch.zeros_like(with_visual["input_ids"], dtype=torch.bool)
    expected[:, :added] = True
    assert torch.equal(architecture_for(model).expansion(model, with_visual["input_ids"]), expected)


@pytest.mark.parametrize("model_type", QFORMER)
def test_stray_or_missing_placeholders_are_refused(tiny, model_type):
    model, processor = tiny(model_type)
    ids = tiny_inputs(processor, model_type, PROMPTS[:1])["input_ids"]
    architecture = architecture_for(model)
    placeholder = architecture.placeholder_ids(model.config)[0]
    stray = ids.clone()
    stray[0, -3] = placeholder  # a placeholder written into the text
    with pytest.raises(ValueError, match="Write no image/video token into the text"):
        architecture.expansion(model, stray)
    with pytest.raises(ValueError, match="query tokens"):
        architecture.expansion(model, ids[:, 1:])  # one placeholder fewer than the processor prepends


@pytest.mark.parametrize("model_type", QFORMER)
def test_detach_restores_the_language_model_and_the_repairs(model_type):
    from pnd.testing import tiny_model

    model, processor = tiny_model(model_type)  # a fresh one: no CaptionScorer repaired it before attach
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    plain = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    pnd.attach(model, processor)
    assert "forward" in vars(model.language_model)
    pnd.detach(model)
    assert "forward" not in vars(model.language_model) and "forward" not in vars(model)
    assert not {"get_image_features", "get_video_features"} & set(vars(model))
    assert torch.equal(model.generate(**inputs, max_new_tokens=4, do_sample=False), plain)


@pytest.mark.parametrize("model_type", QFORMER)
@pytest.mark.parametrize("prior", ["blank", "noise"])
def test_priors_that_run_the_vision_tower_are_refused(tiny, model_type, prior):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1])
    pnd.attach(model)
    with pytest.raises(ValueError, match="prior='masked' or 'text' on a new prompt"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5, prior=prior)])


def test_an_encoder_decoder_language_model_is_refused():
    from transformers import Blip2Config, Blip2ForConditionalGeneration

    config = Blip2Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                            num_attention_heads=2, image_size=32, patch_size=8),
                         qformer_config=dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                             intermediate_size=64, encoder_hidden_size=32),
                         text_config=dict(model_type="t5", vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                          num_heads=2), num_query_tokens=2)
    model = Blip2ForConditionalGeneration(config)
    with pytest.raises(ValueError, match="encoder-decoder"):
        pnd.attach(model)


@pytest.mark.parametrize("model_type", QFORMER)
def test_each_returned_sequence_gets_its_own_prompts_prior(tiny, model_type):
    """Sampling 2 sequences per prompt: the language model's generate repeats each prompt's embeddings (interleaved), and
    every row's prior is its own prompt's (beam search would not show it: it starts from each prompt's first row)."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    pnd.attach(model)
    torch.manual_seed(3)
    out = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=True, top_k=0, num_return_sequences=2,
                         logits_processor=[pnd.PriorNormalized(0.5)], return_dict_in_generate=True, output_scores=True)
    rows = {k: v.repeat_interleave(2, 0) for k, v in inputs.items()}
    reference = forced_scores(model, rows, out.sequences[:, inputs["input_ids"].shape[1]:], 0.5)
    got = torch.stack(out.scores, 1)
    finite = torch.isfinite(got)
    torch.testing.assert_close(got[finite], reference[finite], atol=1e-4, rtol=0)
