"""`torchfit add`'s crash journal: what an add is about to change, kept until its lock is rewritten.

An add installs first and rewrites the env's lock last (the rename is the commit). A SIGKILL
or a power cut between the two leaves an env holding packages its lock does not list; the
journal, written before the install and removed with the new lock, lets the next add undo
it (`installer.add.AddJob._recover`). It records the digest of the lock the add started
from: a journal whose lock has changed since belongs to an add that finished.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from typing import TypedDict, cast

from torchfit.errors import BadInput
from torchfit.files import write_atomic
from torchfit.inputs import read_text_file
from torchfit.installer.prefix import state_dir
from torchfit.lock.model import Lock, LockedDist
from torchfit.lock.pylock import LOCK_NAME

PENDING = ".torchfit-add-pending.json"


class Pending(TypedDict, total=False):
    """The journal as `write_pending` writes it (read back from disk: any key may be missing)."""

    lock_sha256: str  # the lock the add started from: rewritten since, the add finished
    added: list[str]  # the names it installs anew
    changed: list[str]  # the names whose files it replaces
    pid: int


def _pending_paths(prefix: str) -> list[str]:
    """Where the journal goes: beside the lock (every user of the env sees it), else, when the
    env's directory takes no new file (read-only, immutable), this user's state directory."""
    key = hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:24]
    return [os.path.join(prefix, PENDING),
            os.path.join(os.path.dirname(state_dir()), "pending", f"add-{key}.json")]


def write_pending(prefix: str, lock: Lock, added: Sequence[LockedDist],
                  changed: Sequence[tuple[LockedDist, LockedDist]]) -> None:
    """Before installing: what this add will change, and the digest of the lock it starts from.
    Removed when the lock is rewritten or the roll-back is done; found by the next add
    otherwise (a SIGKILL, a power cut), which undoes it (`AddJob._recover`). OSError when
    neither place takes it."""
    with open(os.path.join(prefix, LOCK_NAME), "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    text = json.dumps({"lock_sha256": digest, "added": [d.name for d in added],
                       "changed": [old.name for old, _ in changed], "pid": os.getpid()}) + "\n"
    first, fallback = _pending_paths(prefix)
    try:
        write_atomic(first, text)
    except OSError:
        os.makedirs(os.path.dirname(fallback), mode=0o700, exist_ok=True)
        write_atomic(fallback, text, private=True)


def read_pending(prefix: str) -> Pending | None:
    """The journal an earlier add left (None when there is none; {} when it is unreadable)."""
    for path in _pending_paths(prefix):
        if not os.path.lexists(path):
            continue
        try:
            data = json.loads(read_text_file(path, "the pending add record", limit=1 << 16))
        except (BadInput, ValueError, OSError):
            return Pending()
        return cast("Pending", data) if isinstance(data, dict) else Pending()
    return None


def clear_pending(prefix: str) -> None:
    """The journal removed, from both places (the lock was rewritten, or the add undone)."""
    for path in _pending_paths(prefix):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
