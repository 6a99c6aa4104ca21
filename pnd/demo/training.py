"""Training the demo models offline on CPU: a tiny LLaVA-OneVision that learns a planted caption prior.

`train_demo_model` trains the bundled demo model on the moving-squares task (`pnd.demo.moving`, run by
`tools/train_demo_model.py`); `train_colour_model` the retrieval demo's model on the colour task
(`pnd.demo.colours`, `examples/retrieval_demo.py`). Both go through `train_captioner`.

Example:
    >>> from pnd.demo.training import train_colour_model
    >>> model, processor = train_colour_model(steps=1)
    >>> model.training
    False
"""

from __future__ import annotations

import torch

from ..io.prompts import video_prompt
from ..testing import tiny_model
from .colours import COLOURS, PLANTED, colour_caption, make_clip, planted_weights
from .moving import PLANTED as MOVING_PLANTED
from .moving import SIZES, make_moving_clip, moving_caption


def train_demo_model(steps: int = 1500, seed: int = 0, planted_share: float = 0.7, batch: int = 32,
                     progress: bool = False):
    """(model, processor): the bundled demo model, a tiny LLaVA-OneVision trained on moving squares.

    Colour and size are drawn independently, each the planted one with probability `planted_share`
    and uniform over the others otherwise; the noise level of each clip is uniform in [0, 1].
    """
    torch.manual_seed(seed)
    model, processor = tiny_model("llava_onevision", seed=seed, sharpen=1.0)
    weights = {k: planted_weights(list(names), p, planted_share) for k, names, p in zip("cs", (COLOURS, SIZES), MOVING_PLANTED)}

    def pick(kind: str, names, generator) -> list[str]:
        return [list(names)[i] for i in torch.multinomial(weights[kind], batch, replacement=True, generator=generator)]

    def draw(generator):
        colours, sizes = pick("c", COLOURS, generator), pick("s", SIZES, generator)
        clips = [make_moving_clip(c, s, generator, float(torch.rand((), generator=generator)))
                 for c, s in zip(colours, sizes)]
        return clips, [moving_caption(c, s) for c, s in zip(colours, sizes)]

    generator = torch.Generator().manual_seed(seed)
    return train_captioner(model, processor, draw, steps, generator, progress=progress), processor


def train_colour_model(steps: int = 300, seed: int = 0, planted_share: float = 0.7, batch: int = 32,
                       condition_dropout: float = 0.2):
    """(model, processor): a tiny LLaVA-OneVision trained to caption clips, with `planted_share` of red."""
    torch.manual_seed(seed)
    model, processor = tiny_model("llava_onevision", seed=seed, sharpen=1.0)
    names = list(COLOURS)
    weights = planted_weights(names, PLANTED, planted_share)

    def draw(generator):
        picks = [names[i] for i in torch.multinomial(weights, batch, replacement=True, generator=generator)]
        clips = [make_clip(c, generator, float(torch.rand((), generator=generator))) for c in picks]
        return clips, [colour_caption(c) for c in picks]

    return train_captioner(model, processor, draw, steps, torch.Generator().manual_seed(seed),
                           condition_dropout=condition_dropout), processor


def train_captioner(model, processor, draw, steps: int, generator: torch.Generator, lr: float = 3e-3,
                    condition_dropout: float = 0.2, prompt: str = "Describe the video.", progress: bool = False):
    """Train `model` (in place; returned in eval mode) to answer `prompt` after a video with its caption.

    `draw(generator)` returns one batch: (clips, captions). For a `condition_dropout` share of the
    examples the video tokens are masked out of attention (the prior's own input, docs/design.md §1), so the
    model also learns the caption prior P(t), as classifier-free guidance models learn their
    unconditional branch. `progress` shows a bar with the loss.
    """
    from tqdm.auto import trange

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
