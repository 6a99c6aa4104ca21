"""Brute-force reference for prior-normalized decoding, independent of pnd's code.

Every step recomputes two full forwards from scratch, without any cache (docs/design.md §3.2):
  conditioned: the model on the whole sequence, pixels included, HF position ids;
  prior:       the same call with the attention mask set to 0 at every visual-token position and the
               position ids of the conditioned pass passed explicitly.
"""

import torch

PIXEL_KEYS = ("pixel_values", "pixel_values_videos", "image_sizes", "image_grid_thw", "video_grid_thw")


def visual_positions(model, input_ids):
    ids = [getattr(model.config, k, None) for k in ("image_token_id", "video_token_id")]
    return torch.isin(input_ids, torch.tensor([i for i in ids if i is not None]))


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


def greedy(model, inputs, alpha, steps):
    """Normalized greedy decoding by brute force: (generated tokens, per-step scores)."""
    sequence = inputs["input_ids"]
    scores = []
    for _ in range(steps):
        s = normalized_scores(model, inputs, sequence, alpha)
        scores.append(s)
        sequence = torch.cat([sequence, s.argmax(-1, keepdim=True)], dim=1)
    return sequence[:, inputs["input_ids"].shape[1] :], scores


def forced_scores(model, inputs, generated, alpha):
    """Per-step normalized scores (batch, steps, vocab) along given generated tokens."""
    prompt = inputs["input_ids"]
    steps = []
    for k in range(generated.shape[1]):
        steps.append(normalized_scores(model, inputs, torch.cat([prompt, generated[:, :k]], 1), alpha))
    return torch.stack(steps, 1)
