"""Brute-force reference for prior-normalized decoding, independent of pnd's code.

Every step recomputes two full forwards from scratch, without any cache (docs/design.md §3.2):
  conditioned: the model on the whole sequence, pixels included, HF position ids;
  prior:       the same call with the attention mask set to 0 over the whole visual expansion (every token the
               processor inserted for an image or video) and the position ids of the conditioned pass passed
               explicitly; for a model with recurrent layers (Qwen3.5), where masking is not removal, a call on
               the kept tokens alone (the expansion cut out, each row left-padded), at those same position ids.

The expansion is read here with a plain loop over the tokens, and `processor_expansion` reads it from the
processor's own record of its replacements: tests check the two (and pnd's adapters) agree.
"""

import contextlib
import functools
import inspect
import itertools
import re

import torch

from pnd.attachment import attachment_of

PIXEL_KEYS = ("pixel_values", "pixel_values_images", "pixel_values_videos", "image_sizes", "image_grid_thw", "video_grid_thw",
              "image_token_pooling", "image_grids", "image_num_crops", "video_token_pooling", "video_grids",
              "image_grid_hw", "image_merge_sizes", "video_merge_sizes", "video_compression_mask", "target_sizes",
              "target_sizes_videos", "pixel_attention_mask", "spatial_shapes", "pixel_values_local", "num_local_patches",
              "num_frames_per_video", "image_position_ids", "video_position_ids",
              "qformer_input_ids", "qformer_attention_mask",  # the Q-Former families: the instruction the queries read
              "pixel_mask", "high_res_pixel_values",  # Aria's padding mask, DeepSeek-VL hybrid's SAM input
              "flattened_patches")  # Kosmos-2.5's patches
# per-token inputs (0 = text): visual blocks that attend bidirectionally (Gemma 3 and 4, Molmo2), MoE routing of visual
# tokens to vision experts (ERNIE 4.5 VL); the prior's kept tokens and the generated tokens are text
TOKEN_TYPES = ("token_type_ids", "mm_token_type_ids", "moe_mm_token_type_ids")
# prefix LMs (PaliGemma): token type 0 is the prompt's bidirectional prefix, so the generated tokens (the causal suffix,
# as its generate's cache makes them) are 1; the prior's prompt keeps the processor's types (its kept tokens stay in
# the prefix)
SUFFIX_TYPE = {"paligemma": 1}


QWEN3_VL = (("vision_start_token_id", "vision_end_token_id"),)
GLM4V = (("image_start_token_id", "image_end_token_id"), ("video_start_token_id", "video_end_token_id"))
# families whose template wraps the processor's whole expansion in (start, end) token pairs (config attribute names)
DELIMITED = {"qwen3_vl": QWEN3_VL, "qwen3_vl_moe": QWEN3_VL, "glm4v": GLM4V, "glm4v_moe": GLM4V, "qwen3_5": QWEN3_VL,
             "qwen3_5_moe": QWEN3_VL, "glm46v": GLM4V, "cosmos3_omni": QWEN3_VL, "cohere_compass": QWEN3_VL,
             "qwen4_exp": QWEN3_VL, "glm_ocr": GLM4V, "glmga": GLM4V}
# layer_types where masking is not removal: recurrent layers (Qwen3.5, LFM2, Nemotron-H's Mamba-2, GLM-5-next's KDA)
# and indexed attention (an indexer picks keys before any mask applies: GLM-5-next, Qwen4; MiniMax-M3, whose indexer
# pools keys by position here: `position_binned_indexers`), and Inkling's hybrid layers (short convolutions around an
# attention whose relative bias and window are by distance in the whole sequence here: `slot_distance_biases`)
REMOVED_LAYER_TYPES = ("linear_attention", "conv", "indexed_attention", "minimax_m3_sparse", "hybrid", "hybrid_sliding")


def is_hybrid(model):
    """Whether the prior must run on the kept tokens alone, read from the language model's layer types."""
    layer_types = getattr(model.config.get_text_config(decoder=True), "layer_types", None) or ()
    return any(t in REMOVED_LAYER_TYPES for t in layer_types)


# families whose processor writes (start, end) token pairs itself, with one newline token outside each end (Gemma 3:
# "\n\n<start_of_image>...<end_of_image>\n\n", a run of newlines being one token)
# (Gemma 3n: its audio blocks too, `\n\n<start_of_audio>…<end_of_audio>\n\n`)
WRAPPED = {"gemma3": (("boi_token_id", "eoi_token_id"),),
           "gemma3n": (("boi_token_id", "eoi_token_id"), ("boa_token_id", "eoa_token_id"))}
# families whose processor writes (starts, end) blocks itself, hidden with their ends (Molmo2's image views)
BLOCKS = {"molmo2": (("image_start_token_id", "low_res_image_start_token_id"), "image_end_token_id")}


