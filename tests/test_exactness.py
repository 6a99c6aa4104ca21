"""docs/design.md §3.1-3.4: pnd's decoding equals a brute-force reference in every decoding mode."""

import pytest
import torch

import pnd
from pnd.architectures import architecture_for
from pnd.attachment import attachment_of
from pnd.testing import FINDER_IMAGE_ARCHITECTURES, FINDER_VIDEO_ARCHITECTURES, TINY_ARCHITECTURES
from pnd.testing.reference import (
    PIXEL_KEYS,
    conditioned_positions,
    forced_scores,
    full_logits,
    greedy,
    visual_positions,
)

from helpers import (
    DEVICE,
    PROMPTS,
    assert_scores_close,
    language_model_calls,
    on_device,
    on_device_model,
    tiny_inputs,
    tiny_model,
)

STEPS = 6
FINDER = (*FINDER_VIDEO_ARCHITECTURES, *FINDER_IMAGE_ARCHITECTURES)  # the families added through the generic finder
# video + beam search crashes in transformers itself: GLM-4V, GLM-4.6V, GLM-5-next and GLM-OCR; Nemotron-H Omni, whose video
# tokens are image tokens, which generate's expansion of the encoder outputs per beam counts as video tokens
VIDEO_BEAM_CRASHES = ("glm4v", "glm46v", "glm5_next", "nemotron_h_omni", "glm_ocr", "glmga")
# plain `generate` crashes on any expansion of the batch (beams, num_return_sequences) in transformers itself, images
# included: Llama 4 (generate expands encoded images through their pooler_output, which Llama 4's vision model leaves
# empty: its features stay the unexpanded batch's; Fuyu's projected patches likewise, its image features have no
# pooler_output). `test_plain_generate_crashes_on_expanded_batches` shows it
EXPANSION_CRASHES = ("llama4", "fuyu")
# the processor prepends 4 frames' placeholders whatever it is given: an image (one frame) crashes in transformers'
# own generate (InstructBLIP-Video)
VIDEO_ONLY = ("instructblipvideo",)


def generate(model, inputs, alpha, **kwargs):
    pnd.attach(model)
    kwargs.setdefault("do_sample", False)
    return model.generate(
        **inputs, max_new_tokens=STEPS, logits_processor=[pnd.PriorNormalized(alpha)],
        return_dict_in_generate=True, output_scores=True, **kwargs,
    )


