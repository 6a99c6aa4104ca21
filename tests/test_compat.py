"""Every private transformers API that pnd uses lives in `pnd/_compat/`, exists in the installed transformers
with the arguments pnd passes, and does what pnd relies on (checked against public behaviour)."""

import contextlib
import inspect
import re
from pathlib import Path

import pytest
import torch
import transformers
from packaging.specifiers import SpecifierSet
from transformers import AttentionInterface, CompileConfig, DynamicCache
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

import pnd
from pnd import _compat
from pnd._compat import cache_rows, generation, masks, repairs
from pnd.testing import tiny_inputs

PRIVATE = re.compile(r"\._prepare_\w+|\._expand_multimodal_outputs|\._valid_auto_compile_criteria|\._default_compile_config|"
                     r"\._attn_implementation\b|ddp_cache_data|"
                     r"from transformers\.(?:integrations|masking_utils|cache_utils)|AttentionInterface|AttentionMaskInterface|"
                     r"\.(?:conv|recurrent)_states\b")


def test_installed_transformers_is_in_the_checked_range():
    assert SpecifierSet(_compat.TRANSFORMERS_CHECKED).contains(transformers.__version__), (
        f"pnd/_compat/ was checked against transformers {_compat.TRANSFORMERS_CHECKED}, installed: "
        f"{transformers.__version__}: re-check each call there and widen the range.")


def test_no_module_but_compat_touches_a_private_transformers_api():
    root = Path(pnd.__file__).parent
    compat = list((root / "_compat").rglob("*.py"))
    offenders = {str(p.relative_to(root)): PRIVATE.findall(p.read_text())
                 for p in root.rglob("*.py") if p not in compat}
    assert {p: found for p, found in offenders.items() if found} == {}
    assert len(set(PRIVATE.findall("".join(p.read_text() for p in compat)))) >= 6  # the pattern does find them


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_private_generation_apis_take_the_arguments_pnd_passes(tiny, model_type):
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type)
    ids = inputs["input_ids"]
    inspect.signature(model._prepare_generation_config).bind(None, max_new_tokens=2)
    inspect.signature(model._prepare_position_ids_for_generation).bind(ids, {})
    inspect.signature(model._prepare_special_tokens).bind(model.generation_config, device=ids.device)
    inspect.signature(model._prepare_attention_mask_for_generation).bind(ids, model.generation_config, {})
    inspect.signature(model._prepare_multimodal_encoder_kwargs_for_generation).bind(dict(inputs))
    inspect.signature(model._expand_multimodal_outputs).bind(ids, {}, expand_size=2)
    inspect.signature(DynamicCache).bind(ddp_cache_data=None, config=model.config.get_text_config(decoder=True))
    assert callable(AttentionInterface.register) and callable(AttentionMaskInterface.register)
    assert "sdpa" in ALL_MASK_ATTENTION_FUNCTIONS


@pytest.mark.parametrize("model_type", ["llava_onevision", "qwen2_vl"])
def test_compat_calls_agree_with_what_generate_itself_does(tiny, model_type):
    """generation_config / position_ids_for_generation / encode_visual_inputs give what generate's first forward
    receives (recorded with a forward hook)."""
    model, processor = tiny(model_type)
    inputs = tiny_inputs(processor, model_type)
    seen = {}

    def record(module, args, kwargs):
        seen.setdefault("first", kwargs)

    handle = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        model.generate(**inputs, max_new_tokens=1, do_sample=False)
    finally:
        handle.remove()
    first = seen["first"]
    assert generation.generation_config(model, {"max_new_tokens": 7, "num_beams": 2}).max_new_tokens == 7
    positions = generation.position_ids_for_generation(model, inputs["input_ids"], dict(inputs))
    torch.testing.assert_close(positions, first["position_ids"], rtol=0, atol=0)
    encoded = generation.encode_visual_inputs(model, dict(inputs))
    for key, value in first["mm_encoder_outputs"].items():
        torch.testing.assert_close(encoded[key], value, rtol=0, atol=0)


@pytest.mark.parametrize("pad_is_eos", [False, True])
def test_the_inferred_attention_mask_is_the_one_generate_gives_a_prompt_without_one(tiny, pad_is_eos):
    """A left-padded batch passed without its mask: generate's first forward gets 0 on the padding token, or ones
    where the padding token is an eos token (it cannot tell padding from text then; generate drops a mask of ones, as
    it drops one given); `inferred_attention_mask` too."""
    model, processor = tiny("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", ("Describe the video.", "What happens in this clip, in detail?"))
    assert not inputs["attention_mask"].all()
    del inputs["attention_mask"]
    kwargs = {"pad_token_id": model.generation_config.eos_token_id} if pad_is_eos else {}
    seen = []
    handle = model.register_forward_pre_hook(lambda module, args, kw: seen.append(kw.get("attention_mask")),
                                             with_kwargs=True)
    try:
        model.generate(**inputs, max_new_tokens=1, do_sample=False, **kwargs)
    finally:
        handle.remove()
    config = generation.generation_config(model, {**inputs, **kwargs})
    inferred = generation.inferred_attention_mask(model, config, inputs["input_ids"])
    assert bool(inferred.all()) == pad_is_eos
    assert torch.equal(inferred, torch.ones_like(inferred) if seen[0] is None else seen[0])


