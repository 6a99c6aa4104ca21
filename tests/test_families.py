"""Issue 13: the prior hides the whole visual expansion of the newer families (README, "The prior").

Each family's adapter mask is checked against the processor's own record of what it replaced, and the tests
named `..._hides_timestamps` fail with a prior that masks the placeholder tokens only.
"""

import pytest
import torch

import pnd
from pnd.architectures import Architecture, architecture_for
from pnd.attachment import attachment_of
from pnd.io.prompts import images_for, video_prompt
from pnd.testing import FINDER_VIDEO_ARCHITECTURES, TINY_ARCHITECTURES, VIDEO_ARCHITECTURES, random_video
from pnd.testing.reference import full_logits, processor_expansion, text_in_replacement, visual_positions

from helpers import DEVICE, on_device, tiny_inputs, tiny_model

# Cosmos 3 Edge's processor class (transformers 5.23) defaults to neither the video metadata nor mm_token_type_ids that
# it and its model need: a saved and reloaded one fails in plain transformers too, so it is tested in process only
# InstructBLIP-Video: its saved processor loads without the chat template (its __init__ drops it) and takes frames as
# `images=`, so `pnd caption` cannot build its prompts
SAVED_FINDER_VIDEO_ARCHITECTURES = tuple(t for t in FINDER_VIDEO_ARCHITECTURES if t not in ("cosmos3_edge",
                                                                                          "instructblipvideo"))


def _metadata(fps, first=0):
    return [{"fps": fps, "total_num_frames": first + 4, "frames_indices": list(range(first, first + 4))}]


def _expansions(processor, modality):
    """(input_ids, processor's replaced-span mask) of a left-padded batch of two prompts with one visual each."""
    texts = [video_prompt(processor, p, modality) for p in ("Describe it.", "what colour is the shape? answer.")]
    if modality == "image":
        visuals = {"images": images_for(processor, [[random_video(i, frames=1, size=64)[0]] for i in range(2)])}
    else:
        visuals = {"videos": [random_video(0), random_video(1)], "video_metadata": _metadata(2) * 2}
    return tuple(t.to(DEVICE) for t in processor_expansion(processor, texts, **visuals))


# per family: {modality it takes: whether the processor writes more than placeholders for it}
MORE_THAN_PLACEHOLDERS = {
    "qwen3_vl": {"video": True, "image": False}, "qwen3_vl_moe": {"video": True, "image": False},
    "qwen3_5": {"video": True, "image": False}, "qwen3_5_moe": {"video": True, "image": False},
    "glm4v": {"video": True, "image": False}, "glm4v_moe": {"video": True, "image": False},
    "video_llava": {"video": False, "image": False}, "perception_lm": {"video": False, "image": False},
    "gemma3": {"image": True}, "molmo2": {"video": True, "image": True},
    "internvl": {"video": True, "image": True}, "smolvlm": {"video": True, "image": True},
    "video_llama_3": {"video": True, "image": False}, "minicpmv4_6": {"video": True, "image": True},
    "minicpmv4_7": {"video": True, "image": True}, "lfm2_vl": {"image": True},
    # issue 36's families through the generic finder
    "cohere2_vision": {"image": True},
    "aya_vision": {"image": True},
    "fast_vlm": {"image": False},
    "lighton_ocr": {"image": False},
    "granite_docling": {"image": True},
    "aria": {"image": False},
    "ovis2": {"image": True},
    "paddleocr_vl": {"image": False},
    "deepseek_vl": {"image": False},
    "deepseek_vl_hybrid": {"image": False},
    "glm_ocr": {"video": True, "image": False},
    "qianfan_ocr": {"image": True},
    "exaone4_5": {"video": False, "image": False}, "hyperclovax_vision_v2": {"video": True, "image": False},
    "glmga": {"video": True, "image": False},
    "muse_spark": {"video": True, "image": True},
    "fuyu": {"image": True},
    "deepseek_ocr2": {"image": False},
    "got_ocr2": {"image": False},
}


@pytest.mark.parametrize("model_type, modality", [(t, m) for t, modalities in sorted(MORE_THAN_PLACEHOLDERS.items())
                                                  for m in modalities])
