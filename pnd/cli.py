"""The `pnd` command line.

    pnd --version
    pnd models        # the supported model types
    pnd retrieve ...  # rank captions for videos with prior normalization (pnd retrieve --help)
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from . import __version__, supported_model_types

    parser = argparse.ArgumentParser(prog="pnd", description="Prior-normalized decoding for video/image LLMs.")
    parser.add_argument("--version", action="version", version=f"pnd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("models", help="list the supported Hugging Face model types")
    from . import retrieve

    retrieve.add_arguments(commands.add_parser("retrieve", help="rank captions for videos (and videos for captions)",
                                               description=retrieve.__doc__,
                                               formatter_class=argparse.RawDescriptionHelpFormatter))
    args = parser.parse_args(argv)
    if args.command == "models":
        print("\n".join(supported_model_types()))
        return 0
    return retrieve.run(args)


if __name__ == "__main__":
    sys.exit(main())