def test_cache_from_layers_holds_the_given_states():
    config = pnd.testing.tiny_model("llava_onevision")[0].config.get_text_config(decoder=True)
    layers = [(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)) for _ in range(config.num_hidden_layers)]
    cache = cache_rows.cache_from_layers(config, layers)
    assert cache.get_seq_length() == 3
    for layer, (keys, values) in zip(cache.layers, layers):
        assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values)
    assert cache_rows.cache_from_layers(config).get_seq_length() == 0


def test_recurrent_layer_states_round_trip_through_a_cache():
    """A hybrid model's cache (Qwen3.5): `cache_from_layers` copies each layer's states in (a recurrent layer's as
    its public getters then return them), `layer_states` reads them back, `set_layer_state` replaces them."""
    config = pnd.testing.tiny_model("qwen3_5")[0].config.get_text_config(decoder=True)
    assert cache_rows.has_recurrent_layers(config)
    assert not cache_rows.has_recurrent_layers(pnd.testing.tiny_model("llava")[0].config.get_text_config(decoder=True))
    recurrent = lambda: cache_rows.RecurrentState((torch.randn(2, 8, 4),), (torch.randn(2, 4, 16, 16),))  # noqa: E731
    states = [recurrent(), (torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)), recurrent()]
    assert config.layer_types == ["linear_attention", "full_attention", "linear_attention"]
    cache = cache_rows.cache_from_layers(config, states)
    assert cache.get_seq_length() == 5 and cache.has_previous_state(0)
    torch.testing.assert_close(cache.get_conv_state(0), states[0].conv[0], rtol=0, atol=0)
    torch.testing.assert_close(cache.get_recurrent_state(2), states[2].recurrent[0], rtol=0, atol=0)
    states[0].conv[0].zero_()  # a copy: the model updates the cache's states in place
    assert cache.get_conv_state(0).abs().sum() > 0
    read = cache_rows.layer_states(cache)
    assert isinstance(read[0], cache_rows.RecurrentState) and torch.equal(read[2].recurrent[0], states[2].recurrent[0])
    assert torch.equal(read[1][0], states[1][0]) and torch.equal(read[1][1], states[1][1])
    replaced = recurrent()
    cache_rows.set_layer_state(cache.layers[2], replaced)
    assert cache.get_conv_state(2) is replaced.conv[0] and cache.get_recurrent_state(2) is replaced.recurrent[0]
    halves = cache_rows.map_states(lambda t: t[:1], cache_rows.layer_states(cache)[2])
    assert isinstance(halves, cache_rows.RecurrentState) and halves.recurrent[0].shape[0] == 1


def test_conv_only_recurrent_layer_states_round_trip_through_a_cache():
    """LFM2's short-convolution layers hold a conv state and no recurrent state: the same calls carry it, the missing
    state stays None (no tensor made up for it)."""
    config = pnd.testing.tiny_model("lfm2_vl")[0].config.get_text_config(decoder=True)
    assert config.layer_types == ["conv", "full_attention", "conv"] and cache_rows.has_recurrent_layers(config)
    conv = lambda: cache_rows.RecurrentState((torch.randn(2, 64, config.conv_L_cache),), (None,))  # noqa: E731
    states = [conv(), (torch.randn(2, 2, 5, 16), torch.randn(2, 2, 5, 16)), conv()]
    cache = cache_rows.cache_from_layers(config, states)
    assert cache.get_seq_length() == 5
    torch.testing.assert_close(cache.get_conv_state(2), states[2].conv[0], rtol=0, atol=0)
    read = cache_rows.layer_states(cache)
    assert isinstance(read[0], cache_rows.RecurrentState) and read[0].recurrent == (None,)
    halves = cache_rows.map_states(lambda t: t[1:], read[0])
    assert torch.equal(halves.conv[0], states[0].conv[0][1:]) and halves.recurrent == (None,)
    cache_rows.set_layer_state(cache.layers[0], halves)
    assert cache.get_conv_state(0) is halves.conv[0]