# families whose processor writes unbounded text around the placeholders: what it writes, as it writes it (read
# from the prompt's text with the processor bound to the model; the tiny models' token strings)
_INTERNVL_FRAME = "<img>(?:<IMG_CONTEXT>)+</img>"
_SMOLVLM_IMAGE = "<fake_token_around_image><global-img>(?:<image>)+<fake_token_around_image>"
_SMOLVLM_TILE = "<fake_token_around_image><row_[0-9]+_col_[0-9]+>(?:<image>)+"
# MiniCPM-V: an image id (4.7: images only), then per image or frame `<image>…</image>` and its slices, slice rows
# joined by a newline
_MINICPMV_PADS = r"(?:<\|image_pad\|>|<\|video_pad\|>)+"
_MINICPMV_SLICES = rf"<slice>{_MINICPMV_PADS}</slice>"
_MINICPMV = (rf"(?:<image_id>[0-9]+</image_id>)?(?:<image>{_MINICPMV_PADS}</image>"
             rf"(?:(?:{_MINICPMV_SLICES})+(?:\n(?:{_MINICPMV_SLICES})+)*)?)+")
# Nemotron-H Omni: per pair of frames `Frame 1 and frame 2: <img>…</img>` (timestamps when given), on lines of their own
_NEMOTRON_TUBELET = r"Frame [0-9]+(?: sampled at [0-9.]+ seconds)?(?: and frame [0-9]+(?: sampled at [0-9.]+ seconds)?)*: " \
                    r"<img>(?:<image>)+</img>"
_SECONDS_FRAMES = r"(?:<[0-9.]+ seconds><\|vision_start\|>(?:<\|video_pad\|>)+<\|vision_end\|>)+|(?:<\|image_pad\|>)+"
# Muse Glimmer and Muse Spark: `<|vid_start|>`, per frame group `Time: t.ts` + placeholders, separators, `<|vid_end|>`
_MUSE = (r"<\|vid_start\|>Time: [0-9.]+s(?:<\|video\|>)+(?:<\|vid_frame_separator\|>Time: [0-9.]+s(?:<\|video\|>)+)*"
         r"<\|vid_end\|>|<\|image_start\|>(?:<\|patch\|>)+<\|image_end\|>")
