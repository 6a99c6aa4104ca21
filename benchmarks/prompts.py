"""The benchmarks' video prompts for a model of `shapes.py`: text, a video's placeholders and pixels, text; and the
same prompts without the video."""

from __future__ import annotations

import math

import torch
from shapes import NEMOTRON, QWEN3_TEXT, QWEN3_VISION, SIZES

from pnd.attachment import attachment_of

TIMESTAMP_TOKENS = 4  # "<0.5 seconds>" is a few text tokens in front of each frame


def _nemotron_video_inputs(model, size: str, frames: int, batch: int, generator) -> tuple[dict, torch.Tensor]:
    """Nemotron-H Omni prompts built by its bound processor, one video per call, left-padded together."""
    from pnd.testing import left_padded

    processor, side = attachment_of(model).processor, NEMOTRON[size][2]
    words = "the a video frame scene person moves light shows then what who where why how is in on of".split()

    def sentence(n):
        return " ".join(words[int(i)] for i in torch.randint(0, len(words), (n,), generator=generator))

    rows, texts = [], []
    for r in range(batch):
        prefix, question = sentence(14), sentence(24 - 3 * (r % 3))
        video = torch.randint(0, 256, (frames, 3, side, side), dtype=torch.uint8, generator=generator)
        rows.append(processor(text=[f"{prefix} <video> {question}"], videos=[video], return_tensors="pt"))
        texts.append(processor(text=[f"{prefix} {question}"], return_tensors="pt"))
    inputs = left_padded(rows, 0)
    inputs["pixel_values_videos"] = inputs["pixel_values_videos"].to(model.dtype)
    return inputs.to(model.device), left_padded(texts, 0)["input_ids"].to(model.device)


def _qwen_video(config, size: str, frames: int, batch: int, generator) -> tuple[list[int], dict]:
    """The token expansion of one Qwen-family video and its pixel inputs for `batch` rows."""
    qwen3 = config.model_type in QWEN3_TEXT
    patch = config.vision_config.patch_size
    side = QWEN3_VISION[size][1] if qwen3 else SIZES[size]["qwen_pixels"]
    grid = [frames // 2, side // patch, side // patch]
    start, end, video = config.vision_start_token_id, config.vision_end_token_id, config.video_token_id
    per_frame = grid[1] * grid[2] // 4
    if qwen3:  # the template's pair around per-frame timestamps, each before its own delimited frame
        def frame():
            return torch.randint(10, 1000, (TIMESTAMP_TOKENS,), generator=generator).tolist() + [
                start] + [video] * per_frame + [end]
        visual = [start] + [token for _ in range(grid[0]) for token in frame()] + [end]
    else:
        visual = [start] + [video] * (grid[0] * per_frame) + [end]
    pixels = {"pixel_values_videos": torch.randn(batch * math.prod(grid), 3 * 2 * patch**2, generator=generator),
              "video_grid_thw": torch.tensor([grid] * batch)}
    return visual, pixels


def video_inputs(model, size: str, frames: int, batch: int = 1, seed: int = 0) -> tuple[dict, torch.Tensor]:
    """Left-padded video prompts (text, video, text of different lengths) and the text-only prompts."""
    config, device = model.config, model.device
    generator = torch.Generator().manual_seed(seed)
    if config.model_type == "nemotron_h_omni":
        return _nemotron_video_inputs(model, size, frames, batch, generator)
    if config.model_type == "llava_onevision":
        side = config.vision_config.image_size
        per_side = math.ceil(side // config.vision_config.patch_size / 2)
        visual = [config.video_token_id] * (frames * per_side**2 + 1)
        pixels = {"pixel_values_videos": torch.randn(batch, frames, 3, side, side, generator=generator)}
    else:
        visual, pixels = _qwen_video(config, size, frames, batch, generator)
    rows, texts = [], []
    for r in range(batch):
        prefix = torch.randint(10, 1000, (14,), generator=generator).tolist()
        question = torch.randint(10, 1000, (24 - 3 * (r % 3),), generator=generator).tolist()
        rows.append(prefix + visual + question)
        texts.append(prefix + question)
    inputs = _left_pad(rows) | pixels
    if config.model_type != "llava_onevision":
        inputs["mm_token_type_ids"] = (inputs["input_ids"] == config.video_token_id).long() * 2
    to = {"device": device}
    inputs = {k: v.to(**to, dtype=model.dtype) if v.is_floating_point() else v.to(**to) for k, v in inputs.items()}
    return inputs, _left_pad(texts)["input_ids"].to(device)


def _left_pad(rows: list[list[int]]) -> dict:
    width = max(map(len, rows))
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return {"input_ids": ids, "attention_mask": mask}
