"""All-reduce message sizes: `--sizes` parsing, byte formatting, the default
sweeps and how many warm-up and timed calls each size gets."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from torchfit.errors import BadInput
from torchfit.text import format_bytes_iec
from torchfit.verify.model import Options

MIB = 1 << 20
GIB = 1 << 30
# 1 MiB .. 1 GiB in powers of two: the default sweep (11 sizes).
DEFAULT_SIZES = tuple(MIB << k for k in range(11))
# One all-reduce buffer must fit in one GPU's memory (an H200 has 141 GB).
MAX_SIZE = 64 << 30
# gloo on CPU processes moves ~0.3-1 GB/s here: a 1 GiB sweep would take minutes.
GLOO_SIZES = tuple(MIB << k for k in range(5))

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """ "1M", "1MiB", "512K", "8G", "65536" -> bytes (binary units); BadInput otherwise."""
    m = _SIZE.match(str(text))
    if not m:
        raise BadInput(f"--sizes: {text!r} is not a size like 1M, 64MiB or 1G")
    unit = {"": 1, "k": 1 << 10, "m": MIB, "g": GIB, "t": 1 << 40}[m.group(2).lower()]
    value = int(float(m.group(1)) * unit)
    if value < 4 or value % 4:
        raise BadInput(f"--sizes: {text!r} must be a positive multiple of 4 bytes (float32)")
    if value > MAX_SIZE:
        raise BadInput(f"--sizes: {text!r} is more than {format_bytes_iec(MAX_SIZE)} (one buffer on one GPU)")
    return value


def parse_sizes(items: Iterable[str]) -> tuple[int, ...]:
    """Sizes given as separate words or comma lists, sorted and de-duplicated."""
    out = {parse_size(p) for item in items for p in str(item).split(",") if p.strip()}
    if not out:
        raise BadInput("--sizes: give at least one size, e.g. --sizes 1M,1G")
    return tuple(sorted(out))


def iteration_plan(
    sizes: Sequence[int], iters: int | None = None, warmup: int | None = None
) -> dict[int, tuple[int, int]]:
    """(warmup, timed iterations) per size: more calls where one call is short.

    On 2x H200 a 1 GiB all-reduce takes ~3.3 ms and 1 MiB ~50 us, so the whole
    default sweep is well under a second of collectives; the budget that matters is
    the 30 s of the whole verify (torch import 3.4 s, init 1.4 s, first DDP step 4 s).
    """
    plan = {}
    for n in sizes:
        auto_iters = 50 if n <= 16 * MIB else 20 if n <= 256 * MIB else 10 if n <= GIB else 5
        auto_warm = 5 if n <= GIB else 2
        plan[n] = (auto_warm if warmup is None else warmup, auto_iters if iters is None else iters)
    return plan


def sweep_sizes(opts: Options, backend: str) -> tuple[int, ...]:
    # --sizes asks for a sweep even with gloo; --no-bandwidth wins over it.
    wanted = opts.bandwidth if opts.bandwidth is not None else backend == "nccl" or bool(opts.sizes)
    if not wanted:
        return ()
    if opts.sizes:
        return opts.sizes
    return DEFAULT_SIZES if backend == "nccl" else GLOO_SIZES