TEXT_EXPANDED = {
    "internvl": rf"Frame1: {_INTERNVL_FRAME}(?:\nFrame[0-9]+: {_INTERNVL_FRAME})*|{_INTERNVL_FRAME}",
    "smolvlm": r"You are provided the following series of [a-z -]+ frames from a [0-9:]+ \[H:MM:SS\] video\.\n"
               rf"(?:\nFrame from [0-9]+:[0-9][0-9]:{_SMOLVLM_IMAGE})+\n\n"
               rf"|(?:(?:{_SMOLVLM_TILE})+\n)+\n{_SMOLVLM_IMAGE}|{_SMOLVLM_IMAGE}",
    "video_llama_3": r"Time [0-9]+\.[0-9]s:(?:<\|video_pad\|>)+(?:,Time [0-9]+\.[0-9]s:(?:<\|video_pad\|>)*)*"
                     r"|(?:<\|image_pad\|>)+",
    # Molmo2 video prompts (its image-only prompts are BLOCKS): `t.t <frame_start>…<frame_end>` per frame, spaced
    # LFM2-VL: `<|image_start|>` … `<|image_end|>` around tiles, row/col markers and thumbnail; bare `<image>` tokens
    # without the special tokens
    "lfm2_vl": r"<\|image_start\|>.*?<\|image_end\|>|(?:<image>)+",
    "molmo2": r"[0-9]+\.[0-9] <frame_start>(?:<im_patch>)+<frame_end>(?: [0-9]+\.[0-9] <frame_start>(?:<im_patch>)+"
              r"<frame_end>)*|(?:<low_res_im_start>|<im_start>)(?:<im_patch>|<im_col>)*<im_end>",
    "minicpmv4_6": _MINICPMV,
    # families registered through the generic finder: what their processors write, from processing_<family>.py
    "idefics3": rf"(?:(?:{_SMOLVLM_TILE})+\n)+\n{_SMOLVLM_IMAGE}|{_SMOLVLM_IMAGE}",
    "mistral3": r"(?:(?:\[IMG\])+\[IMG_BREAK\])*(?:\[IMG\])+\[IMG_END\]",
    "mistral_large4": r"(?:(?:\[IMG\])+\[IMG_BREAK\])*(?:\[IMG\])+\[IMG_END\]",
    # processing_kosmos2.py: `<image>`, one ordinary id per latent query, `</image>`, after `<s>`
    # (processing_kosmos2_5.py: `<s>` per latent query)
    **dict.fromkeys(("kosmos-2", "kosmos-2.5"), r"(?s)<image>.*?</image>"),
    "gemma4": r"(?:[0-9][0-9]:[0-9][0-9] <\|image>(?:<\|video\|>)+<image\|>)(?: [0-9][0-9]:[0-9][0-9] <\|image>"
              r"(?:<\|video\|>)+<image\|>)*|<\|image>(?:<\|image\|>)+<image\|>",
    "cosmos3_edge": _SECONDS_FRAMES,
    "lfm3_vl": _SECONDS_FRAMES,
    "kimi_k25": r"(?:[0-9:.]+<\|media_begin\|>video<\|media_content\|>(?:<\|kimi_k25_video_placeholder\|>)+"
                r"<\|media_end\|>)+|(?:<\|media_pad\|>)+",
    "muse_glimmer": _MUSE,
    "muse_spark": _MUSE,
    # the video's duration (the template's `"video_duration": <|video_duration|>`) and the placeholders
    "hyperclovax_vision_v2": r'(?<="video_duration": )[0-9.]+|(?:<\|video_pad\|>)+|(?:<\|image_pad\|>)+',
    "minicpm_ocr": _MINICPMV,
    "step3p7": r"(?:<patch_start>(?:<im_patch>)+<patch_end>(?:<patch_newline>)?)*<im_start>(?:<im_patch>)+<im_end>",
    "minicpmv4_7": _MINICPMV,
    "nemotron_h_omni": rf"{_NEMOTRON_TUBELET}(?:\n{_NEMOTRON_TUBELET})*|<img>(?:<image>)+</img>",
    "minimax_m3_vl": r"(?:(?:\]<\][0-9.]+ seconds\[>\[)?\]<\]start of image\[>\[(?:\]<\](?:image|video)\[>\[)+"
                     r"\]<\]end of image\[>\[)+",
    "chameleon": r"<racm3:break>(?:<image>)+<eoss>",
    "janus": r"<begin_of_image>(?:<image_placeholder>)+<end_of_image>",
    "emu3": r"<\|image start\|>[0-9]+\*[0-9]+<\|image token\|>(?:<image>)+<\|extra_201\|><\|image end\|>",
    # Idefics2: fake-token blocks (adjacent fakes merged), and the space its processor puts before a word that follows
    "idefics2": r"(?:<fake_token_around_image>(?:<image>)+)+<fake_token_around_image>(?: (?=[^\s<]))?",
    # Llama 4: per image, tiles of patches (x separators between tiles of a row, a y separator after each row), then the
    # global view after <|image|>
    "llama4": r"<\|image_start\|>(?:(?:(?:<\|patch\|>)+(?:<\|tile_x_separator\|>)?)+<\|tile_y_separator\|>)*"
              r"<\|image\|>(?:<\|patch\|>)+<\|image_end\|>",
    "glm5_next": r"(?:<\|begin_of_image\|>(?:<\|image\|>)+<\|end_of_image\|>[0-9.]+ seconds)+|(?:<\|image\|>)+",
    # tiles and line breaks (pnd/architectures/families.py)
    "cohere2_vision": r"<\|START_OF_IMG\|>(?:(?:<\|IMG_PATCH\|>)+<\|IMG_LINE_BREAK\|>)+<\|END_OF_IMG\|>",
    "aya_vision": r"<\|START_OF_IMG\|>(?:TILE_[0-9]+(?:<\|IMG_PATCH\|>)+)*TILE_GLOBAL(?:<\|IMG_PATCH\|>)+<\|END_OF_IMG\|>",
    "granite_docling": r"(?:(?:<fake_token_around_image><row_[0-9]+_col_[0-9]+>(?:<image>)+)+\n)+"
                       r"(?:\n<fake_token_around_image><global-img>(?:<image>)+<fake_token_around_image>)?",
    "ovis2": r"<IMG_START>(?:<IMG_ATOM>)+<IMG_GRID>(?:(?:<IMG_ATOM>)+(?:<IMG_COL>|<IMG_ROW>)?)*<IMG_END>",
    "qianfan_ocr": r"<img>(?:<IMG_CONTEXT>)+</img>",
    # Fuyu (pnd/architectures/fuyu.py): per row of patches, `|SPEAKER|` tokens and a `|NEWLINE|` (its processor's
    # `<s>` after them is the prompt's text: `TEXT_IN_REPLACEMENT`)
    "fuyu": r"(?:(?:\|SPEAKER\|)+\|NEWLINE\|)+",
}

TEXT_EXPANDED["gemma4_unified"] = TEXT_EXPANDED["gemma4"]


def _text_expansion(model, input_ids):
    """Tokens holding a character of a match of the family's TEXT_EXPANDED pattern in the decoded prompt."""
    tokenizer = attachment_of(model).processor.tokenizer
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    for row, ids in enumerate(input_ids.tolist()):
        pieces = [tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in ids]
        assert "".join(pieces) == tokenizer.decode(ids, clean_up_tokenization_spaces=False)  # per-token text adds up
        lengths = torch.tensor([len(p) for p in pieces], device=input_ids.device)
        ends = lengths.cumsum(0)
        for match in re.finditer(TEXT_EXPANDED[model.config.model_type], "".join(pieces)):
            begin, end = match.span()
            mask[row] |= (ends - lengths < end) & (ends > begin)
    return mask


