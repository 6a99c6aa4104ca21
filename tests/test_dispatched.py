"""Models that accelerate dispatched (`device_map="auto"`): layers offloaded, or split over two GPUs, emulated on a
CPU.

accelerate dispatches a model too large for one GPU over several, or offloads some blocks to the CPU or disk: each
block's weights stay on its device (or are loaded in each forward), and a hook, set as the block's instance
`forward`, moves each block's inputs there. pnd must compose with those hooks (the families whose forward pnd repairs
included) and, on a split model, every tensor pnd makes or keeps per call (the prior's slot indices, the
interventions' visual slots, VISTA's vectors, the scorer's caption ids) must meet each layer's states on that layer's
device; on one device, and in every other test, any device is right.

The split is emulated: each tensor carries a virtual device, `cpu:1` or `cpu:2` (its storage on the CPU), that a
`TorchFunctionMode` propagates: `Tensor.device` reports it, `.to(device)` and a factory's `device=` set it, an
operation's results take their inputs'. An operation whose tensors sit on two virtual devices is recorded: on CUDA it
fails ("Expected all tensors to be on the same device"). Host tensors are `test_device_guard.py`'s. The model is split
by accelerate's own `dispatch_model` after layer 0 of its language model, its blocks named and ordered as
`device_map="auto"` names them, tied weights on one device; plain `generate` on it records nothing (the emulation's
own check), and a planted tensor left on the first device is recorded.
"""

import inspect

import pytest
import torch
from accelerate import dispatch_model
from torch.overrides import TorchFunctionMode

import pnd
from pnd.testing import tiny_inputs, tiny_model
from pnd.testing.reference import greedy

from helpers import PROMPTS, pnd_call_site

DEVICE_OF = torch.Tensor.device.__get__
# accelerate warns of a device map's parameter keys (`model.image_newline`), which it places all the same
pytestmark = pytest.mark.filterwarnings("ignore:The following device_map keys do not match any submodules")
PND = ("_compat", "architectures", "decoding", "interventions", "scoring", "attachment.py", "validation.py")


def virtual(tensor) -> int | None:
    """A tensor's virtual device (1, 2), None on the host."""
    return getattr(tensor, "_virtual_device", None)


def named_device(func, args, kwargs):
    """The virtual device that a `.to(...)`, `.cpu()` or a factory's `device=` names: 1, 2, None for the host, or
    False where the call names none."""
    if func.__name__ == "cpu":
        return None
    device = kwargs.get("device")
    if device is None and func.__name__ == "to":
        device = next((a for a in args[1:] if isinstance(a, (torch.device, str, torch.Tensor))), None)
    if isinstance(device, torch.Tensor):
        return virtual(device)
    return False if device is None else torch.device(device).index


class TwoDevices(TorchFunctionMode):
    """Propagates virtual devices (the module's docstring); `mixed`: `site op` of each operation that met two."""

    def __init__(self):
        super().__init__()
        self.mixed: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func == DEVICE_OF:  # a new method-wrapper at each access: equal, not the same
            return torch.device("cpu", virtual(args[0])) if virtual(args[0]) else torch.device("cpu")
        tensors = tensors_in((args, kwargs), [])
        devices = {virtual(t) for t in tensors} - {None}  # host tensors: test_device_guard's
        target = named_device(func, args, kwargs)
        if target is False and len(devices) > 1 and func.__name__ != "copy_":  # copy_ may cross devices
            self.mixed.add(f"{_site(inspect.currentframe().f_back)} {func.__name__}")
        out = func(*args, **kwargs)
        if target is not False:
            if args and out is args[0] and virtual(out) != target:  # `.to` of a tensor already there in storage: a new one
                out = out.view_as(out)
            if isinstance(out, torch.Tensor):
                out._virtual_device = target
            return out
        placed = next(iter(devices), None)
        for result in tensors_in(out, []):
            if virtual(result) is None and placed is not None:
                result._virtual_device = placed
        return out


