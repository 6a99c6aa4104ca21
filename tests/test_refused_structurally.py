"""Image-text-to-text types refused for a structural reason (`pnd/architectures/refused.py`): each reason, shown."""

import pytest

import pnd
from pnd.testing import chat_template, random_video


def test_shieldgemma2_is_a_policy_classifier_whose_processor_drops_the_prompt(tiny):
    """ShieldGemma 2: its processor writes one prompt per policy and drops the text it is given, its model returns
    yes/no logits per prompt; pnd refuses it, naming why."""
    from transformers import (
        Gemma3ImageProcessor,
        ShieldGemma2Config,
        ShieldGemma2ForImageClassification,
        ShieldGemma2Processor,
    )

    gemma3, gemma3_processor = tiny("gemma3")  # ShieldGemma 2 is Gemma 3 underneath
    tokenizer = gemma3_processor.tokenizer
    processor = ShieldGemma2Processor(image_processor=Gemma3ImageProcessor(size={"height": 32, "width": 32}),
                                      tokenizer=tokenizer, chat_template=chat_template("<start_of_image>"),
                                      image_seq_length=4, policy_definitions={"cats": "No cats.", "dogs": "No dogs."})
    inputs = processor(images=[random_video(0, frames=1)[0]], text=["Describe the image."], return_tensors="pt")
    prompts = tokenizer.batch_decode(inputs["input_ids"])
    assert len(prompts) == 2 and not any("Describe" in p for p in prompts)  # one per policy; the text dropped
    assert "No cats." in prompts[0] and "No dogs." in prompts[1]
    config = ShieldGemma2Config(text_config=gemma3.config.text_config.to_dict(),
                                vision_config=gemma3.config.vision_config.to_dict(), mm_tokens_per_image=4,
                                boi_token_index=gemma3.config.boi_token_id, eoi_token_index=gemma3.config.eoi_token_id,
                                image_token_index=gemma3.config.image_token_id)
    config.yes_token_index, config.no_token_index = tokenizer.convert_tokens_to_ids(["yes", "no"])
    model = ShieldGemma2ForImageClassification(config).eval()
    assert model(**inputs).logits.shape == (2, 2)  # (prompt, [yes, no]): no text is generated
    with pytest.raises(ValueError, match="policy classifier.*drops the text it is given"):
        pnd.attach(model)