def visual_positions(model, input_ids):
    """The visual expansion: the placeholder tokens, for DELIMITED families every token inside an outermost
    start...end pair, for WRAPPED families every start...end pair with its ends and the token on each side, for
    BLOCKS families every block with its ends, for TEXT_EXPANDED families (Molmo2: its video prompts) every token
    holding a character of the processor's text."""
    config = model.config
    video_frames = getattr(config, "frame_start_token_id", None)  # Molmo2: its timestamps are text
    if config.model_type in TEXT_EXPANDED and (config.model_type not in BLOCKS or (input_ids == video_frames).any()):
        return _text_expansion(model, input_ids)
    if config.model_type in BLOCKS:
        starts, end = BLOCKS[config.model_type]
        starts = [getattr(config, k) for k in starts]
        mask = torch.zeros_like(input_ids, dtype=torch.bool)
        for row, ids in enumerate(input_ids.tolist()):
            inside = False
            for i, token in enumerate(ids):
                inside |= token in starts
                mask[row, i] = inside
                inside &= token != getattr(config, end)
        return mask
    if config.model_type in WRAPPED:
        mask = torch.zeros_like(input_ids, dtype=torch.bool)
        pairs = [[getattr(config, k) for k in pair] for pair in WRAPPED[config.model_type]]
        for (start, end), (row, ids) in itertools.product(pairs, enumerate(input_ids.tolist())):
            inside = False
            for i, token in enumerate(ids):
                if token == start:
                    inside = True
                    mask[row, i - 1] = True
                if inside:
                    mask[row, i] = True
                if token == end:
                    inside = False
                    mask[row, i + 1] = True
        return mask
    if config.model_type not in DELIMITED:
        return placeholder_positions(model, input_ids)
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    for start, end in DELIMITED[config.model_type]:
        start, end = getattr(config, start), getattr(config, end)
        for row, ids in enumerate(input_ids.tolist()):
            depth = 0
            for i, token in enumerate(ids):
                if token == end:
                    depth -= 1
                mask[row, i] |= depth > 0
                if token == start:
                    depth += 1
    return mask


def placeholder_positions(model, input_ids):
    """The image and video placeholder tokens alone (for most families only a part of the visual expansion)."""
    ids = [getattr(model.config, k, None) for k in ("image_token_id", "video_token_id")]
    return torch.isin(input_ids, torch.tensor([i for i in ids if i is not None], device=input_ids.device))


def placeholders_only_removed(model, inputs, sequence):
    """A leaky prior, for tests that show it decodes other tokens: the kept-tokens forward with only the placeholders
    cut out (timestamps, labels and delimiters stay)."""
    mask = sequence_mask(inputs, sequence)
    kept = mask.bool()
    kept[:, : inputs["input_ids"].shape[1]] &= ~placeholder_positions(model, inputs["input_ids"])
    return kept_tokens_logits(model, sequence, kept, conditioned_positions(model, sequence, mask, inputs))


# text a processor writes inside its replacement that a prompt without an image has too, which the family's rule keeps
# in the prior: Fuyu's `<s>` after the image (pnd/architectures/fuyu.py)
TEXT_IN_REPLACEMENT = {"fuyu": "<s>"}


def text_in_replacement(processor, model_type: str, ids: torch.Tensor) -> torch.Tensor:
    """Mask of the family's `TEXT_IN_REPLACEMENT` tokens in `ids` (none for most families)."""
    text = TEXT_IN_REPLACEMENT.get(model_type)
    return torch.zeros_like(ids, dtype=torch.bool) if text is None else ids == processor.tokenizer.convert_tokens_to_ids(
        text)


def processor_expansion(processor, text, **visuals):
    """(input_ids, mask of the tokens holding a character the processor inserted), from the processor's own offsets.

    A token that merges inserted text with the template's (Gemma 3's `\n\n` after a template newline) counts."""
    out = processor(text=text, **visuals, return_tensors="pt", padding=True, return_text_replacement_offsets=True,
                    return_offsets_mapping=True)
    if "offset_mapping" not in out:  # Fuyu tokenizes parts of the prompt apart and returns no offsets
        return out["input_ids"], _decoded_replacements(processor.tokenizer, out)
    mask = torch.zeros_like(out["input_ids"], dtype=torch.bool)
    for row, replacements in enumerate(out["text_replacement_offsets"]):
        starts, ends = out["offset_mapping"][row].unbind(-1)
        for replacement in replacements:
            begin, end = replacement["new_span"]
            mask[row] |= (starts < end) & (ends > begin)  # any token holding an inserted character
    return out["input_ids"], mask


