"""docs/design.md §3.3, §3.6, §3.7: other processors, stopping criteria, NaN safety, prior modes, errors."""

import functools
import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, LogitsProcessor, StoppingCriteria

import pnd
from pnd.testing import tiny_inputs
from pnd.testing.reference import full_logits, greedy, normalized_scores

from helpers import PROMPTS


class BanTokens(LogitsProcessor):
    """Sets a fixed set of tokens to -inf (a stand-in for bad_words / suppress_tokens)."""

    def __init__(self, ids):
        self.ids = list(ids)

    def __call__(self, input_ids, scores):
        return scores.index_fill(1, torch.tensor(self.ids), -math.inf)


def run(model, inputs, processors, **kwargs):
    pnd.attach(model)
    kwargs = {"max_new_tokens": 5, "do_sample": False, **kwargs}
    return model.generate(**inputs, return_dict_in_generate=True, output_scores=True, logits_processor=processors,
                          **kwargs)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_banned_tokens_stay_minus_inf_without_nan(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    banned = list(range(40, 200))
    out = run(model, inputs, [BanTokens(banned), pnd.PriorNormalized(1.0)])
    sequence = inputs["input_ids"]
    for scores in out.scores:
        assert not torch.isnan(scores).any()
        assert torch.isneginf(scores[:, banned]).all()
        reference = normalized_scores(model, inputs, sequence, 1.0).index_fill(1, torch.tensor(banned), -math.inf)
        torch.testing.assert_close(scores, reference, atol=1e-4, rtol=0)
        sequence = torch.cat([sequence, reference.argmax(-1, keepdim=True)], 1)
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1]:], sequence[:, inputs["input_ids"].shape[1]:])


def test_all_banned_row_gives_no_nan(tiny):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    vocab = model.config.text_config.vocab_size
    out = run(model, inputs, [BanTokens(range(vocab)), pnd.PriorNormalized(0.5)], max_new_tokens=1)
    assert torch.isneginf(out.scores[0]).all()


def test_bf16_model_scores_are_fp32_and_finite():
    from pnd.testing import tiny_model

    model, processor = tiny_model("qwen2_vl")  # its own model: the cached ones are shared and must stay fp32
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)
    out = run(model.to(torch.bfloat16), inputs, [pnd.PriorNormalized(0.5)])
    assert all(s.dtype == torch.float32 and torch.isfinite(s).all() for s in out.scores)


def test_plausibility_restricts_to_plausible_tokens(tiny):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    beta, alpha = 0.3, 1.0
    out = run(model, inputs, [pnd.PriorNormalized(alpha, plausibility=beta)], min_new_tokens=5)
    sequence = inputs["input_ids"]
    for scores in out.scores:
        cond = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1)
        implausible = cond < cond.amax(-1, keepdim=True) + math.log(beta)
        reference = normalized_scores(model, inputs, sequence, alpha).masked_fill(implausible, -math.inf)
        assert torch.equal(torch.isneginf(scores), implausible)
        torch.testing.assert_close(scores[~implausible], reference[~implausible], atol=1e-4, rtol=0)
        sequence = torch.cat([sequence, reference.argmax(-1, keepdim=True)], 1)


