"""The decoding methods pnd runs on its paired engine, by name: one registered `Method` each (docs/methods.md).

    cpn   BLiM's Candidate Prior Normalization (pnd's default)   PriorNormalized(alpha, prior="masked")
    vcd   Visual Contrastive Decoding (Leng et al., CVPR 2024)  PriorNormalized(prior="noise", combine="contrastive")
    icd   Instruction Contrastive Decoding (Wang et al., 2024)  PriorNormalized(prior="inputs", combine="contrastive")
    m3id  M3ID (Favero et al., CVPR 2024)                       M3ID(forgetting_rate, gate, prior="text")
    pai   PAI (Liu et al., ECCV 2024)                           PAI(alpha, gamma, beta, start_layer, end_layer)
    only  ONLY (Wan et al., ICCV 2025)                          ONLY(layer, alpha1, alpha2, gamma)
    vista VISTA (Li & Shi, ICML 2025)                           VISTA(steer_strength)

Front ends (`pnd caption --method`, lmms-eval's `model_args` `method=vcd,noise_step=500`, `pnd sweep --methods`)
take a name and settings (strings allowed) and get the logits processor, and for ICD the contrast prompt's text.

Example:
    >>> method("vcd").processor(noise_step="250")
    PriorNormalized(alpha=1.0, prior='noise', plausibility=0.1, combine='contrastive', noise_step=250, seed=0)
    >>> method("icd").contrast_text("Describe the video.", instruction="Be vague.")
    'Be vague. Describe the video.'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..interventions import ONLY, PAI, VISTA
from .contrast import ICD_INSTRUCTION
from .logits_processor import PairedProcessor, PriorNormalized
from .m3id import M3ID


@dataclass(frozen=True)
class Method:
    """A decoding method: its name, the paper, its settings with the paper's defaults, and how to build its processor.

    `make(settings)` returns the logits processor; `contrast` names the setting that holds the instruction written
    before the user's text for the contrast prompt (ICD), None where the method needs no contrast prompt."""

    name: str
    paper: str
    defaults: Mapping[str, object]
    make: Callable[[dict], PairedProcessor]
    contrast: str | None = None

    def settings(self, **given) -> dict:
        """The defaults updated with `given` (strings are converted to the default's type; None is kept), checked."""
        unknown = sorted(set(given) - set(self.defaults))
        if unknown:
            raise ValueError(f"method {self.name!r} has no setting {', '.join(map(repr, unknown))}; its settings "
                             f"(with the paper's defaults): {_listed(self.defaults)}.")
        settings = dict(self.defaults)
        for key, value in given.items():
            settings[key] = _converted(self.name, key, value, self.defaults[key])
        return settings

    def processor(self, **given) -> PairedProcessor:
        """The logits processor of this method with settings `given` (the others at the paper's defaults)."""
        return self.make(self.settings(**given))

    def contrast_text(self, text: str, **given) -> str | None:
        """The user's text of the contrast prompt (ICD: the instruction, then `text`); None for the other methods."""
        if self.contrast is None:
            return None
        return f"{self.settings(**given)[self.contrast]} {text}"


def _listed(defaults: Mapping) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in defaults.items())


def _converted(name: str, key: str, value, default):
    """`value` as the type of `default` when it is a string (command lines, lmms-eval's model_args)."""
    if not isinstance(value, str) or isinstance(default, str):
        return value
    if value.lower() == "none":
        return None
    kind = float if default is None else type(default)
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"method {name!r}: {key} must be of type {kind.__name__}, got {value!r}.") from None


METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add `method` to the registry under its name; returns it."""
    METHODS[method.name] = method
    return method


def method(name: str) -> Method:
    """The registered method `name`, or an error listing them."""
    if name not in METHODS:
        raise ValueError(f"Unknown decoding method {name!r}: pnd has {', '.join(map(repr, METHODS))} (docs/methods.md).")
    return METHODS[name]


def parse_settings(text: str | None) -> dict:
    """`"alpha=1,noise_step=500"` as {"alpha": "1", "noise_step": "500"} (a command line's method settings). A piece
    without "=" continues the value before it: a comma inside a value (ICD's instruction).

    Example:
        >>> parse_settings("alpha=1, noise_step=500")
        {'alpha': '1', 'noise_step': '500'}
        >>> parse_settings("instruction=Be vague, please,alpha=2")
        {'instruction': 'Be vague, please', 'alpha': '2'}
    """
    settings, key = {}, None
    for item in (text or "").split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            key, settings[name.strip()] = name.strip(), value.strip()
        elif not item.strip():
            continue
        elif key is not None:
            settings[key] = f"{settings[key]},{item}".strip()
        else:
            raise ValueError(f"method settings are key=value pairs separated by commas (e.g. alpha=1,noise_step=500), "
                             f"got {item.strip()!r}.")
    return settings


_CONTRASTIVE = {"alpha": 1.0, "plausibility": 0.1}  # VCD's and ICD's alpha and beta
register(Method("cpn", "BLiM, ICCV 2025 (Candidate Prior Normalization)",
                MappingProxyType({"alpha": 0.5, "prior": "masked", "plausibility": None}),
                lambda s: PriorNormalized(s["alpha"], prior=s["prior"], plausibility=s["plausibility"])))
register(Method("vcd", "Leng et al., CVPR 2024 (Visual Contrastive Decoding)",
                MappingProxyType({**_CONTRASTIVE, "noise_step": 500, "seed": 0}),
                lambda s: PriorNormalized(s["alpha"], prior="noise", plausibility=s["plausibility"],
                                          combine="contrastive", noise_step=s["noise_step"], seed=s["seed"])))
register(Method("icd", "Wang et al., Findings of ACL 2024 (Instruction Contrastive Decoding)",
                MappingProxyType({**_CONTRASTIVE, "instruction": ICD_INSTRUCTION}),
                lambda s: PriorNormalized(s["alpha"], prior="inputs", plausibility=s["plausibility"],
                                          combine="contrastive"),
                contrast="instruction"))


def _m3id(s: dict) -> M3ID:
    """M3ID for the front ends, which hand no `prior_inputs`: prior "text" or "masked" only."""
    if s["prior"] == "inputs":
        raise ValueError("method 'm3id': prior='inputs' needs generate(..., prior_inputs=...), which the front ends do "
                         "not pass; use 'text' or 'masked' here, pnd.M3ID(prior='inputs') in Python.")
    return M3ID(s["forgetting_rate"], s["gate"], prior=s["prior"])


register(Method("m3id", "Favero et al., CVPR 2024 (M3ID)",
                MappingProxyType({"forgetting_rate": 0.02, "gate": 0.3, "prior": "text"}), _m3id))
register(Method("pai", "Liu et al., ECCV 2024 (PAI: Paying More Attention to Image)",
                MappingProxyType({"alpha": 0.2, "gamma": 1.1, "beta": 0.1, "start_layer": 2, "end_layer": 32,
                                  "prior": "text"}),
                lambda s: PAI(**s)))
register(Method("only", "Wan et al., ICCV 2025 (ONLY: One-Layer Intervention)",
                MappingProxyType({"layer": 0, "alpha1": 3.0, "alpha2": 1.0, "gamma": 0.2}), lambda s: ONLY(**s)))
register(Method("vista", "Li & Shi, ICML 2025 (VISTA: Visual Information Steering)",
                MappingProxyType({"steer_strength": 0.01, "prior": "text"}), lambda s: VISTA(**s)))
