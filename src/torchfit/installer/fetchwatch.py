"""Which of an install step's packages uv's cache holds already: install's progress (issue 26, item 5).

One `uv pip install` installs a whole set, and uv tells nothing while it runs when its output
is not a terminal; the bytes its processes move are no measure either (measured, uv 0.13.9, the
CPU torch wheel of 192 MB: 6 MB read and 702 MB written fetching it over HTTP, 978 MB read
from a local path). What is certain is the end of each file: uv records a wheel in its cache
(`wheels-v*/<source>/.../<name>/<version>-<tags>.{rev,http,msgpack}`) once it is fetched and
unpacked, before it links anything into the env. So a package counts as ready when that record
exists, and the share of the plan's bytes that is ready (the sizes the lock knows) is the
percent. A cache laid out otherwise (another uv) finds nothing: the percent then moves only
when the step ends.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Sequence

from torchfit.lock.model import LockedDist

_RECORDS = (".rev", ".http", ".msgpack")


def dist_size(d: LockedDist) -> int:
    """The bytes of the dist's file(s): the lock's `size`, else a local file's own (uv writes no
    size for a file:// wheel), else 0 (unknown)."""
    from torchfit.lock.pylock import artifact_size

    return sum(artifact_size(a) for a in d.artifacts)


def format_dist(d: LockedDist) -> str:
    return f"{d.name} {d.version}" if d.version else d.name


def cached_names(cache_dir: str, dists: Iterable[LockedDist]) -> set[str]:
    """The names of `dists` whose wheel uv's cache at `cache_dir` records (see the module docstring)."""
    found: set[str] = set()
    for d in dists:
        if not d.version:
            continue
        pattern = os.path.join(glob.escape(cache_dir), "wheels-v*", "*", "**", glob.escape(d.name),
                               glob.escape(d.version) + "*")
        if any(p.endswith(_RECORDS) for p in glob.iglob(pattern, recursive=True)):
            found.add(d.name)
    return found


def ready_share(dists: Sequence[LockedDist], ready: set[str]) -> tuple[int, int]:
    """(bytes ready, bytes in all) of `dists`, `ready` naming those in uv's cache."""
    total = sum(dist_size(d) for d in dists)
    return sum(dist_size(d) for d in dists if d.name in ready), total
