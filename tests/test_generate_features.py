"""docs/design.md §3.8: every `generate` feature works exactly against the brute-force reference or is refused up
front, naming the user's own setting; at alpha=0 every argument is plain `generate`'s."""

import copy
import math

import pytest
import torch
from transformers import (
    DynamicCache,
    GenerationConfig,
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SequenceBiasLogitsProcessor,
    StaticCache,
    StoppingCriteria,
    SuppressTokensLogitsProcessor,
)
from transformers.generation.configuration_utils import ContinuousBatchingConfig
from transformers.generation.streamers import BaseStreamer

import pnd
from pnd.decoding.methods import method as method_named
from pnd.testing.reference import PIXEL_KEYS, conditioned_positions, full_logits

from helpers import DEVICE, DTYPE, PROMPTS, tiny_inputs, tiny_model

STEPS, ALPHA = 5, 0.7


def reference(model, inputs, processors, steps=STEPS):
    """Greedy decoding by brute force with transformers' own processors applied to the conditioned logits before
    the normalization (as generate orders them): s = processed - log Z(raw) - alpha * log_softmax(prior)."""
    sequence, scores = inputs["input_ids"], []
    for _ in range(steps):
        raw = full_logits(model, inputs, sequence, prior=False)
        processed = processors(sequence, raw.clone())
        prior = torch.log_softmax(full_logits(model, inputs, sequence, prior=True), -1)
        s = (processed - torch.logsumexp(raw, -1, keepdim=True) - ALPHA * prior).masked_fill(
            torch.isneginf(processed), -math.inf)
        scores.append(s)
        sequence = torch.cat([sequence, s.argmax(-1, keepdim=True)], 1)
    return sequence, scores


class Collect(BaseStreamer):
    def __init__(self):
        self.tokens = []

    def put(self, value):
        self.tokens.append(value.reshape(-1))

    def end(self):
        self.tokens.append(None)


# feature -> (generate kwargs, the transformers processors generate builds for it), from the EOS id and each row's
# left-padding length
FEATURES = {
    "min_new_tokens": lambda eos, pads: ({}, []),
    "bad_words_ids": lambda eos, pads: ({"bad_words_ids": [[40], [41, 42]]}, [NoBadWordsLogitsProcessor([[40], [41, 42]], eos)]),
    "suppress_tokens": lambda eos, pads: ({"suppress_tokens": list(range(50, 90))},
                                       [SuppressTokensLogitsProcessor(list(range(50, 90)))]),
    "repetition_penalty": lambda eos, pads: ({"repetition_penalty": 1.8},
                                             [RepetitionPenaltyLogitsProcessor(1.8, prompt_ignore_length=pads)]),
    "no_repeat_ngram_size": lambda eos, pads: ({"no_repeat_ngram_size": 1}, [NoRepeatNGramLogitsProcessor(1)]),
    "sequence_bias": lambda eos, pads: ({"sequence_bias": {(45,): 4.0, (46,): -3.0}},
                                     [SequenceBiasLogitsProcessor([[[45], 4.0], [[46], -3.0]])]),
    "logits_to_keep": lambda eos, pads: ({"logits_to_keep": 0}, []),
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_feature_equals_the_reference(tiny, feature):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    eos, length = model.generation_config.eos_token_id, inputs["input_ids"].shape[1]
    kwargs, processors = FEATURES[feature](eos, inputs["attention_mask"].int().argmax(1))
    processors = LogitsProcessorList(processors + [MinNewTokensLengthLogitsProcessor(length, STEPS, eos)])
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     logits_processor=[pnd.PriorNormalized(ALPHA)], return_dict_in_generate=True,
                                     output_scores=True, **kwargs)
    sequence, scores = reference(model, inputs, processors)
    assert torch.equal(out.sequences, sequence)
    for got, want in zip(out.scores, scores):
        assert torch.equal(torch.isneginf(got), torch.isneginf(want))
        finite = torch.isfinite(want)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)