def _decoded_replacements(tokenizer, out):
    """The tokens holding a character of each replacement, read from the attended tokens' decoded text, which must
    hold the replacement's text at its span."""
    mask = torch.zeros_like(out["input_ids"], dtype=torch.bool)
    for row, replacements in enumerate(out["text_replacement_offsets"]):
        kept = out["attention_mask"][row].bool()
        pieces = [tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in out["input_ids"][row][kept]]
        lengths = torch.tensor([len(p) for p in pieces], device=kept.device)
        ends = lengths.cumsum(0)
        starts = ends - lengths
        for replacement in replacements:
            begin, end = replacement["new_span"]
            assert "".join(pieces)[begin:end] == replacement["replacement"]
            mask[row, kept.nonzero().flatten()] |= (starts < end) & (ends > begin)
    return mask


def conditioned_positions(model, input_ids, mask, inputs):
    """Position ids the model gives this sequence: cumsum of the mask, or Qwen2-VL's M-RoPE index (MiniCPM-V 4.7:
    its canvas M-RoPE index)."""
    base = getattr(model, "model", None)  # Nemotron-H Omni has none (1-D positions)
    if hasattr(base, "get_rope_index"):
        accepted = inspect.signature(base.get_rope_index).parameters
        grids = {k: inputs[k] for k in ("image_grid_thw", "video_grid_thw", "target_sizes", "target_sizes_videos")
                 if k in inputs and k in accepted}
        if "mm_token_type_ids" in accepted:
            mm = inputs["mm_token_type_ids"]
            grids["mm_token_type_ids"] = torch.cat([mm, mm.new_zeros(mm.shape[0], input_ids.shape[1] - mm.shape[1])], 1)
        if "second_per_grids" in accepted and "video_second_per_grid" in inputs:  # Qwen3-Omni's time stride
            grids["second_per_grids"] = inputs["video_second_per_grid"]
        positions, _ = base.get_rope_index(input_ids, attention_mask=mask, **grids)
        return positions
    if model.config.model_type in ("kosmos-2", "kosmos-2.5"):  # modeling_kosmos2(_5).py: from its padding id + 1, pads
        # skipped
        return mask.long().cumsum(-1) * mask.long() + model.config.text_config.pad_token_id
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def full_logits(model, inputs, sequence, prior: bool, removed: bool | None = None):
    """Last-position logits of one from-scratch forward over `sequence` (prompt + generated tokens).

    `removed` (the prior only; default: whether the model has recurrent layers): the kept tokens alone, instead of
    the whole sequence with the expansion masked out of attention.
    """
    mask = sequence_mask(inputs, sequence)
    positions = conditioned_positions(model, sequence, mask, inputs)
    if prior:  # the prompt's visual slots (a generated placeholder id is just a token)
        visual = visual_positions(model, inputs["input_ids"])
        mask[:, : visual.shape[1]] *= ~visual
        if is_hybrid(model) if removed is None else removed:
            return kept_tokens_logits(model, sequence, mask.bool(), positions)
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    suffix = SUFFIX_TYPE.get(model.config.model_type)
    for key in TOKEN_TYPES:  # the processor's for the conditioned pass, text (0) for generated tokens and the prior
        if key in inputs:
            types = inputs[key] if suffix is not None else inputs[key] * (not prior)
            generated = types.new_full((types.shape[0], sequence.shape[1] - types.shape[1]), suffix or 0)
            pixels[key] = torch.cat([types, generated], 1)
    if "image_embeds_position_mask" in inputs:  # Kosmos-2: the slots its image features fill (masked for the prior)
        slots = inputs["image_embeds_position_mask"]
        pixels["image_embeds_position_mask"] = torch.cat([slots, slots.new_zeros(slots.shape[0], sequence.shape[1] -
                                                                                 slots.shape[1])], 1)
    out = model_forward(model, sequence, inputs["input_ids"].shape[1], attention_mask=mask, position_ids=positions,
                        use_cache=False, **pixels)
    return out.logits[:, -1].float()


def model_forward(model, sequence, prompt_length, **inputs):
    """`model(input_ids=sequence, **inputs)`; for the Q-Former families (BLIP-2, InstructBLIP, InstructBLIP-Video),
    whose forward passes position ids on to the Q-Former as well, what their `generate` does: the projected query
    outputs scattered into the prompt's placeholder embeddings, then the language model on those embeddings.
    Unlimited-OCR's attention is written out for the sequence (`window_masks`)."""
    if inputs.get("attention_mask") is not None:
        inputs["attention_mask"] = window_masks(model, inputs["attention_mask"], prompt_length)
    if not hasattr(model, "query_tokens"):
        return model(input_ids=sequence, **inputs)
    features = getattr(model, "get_video_features", None) or model.get_image_features
    qformer = {k: inputs.pop(k) for k in ("qformer_input_ids", "qformer_attention_mask") if k in inputs}
    queries = features(inputs.pop("pixel_values"), **qformer).pooler_output
    slots = torch.zeros_like(sequence, dtype=torch.bool)
    slots[:, :prompt_length] = placeholder_positions(model, sequence[:, :prompt_length])  # generated ones are tokens
    embeds = model.get_input_embeddings()(sequence).masked_scatter(slots[..., None], queries)
    return model.language_model(inputs_embeds=embeds, **inputs)


