"""Data parallelism under the usual launchers: `torchrun`, `accelerate launch` (one process per GPU, any nodes).

The launcher sets RANK, WORLD_SIZE and LOCAL_RANK; each process takes every WORLD_SIZE-th input from RANK
on and loads its model on its own device. A gloo process group (CPU only, whatever the device) serves the
barriers that let rank 0 merge the outputs once every rank is done. Without a launcher: one process.

Example:
    >>> from pnd.cli.launch import Launch, pick_device
    >>> Launch.from_env({}).world_size, pick_device("cpu", 0)
    (1, 'cpu')
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch

# A barrier waits for the slowest rank's whole shard; the launcher stops every rank when one fails.
BARRIER_TIMEOUT = datetime.timedelta(days=7)


@dataclass(frozen=True)
class Launch:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls, environ=os.environ) -> Launch:
        return cls(*(int(environ.get(name, default)) for name, default in
                     (("RANK", 0), ("WORLD_SIZE", 1), ("LOCAL_RANK", environ.get("RANK", 0)))))

    def shard(self, items: list) -> list:
        """This rank's items: a deterministic split of `items` (same order on every rank)."""
        return items[self.rank :: self.world_size]

    def start(self) -> None:
        if self.world_size > 1 and not torch.distributed.is_initialized():
            torch.distributed.init_process_group("gloo", timeout=BARRIER_TIMEOUT)

    def barrier(self) -> None:
        if self.world_size > 1:
            torch.distributed.barrier()

    def stop(self) -> None:
        if self.world_size > 1 and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def pick_device(device: str, local_rank: int) -> str:
    """`device`, with "auto" as this process's GPU (cuda:LOCAL_RANK) when there is one, else the CPU."""
    if device != "auto":
        return device
    return f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu"


def pick_dtype(dtype: str | None, device: str) -> str:
    """`dtype`, by default bfloat16 on a GPU and the checkpoint's own dtype elsewhere."""
    if dtype is not None:
        return dtype
    return "bfloat16" if device.startswith("cuda") else "auto"


def add_model_arguments(parser) -> None:
    """The options of where and how each process loads its model (shared by `pnd caption` and `pnd retrieve`)."""
    parser.add_argument("--device", default="auto", help="auto (default: this process's GPU if any, else cpu), cpu, cuda:0 ...")
    parser.add_argument("--dtype", choices=["auto", "bfloat16", "float16", "float32"],
                        help="default: bfloat16 on a GPU, the checkpoint's dtype on cpu")
    parser.add_argument("--attn-implementation", help="e.g. sdpa, eager, flash_attention_2 (default: transformers')")
    parser.add_argument("--load-in-4bit", action="store_true")
    parser.add_argument("--load-in-8bit", action="store_true")


def check_counts(args, names: tuple[str, ...]) -> None:
    """A ValueError of one line if an option of `names` is below 1, or --workers (where the command has it) below 0.

    Example:
        >>> from argparse import Namespace
        >>> check_counts(Namespace(top_k=0), ("top_k",))
        Traceback (most recent call last):
        ValueError: --top-k must be at least 1, got 0.
    """
    for name in names:
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}.")
    if getattr(args, "workers", 0) < 0:
        raise ValueError(f"--workers must be 0 (decode in the main process) or more, got {args.workers}.")


def check_model_arguments(args) -> None:
    """Refuse bad options of `add_model_arguments` and a bad --model before anything loads: a ValueError of one line."""
    from ..io.loading import check_device, check_model_source

    if args.load_in_4bit and args.load_in_8bit:
        raise ValueError("choose one of --load-in-4bit and --load-in-8bit.")
    if args.device != "auto":
        check_device(args.device)
    if args.model:
        check_model_source(args.model)


def rank_device_dtype(args, launch: Launch) -> tuple[str, str]:
    """The device and dtype this process loads its model with, from --device and --dtype (`pick_device`, `pick_dtype`)."""
    device = pick_device(args.device, launch.local_rank)
    return device, pick_dtype(args.dtype, device)


def load_for_rank(args, name_or_path: str, launch: Launch):
    """`(model, processor)` of `name_or_path` on this process's device, with the options of `add_model_arguments`."""
    from ..io.loading import load_model

    device, dtype = rank_device_dtype(args, launch)
    return load_model(name_or_path, device, dtype=dtype, load_in_4bit=args.load_in_4bit,
                      load_in_8bit=args.load_in_8bit, attn_implementation=args.attn_implementation)