@pytest.mark.parametrize("how", ["inputs=", "positional"])
def test_the_prompt_by_generates_own_first_parameter_decodes_as_the_reference(tiny, how):
    """`generate(inputs=input_ids, ...)`, the name of generate's first parameter, and the ids given positionally."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    eos, length = model.generation_config.eos_token_id, inputs["input_ids"].shape[1]
    rest = {k: v for k, v in inputs.items() if k != "input_ids"}
    args, kwargs = ((), {"inputs": inputs["input_ids"]}) if how == "inputs=" else ((inputs["input_ids"],), {})
    out = pnd.attach(model).generate(*args, **kwargs, **rest, max_new_tokens=STEPS, min_new_tokens=STEPS,
                                     do_sample=False, logits_processor=[pnd.PriorNormalized(ALPHA)])
    sequence, _ = reference(model, inputs, LogitsProcessorList([MinNewTokensLengthLogitsProcessor(length, STEPS, eos)]))
    assert torch.equal(out, sequence)


@pytest.mark.parametrize("kind", ["dynamic", "static"])
def test_an_empty_cache_object_decodes_as_the_reference(tiny, kind):
    """generate(..., past_key_values=DynamicCache(config=...)), or a new StaticCache, as transformers' own tests and much
    user code pass them: an empty cache continues no conversation, and the call decodes as the reference does."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    eos, length = model.generation_config.eos_token_id, inputs["input_ids"].shape[1]
    config = model.config.get_text_config(decoder=True)
    cache = DynamicCache(config=config) if kind == "dynamic" else StaticCache(config=config, max_cache_len=length + 9)
    out = pnd.attach(model).generate(**inputs, past_key_values=cache, max_new_tokens=STEPS, min_new_tokens=STEPS,
                                     do_sample=False, logits_processor=[pnd.PriorNormalized(ALPHA)],
                                     return_dict_in_generate=True, output_scores=True)
    sequence, scores = reference(model, inputs, LogitsProcessorList([MinNewTokensLengthLogitsProcessor(length, STEPS, eos)]))
    assert torch.equal(out.sequences, sequence)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(want)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)


