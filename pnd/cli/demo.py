"""`pnd demo`: what prior normalization does, measured offline on the bundled demo model.

    pnd demo [--out pnd_demo.png] [--per-pair 8] [--noise 0.85] [--methods cpn,vcd,icd,m3id,pai,only,vista]

Prints plain and normalized captions of the sample videos, the caption prior pnd measures, and the
balanced accuracy of the colour and size words per alpha on a uniform test set (`pnd.demo`); saves the plot. With
--methods, the table compares those decoding methods instead (docs/methods.md), each at two settings, plain first.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..decoding.captioning import generate_captions
from ..decoding.paired import attach
from ..demo import (
    DEMO_METHODS,
    PLAUSIBILITY,
    SAMPLE_ALPHAS,
    SAMPLE_VIDEOS,
    compare_methods,
    evaluate,
    load_demo_model,
    markdown,
    plot,
    prior_shares,
)
from ..demo.moving import FRAMES
from ..io.video import list_videos, read_video
from .records import file_in_the_way


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="pnd_demo.png", help="where to save the plot (default pnd_demo.png)")
    parser.add_argument("--per-pair", type=int, default=8, help="test clips per colour x size pair (default 8)")
    parser.add_argument("--noise", type=float, default=0.85, help="noise level of the test clips, 0-1 (default 0.85)")
    parser.add_argument("--methods", default=None,
                        help=f"compare these decoding methods, comma-separated, of {','.join(DEMO_METHODS)}")


def run(args) -> int:
    methods = None if args.methods is None else [m.strip() for m in args.methods.split(",") if m.strip()]
    if why := refusal(args, methods):  # before the model loads
        print(f"pnd demo: {why}", file=sys.stderr)
        return 2
    model, processor = load_demo_model()
    attach(model)
    paths = list_videos([SAMPLE_VIDEOS])
    videos = [read_video(p, FRAMES) for p in paths]
    columns = [generate_captions(model, processor, videos, None)]
    columns += [generate_captions(model, processor, videos, a, plausibility=PLAUSIBILITY) for a in SAMPLE_ALPHAS]
    print(f"Sample videos ({SAMPLE_VIDEOS}):\n\n| video | plain | "
          + " | ".join(f"normalized (alpha {a})" for a in SAMPLE_ALPHAS) + " |\n|---|---|---|---|")
    for path, *captions in zip(paths, *columns):
        print(f"| {path.name} | " + " | ".join(captions) + " |")
    shares = prior_shares(model, processor)
    print("\nCaption prior P(t) measured by pnd, summed per attribute:")
    for kind, values in shares.items():
        print(f"  {kind}: " + ", ".join(f"{name} {share:.2f}" for name, share in values.items()))
    if methods is not None:
        rows = compare_methods(model, processor, methods, per_pair=args.per_pair, noise=args.noise)
        print(f"\nTest set uniform over 4 colours x 3 sizes ({12 * args.per_pair} clips, noise {args.noise}), "
              f"greedy captions, each method at the paper's defaults and at a second setting:\n\n{markdown(rows)}")
        return 0
    table = evaluate(model, processor, per_pair=args.per_pair, noise=args.noise)
    print(f"\nTest set uniform over 4 colours x 3 sizes ({12 * args.per_pair} clips, noise {args.noise}), "
          f"greedy captions, plausibility {PLAUSIBILITY} with alpha > 0:\n\n{markdown(table)}")
    plot(table, Path(args.out))
    print(f"\nSaved the plot to {args.out}")
    return 0


def refusal(args, methods: list[str] | None) -> str | None:
    """What is wrong with the arguments, or None."""
    if methods is not None and (not methods or set(methods) - set(DEMO_METHODS)):
        return f"--methods takes names of {', '.join(DEMO_METHODS)}, got {args.methods!r}."
    if args.per_pair < 1:
        return f"--per-pair takes a whole number of clips >= 1, got {args.per_pair}."
    if not 0 <= args.noise <= 1:  # NaN too
        return f"--noise takes a level from 0 to 1, got {args.noise}."
    return file_in_the_way(Path(args.out))
