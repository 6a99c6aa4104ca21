"""Synthetic coloured-clip data with a planted language prior, and a tiny model trained on it offline.

The training captions say "a {colour} video"; one colour is far more frequent than the others (the
planted prior) and part of the clips are drowned in noise, so a model trained on them answers the
frequent colour when the pixels are ambiguous: exactly the bias prior normalization removes.

Example:
    >>> from pnd.synthetic import COLOURS, make_clip
    >>> import torch
    >>> make_clip("red", torch.Generator().manual_seed(0), noise=0.5).shape
    torch.Size([4, 3, 32, 32])
"""

from __future__ import annotations

import torch

COLOURS = {"red": (220, 40, 40), "blue": (40, 60, 220), "green": (40, 200, 60), "yellow": (230, 220, 40)}
PLANTED = "red"


def make_clip(colour: str, generator: torch.Generator, noise: float, frames: int = 4, size: int = 32) -> torch.Tensor:
    """A (frames, 3, size, size) uint8 clip: the colour blended with uniform noise (noise in [0, 1])."""
    base = torch.tensor(COLOURS[colour], dtype=torch.float32).view(1, 3, 1, 1).expand(frames, 3, size, size)
    random = torch.rand(frames, 3, size, size, generator=generator) * 255
    return (base * (1 - noise) + random * noise).round().clamp(0, 255).to(torch.uint8)


def caption(colour: str) -> str:
    return f"a {colour} video"


def train_colour_model(steps: int = 300, seed: int = 0, planted_share: float = 0.7, batch: int = 32,
                       condition_dropout: float = 0.2):
    """(model, processor): a tiny LLaVA-OneVision trained to caption clips, with `planted_share` of red.

    For a `condition_dropout` share of the examples the video tokens are masked out of attention (the
    prior's own input, DESIGN.md §1), so the model also learns the caption prior P(t), as
    classifier-free guidance models learn their unconditional branch.
    """
    from .tiny import tiny_model

    torch.manual_seed(seed)
    model, processor = tiny_model("llava_onevision", seed=seed, sharpen=1.0)
    prompt = processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}],
        add_generation_prompt=True,
    )
    names = list(COLOURS)
    weights = torch.tensor([planted_share if n == PLANTED else (1 - planted_share) / (len(names) - 1) for n in names])
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    end = processor.tokenizer.eos_token
    model.train()
    for _ in range(steps):
        picks = [names[i] for i in torch.multinomial(weights, batch, replacement=True, generator=generator)]
        clips = [make_clip(c, generator, float(torch.rand((), generator=generator))) for c in picks]
        answers = [caption(c) + end for c in picks]
        inputs = processor(text=[prompt + a for a in answers], videos=clips, return_tensors="pt", padding=True)
        video = inputs["input_ids"] == model.config.video_token_id
        dropped = torch.rand(batch, 1, generator=generator) < condition_dropout
        inputs["attention_mask"] = inputs["attention_mask"] * ~(video & dropped)
        labels = inputs["input_ids"].clone()  # left-padded: the answer is the last tokens of each row
        for row, answer in enumerate(answers):
            labels[row, : labels.shape[1] - len(processor.tokenizer(answer, add_special_tokens=False).input_ids)] = -100
        loss = model(**inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), processor