def test_a_generation_config_object_decodes_as_the_reference_without_a_warning_about_pnds_arguments(tiny, capfd):
    """generate(..., generation_config=GenerationConfig(...)): transformers warns when arguments are passed beside it,
    so pnd passes none the user did not (it set cache_implementation=None on every call)."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    eos, length = model.generation_config.eos_token_id, inputs["input_ids"].shape[1]
    capfd.readouterr()
    out = pnd.attach(model).generate(**inputs, generation_config=GenerationConfig(
        max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, eos_token_id=eos, pad_token_id=0),
        logits_processor=[pnd.PriorNormalized(ALPHA)])
    assert "together with" not in capfd.readouterr().err
    sequence, _ = reference(model, inputs, LogitsProcessorList([MinNewTokensLengthLogitsProcessor(length, STEPS, eos)]))
    assert torch.equal(out, sequence)


def test_streamer_and_stopping_criteria(tiny):
    model, processor = tiny("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS[:1])  # streamers take one row
    length, eos = inputs["input_ids"].shape[1], model.generation_config.eos_token_id

    class StopAfterThree(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= length + 3, device=input_ids.device)

    streamer = Collect()
    out = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                                     streamer=streamer, stopping_criteria=[StopAfterThree()],
                                     logits_processor=[pnd.PriorNormalized(ALPHA)])
    sequence, _ = reference(model, inputs, LogitsProcessorList([MinNewTokensLengthLogitsProcessor(length, STEPS, eos)]),
                            steps=3)
    assert torch.equal(out, sequence)
    assert streamer.tokens[-1] is None and torch.equal(torch.cat(streamer.tokens[:-1]), out[0])


def test_decoding_step_attentions_hidden_states_and_cache_describe_the_conditioned_rows():
    model, processor = tiny_model("llava_onevision")  # its own model: eager attention, to return attentions
    model.set_attn_implementation("eager")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    n, length = inputs["input_ids"].shape
    kwargs = dict(max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True,
                  output_attentions=True, output_hidden_states=True)
    plain = model.generate(**inputs, **kwargs)
    out = pnd.attach(model).generate(**inputs, logits_processor=[pnd.PriorNormalized(ALPHA)], **kwargs)
    for name in ("attentions", "hidden_states"):
        for got, want in zip(getattr(out, name), getattr(plain, name)):
            assert [t.shape for t in got] == [t.shape for t in want]
    # the last step's last hidden state and the returned cache equal a from-scratch conditioned forward's
    sequence = out.sequences[:, :-1]
    mask = torch.cat([inputs["attention_mask"], torch.ones(n, STEPS - 1, dtype=torch.long, device=DEVICE)], 1)
    with torch.no_grad():
        scratch = model(input_ids=sequence, attention_mask=mask, use_cache=True, output_hidden_states=True,
                        position_ids=conditioned_positions(model, sequence, mask, inputs),
                        **{k: inputs[k] for k in PIXEL_KEYS if k in inputs})
    torch.testing.assert_close(out.hidden_states[-1][-1][:, -1], scratch.hidden_states[-1][:, -1], atol=1e-4, rtol=0)
    assert type(out.past_key_values) is DynamicCache
    for got, want in zip(out.past_key_values.layers, scratch.past_key_values.layers):
        assert got.keys.shape == want.keys.shape
        attended = mask.bool()
        torch.testing.assert_close(got.keys.transpose(1, 2)[attended], want.keys.transpose(1, 2)[attended],
                                   atol=1e-4, rtol=0)
        torch.testing.assert_close(got.values.transpose(1, 2)[attended], want.values.transpose(1, 2)[attended],
                                   atol=1e-4, rtol=0)


@pytest.mark.parametrize("kwargs, named", [
    ({"prefill_chunk_size": 8}, "prefill_chunk_size=8"),
    ({"prompt_lookup_num_tokens": 3}, "prompt_lookup_num_tokens=3"),
    ({"negative_prompt_ids": torch.tensor([[1, 2]], device=DEVICE)}, "generate(..., negative_prompt_ids=...)"),
    ({"use_cache": False}, "use_cache=False"),
    ({"inputs_embeds": torch.zeros(1, 3, 8, device=DEVICE, dtype=DTYPE)}, "generate(..., inputs_embeds=...)"),
    ({"cache_implementation": "offloaded_static"}, "cache_implementation='offloaded_static'"),
])
def test_refusals_name_the_users_own_setting(tiny, kwargs, named):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    with pytest.raises(ValueError) as error:
        pnd.attach(model).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)], **kwargs)
    message = str(error.value)
    assert named in message and "PriorNormalized(0)" in message
    others = {"prefill_chunk_size", "prompt_lookup_num_tokens", "negative_prompt_ids", "use_cache", "cache_implementation",
              "past_key_values", "inputs_embeds"} - {named.split("=")[0].split(".., ")[-1]}
    assert not any(other in message for other in others), message


@pytest.mark.parametrize("kwargs", [{"prefill_chunk_size": 8}, {"use_cache": False}])
def test_alpha_zero_passes_every_argument_to_plain_generate(tiny, kwargs):
    """(Prompt lookup and assisted decoding also go straight to plain generate at alpha=0, where transformers 5.23
    itself fails on video prompts: "Video features and video tokens do not match".)"""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    plain = model.generate(**inputs, max_new_tokens=STEPS, do_sample=False, **kwargs)
    ours = pnd.attach(model).generate(**inputs, max_new_tokens=STEPS, do_sample=False,
                                      logits_processor=[pnd.PriorNormalized(0)], **kwargs)
    assert torch.equal(plain, ours)


def conversation(inputs, sequences, new_text):
    """The processor's inputs for the whole conversation: the earlier prompt and answers (`sequences`), then
    `new_text` (token ids) on every row."""
    n, added = sequences.shape[0], sequences.shape[1] - inputs["input_ids"].shape[1] + len(new_text)
    whole = dict(inputs, input_ids=torch.cat([sequences, sequences.new_tensor([new_text] * n)], 1))
    for key in ("attention_mask", "mm_token_type_ids"):
        if key in inputs:
            whole[key] = torch.cat([inputs[key], inputs[key].new_full((n, added), int(key == "attention_mask"))], 1)
    return whole


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_continuing_a_conversation_with_the_returned_cache_equals_the_reference(tiny, model_type, cache_implementation):
    """The returned cache (conditioned rows) continues: the prior rows are rebuilt over the whole conversation, and the
    result equals the reference run from scratch on it. As plain generate, the continuation takes no pixel values."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type, PROMPTS)
    first = pnd.attach(model).generate(**inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True,
                                       logits_processor=[pnd.PriorNormalized(ALPHA)],
                                       cache_implementation=cache_implementation)
    continued_equals_the_reference(model, inputs, first)


@pytest.mark.parametrize("between", ["another prompt", "a new instance"])
def test_continuing_a_conversation_takes_nothing_from_the_models_last_call(tiny, between):
    """Qwen2-VL keeps its last prompt's rope deltas on the model, which generate adds to a continuation's positions:
    pnd's continuation takes this conversation's, after another prompt ran on the model (the prior rows were shifted)
    or on a new instance of it, which holds none (it crashed)."""
    model, processor = tiny("qwen2_vl")
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)
    first = pnd.attach(model).generate(**inputs, max_new_tokens=3, do_sample=False, return_dict_in_generate=True,
                                       logits_processor=[pnd.PriorNormalized(ALPHA)])
    if between == "another prompt":
        model.generate(**tiny_inputs(processor, "qwen2_vl", ["a much longer question about the picture"], image=True),
                       max_new_tokens=2, logits_processor=[pnd.PriorNormalized(ALPHA)])
    else:
        model = copy.deepcopy(model)
        model.model.rope_deltas = None  # as loaded
    continued_equals_the_reference(model, inputs, first)