def tensors_in(value, found: list) -> list:
    """The tensors in `value`, in lists, tuples and dicts at any depth, appended to `found` (pytree's
    `tree_flatten`, which costs half the test's time, for what a torch function takes and returns)."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            tensors_in(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            tensors_in(item, found)
    return found


def _site(frame) -> str:
    """The innermost pnd frame's `file:line`, else "transformers" (or torch)."""
    while frame is not None:
        if site := pnd_call_site(frame, PND):
            return site
        frame = frame.f_back
    return "transformers"


def split_over_two_devices(model) -> dict:
    """Dispatch `model` with accelerate as `device_map="auto"` would over two GPUs: its language model's layer 0 and
    every block before it on device 1, the rest on device 2 (a block sharing a tied weight with an earlier one: on
    that one's device). Returns the device map."""
    import accelerate.hooks

    layers_name = language_layers(model)
    blocks = _blocks(model, "", layers_name)
    second = blocks.index(f"{layers_name}.1")
    device_map, owner = {}, {}
    for i, block in enumerate(blocks):
        tensors = _tensors(model, block)
        device_map[block] = next((owner[id(t)] for t in tensors if id(t) in owner), 1 if i < second else 2)
        owner.update({id(t): device_map[block] for t in tensors})
    placed = accelerate.hooks.set_module_tensor_to_device
    accelerate.hooks.set_module_tensor_to_device = lambda *args, **kwargs: None  # the weights: loaded in place
    try:
        dispatch_model(model, {block: torch.device("cpu", d) for block, d in device_map.items()},
                       main_device=torch.device("cpu", 1))
    finally:
        accelerate.hooks.set_module_tensor_to_device = placed
    for block, device in device_map.items():
        for tensor in _tensors(model, block):
            tensor._virtual_device = device
    return device_map


def language_layers(model) -> str:
    """The name of the language model's list of decoder layers: the largest list of layers outside the vision side."""
    return max(((name, module) for name, module in model.named_modules()
                if isinstance(module, torch.nn.ModuleList) and name.endswith("layers")
                and not any(part in name for part in ("vision", "visual", "encoder"))),
               key=lambda item: sum(p.numel() for p in item[1].parameters()))[0]


def _blocks(module, prefix: str, layers_name: str) -> list[str]:
    """The blocks of `device_map="auto"` in its order (a module's own parameters, its children, its own buffers): the
    layers' list by layer, the modules around it, the rest whole."""
    blocks = [prefix + name for name, _ in module.named_parameters(recurse=False)]
    for name, child in module.named_children():
        full = prefix + name
        if full == layers_name:
            blocks += [f"{full}.{i}" for i in range(len(child))]
        elif layers_name.startswith(full + "."):
            blocks += _blocks(child, full + ".", layers_name)
        else:
            blocks.append(full)
    return blocks + [prefix + name for name, _ in module.named_buffers(recurse=False)]


def _tensors(model, block: str) -> list[torch.Tensor]:
    try:
        module = model.get_submodule(block)
    except AttributeError:  # a parameter or buffer of its own
        return [model.get_parameter(block) if block in dict(model.named_parameters()) else model.get_buffer(block)]
    return [*module.parameters(), *module.buffers()]


def on_first_device(inputs) -> dict:
    return {key: value.to(torch.device("cpu", 1)) if isinstance(value, torch.Tensor) else value
            for key, value in inputs.items()}


METHODS = {"cpn": lambda: pnd.PriorNormalized(0.5), "text": lambda: pnd.PriorNormalized(0.5, prior="text"),
           "vcd": lambda: pnd.PriorNormalized(0.5, prior="noise", combine="contrastive"), "m3id": pnd.M3ID,
           "pai": lambda: pnd.PAI(start_layer=0), "only": lambda: pnd.ONLY(layer=1), "vista": pnd.VISTA}
