"""The conditional-request disk cache of the index client (ETag / Last-Modified).

Under `$XDG_CACHE_HOME/torchfit/http`: one body and one JSON record per
(URL, Accept) key, the record holding the URL without credentials and the body's
sha256 (a torn or edited body is a miss, never a wrong answer).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from torchfit.cache import read_regular
from torchfit.inputs import decode_json

MAX_META_BYTES = 1 << 20
# The largest body the client keeps (index.client reads no more than this from a server).
MAX_BODY_BYTES = 256 << 20


def default_cache_dir() -> Path:
    """`$XDG_CACHE_HOME/torchfit/http` (XDG default `~/.cache`)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "torchfit" / "http"


class DiskCache:
    """Bodies and their validators, one pair of files per (URL, Accept) key.

    Records hold the URL without credentials; a cache the user cannot write, or a
    directory not theirs or writable by others, is silently skipped (it is an
    optimisation, never a reason to fail). Nothing there is written through a name
    someone could have planted (torchfit.files).
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def key(url: str, accept: str) -> str:
        return hashlib.sha256(f"{url}\n{accept}".encode()).hexdigest()

    def load(self, key: str) -> tuple[dict[str, Any], bytes] | None:
        """The record and body stored for `key`; None when absent, damaged, not regular
        files (a FIFO or a device there never blocks: `cache.read_regular`), or in a
        directory that is not ours or that others can write (a record planted there)."""
        from torchfit.files import private_dir

        try:
            os.close(private_dir(str(self.root), create=False))
            meta = decode_json(read_regular(str(self.root / f"{key}.json"), MAX_META_BYTES))
            body = read_regular(str(self.root / f"{key}.body"), MAX_BODY_BYTES)
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or hashlib.sha256(body).hexdigest() != meta.get("sha256"):
            return None
        return meta, body

    def store(self, key: str, meta: dict[str, Any], body: bytes) -> None:
        """Keep `body` and its validators: new O_EXCL files renamed into place
        (files.write_private), in a directory that is ours and not writable by others;
        anything else is skipped, never written through."""
        from torchfit.files import private_dir, write_private

        try:
            dfd = private_dir(str(self.root))
        except OSError:
            return
        try:
            meta = {**meta, "sha256": hashlib.sha256(body).hexdigest()}
            write_private(dfd, f"{key}.body", body)
            write_private(dfd, f"{key}.json", json.dumps(meta).encode())
        except OSError:
            pass
        finally:
            os.close(dfd)