def continued_equals_the_reference(model, inputs, first):
    """The conversation of `first` (a generate output), continued by 3 new tokens of text on its returned cache, as
    plain generate takes it (no pixel values), equals the reference run from scratch on the whole conversation."""
    whole = conversation(inputs, first.sequences, [11, 12, 13])
    text_only = {k: v for k, v in whole.items() if not k.startswith("pixel_values")}
    out = model.generate(**text_only, past_key_values=first.past_key_values, max_new_tokens=STEPS,
                         min_new_tokens=STEPS, do_sample=False, logits_processor=[pnd.PriorNormalized(ALPHA)],
                         return_dict_in_generate=True, output_scores=True)
    length = whole["input_ids"].shape[1]
    eos = model.generation_config.eos_token_id
    sequence, scores = reference(model, whole, LogitsProcessorList([MinNewTokensLengthLogitsProcessor(length, STEPS,
                                                                                                      eos)]))
    assert torch.equal(out.sequences, sequence)
    for got, want in zip(out.scores, scores):
        finite = torch.isfinite(want)
        torch.testing.assert_close(got[finite], want[finite], atol=1e-4, rtol=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"num_beams": 2}, "num_beams=1"),
    ({"logits_processor": [pnd.PriorNormalized(0.5, prior="blank")]}, "prior='masked' or 'text'"),
])
def test_continuing_a_conversation_is_refused_where_it_cannot_be_exact(tiny, kwargs, message):
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS[:1])
    first = pnd.attach(model).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)],
                                       return_dict_in_generate=True)
    with pytest.raises(ValueError, match=message):
        model.generate(**conversation(inputs, first.sequences, [11]), past_key_values=first.past_key_values,
                       max_new_tokens=2, **{"logits_processor": [pnd.PriorNormalized(0.5)], **kwargs})
    with pytest.raises(ValueError, match="pass the whole conversation"):  # only the new text as input_ids
        model.generate(input_ids=torch.tensor([[11]], device=DEVICE), past_key_values=first.past_key_values,
                       max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])


@pytest.mark.parametrize("method", ["cpn", "vcd", "m3id", "vista"])
@pytest.mark.parametrize("named_in", ["generate", "generation_config"])
def test_cache_implementation_dynamic_named_is_the_default_cache(tiny, monkeypatch, method, named_in):
    """`cache_implementation="dynamic"`, in the call or the model's generation config, decodes as the default cache
    (it failed in transformers: 'Passing both cache_implementation ... and past_key_values')."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    kwargs = dict(max_new_tokens=STEPS, do_sample=False, return_dict_in_generate=True, output_scores=True)
    default = pnd.attach(model).generate(**inputs, logits_processor=[method_named(method).processor()],
                                         **kwargs)
    if named_in == "generate":
        kwargs["cache_implementation"] = "dynamic"
    else:
        monkeypatch.setattr(model.generation_config, "cache_implementation", "dynamic")
    named = model.generate(**inputs, logits_processor=[method_named(method).processor()], **kwargs)
    assert torch.equal(named.sequences, default.sequences)
    assert all(torch.equal(a, b) for a, b in zip(named.scores, default.scores))


def test_continuous_batching_on_an_attached_model_is_the_plain_models(tiny):
    """transformers' continuous batching (`generate_batch`, and `generate(cache_implementation="paged")`, which calls
    it) builds its attention masks for the names it knows: under pnd's it decoded other tokens, or one per row."""
    model, processor = tiny("qwen2_vl")
    small = dict(continuous_batching_config=ContinuousBatchingConfig(num_blocks=16, max_batch_tokens=128))  # fast
    prompts, config = [[1, 2, 3, 4, 5, 6], [7, 8, 9]], GenerationConfig(max_new_tokens=4, do_sample=False)
    inputs = tiny_inputs(processor, "qwen2_vl", PROMPTS)

    def both():
        batch = model.generate_batch(prompts, generation_config=config, **small)
        return ({k: v.generated_tokens for k, v in batch.items()},
                model.generate(**inputs, max_new_tokens=4, do_sample=False, cache_implementation="paged", **small))

    plain = both()
    pnd.attach(model)
    attached = both()
    assert attached[0] == plain[0] and torch.equal(attached[1], plain[1])
    assert plain[1].shape[-1] == inputs["input_ids"].shape[1] + 4
    pnd.detach(model)
    assert "generate_batch" not in vars(model)


def test_right_padded_prompt_is_explained(tiny):
    model, processor = tiny("llava_onevision")
    processor.tokenizer.padding_side = "right"
    try:
        inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    finally:
        processor.tokenizer.padding_side = "left"
    with pytest.raises(ValueError, match=r"Prompt row\(s\) \[0\] end with padding.*padding_side = 'left'"):
        pnd.attach(model).generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])