def test_multi_state_and_indexed_layer_states_round_trip_through_a_cache():
    """Qwen4: three states per recurrent layer (Gated DeltaNet's, then its n-gram embeddings' convolution and last
    token ids) and an indexed layer (keys, values, indexer keys, and the indexer's (3, batch, slots) position ids):
    `layer_states` reads them in the layout slot operations share, `cache_from_layers` puts them back."""
    model, processor = pnd.testing.tiny_model("qwen4_exp")
    inputs = pnd.testing.tiny_inputs(processor, "qwen4_exp")
    with torch.no_grad():
        cache = model(**inputs, use_cache=True).past_key_values
    read = cache_rows.layer_states(cache)
    recurrent, indexed = read[0], read[1]
    assert len(recurrent.conv) == 3 and recurrent.recurrent[1] is None
    slots = indexed.keys.shape[2]
    assert indexed.indexer_keys.shape[:3] == (1, 1, slots) and indexed.indexer_positions.shape == (1, 3, slots, 1)
    copied = cache_rows.layer_states(cache_rows.cache_from_layers(model.config.get_text_config(decoder=True), read))
    for mine, theirs in zip(read, copied):
        cache_rows.map_states(lambda a, b: torch.testing.assert_close(a, b, rtol=0, atol=0), mine, theirs)
    assert torch.equal(indexed.indexer_positions[..., 0].transpose(0, 1), cache.layers[1].indexer_position_ids)


def test_minimax_indexed_layer_states_round_trip_and_the_masked_indexer_is_transformers_own():
    """MiniMax-M3's sparse cache layer (keys, values, the indexer's keys `idx_keys`) reads and writes as an
    `IndexedState`; pnd's copy of its indexer's forward (`mask_indexer_keys`) returns transformers' own block choice
    when every key is kept, with and without a cache, and runs transformers' own outside `indexer_keys`."""
    model, processor = pnd.testing.tiny_model("minimax_m3_vl")
    inputs = pnd.testing.tiny_inputs(processor, "minimax_m3_vl")
    with torch.no_grad():
        cache = model(**inputs, use_cache=True).past_key_values
    read = cache_rows.layer_states(cache)
    assert isinstance(read[0], cache_rows.IndexedState) and read[0].indexer_keys.shape[:3] == (1, 1, read[0].keys.shape[2])
    assert not isinstance(read[1], cache_rows.IndexedState)  # the full-attention layer between them
    copied = cache_rows.cache_from_layers(model.config.get_text_config(decoder=True), read)
    for mine, theirs in zip(read, cache_rows.layer_states(copied)):
        cache_rows.map_states(lambda a, b: torch.testing.assert_close(a, b, rtol=0, atol=0), mine, theirs)
    indexer = model.model.language_model.layers[2].self_attn.indexer
    slots = read[0].keys.shape[2]
    repairs.mask_indexer_keys(model)
    try:
        for past, first, queries in ((False, 0, 16), (True, slots, 5)):  # a prefill of 16 tokens; 5 after the cache
            hidden = torch.randn(2, queries, model.config.text_config.hidden_size)
            positions = torch.arange(first, first + queries).expand(2, -1)
            rotary = model.model.language_model.rotary_emb(hidden, positions)

            def run(keys):
                layers = cache_rows.cache_from_layers(model.config.get_text_config(decoder=True), [
                    cache_rows.map_states(lambda t: t.expand(2, *t.shape[1:]), state) for state in read])
                with repairs.indexer_keys(keys) if keys is not None else contextlib.nullcontext():
                    return indexer(hidden, rotary, layers if past else None, positions)

            own, length = run(None), first + queries
            assert torch.equal(run(torch.ones(2, length, dtype=torch.bool)), own)
            hidden_keys = torch.ones(2, length, dtype=torch.bool)
            hidden_keys[:, 4:12] = False  # two blocks of keys hidden: other blocks win
            assert not torch.equal(run(hidden_keys), own)
    finally:
        repairs.unmask_indexer_keys(model)
    assert "forward" not in vars(indexer)


def test_attention_implementation_follows_the_public_switch():
    model, _ = pnd.testing.tiny_model("llava_onevision")
    text_config = model.config.get_text_config(decoder=True)
    assert masks.attention_implementation(text_config) == "sdpa"
    model.set_attn_implementation("eager")
    assert masks.attention_implementation(model.config.get_text_config(decoder=True)) == "eager"


def test_compiled_decoding_follows_generate(tiny):
    """compiles_decoding says what generate decides for a static cache (compile_config on a CPU, else no)."""
    model, processor = tiny("llava_onevision")
    inspect.signature(model._valid_auto_compile_criteria).bind({"past_key_values": None}, None)
    assert generation.compiles_decoding(model, generation.generation_config(model, {})) is False
    config = CompileConfig(mode="default")
    config._compile_all_devices = True  # generate's switch for compiling on a CPU
    assert generation.compiles_decoding(model, generation.generation_config(model, {"compile_config": config})) is True


def test_the_installed_package_declares_what_the_code_says():
    """One source each: the version is pnd.__version__ (pyproject reads it), and the transformers requirement is the
    range pnd/_compat/ was checked against."""
    from importlib.metadata import requires, version

    assert version("pnd") == pnd.__version__
    [declared] = [r for r in requires("pnd") if r.startswith("transformers") and "extra" not in r]
    assert SpecifierSet(declared.removeprefix("transformers")) == SpecifierSet(_compat.TRANSFORMERS_CHECKED)