def _eos(model):
    eos = model.generation_config.eos_token_id
    return eos if isinstance(eos, list) else [eos]


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_greedy_matches_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    out = generate(model, inputs, alpha=0.7, min_new_tokens=STEPS)
    ref_tokens, ref_scores = greedy(model, inputs, 0.7, STEPS, banned=_eos(model))
    assert torch.equal(out.sequences[:, inputs["input_ids"].shape[1] :], ref_tokens)
    for got, want in zip(out.scores, ref_scores):
        assert_scores_close(got, want)


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_normalization_changes_decoding(tiny, model_type):
    """Guard against a vacuous reference: at alpha=1 the prior must change some token here."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    placeholders = architecture_for(model).placeholder_ids(model.config)  # a generated one would be a visual input
    plain, _ = greedy(model, inputs, 0.0, STEPS, banned=placeholders)
    normalized, _ = greedy(model, inputs, 1.0, STEPS, banned=placeholders)
    assert not torch.equal(plain, normalized)


ALPHA_ZERO_FAMILIES = ("llava_onevision", "qwen2_vl", "qwen3_vl", "glm4v", "video_llava", "perception_lm", "qwen3_5",
                       "gemma3", "molmo2", "internvl", "smolvlm", "video_llama_3", "minicpmv4_6",
                       "minicpmv4_7", "lfm2_vl", *FINDER)
ALPHA_ZERO_CASES = [(model_type, mode) for model_type in ALPHA_ZERO_FAMILIES for mode in ("greedy", "beam", "sample")
                    if mode != "beam" or model_type not in (*VIDEO_BEAM_CRASHES, *EXPANSION_CRASHES)]


@pytest.mark.parametrize("model_type, mode", ALPHA_ZERO_CASES)
def test_alpha_zero_is_plain_generate(tiny, model_type, mode):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    kwargs = {"greedy": {}, "beam": {"num_beams": 3}, "sample": {"do_sample": True, "top_k": 20}}[mode]
    torch.manual_seed(0)
    plain = model.generate(**inputs, max_new_tokens=STEPS, return_dict_in_generate=True, output_scores=True,
                           **{"do_sample": False, **kwargs})
    torch.manual_seed(0)
    ours = generate(model, inputs, alpha=0.0, **kwargs)
    assert torch.equal(plain.sequences, ours.sequences)
    for a, b in zip(plain.scores, ours.scores):
        assert torch.equal(a, b)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "llava", "qwen3_vl", "glm4v", "video_llava", "perception_lm",
                                        "qwen3_5", "gemma3", "molmo2", "internvl", "smolvlm", "video_llama_3",
                                        "minicpmv4_6", "minicpmv4_7", "lfm2_vl", *FINDER])
def test_left_padded_batch_equals_each_prompt_alone(tiny, model_type):
    model, processor = tiny(model_type)
    batch = tiny_inputs(processor, model_type, PROMPTS)
    assert (batch["attention_mask"] == 0).any(), "prompts of different lengths must be left-padded"
    together = generate(model, batch, alpha=0.5, min_new_tokens=STEPS).sequences[:, -STEPS:]
    for i, prompt in enumerate(PROMPTS):
        alone = tiny_inputs(processor, model_type, (prompt,), seed=i)
        assert torch.equal(generate(model, alone, alpha=0.5, min_new_tokens=STEPS).sequences[0, -STEPS:], together[i])


@pytest.mark.parametrize("model_type, image", [("llava_onevision", False), ("qwen2_vl", False), ("qwen3_vl", False),
                                               ("video_llava", False), ("glm4v", True), ("perception_lm", False),
                                               ("qwen3_5", False), ("gemma3", True), ("molmo2", True),
                                               ("internvl", False), ("internvl", True), ("smolvlm", False),
                                               ("smolvlm", True), ("video_llama_3", False), ("video_llama_3", True),
                                               ("minicpmv4_6", False), ("minicpmv4_6", True),
                                               ("minicpmv4_7", False), ("minicpmv4_7", True),
                                               ("lfm2_vl", True),
                                               *((t, t in (*FINDER_IMAGE_ARCHITECTURES, *VIDEO_BEAM_CRASHES))
                                                 for t in FINDER if t not in EXPANSION_CRASHES)])
def test_beam_search_scores_are_reference_normalized_scores(tiny, model_type, image):
    model, processor = tiny(model_type)
    # HunYuan-VL numbers images across the whole batch (its 4th rope axis): a prompt's positions depend on its batch
    # row in transformers itself, so its beams are checked on a batch of one
    prompts = PROMPTS[:1] if model_type == "hunyuan_vl" else PROMPTS
    inputs = tiny_inputs(processor, model_type, prompts, image=image)
    alpha, prompt_len = 0.6, inputs["input_ids"].shape[1]
    out = generate(model, inputs, alpha, num_beams=3, num_return_sequences=2, length_penalty=1.0)
    eos, pad = model.generation_config.eos_token_id, model.generation_config.pad_token_id
    per_token = ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids", "moe_mm_token_type_ids",
                 "qformer_input_ids", "qformer_attention_mask",  # InstructBLIP's instruction, padded as in the batch
                 "image_embeds_position_mask")  # Kosmos-2's image slots
    row_inputs = {k: v.repeat_interleave(2, 0) for k, v in inputs.items() if k in per_token}
    pixel_inputs = {k: v for k, v in inputs.items() if k not in row_inputs}
    for row in range(out.sequences.shape[0]):
        generated = out.sequences[row, prompt_len:]
        length = int((generated == eos).nonzero()[0, 0]) + 1 if (generated == eos).any() else len(generated)
        if model_type == "molmo2" or model_type in FINDER:  # the visual inputs of the prompt processed alone
            alone = tiny_inputs(processor, model_type, prompts[row // 2 : row // 2 + 1], seed=row // 2, image=image)
            pixels = {k: alone[k] for k in pixel_inputs}
        else:
            pixels = _pixels_of(pixel_inputs, row // 2, model, inputs)
        one = {k: v[row : row + 1] for k, v in row_inputs.items()} | pixels
        scores = forced_scores(model, one, generated[None, :length], alpha)[0]
        total = scores.gather(1, generated[:length, None]).sum()
        torch.testing.assert_close(out.sequences_scores[row], total / length, atol=1e-4, rtol=0)
        assert (generated[length:] == pad).all()


@pytest.mark.parametrize("model_type", EXPANSION_CRASHES)
@pytest.mark.parametrize("expand", [{"num_beams": 2}, {"do_sample": True, "num_return_sequences": 2}])
def test_plain_generate_crashes_on_expanded_batches(tiny, model_type, expand):
    """Why EXPANSION_CRASHES skip beams and num_return_sequences: transformers' own `generate` crashes there (on an
    image prompt), and pnd's fails as plain generate does. When this test fails, transformers was fixed: drop the
    family from EXPANSION_CRASHES."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS[:1])
    with pytest.raises(ValueError, match="Image features and image tokens do not match"):
        model.generate(**inputs, max_new_tokens=2, **expand)
    with pytest.raises(ValueError, match="Image features and image tokens do not match"):
        generate(model, inputs, alpha=0.5, **expand)