def test_num_return_sequences_and_stopping_criteria(tiny):
    model, processor = tiny("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)

    class StopAtLength(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= inputs["input_ids"].shape[1] + 3)

    torch.manual_seed(0)
    out = run(model, inputs, [pnd.PriorNormalized(0.5)], do_sample=True, num_return_sequences=3,
              stopping_criteria=[StopAtLength()], max_new_tokens=10)
    assert out.sequences.shape == (6, inputs["input_ids"].shape[1] + 3)
    # each returned sample scored by the reference: the sampled token must be finite under it
    for k, scores in enumerate(out.scores):
        assert torch.isfinite(scores.gather(1, out.sequences[:, inputs["input_ids"].shape[1] + k, None])).all()


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_text_prior_mode_is_the_prompt_without_visual_tokens(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1])
    visual = torch.isin(inputs["input_ids"], torch.tensor([model.config.image_token_id, model.config.video_token_id]))
    text_only = inputs["input_ids"][~visual][None]
    want = model(input_ids=text_only).logits[:, -1]
    got = pnd.prior_logits(model, **inputs, mode="text")
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    # and the decoding continues from the renumbered positions
    out = run(model, inputs, [pnd.PriorNormalized(1.0, prior="text")], min_new_tokens=5)
    ids = inputs["input_ids"]
    for scores in out.scores:
        prior = torch.log_softmax(model(input_ids=torch.cat([text_only, ids[:, inputs["input_ids"].shape[1]:]], 1)).logits[:, -1], -1)
        cond = torch.log_softmax(full_logits(model, inputs, ids, prior=False), -1)
        finite = torch.isfinite(scores)  # min_new_tokens bans EOS
        assert finite.sum() == finite.numel() - 1
        torch.testing.assert_close(scores[finite], (cond - prior)[finite], atol=1e-4, rtol=0)
        ids = torch.cat([ids, (cond - prior).argmax(-1, keepdim=True)], 1)


def test_detach_restores_the_model(tiny):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    before = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    pnd.attach(model)
    assert pnd.attach(model) is model  # idempotent
    pnd.detach(model)
    assert "forward" not in vars(model) and "generate" not in vars(model)
    assert torch.equal(model.generate(**inputs, max_new_tokens=4, do_sample=False), before)
    with pytest.raises(RuntimeError, match=r"pnd\.attach\(model\)"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


def test_detach_keeps_forward_hooks_set_before_attach(tiny):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    class_forward = model.forward
    calls = []

    @functools.wraps(class_forward)
    def hooked(*args, **kwargs):  # what accelerate's device hooks do to a dispatched model
        calls.append(1)
        return class_forward(*args, **kwargs)

    model.forward = hooked
    try:
        pnd.attach(model)
        model.generate(**inputs, max_new_tokens=3, logits_processor=[pnd.PriorNormalized(0.5)])
        assert calls, "the hook set before attach must still run"
        pnd.detach(model)
        assert model.forward is hooked
    finally:
        pnd.detach(model)
        del model.forward


def test_saved_and_reloaded_model_decodes_identically(tiny, tmp_path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model, processor = tiny("qwen2_vl")
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    loaded = pnd.attach(AutoModelForImageTextToText.from_pretrained(tmp_path).eval())
    inputs = tiny_inputs(AutoProcessor.from_pretrained(tmp_path), "qwen2_vl", PROMPTS)
    ref_tokens, _ = greedy(model, inputs, 0.5, 4)
    out = loaded.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                          logits_processor=[pnd.PriorNormalized(0.5)])
    assert torch.equal(out[:, inputs["input_ids"].shape[1]:], ref_tokens)


# --- docs/design.md §3.7: bad input gets an error naming the problem and the fix ---

@pytest.mark.parametrize("alpha", [-0.1, 1.5, float("nan"), float("inf"), "0.5", True, None])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match=r"alpha must be a finite number in \[0, 1\]"):
        pnd.PriorNormalized(alpha)


@pytest.mark.parametrize("kwargs, message", [
    ({"prior": "nothing"}, "prior must be one of"), ({"plausibility": 0}, "plausibility must be"),
    ({"plausibility": 2.0}, "plausibility must be"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pnd.PriorNormalized(0.5, **kwargs)


def test_unsupported_architecture_lists_supported():
    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2))
    with pytest.raises(ValueError, match=r"does not support model_type 'llama'.*llava_onevision.*qwen2_vl"):
        pnd.attach(model)


def test_prompt_without_visual_tokens(tiny):
    model, processor = tiny("llava_onevision")
    inputs = processor(text=["<|im_start|>user\nno video here<|im_end|>\n<|im_start|>assistant\n"], return_tensors="pt")
    pnd.attach(model)
    with pytest.raises(ValueError, match="No visual tokens in prompt row"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


def test_prompt_ending_with_visual_token(tiny):
    model, processor = tiny("llava_onevision")
    from pnd.testing import random_video
    inputs = processor(text=["Look: <video>"], videos=[random_video(0)], return_tensors="pt")
    pnd.attach(model)
    with pytest.raises(ValueError, match="ends with a visual token"):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


@pytest.mark.parametrize("kwargs, message", [
    ({"use_cache": False}, "use_cache=False"),
    ({"cache_implementation": "quantized"}, "cache_implementation"),
])
def test_unsupported_generate_options(tiny, kwargs, message):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    pnd.attach(model)
    with pytest.raises(ValueError, match=message):
        model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)], **kwargs)


