"""Brute-force reference for prior-normalized decoding, independent of pnd's code.

Every step recomputes two full forwards from scratch, without any cache (docs/design.md §3.2):
  conditioned: the model on the whole sequence, pixels included, HF position ids;
  prior:       the same call with the attention mask set to 0 over the whole visual expansion (every token the
               processor inserted for an image or video) and the position ids of the conditioned pass passed
               explicitly.

The expansion is read here with a plain loop over the tokens, and `processor_expansion` reads it from the
processor's own record of its replacements: tests check the two (and pnd's adapters) agree.
"""

import re

import torch

PIXEL_KEYS = ("pixel_values", "pixel_values_images", "pixel_values_videos", "image_sizes", "image_grid_thw", "video_grid_thw",
              "image_merge_sizes", "video_merge_sizes", "video_compression_mask")


QWEN3_VL = (("vision_start_token_id", "vision_end_token_id"),)
GLM4V = (("image_start_token_id", "image_end_token_id"), ("video_start_token_id", "video_end_token_id"))
# families whose template wraps the processor's whole expansion in (start, end) token pairs (config attribute names)
DELIMITED = {"qwen3_vl": QWEN3_VL, "qwen3_vl_moe": QWEN3_VL, "glm4v": GLM4V, "glm4v_moe": GLM4V}


# families whose processor writes unbounded text around the placeholders: what it writes, as it writes it (read
# from the prompt's text with the processor bound to the model; the tiny models' token strings)
_INTERNVL_FRAME = "<img>(?:<IMG_CONTEXT>)+</img>"
_SMOLVLM_IMAGE = "<fake_token_around_image><global-img>(?:<image>)+<fake_token_around_image>"
_SMOLVLM_TILE = "<fake_token_around_image><row_[0-9]+_col_[0-9]+>(?:<image>)+"
TEXT_EXPANDED = {
    "internvl": rf"Frame1: {_INTERNVL_FRAME}(?:\nFrame[0-9]+: {_INTERNVL_FRAME})*|{_INTERNVL_FRAME}",
    "smolvlm": r"You are provided the following series of [a-z -]+ frames from a [0-9:]+ \[H:MM:SS\] video\.\n"
               rf"(?:\nFrame from [0-9]+:[0-9][0-9]:{_SMOLVLM_IMAGE})+\n\n"
               rf"|(?:(?:{_SMOLVLM_TILE})+\n)+\n{_SMOLVLM_IMAGE}|{_SMOLVLM_IMAGE}",
    "video_llama_3": r"Time [0-9]+\.[0-9]s:(?:<\|video_pad\|>)+(?:,Time [0-9]+\.[0-9]s:(?:<\|video_pad\|>)*)*"
                     r"|(?:<\|image_pad\|>)+",
}


def _text_expansion(model, input_ids):
    """Tokens holding a character of a match of the family's TEXT_EXPANDED pattern in the decoded prompt."""
    tokenizer = model._pnd_processor.tokenizer
    mask = torch.zeros_like(input_ids, dtype=torch.bool)
    for row, ids in enumerate(input_ids.tolist()):
        pieces = [tokenizer.decode([i], clean_up_tokenization_spaces=False) for i in ids]
        assert "".join(pieces) == tokenizer.decode(ids, clean_up_tokenization_spaces=False)  # per-token text adds up
        ends = torch.tensor([len(p) for p in pieces]).cumsum(0)
        for match in re.finditer(TEXT_EXPANDED[model.config.model_type], "".join(pieces)):
            begin, end = match.span()
            mask[row] |= (ends - torch.tensor([len(p) for p in pieces]) < end) & (ends > begin)
    return mask


def visual_positions(model, input_ids):
    """The visual expansion: the placeholder tokens, or for DELIMITED families every token inside an outermost
    start...end pair, or for TEXT_EXPANDED families every token holding a character of the processor's text."""
    config = model.config
    if config.model_type in TEXT_EXPANDED:
        return _text_expansion(model, input_ids)
    if config.model_type not in DELIMITED:
        ids = [getattr(config, k, None) for k in ("image_token_id", "video_token_id")]
        return torch.isin(input_ids, torch.tensor([i for i in ids if i is not None]))
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


def processor_expansion(processor, text, **visuals):
    """(input_ids, mask of the tokens holding a character of a span the processor replaced), from the processor's own
    offsets."""
    out = processor(text=text, **visuals, return_tensors="pt", padding=True, return_text_replacement_offsets=True,
                    return_offsets_mapping=True)
    mask = torch.zeros_like(out["input_ids"], dtype=torch.bool)
    for row, replacements in enumerate(out["text_replacement_offsets"]):
        starts, ends = out["offset_mapping"][row].unbind(-1)
        for replacement in replacements:
            begin, end = replacement["new_span"]
            mask[row] |= (starts < end) & (ends > begin)  # holds a character the processor wrote
    return out["input_ids"], mask


def conditioned_positions(model, input_ids, mask, inputs):
    """Position ids the model gives this sequence: cumsum of the mask, or Qwen2-VL's M-RoPE index."""
    if hasattr(model.model, "get_rope_index"):
        mm = inputs["mm_token_type_ids"]
        mm = torch.cat([mm, mm.new_zeros(mm.shape[0], input_ids.shape[1] - mm.shape[1])], dim=1)
        grids = {k: inputs[k] for k in ("image_grid_thw", "video_grid_thw") if k in inputs}
        positions, _ = model.model.get_rope_index(input_ids, mm_token_type_ids=mm, attention_mask=mask, **grids)
        return positions
    return (mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def full_logits(model, inputs, sequence, prior: bool):
    """Last-position logits of one from-scratch forward over `sequence` (prompt + generated tokens)."""
    prompt_mask = inputs["attention_mask"]
    mask = torch.cat([prompt_mask, prompt_mask.new_ones(sequence.shape[0], sequence.shape[1] - prompt_mask.shape[1])], 1)
    positions = conditioned_positions(model, sequence, mask, inputs)
    if prior:  # the prompt's visual slots (a generated placeholder id is just a token)
        visual = visual_positions(model, inputs["input_ids"])
        mask[:, : visual.shape[1]] *= ~visual
    pixels = {k: inputs[k] for k in PIXEL_KEYS if k in inputs}
    out = model(input_ids=sequence, attention_mask=mask, position_ids=positions, use_cache=False, **pixels)
    return out.logits[:, -1].float()


def normalized_scores(model, inputs, sequence, alpha):
    """s = log_softmax(cond) - alpha * log_softmax(prior) for the next token after `sequence`."""
    cond = torch.log_softmax(full_logits(model, inputs, sequence, prior=False), -1)
    if alpha == 0:
        return cond
    return cond - alpha * torch.log_softmax(full_logits(model, inputs, sequence, prior=True), -1)


def greedy(model, inputs, alpha, steps, banned=()):
    """Normalized greedy decoding by brute force: (generated tokens, per-step scores). Tokens in `banned` are never
    chosen (as generate's `min_new_tokens` bans the end-of-sequence token)."""
    sequence = inputs["input_ids"]
    scores = []
    for _ in range(steps):
        s = normalized_scores(model, inputs, sequence, alpha)
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