def _pixels_of(pixel_inputs, index, model, inputs):
    """The visual inputs of prompt `index` alone (the Qwen-style processors and InternVL flatten the patches of all
    visuals)."""
    if model.config.model_type == "lfm2_vl":  # one tile per run of image tokens (its tiles, then its thumbnail)
        image = inputs["input_ids"] == model.config.image_token_id
        tiles = (image[:, 1:] & ~image[:, :-1]).sum(1)
        start = int(tiles[:index].sum())
        return {k: v[start : start + int(tiles[index])] for k, v in pixel_inputs.items()}
    if model.config.model_type == "internvl":  # image_seq_length placeholders per frame or image tile
        tiles = (inputs["input_ids"] == model.config.image_token_id).sum(1) // model.config.image_seq_length
        start = int(tiles[:index].sum())
        return {"pixel_values": pixel_inputs["pixel_values"][start : start + int(tiles[index])]}
    if model.config.model_type.startswith("minicpmv"):  # the patches of every image (or frame) and slice, packed along -1
        processor = attachment_of(model).processor
        suffix = "_videos" if "target_sizes_videos" in pixel_inputs else ""
        starts = processor.tokenizer.convert_tokens_to_ids([processor.image_start_token, processor.slice_start_token])
        units = torch.isin(inputs["input_ids"], torch.tensor(starts, device=DEVICE)).sum(1).tolist()
        first = sum(units[:index])
        pixels = pixel_inputs[f"pixel_values{suffix}"]  # (1, 3, patch, patches * patch)
        sizes = (pixel_inputs[f"target_sizes{suffix}"].prod(-1) * pixels.shape[-2]).tolist()
        begin, length = sum(sizes[:first]), sum(sizes[first : first + units[index]])
        return {f"target_sizes{suffix}": pixel_inputs[f"target_sizes{suffix}"][first : first + units[index]],
                f"pixel_values{suffix}": pixels[..., begin : begin + length]}
    for kind, pixel_key in (("video", "pixel_values_videos"), ("image", "pixel_values")):
        if f"{kind}_grid_thw" in pixel_inputs:
            grid = pixel_inputs[f"{kind}_grid_thw"]
            sizes = grid.prod(-1).tolist()
            start = sum(sizes[:index])
            one = {f"{kind}_grid_thw": grid[index : index + 1],
                   pixel_key: pixel_inputs[pixel_key][start : start + sizes[index]]}
            if f"{kind}_merge_sizes" in pixel_inputs:  # VideoLLaMA3: per-visual merge sizes, per-feature compression
                merges = pixel_inputs[f"{kind}_merge_sizes"]
                one[f"{kind}_merge_sizes"] = merges[index : index + 1]
                features = [size // int(m) ** 2 for size, m in zip(sizes, merges)]
                if "video_compression_mask" in pixel_inputs and kind == "video":
                    first = sum(features[:index])
                    one["video_compression_mask"] = pixel_inputs["video_compression_mask"][first : first + features[index]]
            return one
    return {k: v[index : index + 1] for k, v in pixel_inputs.items()}


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "qwen3_vl", "glm4v", "video_llava", "perception_lm",
                                        "qwen3_5", "gemma3", "molmo2", "internvl", "smolvlm", "video_llama_3",
                                        "minicpmv4_6", "minicpmv4_7", "lfm2_vl", *FINDER])