def additive_mask(allowed, dtype):
    """An additive attention mask: 0 where `allowed`, the dtype's minimum elsewhere (on `allowed`'s device)."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(~allowed, torch.finfo(dtype).min)


def window_masks(model, mask, prompt_length):
    """The 2-D `mask`, or for a model with reference sliding-window attention (Unlimited-OCR), {layer type: additive
    4-D mask} written out: every token sees the attended slots before it (full attention), and in R-SWA layers only the
    prompt's and those of the last `sliding_window` tokens after the prompt, itself included
    (modeling_unlimited_ocr.py: its cache keeps the prompt, a window of the generated tokens)."""
    config = model.config.get_text_config(decoder=True)
    if "reference_sliding_attention" not in (getattr(config, "layer_types", None) or ()):
        return mask
    slots = torch.arange(mask.shape[1], device=mask.device)
    query, key = slots[:, None], slots[None, :]
    causal = (key <= query)[None] & mask.bool()[:, None, :]
    window = causal & ((key < prompt_length) | (query - key < config.sliding_window))
    return {name: additive_mask(seen, model.dtype)[:, None]
            for name, seen in (("full_attention", causal), ("reference_sliding_attention", window))}


def sequence_mask(inputs, sequence):
    """The attention mask of `sequence`: the prompt's, then 1 for every generated token."""
    prompt_mask = inputs["attention_mask"]
    return torch.cat([prompt_mask, prompt_mask.new_ones(sequence.shape[0], sequence.shape[1] - prompt_mask.shape[1])], 1)


def kept_tokens_logits(model, sequence, kept, positions):
    """Last logits of `kept_tokens_forward`."""
    return kept_tokens_forward(model, sequence, kept, positions)[0].logits[:, -1].float()


def kept_tokens_forward(model, sequence, kept, positions, **kwargs):
    """A forward on each row's `kept` tokens alone, left-padded, at their `positions` (batch, L) or (rows, batch, L);
    the attention mask is explicit (non-contiguous positions, docs/design.md §8). Returns the model's output and
    the (batch, width) mask of the kept tokens in that compacted batch."""
    width = int(kept.sum(1).max())
    ids = sequence.new_full((sequence.shape[0], width), model.generation_config.pad_token_id)
    mask = torch.zeros_like(ids)
    compact = positions.new_zeros(*positions.shape[:-1], width)
    slots = torch.zeros_like(ids)  # each kept token's slot in `sequence`
    for row in range(sequence.shape[0]):
        n = int(kept[row].sum())
        ids[row, width - n :], mask[row, width - n :] = sequence[row, kept[row]], 1
        compact[..., row, width - n :] = positions[..., row, kept[row]]
        slots[row, width - n :] = kept[row].nonzero().flatten()
    with position_binned_indexers(model, compact, mask.bool()), slot_distance_biases(model, slots):
        out = model(input_ids=ids, attention_mask=_window_masks(model, mask, slots), position_ids=compact,
                    **{"use_cache": False, **kwargs})
    return out, mask.bool()


