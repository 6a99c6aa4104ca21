"""The decoding-method flags that `pnd caption` and `pnd explain` share: `--method` and `--method-args`.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_method_arguments(parser)
    >>> args = parser.parse_args(["--method", "vcd", "--method-args", "noise_step=250"])
    >>> args.alpha, args.plausibility = None, "0.2"
    >>> method_settings(args)
    {'noise_step': '250', 'plausibility': '0.2'}
"""

from __future__ import annotations

from ..decoding.methods import METHODS, method, parse_settings


def add_method_arguments(parser) -> None:
    parser.add_argument("--method", default="cpn", choices=sorted(METHODS),
                        help="decoding method (default cpn, prior normalization; docs/methods.md)")
    parser.add_argument("--method-args", default="", help="the method's settings, key=value pairs separated by commas "
                        "(e.g. noise_step=500,alpha=1; the others at the paper's defaults)")


def method_settings(args, defaults: dict | None = None) -> dict:
    """The settings of `args.method`: `defaults`, then `--method-args`, then `--alpha` / `--plausibility` where
    given (not None); checked by building the method's processor (a ValueError names what is wrong)."""
    given = {k: v for k, v in (("alpha", args.alpha), ("plausibility", args.plausibility)) if v is not None}
    settings = {**(defaults or {}), **parse_settings(args.method_args), **given}
    method(args.method).processor(**settings)
    return settings