def test_sampling_scores_are_reference_scores(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    torch.manual_seed(3)
    out = generate(model, inputs, alpha=0.5, do_sample=True, top_k=0, top_p=1.0, temperature=1.0, min_new_tokens=STEPS)
    generated = out.sequences[:, inputs["input_ids"].shape[1] :]
    reference = forced_scores(model, inputs, generated, 0.5)
    assert_scores_close(torch.stack(out.scores, 1), reference)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "qwen3_vl", "glm4v", "video_llava", "perception_lm",
                                        "qwen3_5", "gemma3", "molmo2", "internvl", "smolvlm", "video_llama_3",
                                        "minicpmv4_6", "minicpmv4_7", "lfm2_vl", *FINDER])
def test_prior_ignores_pixels_and_equals_masked_forward(tiny, model_type):
    model, processor = tiny(model_type)
    a = tiny_inputs(processor, model_type, PROMPTS, seed=0)
    b = tiny_inputs(processor, model_type, PROMPTS, seed=10)
    pixels = [k for k in a if k.startswith(("pixel_values", "flattened_patches"))]  # Kosmos-2.5: flattened patches
    assert not torch.equal(a[pixels[0]], b[pixels[0]])
    prior_a, prior_b = pnd.prior_logits(model, **a), pnd.prior_logits(model, **b)
    no_pixels = pnd.prior_logits(model, **{k: v for k, v in a.items() if k not in pixels})
    assert torch.equal(prior_a, prior_b) and torch.equal(prior_a, no_pixels)
    torch.testing.assert_close(prior_a.float(), full_logits(model, a, a["input_ids"], prior=True), atol=1e-4, rtol=0)
    assert not torch.allclose(prior_a.float(), full_logits(model, a, a["input_ids"], prior=False), atol=1e-2)


