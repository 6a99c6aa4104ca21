"""Quickstart, fully offline: prior-normalized decoding on a tiny random LLaVA-OneVision.

    .venv/bin/python examples/quickstart.py

It builds a tiny model of the real architecture, saves it and loads it back with `from_pretrained`
(the same code path as a hub checkpoint), then decodes one video prompt plainly and with pnd.
Random weights make the words meaningless; what the script shows is the API and that the prior moves
the decoding. Replace the model and processor with e.g. "llava-hf/llava-onevision-qwen2-7b-ov-hf".
"""

import tempfile

import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

import pnd
from pnd.testing import random_video, tiny_model

with tempfile.TemporaryDirectory() as folder:
    tiny, tiny_processor = tiny_model("llava_onevision")
    tiny.save_pretrained(folder)
    tiny_processor.save_pretrained(folder)
    model = AutoModelForImageTextToText.from_pretrained(folder).eval()
    processor = AutoProcessor.from_pretrained(folder)

messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": "Describe the video."}]}]
prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
inputs = processor(text=[prompt], videos=[random_video(seed=0)], return_tensors="pt")

pnd.attach(model)
for alpha in (0.0, 0.5, 1.0):
    out = model.generate(**inputs, max_new_tokens=12, do_sample=False,
                         logits_processor=[pnd.PriorNormalized(alpha=alpha)])
    text = processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)[0]
    print(f"alpha={alpha:<4} {text!r}")

prior = torch.softmax(pnd.prior_logits(model, **inputs), -1)[0]
top = prior.topk(3)
print("prior's top next tokens:", [(processor.tokenizer.decode(int(i)), round(float(p), 3)) for p, i in zip(*top)])