@contextlib.contextmanager
def position_binned_indexers(model, positions, valid):
    """MiniMax-M3's sparse layers for a cache-free forward on the kept tokens alone (keys = the call's tokens, at
    `positions` (batch, S), `valid` (batch, S) the non-padding ones), as its indexer's TODO describes them for a
    content-relative run: key blocks are bins of positions (`position // block_size`), not runs of slots; only valid
    keys at or before the query's position are scored; each block's score is its best key's, the query's own and
    `index_local_blocks - 1` blocks before it always kept, and the top `index_topk_blocks` blocks chosen. Attention
    then sees the valid, causal keys of the chosen blocks. Written from the indexer's description, not from pnd."""
    indexers = [m for m in model.modules() if type(m).__name__ == "MiniMaxM3VLIndexer"]
    if not indexers:
        yield
        return
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import apply_rotary_pos_emb

    seen = valid[:, None, :] & (positions[:, None, :] <= positions[:, :, None])  # (batch, queries, keys)

    def select(indexer, hidden_states, position_embeddings, past_key_values, position_ids):
        assert torch.equal(position_ids, positions)
        batch, length, _ = hidden_states.shape
        q = indexer.q_norm(indexer.q_proj(hidden_states).view(batch, length, -1, indexer.head_dim)).transpose(1, 2)
        k = indexer.k_norm(indexer.k_proj(hidden_states).view(batch, length, 1, indexer.head_dim)).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = apply_rotary_pos_emb(q, k, cos[..., : indexer.head_dim], sin[..., : indexer.head_dim])
        if past_key_values is not None:  # a fresh cache (tests compare its indexer keys): this call's keys only
            assert past_key_values.layers[indexer.layer_idx].update_index(k).shape[2] == length
        scores = (q.float() @ k.float().transpose(-1, -2)).masked_fill(~seen[:, None], -torch.inf)
        blocks = int(positions.max()) // indexer.block_size + 1
        bins = (positions // indexer.block_size)[:, None, None, :].expand_as(scores)
        pooled = scores.new_full((*scores.shape[:-1], blocks), -torch.inf).scatter_reduce(-1, bins, scores, "amax")
        own = positions // indexer.block_size
        for back in range(indexer.local_blocks):
            local = (own - back).clamp(min=0)[:, None, :, None].expand(-1, pooled.shape[1], -1, 1)
            pooled.scatter_(-1, local, torch.inf)
        best, chosen = pooled.topk(min(indexer.topk_blocks, blocks), dim=-1)
        return chosen.masked_fill(best == -torch.inf, -1)

    def block_mask(indexer, chosen, attention_mask, key_length, dtype, device, position_ids):
        blocks = int(positions.max()) // indexer.block_size + 1
        picked = torch.zeros(*chosen.shape[:-1], blocks + 1, dtype=torch.bool, device=chosen.device)
        picked.scatter_(-1, chosen.masked_fill(chosen < 0, blocks), True)
        bins = (positions // indexer.block_size)[:, None, None, :].expand(*chosen.shape[:-1], -1)
        keep = picked.gather(-1, bins) & seen[:, None]  # (batch, indexer heads, queries, keys)
        keep = keep.repeat_interleave(model.config.get_text_config(decoder=True).num_attention_heads // keep.shape[1], 1)
        return additive_mask(keep, dtype)

    before = [dict(vars(indexer)) for indexer in indexers]  # pnd's own forward, where pnd.attach put one
    for indexer in indexers:
        indexer.forward = functools.partial(select, indexer)
        indexer.build_block_mask = functools.partial(block_mask, indexer)
    try:
        yield
    finally:
        for indexer, attributes in zip(indexers, before):
            for name in ("forward", "build_block_mask"):
                vars(indexer).pop(name)
                if name in attributes:
                    setattr(indexer, name, attributes[name])


@contextlib.contextmanager
def slot_distance_biases(model, slots):
    """Inkling's relative position biases for a cache-free forward on the kept tokens alone: by each pair's distance in
    slots of the whole sequence (`slots` (batch, S): each kept token's), as the masked forward over the whole sequence
    gives them, not by the distance in the compacted batch. The bias is `relative_states @ proj` read at the backward
    distance, zero outside [0, rel_extent). Written from `Inkling2RelativeLogits`' description, not from pnd."""
    biases = [m for m in model.modules() if type(m).__name__ in ("InklingRelativeLogits", "Inkling2RelativeLogits")]
    if not biases:
        yield
        return
    behind = (slots[:, :, None] - slots[:, None, :])[:, None]  # (batch, 1, queries, keys)

    def forward(bias, relative_states, query_positions, key_positions):
        profiles = torch.einsum("bqhd,de->bhqe", relative_states, bias.proj)  # (batch, heads, queries, extent)
        reach = behind.expand(-1, profiles.shape[1], -1, -1)
        read = profiles.gather(-1, reach.clamp(0, bias.rel_extent - 1))
        return torch.where((reach >= 0) & (reach < bias.rel_extent), read, torch.zeros_like(read))

    before = [vars(bias).get("forward") for bias in biases]  # pnd's own forward, where pnd.attach put one
    for bias in biases:
        bias.forward = functools.partial(forward, bias)
    try:
        yield
    finally:
        for bias, forward_before in zip(biases, before):
            vars(bias).pop("forward")
            if forward_before is not None:
                bias.forward = forward_before


def _window_masks(model, mask, slots):
    """The attention mask of a kept-tokens forward: `mask` (2-D), except on a model with sliding-window attention
    layers, whose window stays over the slots of the whole sequence (the removed span counts, as in the masked
    forward of an attention-only model): per layer type, 4-D additive masks for attention layers, `mask` for recurrent
    ones."""
    config = model.config.get_text_config(decoder=True)
    types = getattr(config, "layer_types", None) or ()
    if "hybrid_sliding" in types:  # Inkling: its layers read the masks of these three names
        types = ("full_attention", "sliding_attention", "linear_attention")
    if "sliding_attention" not in types:
        return mask
    behind = slots[:, :, None] - slots[:, None, :]  # (batch, queries, keys) in slots of the whole sequence
    allowed = mask.bool()[:, None, :] & (behind >= 0)
    allowed |= torch.eye(mask.shape[1], dtype=torch.bool, device=mask.device)  # a padding query sees itself
    full = additive_mask(allowed, model.dtype)[:, None]
    per_type = {"full_attention": full, "indexed_attention": full,  # dots3's sparse layers
                "sliding_attention": additive_mask(allowed & (behind < config.sliding_window), model.dtype)[:, None]}
    return {kind: per_type.get(kind, mask) for kind in set(types)}  # recurrent layers: the 2-D padding mask


def normalized_scores(model, inputs, sequence, alpha, prior=None):
    """s = log_softmax(cond) - alpha * log_softmax(prior) for the next token after `sequence`.

    `prior(model, inputs, sequence)` replaces the reference prior's logits (tests that show a wrong prior changes
    the tokens)."""
    cond = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1)
    if alpha == 0:
        return cond
    prior_logits = full_logits(model, inputs, sequence, prior=True) if prior is None else prior(model, inputs, sequence)
    return cond - alpha * torch.log_softmax(prior_logits, -1)


def greedy(model, inputs, alpha, steps, banned=(), prior=None):
    """Normalized greedy decoding by brute force: (generated tokens, per-step scores). Tokens in `banned` are never
    chosen (as generate's `min_new_tokens` bans the end-of-sequence token); `prior` as for `normalized_scores`."""
    sequence = inputs["input_ids"]
    scores = []
    for _ in range(steps):
        s = normalized_scores(model, inputs, sequence, alpha, prior)
        scores.append(s)
        choice = s.clone()
        choice[:, list(banned)] = -torch.inf
        sequence = torch.cat([sequence, choice.argmax(-1, keepdim=True)], dim=1)
    return sequence[:, inputs["input_ids"].shape[1] :], scores


def forced_scores(model, inputs, generated, alpha):
    """Per-step normalized scores (batch, steps, vocab) along given generated tokens."""
    prompt = inputs["input_ids"]
    steps = []
    for k in range(generated.shape[1]):
        steps.append(normalized_scores(model, inputs, torch.cat([prompt, generated[:, :k]], 1), alpha))
    return torch.stack(steps, 1)


# --- other decoding methods (docs/methods.md): a combination of the conditioned and a prior's log-probabilities ---


def contrast_prior(contrast):
    """The prior of a contrast input (VCD, ICD, prior="inputs"): one from-scratch forward of the contrast prompt (its
    own pixels, positions and mask) followed by the generated tokens, as a plain call of the model."""
    def prior(model, inputs, sequence):
        generated = sequence[:, inputs["input_ids"].shape[1] :]
        return full_logits(model, contrast, torch.cat([contrast["input_ids"], generated], 1), prior=False)
    return prior


def text_prior(model, inputs, sequence):
    """M3ID's unconditioned model: the sequence with the visual expansion cut out, the kept tokens alone at positions
    0, 1, 2, ... (the prompt as if it had no visual input)."""
    mask = sequence_mask(inputs, sequence).bool()
    visual = visual_positions(model, inputs["input_ids"])
    mask[:, : visual.shape[1]] &= ~visual
    positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
    if conditioned_positions(model, sequence, sequence_mask(inputs, sequence), inputs).ndim == 3:  # M-RoPE: text
        positions = positions.expand(3, -1, -1)
    return kept_tokens_logits(model, sequence, mask, positions)


def masked_prior(model, inputs, sequence):
    """pnd's prior (docs/design.md §1) by brute force."""
    return full_logits(model, inputs, sequence, prior=True)


def method_scores(model, inputs, sequence, combine, prior, step):
    """`combine(log p_c, log p_prior, step)` for the next token after `sequence` (step 1: the first generated one)."""
    cond = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1)
    return combine(cond, torch.log_softmax(prior(model, inputs, sequence).float(), -1), step)


def method_greedy(model, inputs, steps, combine, prior, banned=()):
    """Greedy decoding by brute force on `method_scores`: (generated tokens, per-step scores)."""
    sequence, scores = inputs["input_ids"], []
    for step in range(1, steps + 1):
        s = method_scores(model, inputs, sequence, combine, prior, step)
        scores.append(s)
        choice = s.clone()
        choice[:, list(banned)] = -torch.inf
        sequence = torch.cat([sequence, choice.argmax(-1, keepdim=True)], dim=1)
    return sequence[:, inputs["input_ids"].shape[1] :], scores


def method_forced(model, inputs, generated, combine, prior):
    """Per-step `method_scores` (batch, steps, vocab) along given generated tokens."""
    prompt = inputs["input_ids"]
    return torch.stack([method_scores(model, inputs, torch.cat([prompt, generated[:, :k]], 1), combine, prior, k + 1)
                        for k in range(generated.shape[1])], 1)