def _prior_kv_matches_masked_forward(model, inputs, cache):
    """The prior rows of the paired cache (generate returns the conditioned rows only: the test takes the cache the
    language model was called with) equal a brute-force masked forward's keys/values at every text slot."""
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    text = mask.bool() & ~visual_positions(model, ids)
    positions = conditioned_positions(model, ids, mask, inputs)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    with torch.no_grad():
        masked = model(input_ids=ids, attention_mask=mask * ~visual_positions(model, ids), position_ids=positions,
                       use_cache=True, **pixels)
    n, length = ids.shape
    for got, want in zip(cache.layers, masked.past_key_values.layers):
        for got_states, want_states in ((got.keys[n:, :, :length], want.keys), (got.values[n:, :, :length], want.values)):
            torch.testing.assert_close(got_states.transpose(1, 2)[text], want_states.transpose(1, 2)[text], atol=1e-4, rtol=0)


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl", "qwen3_vl", "glm4v"])
def test_prior_prefill_rides_in_the_conditioned_call(tiny, model_type, monkeypatch):
    """Issue 7: the prefill is one language-model call on [prompt | text after each row's first visual token]
    (the text before it is the conditioned pass's) whose every layer splits attention between the two, and
    the prior's KV-cache equals a brute-force masked forward's at every text slot (left-padded batch)."""
    from transformers import AttentionInterface

    split = AttentionInterface._global_mapping["pnd_packed_sdpa"]
    splits = []
    monkeypatch.setitem(AttentionInterface._global_mapping, "pnd_packed_sdpa",
                        lambda *args, **kwargs: splits.append(1) or split(*args, **kwargs))
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    visual = visual_positions(model, ids)
    text = mask.bool() & ~visual
    after_video = text & (torch.arange(ids.shape[1], device=DEVICE) > visual.int().argmax(1, keepdim=True))
    assert (text & ~after_video).any(1).all()  # every prompt has text before its video to reuse
    calls, out = language_model_calls(model, lambda: pnd.attach(model).generate(
        **inputs, max_new_tokens=1, do_sample=False, return_dict_in_generate=True,
        logits_processor=[pnd.PriorNormalized(0.5)]))
    assert len(calls) == 1 and len(splits) == model.config.get_text_config(decoder=True).num_hidden_layers
    embeds = calls[0]["inputs_embeds"]
    assert embeds.shape[1] == ids.shape[1] + int(after_video.sum(1).max())
    for row in range(ids.shape[0]):
        appended = embeds[row, embeds.shape[1] - int(after_video[row].sum()) :]
        assert torch.equal(appended, model.get_input_embeddings()(ids[row, after_video[row]]))
    _prior_kv_matches_masked_forward(model, inputs, calls[0]["past_key_values"])


