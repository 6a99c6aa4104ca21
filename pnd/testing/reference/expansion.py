"""The brute-force reference's visual expansion: which tokens of a prompt the processor inserted for an image or
video, read with plain loops over the tokens (`visual_positions`), and from the processor's own record of its
replacements (`processor_expansion`), independently of pnd's adapters (tests check the three agree).
"""

import itertools
import re

import torch

from ...attachment import attachment_of

QWEN3_VL = (("vision_start_token_id", "vision_end_token_id"),)
GLM4V = (("image_start_token_id", "image_end_token_id"), ("video_start_token_id", "video_end_token_id"))
# families whose template wraps the processor's whole expansion in (start, end) token pairs (config attribute names)
DELIMITED = {"qwen3_vl": QWEN3_VL, "qwen3_vl_moe": QWEN3_VL, "glm4v": GLM4V, "glm4v_moe": GLM4V, "qwen3_5": QWEN3_VL,
             "qwen3_5_moe": QWEN3_VL, "glm46v": GLM4V, "cosmos3_omni": QWEN3_VL, "cohere_compass": QWEN3_VL,
             "qwen4_exp": QWEN3_VL, "glm_ocr": GLM4V, "glmga": GLM4V}

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
    # a video's frames count from 1 again in the next video: the newline between two is the template's
    "internvl": rf"Frame1: {_INTERNVL_FRAME}(?:\nFrame(?!1:)[0-9]+: {_INTERNVL_FRAME})*|{_INTERNVL_FRAME}",
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