def test_expansion_mask_is_what_the_processor_replaced(tiny, model_type, modality):
    """Fails with a placeholder-only mask for every family and modality marked True in MORE_THAN_PLACEHOLDERS."""
    model, processor = tiny(model_type)
    ids, replaced = _expansions(processor, modality)
    replaced &= ~text_in_replacement(processor, model_type, ids)
    placeholders = architecture_for(model).placeholder_mask(model.config, ids)
    assert (replaced & ~placeholders).any() == MORE_THAN_PLACEHOLDERS[model_type][modality]
    assert torch.equal(architecture_for(model).expansion(model, ids), replaced)
    assert torch.equal(visual_positions(model, ids), replaced)  # the brute-force reference hides the same tokens


def _timestamped(processor, fps, first=0):
    """One video's processor outputs, its 4 frames sampled at `fps` from frame `first` on."""
    text = [video_prompt(processor, "Describe the video.")]
    return on_device(processor(text=text, videos=[random_video(0)], video_metadata=_metadata(fps, first),
                               return_tensors="pt"))


def _assert_prior_hides_timestamps(model, processor, fps_pair, first=0):
    """Two videos whose expansions differ only in their timestamp text (same token count, same positions): the prior
    is the same, and equals the brute-force forward with the whole expansion masked. With the placeholders masked
    only, the timestamps reach the prior (the last assertion shows such a forward differs)."""
    fast, slow = (_timestamped(processor, fps, first) for fps in fps_pair)
    assert fast["input_ids"].shape == slow["input_ids"].shape and not torch.equal(fast["input_ids"], slow["input_ids"])
    prior_fast, prior_slow = pnd.prior_logits(model, **fast), pnd.prior_logits(model, **slow)
    torch.testing.assert_close(prior_fast, prior_slow, atol=1e-5, rtol=0)
    torch.testing.assert_close(prior_fast.float(), full_logits(model, fast, fast["input_ids"], prior=True),
                               atol=1e-4, rtol=0)
    leaky = [_placeholders_masked(model, inputs) for inputs in (fast, slow)]
    assert not torch.allclose(leaky[0], leaky[1], atol=1e-3)


@pytest.mark.parametrize("model_type", TINY_ARCHITECTURES)
def test_the_tiny_models_visual_input_changes_the_logits(tiny, model_type):
    """Guard against vacuous tests: on every tiny model another image (video, for the video families) changes the
    last logits of the same prompt, so that a prior that saw the pixels, a contrast without them or misplaced image
    features fails its reference. The tiny builders scale what a random init leaves too faint."""
    model, processor = tiny(model_type)
    image = model_type not in VIDEO_ARCHITECTURES
    one, other = (tiny_inputs(processor, model_type, ("Describe it.",), seed=seed, image=image) for seed in (0, 5))
    with torch.no_grad():
        change = (model(**one).logits[:, -1].float() - model(**other).logits[:, -1].float()).abs().max()
    assert change > 1e-2, f"{model_type}: another visual input changes the logits by {float(change):.1e} only"


def test_qwen3_vl_prior_hides_timestamps(tiny):
    """Qwen3-VL's `<t seconds>` timestamps, at 24 and 0.5 fps (`_assert_prior_hides_timestamps`)."""
    _assert_prior_hides_timestamps(*tiny("qwen3_vl"), (24, 0.5))


def test_molmo2_prior_hides_timestamps(tiny):
    """Molmo2's `t.t` timestamps from frame 1 on at 2 and 0.5 fps (`0.5 …` and `2.0 …`), the first one plain text
    right after the template's (`_assert_prior_hides_timestamps`; with the placeholders `<im_patch>` masked only, the
    timestamps and the frame delimiters reach the prior)."""
    _assert_prior_hides_timestamps(*tiny("molmo2"), (2, 0.5), first=1)