def test_packed_prior_tokens_attend_over_the_keys_they_see(tiny, monkeypatch):
    """In the packed prefill, the prior tokens' attention gets the reused text before the video and the prior tokens
    as keys, not the whole prompt (exactness: the tests above)."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    packed, keys = pnd.decoding.packed, []
    attend = packed.sdpa_attention_forward
    monkeypatch.setattr(packed, "sdpa_attention_forward",
                        lambda module, query, key, *args, **kwargs: keys.append((query.shape[2], key.shape[2]))
                        or attend(module, query, key, *args, **kwargs))
    pnd.attach(model).generate(**inputs, max_new_tokens=1, logits_processor=[pnd.PriorNormalized(0.5)])
    ids, attended = inputs["input_ids"], inputs["attention_mask"].bool()
    length, visual = ids.shape[1], ids == model.config.video_token_id
    first = visual.int().argmax(1, keepdim=True)  # each row's first visual slot
    after = int((attended & ~visual & (torch.arange(length, device=ids.device) > first)).sum(1).max())
    assert keys[:2] == [(length, length), (after, int(first.max()) + after)]  # layer 0: the prompt, the prior tokens


def test_other_threads_run_plain_attention_during_a_packed_call(tiny):
    """While one thread's packed prefill has the model's attention switched, another thread's forward on the same
    model is a plain one (its own masks, plain SDPA)."""
    import threading

    model, processor = tiny("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)  # left-padded: needs its padding mask
    with torch.no_grad():
        want = model(**inputs).logits
        got = {}
        pnd.attach(model)  # switches the language model to the split attention, once
        with pnd.decoding.packed._packed_attention(length=3, unpadded=True, prefix=1):
            thread = threading.Thread(target=lambda: got.update(logits=model(**inputs).logits))
            thread.start()
            thread.join()
    torch.testing.assert_close(got["logits"], want, atol=1e-5, rtol=0)


def test_eager_attention_runs_the_prior_in_its_own_call():
    """Models without SDPA attention (or with a sliding window) get the prior's prefill as a language-model call
    of its own; same results."""
    model, processor = tiny_model("llava_onevision")
    model.set_attn_implementation("eager")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    length = inputs["input_ids"].shape[1]
    calls, out = language_model_calls(model, lambda: generate(model, inputs, alpha=0.7, min_new_tokens=STEPS))
    assert len(calls) == STEPS + 1 and calls[0]["inputs_embeds"].shape[1] == length  # prompt, prior, STEPS - 1 steps
    assert calls[1]["input_ids"].shape[1] < length
    ref_tokens, ref_scores = greedy(model, inputs, 0.7, STEPS)
    assert torch.equal(out.sequences[:, length:], ref_tokens)
    for got, want in zip(out.scores, ref_scores):
        finite = torch.isfinite(got)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)
    _prior_kv_matches_masked_forward(model, inputs, calls[0]["past_key_values"])
    model.set_attn_implementation("sdpa")
    assert pnd.decoding.packed.packs_prior(model, {"logits_to_keep": 1})
    model.config.text_config.sliding_window = 4096  # the packed call's mask would drop the window
    assert not pnd.decoding.packed.packs_prior(model, {"logits_to_keep": 1})


@pytest.mark.parametrize("model_type", [t for t in TINY_ARCHITECTURES if t not in ("llava", *VIDEO_ONLY)])
def test_image_prompts_match_brute_force(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS, image=True)
    out = generate(model, inputs, alpha=0.7, min_new_tokens=STEPS)
    ref_tokens, _ = greedy(model, inputs, 0.7, STEPS, banned=_eos(model))
    assert torch.equal(out.sequences[:, -STEPS:], ref_tokens)


def test_videos_of_different_lengths_in_one_batch(tiny):
    from pnd.testing import random_video

    model, processor = tiny("qwen2_vl")
    texts = [processor.apply_chat_template([{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": t}]}],
                                           add_generation_prompt=True) for t in PROMPTS]
    videos = [random_video(1, frames=4, size=56), random_video(2, frames=8, size=84)]
    inputs = on_device(processor(text=texts, videos=videos, return_tensors="pt", padding=True))
    assert inputs["video_grid_thw"][0, 0] != inputs["video_grid_thw"][1, 0]
    out = generate(model, inputs, alpha=0.7, min_new_tokens=STEPS)
    ref_tokens, _ = greedy(model, inputs, 0.7, STEPS)
    assert torch.equal(out.sequences[:, -STEPS:], ref_tokens)


def test_llava_next_video_matches_brute_force():
    from transformers import LlavaNextVideoConfig, LlavaNextVideoForConditionalGeneration

    from pnd.testing import sharpen_attention, tiny_tokenizer

    tokenizer = tiny_tokenizer(["<image>", "<video>"])
    config = LlavaNextVideoConfig(
        vision_config=dict(model_type="clip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, image_size=32, patch_size=8, projection_dim=32),
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, bos_token_id=None,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        video_token_index=tokenizer.convert_tokens_to_ids("<video>"),
        vision_feature_layer=-1, image_grid_pinpoints=[[32, 32]], spatial_pool_stride=2,
    )
    torch.manual_seed(0)
    model = on_device_model(LlavaNextVideoForConditionalGeneration(config).eval())
    sharpen_attention(model, 4.0)
    video = tokenizer.convert_tokens_to_ids("<video>")  # 4 frames x (32/8/2)^2 pooled tokens
    ids = torch.tensor([tokenizer("<|im_start|>user\n").input_ids + [video] * 16
                        + tokenizer("describe the video.<|im_end|>\n<|im_start|>assistant\n").input_ids])
    inputs = on_device({"input_ids": ids, "attention_mask": torch.ones_like(ids),
                        "pixel_values_videos": torch.randn(1, 4, 3, 32, 32)})
    out = generate(model, inputs, alpha=0.7, min_new_tokens=STEPS)
    ref_tokens, _ = greedy(model, inputs, 0.7, STEPS)
    assert torch.equal(out.sequences[:, -STEPS:], ref_tokens)
    assert not torch.equal(ref_tokens, greedy(model, inputs, 0.0, STEPS)[0])
    pnd.detach(model)