MODES = {"greedy": {}, "beam": {"num_beams": 2}, "sample": {"do_sample": True, "top_k": 5},
         "static": {"cache_implementation": "static"}}
# one family per path (test_device_guard's list): M-RoPE, recurrent layers, sliding windows, chunked attention,
# slot-anchored indexers, a Q-Former, a prefix LM, an expansion the processor reports, the generic finder
FAMILIES = ("llava_onevision", "qwen2_vl", "qwen3_vl", "qwen3_5", "gemma3", "llama4", "minimax_m3_vl", "internvl",
            "blip-2", "paligemma", "smolvlm")


def runs(model, processor, model_type):
    """(name, call) of every method and mode pnd takes on `model_type`, `prior_logits` and `CaptionScorer`. Sampling
    runs for cpn alone: pnd's code does not branch on it (generate draws from the scores its processors return)."""
    one = on_first_device(tiny_inputs(processor, model_type))
    batch = one if model_type == "minimax_m3_vl" else on_first_device(tiny_inputs(processor, model_type, PROMPTS))
    for method, make in METHODS.items():
        for mode, kwargs in MODES.items():
            if mode == "sample" and method != "cpn":
                continue
            yield f"{method}-{mode}", lambda make=make, kwargs=kwargs: model.generate(
                **batch, max_new_tokens=3, logits_processor=[make()], **{"do_sample": False, **kwargs})
    yield "prior_logits", lambda: pnd.prior_logits(model, **one)
    yield "scorer", lambda: pnd.CaptionScorer(model, processor).score_prompt(one, ["a red circle", "a dark square"])


def refusals(model_type: str, names) -> dict:
    """{name: message} of the runs `names` that the same family refuses on one device, not dispatched."""
    model, processor = tiny_model(model_type)
    pnd.attach(model, processor)
    refused = {}
    with TwoDevices():  # the inputs' virtual device; mixing does not matter here
        for name, call in runs(model, processor, model_type):
            if name in names:
                try:
                    call()
                except ValueError as refusal:
                    refused[name] = str(refusal)
    return refused


@pytest.mark.parametrize("model_type", FAMILIES)
def test_pnd_on_a_model_split_over_two_devices_keeps_each_layers_tensors_on_its_device(model_type):
    model, processor = tiny_model(model_type)  # its own model: dispatch puts hooks on it
    split_over_two_devices(model)
    with TwoDevices() as devices:
        model.generate(**on_first_device(tiny_inputs(processor, model_type)), max_new_tokens=3, do_sample=False)
        assert devices.mixed == set(), "the emulation itself mixes devices in plain generate"
        pnd.attach(model, processor)
        ran, mixed, refused = [], {}, {}
        for name, call in runs(model, processor, model_type):
            try:
                call()
                ran.append(name)
            except ValueError as refusal:  # a method or mode the family does not take, with its reason
                refused[name] = str(refusal)
            if devices.mixed:
                mixed[name] = sorted(devices.mixed)
                devices.mixed.clear()
    assert mixed == {}
    assert "cpn-greedy" in ran and "prior_logits" in ran
    assert refused == refusals(model_type, refused), "the split refuses what the model on one device does not"
    if model_type == "llava_onevision":  # a family every method and mode runs on: nothing refused
        assert refused == {} and "vista-static" in ran and "cpn-sample" in ran


def test_the_emulation_catches_a_tensor_left_on_the_first_device():
    """A forward hook on layer 1 (device 2) that adds a tensor made on the input's device is recorded with its op."""
    model, processor = tiny_model("llava_onevision")
    split_over_two_devices(model)
    with TwoDevices() as devices:
        inputs = on_first_device(tiny_inputs(processor, "llava_onevision"))
        first = torch.zeros(1, device=inputs["input_ids"].device)  # device 1, as the inputs
        model.model.language_model.layers[1].register_forward_hook(lambda module, args, output: output + first)
        model.generate(**inputs, max_new_tokens=2, do_sample=False)
    assert devices.mixed == {"transformers add"}