@pytest.mark.parametrize("processors, named", [
    ((pnd.PriorNormalized(0.5), pnd.PriorNormalized(0.2)), "PriorNormalized, PriorNormalized"),
    ((pnd.PAI(start_layer=0), pnd.VISTA()), "PAI, VISTA"),  # the message named PriorNormalized and M3ID only
])
def test_two_of_pnds_processors_in_one_call_are_refused_naming_them(tiny, processors, named):
    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    with pytest.raises(ValueError, match=rf"generate got 2 of pnd's processors \({named}\).* pass one per generate"):
        model.generate(**tiny_inputs(processor, "llava_onevision"), max_new_tokens=2, logits_processor=list(processors))


def test_a_custom_generate_loop_without_the_cache_is_named_in_the_refusal(tiny):
    """A `custom_generate` callable that runs the model without generate's cache bypasses the paired forward: pnd can
    only say so at the first step (its message named assisted decoding only); generate's own loops decode exactly."""
    from transformers import GenerationMixin

    model, processor = tiny("llava_onevision")
    pnd.attach(model)
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])

    def uncached(model, input_ids, logits_processor, stopping_criteria, generation_config, **kwargs):
        for _ in range(generation_config.max_new_tokens):
            logits = model(input_ids=input_ids, **{k: v for k, v in kwargs.items() if "pixel" in k or "sizes" in k},
                           attention_mask=torch.ones_like(input_ids), use_cache=False).logits[:, -1]
            input_ids = torch.cat([input_ids, logits_processor(input_ids, logits).argmax(-1, keepdim=True)], 1)
        return input_ids

    run = dict(max_new_tokens=2, do_sample=False, logits_processor=[pnd.PriorNormalized(0.5)])
    with pytest.raises(RuntimeError, match="a custom_generate loop that calls the model without generate's cache"):
        model.generate(**inputs, **run, custom_generate=uncached)
    assert torch.equal(model.generate(**inputs, **run, custom_generate=GenerationMixin._sample),
                       model.generate(**inputs, **run))


def test_processor_outside_generate():
    with pytest.raises(RuntimeError, match=r"call pnd\.attach\(model\)"):
        pnd.PriorNormalized(0.5)(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 10))


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "qwen3_vl", "video_llava", "qwen3_5", "gemma3",
                                        "molmo2", "minicpmv4_6", "minicpmv4_7", "lfm2_vl"])
def test_blank_prior_mode_is_the_model_on_blank_frames(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    blank = {k: (torch.zeros_like(v) if k.startswith("pixel_values") else v) for k, v in inputs.items()}
    out = run(model, inputs, [pnd.PriorNormalized(0.8, prior="blank")], min_new_tokens=4, max_new_tokens=4)
    ids = inputs["input_ids"]
    for scores in out.scores:
        cond = torch.log_softmax(full_logits(model, inputs, ids, prior=False), -1)
        prior = torch.log_softmax(full_logits(model, blank, ids, prior=False), -1)
        finite = torch.isfinite(scores)
        torch.testing.assert_close(scores[finite], (cond - 0.8 * prior)[finite], atol=1e-4, rtol=0)
        ids = torch.cat([ids, (cond - 0.8 * prior).where(finite, -torch.inf).argmax(-1, keepdim=True)], 1)  # no EOS
    assert torch.equal(out.sequences, ids)
