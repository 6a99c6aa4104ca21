"""The `pnd` command line.

    pnd --version
    pnd models        # the supported model types (--families: grouped, with names; --all: every transformers one)
    pnd retrieve ...  # rank captions for videos with prior normalization (pnd retrieve --help)
    pnd caption ...   # caption videos with prior-normalized decoding (pnd caption --help)
    pnd merge ...     # merge the part files of an unfinished pnd caption or pnd retrieve job
    pnd demo          # the effect, measured offline on the bundled demo model
    pnd explain ...   # why the answer changed: both decodings token by token (pnd explain --help)
    pnd sweep ...     # lmms-eval tasks at several alphas: a table and a plot, plain vs normalized (pnd sweep --help)
    pnd check         # is pnd exact here? tiny models against the brute-force reference (--device, --dtype, --families)
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from ..extras import MissingExtra
from .signals import stopped_by, terminate

SUBCOMMANDS = {"retrieve": "rank captions for videos (and videos for captions)",
               "caption": "caption videos with prior-normalized decoding",
               "merge": "merge the part files of an unfinished pnd caption or pnd retrieve job",
               "demo": "measure the effect offline on the bundled demo model",
               "explain": "show token by token what the prior did to an answer",
               "sweep": "run lmms-eval tasks at several alphas: one table and one plot, plain vs normalized",
               "check": "check that pnd is exact on this machine: tiny models against a brute-force reference"}


def main(argv: list[str] | None = None) -> int:
    """Run one `pnd` command; its exit status. A reader that stops early (`pnd models | head`) ends it quietly."""
    try:
        status = _command(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:  # what was left to print has no reader; Python would print a traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _command(argv: list[str] | None) -> int:
    from .. import __version__

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="pnd", description="Prior-normalized decoding for video/image LLMs.")
    parser.add_argument("--version", action="version", version=f"pnd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    models = commands.add_parser("models", help="list the supported Hugging Face model types")
    models.add_argument("--families", action="store_true", help="one line per family: its model types and name")
    models.add_argument("--all", action="store_true", help="every image-text-to-text model type of the installed "
                        "transformers: supported (inputs, what the prior hides, prefill path) or refused and why")
    # only the command asked for is imported (with torch and transformers): `pnd --help` lists the others
    asked = next((word for word in argv if not word.startswith("-")), None)
    for name, summary in SUBCOMMANDS.items():
        module = importlib.import_module(f".{name}", __name__) if name == asked else None
        command = commands.add_parser(name, help=summary, description=module.__doc__ if module else summary,
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
        if module:
            module.add_arguments(command)
    args = parser.parse_args(argv)
    if args.command == "models":
        from ..architectures import registered, supported_model_types

        if args.all:
            from ..architectures.coverage import coverage

            lines = [f"{model_type}: {status}" for model_type, status in coverage()]
        elif args.families:
            lines = [f"{', '.join(a.model_types)}: {a.name}" for a in registered()]
        else:
            lines = supported_model_types()
        print("\n".join(lines))
        return 0
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if in_main_thread else None
    try:
        return importlib.import_module(f".{args.command}", __name__).run(args)
    except MissingExtra as error:
        print(f"pnd {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:  # the commands that keep nothing partial (explain, demo, merge)
        how, status = stopped_by(interruption)
        print(f"pnd {args.command}: {how} before it finished; run the same command again.", file=sys.stderr)
        return status
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