OFFLOADED = {"cpn": (lambda: pnd.PriorNormalized(0.5), {}), "cpn-beam": (lambda: pnd.PriorNormalized(0.5), {"num_beams": 2}),
             "cpn-static": (lambda: pnd.PriorNormalized(0.5), {"cache_implementation": "static"}),
             "vcd": (lambda: pnd.PriorNormalized(0.5, prior="noise", combine="contrastive"), {}),
             "pai": (lambda: pnd.PAI(start_layer=0), {}), "only": (pnd.ONLY, {}), "vista": (pnd.VISTA, {}),
             "vista-static": (pnd.VISTA, {"cache_implementation": "static"})}


def test_a_model_with_an_offloaded_layer_decodes_as_without_offload(tmp_path):
    """A language-model layer offloaded to disk (what `device_map="auto"` does to a model larger than the GPU and the
    CPU's memory): accelerate's hook on that layer loads its weights in each forward. pnd's decoding equals the
    brute-force reference, and every method and mode (interventions inside the offloaded layer included) gives the
    tokens and scores it gives on the same model without offload, bit for bit."""
    model, processor = tiny_model("llava_onevision")
    inputs = tiny_inputs(processor, "llava_onevision", PROMPTS)
    reference_tokens, _ = greedy(model, inputs, 0.5, 4)

    def decode(make, kwargs):
        return model.generate(**inputs, max_new_tokens=4, do_sample=False, logits_processor=[make()],
                              return_dict_in_generate=True, output_scores=True, **kwargs)

    pnd.attach(model)
    before = {name: decode(*how) for name, how in OFFLOADED.items()}
    pnd.detach(model)
    offloaded_layer = f"{language_layers(model)}.1"
    dispatch_model(model, {"": "cpu", offloaded_layer: "disk"}, main_device="cpu", offload_dir=tmp_path)
    assert {p.device.type for p in model.get_submodule(offloaded_layer).parameters()} == {"meta"}  # loaded per call
    pnd.attach(model)
    for name, how in OFFLOADED.items():
        after = decode(*how)
        assert torch.equal(after.sequences, before[name].sequences), name
        assert all(torch.equal(a, b) for a, b in zip(after.scores, before[name].scores, strict=True)), name
    assert torch.equal(before["cpn"].sequences[:, inputs["input_ids"].shape[1]:], reference_tokens)


@pytest.mark.parametrize("model_type", ["blip-2", "kosmos-2"])
def test_families_whose_forward_pnd_repairs_score_on_a_dispatched_model_and_detach_to_its_hook(model_type, tmp_path):
    """The Q-Former and Kosmos families' forward, which pnd repairs so that `CaptionScorer` continues a prompt's
    cache without pixels, is accelerate's hook on a dispatched model: the repair wraps the hook (their scores equal
    those of the same model before dispatch, bit for bit), and `pnd.detach` leaves the hook in place."""
    undispatched, processor = tiny_model(model_type)
    inputs = tiny_inputs(processor, model_type)
    captions = ["a red circle", "a dark square"]
    before = pnd.CaptionScorer(undispatched, processor).score_prompt(inputs, captions)
    model, _ = tiny_model(model_type)  # the same weights (a seeded build), dispatched as it is loaded
    dispatch_model(model, {"": "cpu", f"{language_layers(model)}.1": "disk"}, main_device="cpu", offload_dir=tmp_path)
    hook = vars(model)["forward"]
    pnd.attach(model, processor)
    assert torch.equal(pnd.CaptionScorer(model, processor).score_prompt(inputs, captions), before)
    model.generate(**inputs, max_new_tokens=2, logits_processor=[pnd.PriorNormalized(0.5)])
    pnd.detach(model)
    assert vars(model)["forward"] is hook
