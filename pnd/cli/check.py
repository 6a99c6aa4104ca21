"""`pnd check`: is pnd exact on this machine (its device, torch and transformers)?

    pnd check [--device cuda] [--dtype bfloat16] [--families llava_onevision qwen2_vl ...]

On tiny random-weight models of a few families (default: LLaVA-OneVision, Qwen2-VL, Qwen3.5, Gemma 3, SmolVLM), or
of the families named (any of `pnd.testing.TINY_ARCHITECTURES`), compares pnd's greedy and beam decoding and a
`CaptionScorer` score with the brute-force reference (`pnd.testing.reference`: two full forwards from scratch per
step), offline, in seconds per family. Prints one row per family: pass or FAIL, the largest gap of each comparison,
the dtype's floor measured here (plain `generate` against plain from-scratch forwards) and the tolerance derived
from it (`pnd.testing.check`); "-": beams not compared, where transformers' own beam search crashes on the family.
A family pnd cannot run on is an ERROR row with the error's first line. Exits 1 if a family fails or errs.

Example:
    >>> from pnd.cli import main
    >>> main(["check", "--families", "llava_onevision"])  # doctest: +ELLIPSIS
    pnd ... torch ... transformers ... on cpu, float32
    family           result  greedy    beam      scorer    floor     tolerance
    llava_onevision  pass    ...
    0
"""

from __future__ import annotations

import sys

DTYPES = ("float32", "bfloat16", "float16")


def add_arguments(parser) -> None:
    parser.add_argument("--device", default="cpu", help="where the models run: cpu, cuda, cuda:1, mps, ... (default cpu)")
    parser.add_argument("--dtype", default="float32", choices=DTYPES, help="the models' dtype (default float32)")
    parser.add_argument("--families", nargs="+", metavar="MODEL_TYPE", help="model types to check, space- or "
                        "comma-separated (default: llava_onevision qwen2_vl qwen3_5 gemma3 smolvlm)")


def run(args) -> int:
    import torch
    import transformers

    from .. import __version__
    from ..io.loading import check_device
    from ..testing import TINY_ARCHITECTURES
    from ..testing.check import DEFAULT_FAMILIES, check_family, family_width, header, line

    families = [f for given in args.families for f in given.split(",") if f] if args.families else DEFAULT_FAMILIES
    unknown = [f for f in families if f not in TINY_ARCHITECTURES]
    try:
        check_device(args.device)
        if unknown or not families:
            raise ValueError(f"--families: no tiny model of {', '.join(unknown) or repr(' '.join(args.families))}; "
                             f"pass some of: {' '.join(sorted(TINY_ARCHITECTURES))}")
    except ValueError as error:
        print(f"pnd check: {error}", file=sys.stderr)
        return 2
    where = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else args.device
    print(f"pnd {__version__}, torch {torch.__version__}, transformers {transformers.__version__} on {where}, "
          f"{args.dtype}")
    width = family_width(families)
    print(header(width), flush=True)
    passed, verbosity = True, transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the tiny models' notes (no fps given, slow kernels) are noise here
    try:
        for family in families:
            try:
                row = check_family(family, args.device, getattr(torch, args.dtype))
                result, ok = line(row, width), row.passed
            except Exception as error:  # pnd failing to run on a family is a result too
                result, ok = f"{family:<{width}}ERROR   {type(error).__name__}: {str(error).splitlines()[0]}", False
            print(result, flush=True)
            passed &= ok
    finally:
        transformers.logging.set_verbosity(verbosity)
    return 0 if passed else 1