def test_qwen3_vl_decoding_hides_timestamps(tiny):
    """Normalized greedy decoding does not depend on the timestamps the processor wrote (alpha=1, prior only
    differs through them; the conditioned logits are the same pixels at the same positions)."""
    model, processor = tiny("qwen3_vl")
    pnd.attach(model)
    runs = []
    for fps in (24, 0.5):
        inputs = _timestamped(processor, fps)
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False, output_scores=True,
                             return_dict_in_generate=True, logits_processor=[pnd.PriorNormalized(1.0)])
        cond = model.generate(**inputs, max_new_tokens=1, do_sample=False, output_scores=True,
                              return_dict_in_generate=True)
        runs.append(torch.log_softmax(cond.scores[0], -1) - out.scores[0])  # = the prior's log-softmax
    torch.testing.assert_close(runs[0], runs[1], atol=1e-4, rtol=0)


def _placeholders_masked(model, inputs):
    """Last logits of a forward whose attention mask hides the placeholder tokens only (the leaky prior)."""
    ids = inputs["input_ids"]
    placeholders = Architecture.placeholder_mask(architecture_for(model), model.config, ids)
    positions = pnd.decoding.prior.default_position_ids(model, **inputs)
    with torch.no_grad():
        logits = model(**{**inputs, "attention_mask": inputs["attention_mask"] * ~placeholders},
                       position_ids=positions).logits
    return logits[:, -1].float()


def test_unpaired_vision_delimiters_are_an_error(tiny):
    model, processor = tiny("qwen3_vl")
    inputs = _timestamped(processor, 2)
    ids = inputs["input_ids"]
    start = model.config.vision_start_token_id
    truncated = ids[:, : int((ids[0] == start).nonzero()[1]) + 3]  # cut inside the first frame
    with pytest.raises(ValueError, match="do not pair up"):
        pnd.prior_logits(model, input_ids=torch.cat([truncated, ids[:, -3:]], 1))


def test_a_placeholder_outside_a_vision_block_is_an_error(tiny):
    model, _ = tiny("qwen3_vl")
    ids = torch.tensor([[5, 6, model.config.video_token_id, 7, 8]], device=DEVICE)
    with pytest.raises(ValueError, match="outside a Qwen3-VL"):
        pnd.prior_logits(model, input_ids=ids)


@pytest.mark.parametrize("model_type", ["qwen3_vl", "glm4v", "internvl", "smolvlm", "video_llama_3"])
def test_own_call_prefill_matches_brute_force(model_type):
    """The prior's prefill as a language-model call of its own (no packing) gives the reference's tokens too."""
    from pnd.testing.reference import greedy

    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type, ("Describe the video.", "what colour is the shape? answer."))
    pnd.attach(model, prefill="own_call")
    out = model.generate(**inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                         logits_processor=[pnd.PriorNormalized(0.7)])
    assert torch.equal(out[:, -4:], greedy(model, inputs, 0.7, 4, banned=[model.generation_config.eos_token_id])[0])


@pytest.mark.parametrize("model_type", ["qwen3_vl", "qwen3_5", "internvl", "smolvlm", "video_llama_3", "molmo2",
                                        "glm4v", "video_llava", "perception_lm", "minicpmv4_6",
                                        "minicpmv4_7", *SAVED_FINDER_VIDEO_ARCHITECTURES, "minimax_m3_vl"])
def test_pnd_caption_on_a_local_folder(tmp_path, model_type):
    """`pnd caption --model FOLDER` on a saved model gives what `model.generate` with PriorNormalized gives here."""
    import json

    from transformers import AutoProcessor

    from pnd.cli import main
    from pnd.io.video import read_video, write_video

    model, processor = tiny_model(model_type)
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    # Gemma 4's and MiniMax-M3's tiny video processors keep frames at their size: a multiple of their 28-pixel tokens
    write_video(tmp_path / "v.mp4", random_video(0, frames=8, size=56 if model_type.startswith(("gemma4", "minimax")) else 64))
    assert main(["caption", str(tmp_path / "v.mp4"), "--model", str(tmp_path / "model"), "--alpha", "0.5",
                 "--device", str(DEVICE), "--dtype", "auto",  # the model's own, as it runs here
                 "--frames", "4", "--max-new-tokens", "6", "--workers", "0", "--out", str(tmp_path / "out.jsonl")]) == 0
    got = json.loads((tmp_path / "out.jsonl").read_text())["caption"]
    processor = AutoProcessor.from_pretrained(tmp_path / "model")  # what the command loads (instance settings gone)
    pnd.attach(model, processor)
    inputs = on_device(processor(text=[video_prompt(processor, "Describe the video.")],
                                 videos=[read_video(tmp_path / "v.mp4", 4)], return_tensors="pt"))
    out = model.generate(**inputs, max_new_tokens=6, do_sample=False, logits_processor=[pnd.PriorNormalized(0.5)])
    assert got == processor.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True).strip()


