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
    return with_noise(base, generator, noise)


def with_noise(clean: torch.Tensor, generator: torch.Generator, noise: float) -> torch.Tensor:
    """`clean` (float pixel values) blended with uniform noise in [0, 255] (noise in [0, 1]), as uint8."""
    random = torch.rand(clean.shape, generator=generator) * 255
    return (clean * (1 - noise) + random * noise).round().clamp(0, 255).to(torch.uint8)


def caption(colour: str) -> str:
    return f"a {colour} video"


def planted_weights(names: list[str], planted: str, share: float) -> torch.Tensor:
    """Sampling weights: `share` for the planted name, the rest split evenly over the others."""
    return torch.tensor([share if n == planted else (1 - share) / (len(names) - 1) for n in names])


def train_colour_model(steps: int = 300, seed: int = 0, planted_share: float = 0.7, batch: int = 32,
                       condition_dropout: float = 0.2):
    """(model, processor): a tiny LLaVA-OneVision trained to caption clips, with `planted_share` of red."""
    from .tiny import tiny_model

    torch.manual_seed(seed)
    model, processor = tiny_model("llava_onevision", seed=seed, sharpen=1.0)
    names = list(COLOURS)
    weights = planted_weights(names, PLANTED, planted_share)

    def draw(generator):
        picks = [names[i] for i in torch.multinomial(weights, batch, replacement=True, generator=generator)]
        clips = [make_clip(c, generator, float(torch.rand((), generator=generator))) for c in picks]
        return clips, [caption(c) for c in picks]

    return train_captioner(model, processor, draw, steps, torch.Generator().manual_seed(seed),
                           condition_dropout=condition_dropout), processor


def train_captioner(model, processor, draw, steps: int, generator: torch.Generator, lr: float = 3e-3,
                    condition_dropout: float = 0.2, prompt: str = "Describe the video.", progress: bool = False):
    """Train `model` (in place; returned in eval mode) to answer `prompt` after a video with its caption.

    `draw(generator)` returns one batch: (clips, captions). For a `condition_dropout` share of the
    examples the video tokens are masked out of attention (the prior's own input, DESIGN.md §1), so the
    model also learns the caption prior P(t), as classifier-free guidance models learn their
    unconditional branch. `progress` shows a bar with the loss.
    """
    from tqdm.auto import trange

    from .caption import video_prompt

    prompt = video_prompt(processor, prompt)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    end = processor.tokenizer.eos_token
    model.train()
    bar = trange(steps, desc="training", disable=not progress)
    for _ in bar:
        clips, captions = draw(generator)
        answers = [c + end for c in captions]
        inputs = processor(text=[prompt + a for a in answers], videos=clips, return_tensors="pt", padding=True)
        video = inputs["input_ids"] == model.config.video_token_id
        dropped = torch.rand(len(clips), 1, generator=generator) < condition_dropout
        inputs["attention_mask"] = inputs["attention_mask"] * ~(video & dropped)
        labels = inputs["input_ids"].clone()  # left-padded: the answer is the last tokens of each row
        for row, answer in enumerate(answers):
            labels[row, : labels.shape[1] - len(processor.tokenizer(answer, add_special_tokens=False).input_ids)] = -100
        loss = model(**inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    return model.eval()
