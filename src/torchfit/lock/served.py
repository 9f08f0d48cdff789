"""Does the place a lock's files came from still serve each of them, byte for byte? (issue 35)

`check_served` reads every file an install of the lock takes (a package's wheels, its sdist only
without one: pack's choice) from where the lock says (a `file://` URL or a `path`, read as
lock.artifacts reads them for a pack; an http(s) URL through the caller's `fetch`, the pack's
IndexClient.download), keeps none of it, and compares its sha256 with the lock's. A mirror that
lost a file, or serves another under its name, is named per package: what a nightly job asks of
the mirror before a node needs it (`torchfit pack --check`, docs/nightly.md). An install from
the lock cannot say this: uv's cache answers for a file the mirror no longer holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.errors import BadInput, IndexMalformed, IndexUnavailable
from torchfit.jsontypes import JsonObject
from torchfit.lock.artifacts import copy_local, local_location, lock_dir, size_limit
from torchfit.lock.model import Artifact, Lock, LockedDist
from torchfit.redact import redact

Fetch = Callable[..., tuple[int, str]]  # IndexClient.download: fetch(url, fh, limit=...) -> (bytes, sha256)


@dataclass(**FROZEN)
class Served:
    """One locked file as its source serves it: `why` is None when it is there with the lock's sha256."""

    package: str
    version: str
    file: str
    source: str  # the URL or path, credentials redacted
    size: int
    why: str | None = None

    def to_json(self) -> JsonObject:
        return {"package": self.package, "version": self.version, "file": self.file, "source": self.source,
                "bytes": self.size, "ok": self.why is None, "why": self.why}


def wanted(d: LockedDist) -> list[Artifact]:
    """The files of a package an install takes: its wheels (or archive), the sdist only without one."""
    return [a for a in d.artifacts if a.kind != "sdist"] or list(d.artifacts)


def check_served(lock: Lock, lock_path: str, *, fetch: Fetch, say: Callable[[str], None] | None = None,
                 ) -> list[Served]:
    """Every file of `lock` read from its source and judged against the lock's sha256 (see above)."""
    root = lock_dir(lock_path)
    out: list[Served] = []
    for d in lock.packages:
        for a in wanted(d):
            out.append(_check_one(d, a, root, fetch, say))
    return out


def _check_one(d: LockedDist, a: Artifact, root: str, fetch: Fetch, say: Callable[[str], None] | None) -> Served:
    source = a.url or a.path or ""
    name = a.filename or os.path.basename(source.split("#")[0]) or source
    version = d.version or ""
    shown = redact(source)
    if not a.sha256:
        return Served(d.name, version, name, shown, 0, "the lock gives no sha256 for it")
    local = local_location(a, root)
    if say is not None:
        say(f"reading {shown}")
    try:
        with open(os.devnull, "wb") as sink:
            if local is not None:
                size, got = copy_local(a, local, sink, f"{d.name} {version}")
            else:
                size, got = fetch(source, sink, limit=size_limit(a))
    except BadInput as exc:  # a local file: missing, not a regular file, longer than the lock says
        return Served(d.name, version, name, shown, 0, exc.message.split(": ", 1)[-1])
    except (IndexUnavailable, IndexMalformed) as exc:  # a remote one: 404, refused, longer than the lock says
        return Served(d.name, version, name, shown, 0, exc.why)
    if got != a.sha256:
        return Served(d.name, version, name, shown, size, f"sha256 {got} is not the lock's {a.sha256}")
    return Served(d.name, version, name, shown, size)


__all__ = ["Served", "check_served", "wanted"]