@pytest.mark.parametrize("model_type", ["gemma3", "lfm2_vl"])
def test_pnd_caption_on_an_image_only_family_says_so(tmp_path, model_type):
    """A saved model whose processor takes images only: pnd caption stops with the reason, writing nothing."""
    from pnd.cli import main
    from pnd.io.video import write_video

    model, processor = tiny_model(model_type)
    model.save_pretrained(tmp_path / "model")
    processor.save_pretrained(tmp_path / "model")
    write_video(tmp_path / "v.mp4", random_video(0, frames=8, size=64))
    with pytest.raises(SystemExit, match=f"{model_type}'s processor takes images only"):
        main(["caption", str(tmp_path / "v.mp4"), "--model", str(tmp_path / "model"), "--frames", "4",
              "--out", str(tmp_path / "out.jsonl")])
    assert not (tmp_path / "out.jsonl").exists() or not (tmp_path / "out.jsonl").read_text()


def test_pnd_models_lists_every_family(capsys):
    from pnd.cli import main

    assert main(["models", "--families"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "glm4v, glm4v_moe, glm46v: GLM-4.1V / GLM-4.5V / GLM-4.6V" in lines and "kimi_k25: Kimi K2.5" in lines
    listed = [t for line in lines for t in line.split(":")[0].split(", ")]
    assert sorted(listed) == pnd.supported_model_types()


def test_internvl_prior_hides_frame_labels(tiny):
    """InternVL's `FrameN:` labels: the prior equals the brute-force forward with the whole expansion masked (read by
    the reference from the prompt's text), which a forward with the placeholders masked only does not."""
    model, processor = tiny("internvl")
    inputs = tiny_inputs(processor, "internvl", ("Describe the video.",))
    reference = full_logits(model, inputs, inputs["input_ids"], prior=True)
    torch.testing.assert_close(pnd.prior_logits(model, **inputs).float(), reference, atol=1e-4, rtol=0)
    assert not torch.allclose(_placeholders_masked(model, inputs).float(), reference, atol=1e-3)


@pytest.mark.parametrize("model_type", ["internvl", "minicpmv4_6"])
def test_family_needs_its_processor(model_type):
    """InternVL's frame labels are text no token bounds, MiniCPM-V's delimiters have the processor's ids: without
    the processor the prior refuses, naming the fix."""
    model, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type)
    attachment_of(model).processor = None
    with pytest.raises(ValueError, match=r"pnd.attach\(model, processor\)"):
        pnd.attach(model).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])
    pnd.detach(model)
    out = pnd.attach(model, processor).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])
    assert out.shape[1] == inputs["input_ids"].shape[1] + 2


def test_internvl_prompt_the_processor_did_not_build_is_an_error(tiny):
    """A hand-made prompt, or a processor-built one changed afterwards: its expansion is unknown, never guessed."""
    model, processor = tiny("internvl")
    ids = processor.tokenizer(["user <IMG_CONTEXT> describe it."], return_tensors="pt").input_ids.to(DEVICE)
    with pytest.raises(ValueError, match=r"InternVL visual expansion of prompt row\(s\) \[0\] .* is unknown"):
        pnd.prior_logits(model, input_ids=ids)
    inputs = tiny_inputs(processor, "internvl")
    frame_2, frame_7 = processor.tokenizer.convert_tokens_to_ids(["2", "7"])
    relabelled = inputs["input_ids"].where(inputs["input_ids"] != frame_2, frame_7)
    with pytest.raises(ValueError, match="InternVL visual expansion"):
        pnd.prior_logits(model, input_ids=relabelled, attention_mask=inputs["attention_mask"])


