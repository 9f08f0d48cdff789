"""The files a lock names, read bounded (issue 34): the one reader of a lock's local files
and the one limit of its downloads.

A lock is input someone else may have written, and `pack` copies every file it names. So a
local file (a `file://` URL, or a `path`) is a regular file only: a FIFO would hold the copy
forever and `/dev/zero` would fill the output filesystem in a second (`inputs.iter_regular`
refuses both at once, never waiting on them). A relative `path` is the lock's directory's,
as PEP 751 says ("relative to the lock file"), never the working directory's. Every file,
local or downloaded, stops at the lock's `size` (PEP 751 `packages.wheels.size`); a file the
lock gives no size stops at UNSIZED_LIMIT, past the biggest wheel an index serves.
Every refusal is one line (`BadInput`, exit 2) naming the package and the path.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from typing import BinaryIO
from urllib.parse import unquote, urlsplit

from torchfit.errors import BadInput
from torchfit.inputs import iter_regular, shown
from torchfit.lock.model import Artifact

# A file the lock gives no size (uv writes none for a file:// wheel): the largest wheels on
# PyPI and download.pytorch.org are a few GB (torch's CUDA builds ~2.5 GB, 2026); four
# times that is a bound no real file reaches and a disk survives.
UNSIZED_LIMIT = 16 << 30


def lock_dir(lock_path: str) -> str:
    """The directory a lock's relative paths are read from (PEP 751): the lock file's own."""
    return os.path.dirname(os.path.abspath(lock_path))


def local_location(a: Artifact, root: str) -> str | None:
    """The local file `a` names: a `file://` URL's path, or its `path` (relative to `root`,
    the lock's directory); None for a remote URL."""
    if a.url:
        parts = urlsplit(a.url)
        return unquote(parts.path) if parts.scheme.lower() == "file" else None
    if a.path is None:
        return None
    return os.path.join(root, a.path) if root else a.path


def size_limit(a: Artifact) -> int:
    """The most bytes of `a` read or downloaded: the lock's `size`, else UNSIZED_LIMIT."""
    return a.size if a.size is not None else UNSIZED_LIMIT


def copy_local(a: Artifact, path: str, fh: BinaryIO, what: str) -> tuple[int, str]:
    """Copy the local file `path` (`local_location` of `a`) into `fh`, `size_limit(a)` bytes at
    most: (bytes, sha256 hex). BadInput naming `what` (the package) and the path for a missing
    or unreadable file, anything but a regular file, or one longer than the lock says."""
    h = hashlib.sha256()
    n = 0
    name = shown(path)
    with contextlib.closing(iter_regular(path, size_limit(a))) as blocks:
        while True:
            try:
                block = next(blocks, None)
            except FileNotFoundError:
                raise BadInput(f"{what}: {name}: no such file (a relative path is read from the lock's "
                               "directory)") from None
            except IsADirectoryError:
                raise BadInput(f"{what}: {name}: not a regular file (a directory); a lock names files") from None
            except OSError as exc:
                if exc.errno == errno.EFBIG:
                    given = ("the size the lock gives it" if a.size is not None
                             else "the most read of a file the lock gives no size")
                    raise BadInput(f"{what}: {name}: {exc.strerror}, {given}; nothing more is copied") from None
                if exc.errno == errno.EINVAL:
                    raise BadInput(f"{what}: {name}: {exc.strerror}; a lock names files") from None
                raise BadInput(f"{what}: {name}: cannot read it ({exc.strerror})") from None
            if block is None:
                return n, h.hexdigest()
            fh.write(block)  # a write that fails (a full disk) is the caller's to say: it knows where
            h.update(block)
            n += len(block)