def test_internvl_videos_of_different_frame_counts_are_an_error(tiny):
    from pnd.decoding.captioning import generate_captions

    model, processor = tiny("internvl")
    videos = [random_video(0, frames=4), random_video(1, frames=6)]
    with pytest.raises(ValueError, match=r"cannot batch videos with different frame counts \(got \[4, 6\]\)"):
        generate_captions(pnd.attach(model, processor), processor, videos, alpha=0.5, max_new_tokens=2)


@pytest.mark.parametrize("model_type, fps", [
    ("smolvlm", (2, 1)), ("video_llama_3", (2, 1)),
    # through the generic finder: Gemma 4 `mm:ss`, Cosmos 3 / Cohere Compass / LFM3-VL `<t seconds>`, GLM-4.6V
    # `t seconds`, Muse Glimmer `Time: t.ts`
    *((t, (2, 1)) for t in ("gemma4", "gemma4_unified", "cosmos3_edge", "cosmos3_omni", "cohere_compass", "glm46v",
                            "lfm3_vl", "glm_ocr", "glmga")),
    ("muse_glimmer", (2, 4)), ("muse_spark", (2, 4)),
])
def test_prior_hides_the_timestamps_the_processor_writes(tiny, model_type, fps):
    """Two videos whose expansions differ only in their timestamps (SmolVLM: the intro's duration and `Frame from
    MM:SS:`; VideoLLaMA3: `Time t.ts:`; the finder's families as listed), same token count: the same prior, the
    brute-force one; the placeholder-only prior differs."""
    model, processor = tiny(model_type)
    fast, slow = (on_device(processor(text=[video_prompt(processor, "Describe the video.")], videos=[random_video(0)],
                                      video_metadata=_metadata(rate), return_tensors="pt")) for rate in fps)
    assert fast["input_ids"].shape == slow["input_ids"].shape and not torch.equal(fast["input_ids"], slow["input_ids"])
    prior = pnd.prior_logits(model, **fast)
    torch.testing.assert_close(prior, pnd.prior_logits(model, **slow), atol=1e-5, rtol=0)
    torch.testing.assert_close(prior.float(), full_logits(model, fast, fast["input_ids"], prior=True), atol=1e-4, rtol=0)
    assert not torch.allclose(_placeholders_masked(model, fast), _placeholders_masked(model, slow), atol=1e-3)


def test_lfm2_vl_prior_hides_the_tile_grid(tiny):
    """Two images that LFM2-VL's processor splits into 2x2 and 1x4 tiles: expansions of the same length that differ
    only in their `<|img_row_R_col_C|>` markers. The same prior, the brute-force one (the kept tokens through every
    layer); the placeholder-only prior differs."""
    model, processor = tiny("lfm2_vl")
    text = [video_prompt(processor, "Describe the image.", "image")]
    square, wide = (on_device(processor(text=text, images=[[image]], return_tensors="pt"))
                    for image in (random_video(0, frames=1, size=64)[0], random_video(0, frames=1, size=128)[0, :, :32]))
    assert square["input_ids"].shape == wide["input_ids"].shape
    assert not torch.equal(square["input_ids"], wide["input_ids"])
    prior = pnd.prior_logits(model, **square)
    torch.testing.assert_close(prior, pnd.prior_logits(model, **wide), atol=1e-5, rtol=0)
    torch.testing.assert_close(prior.float(), full_logits(model, square, square["input_ids"], prior=True), atol=1e-4,
                               rtol=0)
    assert not torch.allclose(_placeholders_masked(model, square), _placeholders_masked(model, wide), atol=1e-3)


@pytest.mark.parametrize("special_tokens", [True, False])
def test_lfm2_vl_expansion_of_two_images_in_a_prompt(tiny, special_tokens):
    """A tiled image and a small one in each prompt: the expansion is what the processor replaced; with
    `use_image_special_tokens=False` the processor inserts the `<image>` tokens alone (tiles and thumbnail)."""
    model, processor = tiny("lfm2_vl")
    texts = [processor.apply_chat_template([{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": question}, {"type": "image"}]}], add_generation_prompt=True)
        for question in ("Describe it.", "what colour is the shape? answer.")]
    images = [[random_video(i, frames=1, size=64)[0], random_video(i, frames=1, size=32)[0]] for i in range(2)]
    ids, replaced = (t.to(DEVICE) for t in processor_expansion(processor, texts, images=images,
                                                                use_image_special_tokens=special_tokens))
    assert torch.equal(replaced, ids == model.config.image_token_id) != special_tokens
    assert torch.equal(architecture_for(model).expansion(model, ids), replaced)


def test_lfm2_vl_needs_its_processor_and_whole_image_blocks(tiny):
    """LFM2-VL's image delimiters are tokenizer ids its config lacks: without the processor, or with another family's,
    the prior refuses, naming the fix; a prompt cut inside an image block (its extent unknown) is an error."""
    model, processor = tiny_model("lfm2_vl")
    inputs = tiny_inputs(processor, "lfm2_vl")
    attachment_of(model).processor = None
    with pytest.raises(ValueError, match=r"<\|image_start\|>.*pnd.attach\(model, processor\)"):
        pnd.prior_logits(model, **inputs)
    with pytest.raises(ValueError, match=r"\(LlavaProcessor\) does not write the <\|image_start\|>"):
        pnd.prior_logits(pnd.attach(model, tiny("llava")[1]), **inputs)
    model, _ = tiny("lfm2_vl")
    ids = inputs["input_ids"]
    cut = int((ids[0] == processor.tokenizer.convert_tokens_to_ids("<|image_end|>")).nonzero()[0])
    with pytest.raises(ValueError, match="do not pair up"):
        pnd.prior_logits(model, input_ids=torch.cat([ids[:, :cut], ids[:, -3:]], 1))


def test_smolvlm_language_model_is_its_text_model(tiny):
    """SmolVLM's decoder is `model.model.text_model`: the prior's own prefill calls it (the packed and own-call
    prefills are tested against the brute-force reference above)."""
    model, processor = tiny("smolvlm")
    assert architecture_for(model).language_model(model) is model.model.text_model
    calls = []
    hook = model.model.text_model.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        pnd.prior_logits(model, **tiny_inputs(processor, "smolvlm"))
    finally:
        hook.remove()
    assert calls == [1]


def test_smolvlm_blank_prior_uses_frames_that_are_not_all_zero(tiny):
    """SmolVLM drops all-zero frames as padding, so prior="blank" runs the model on black frames (-1 after
    normalization): its scores are the brute-force ones on such frames."""
    model, processor = tiny("smolvlm")
    inputs = tiny_inputs(processor, "smolvlm")
    with torch.no_grad(), pytest.raises(ValueError, match="features and image tokens do not match"):
        model(**{**inputs, "pixel_values": torch.zeros_like(inputs["pixel_values"])})  # the frames are dropped
    black = {**inputs, "pixel_values": torch.full_like(inputs["pixel_values"], -1.0)}
    out = pnd.attach(model, processor).generate(**inputs, max_new_tokens=3, min_new_tokens=3, do_sample=False,
                                                output_scores=True, return_dict_in_generate=True,
                                                logits_processor=[pnd.PriorNormalized(0.8, prior="blank")])
    ids = inputs["input_ids"]
    for scores in out.scores:
        want = (torch.log_softmax(full_logits(model, inputs, ids, prior=False), -1)
                - 0.8 * torch.log_softmax(full_logits(model, black, ids, prior=False), -1))
        finite = torch.isfinite(scores)
        torch.testing.assert_close(scores[finite], want[finite], atol=1e-4, rtol=0)
        ids = torch.cat([ids, scores.argmax(-1, keepdim=True)], 1)


def test_hyperclovax_video_duration_is_reported(tiny):
    """HyperCLOVAX Vision V2's processor writes each video's duration where its template writes `<|video_duration|>`,
    without reporting it; pnd reports it too (`reported.WRITTEN_UNREPORTED`): the reported expansion is the reference's
    reading of the prompt, the duration's tokens included."""
    model, processor = tiny("hyperclovax_vision_v2")
    ids, replaced = _expansions(processor, "video")
    assert torch.equal(visual_positions(model, ids), replaced)
    assert bool((replaced & (ids != model.config.video_token_id)).any())  # the duration's tokens
