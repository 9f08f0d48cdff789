"""The start-up cache: facts that cost time to compute and are keyed by what decides them.

Under `$XDG_CACHE_HOME/torchfit` (XDG default `~/.cache/torchfit`), one JSON record
per file, never pickle: a record is data, so a cache file can never run code. Each
record carries the sha256 of its own data; a torn, edited or unreadable record is
a miss, and the next run rewrites it. Writes are atomic (a 0600 temp file renamed
into place) and every failure to write is ignored: the cache is an optimisation,
never a reason to fail. A cache directory owned by another user, or writable by
others, is not used at all.

What is kept here:

- `load_matrix`: the validated matrix (`compat.matrix.matrix_to_data`), keyed by
  the sha256 of the matrix file's bytes, its name and torchfit's version.
- `load_companions`: the validated data/companions.toml (`compat.companions.companions_to_data`),
  keyed the same way.
- `read_record` / `write_record` for the host probes (interpreter versions keyed by
  the executable's realpath, device, inode, size and mtime; pyenv's answers keyed
  by its files' stats), see `host/pythons.py`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

try:  # CPython's own sha256: hashlib would first load OpenSSL (~3 ms of every start-up)
    from _sha256 import sha256 as _sha256  # type: ignore[import-not-found,unused-ignore]  # Python <= 3.11
except ImportError:  # pragma: no cover - the module is _sha2 from 3.12, absent in other builds
    try:
        from _sha2 import sha256 as _sha256  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        from hashlib import sha256 as _sha256

if TYPE_CHECKING:
    from torchfit.compat.companions import Companions
    from torchfit.compat.matrix import Matrix

# Bump when the shape of any record changes, so old records are misses.
FORMAT = 1
# No record torchfit writes comes near this (the matrix's is ~200 KB): a bigger file is not ours.
MAX_RECORD_BYTES = 64 << 20


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data`, hex."""
    return _sha256(data).hexdigest()  # type: ignore[no-any-return]


def cache_dir() -> str:
    """`$XDG_CACHE_HOME/torchfit`; `~/.cache/torchfit` when it is unset or not absolute (XDG)."""
    root = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(root):
        root = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "torchfit")


def _usable(directory: str) -> bool:
    """A real directory of ours that others cannot write (files.private_dir, without creating
    it): a record read from here is one we wrote."""
    from torchfit.files import private_dir

    try:
        os.close(private_dir(directory, create=False))
    except OSError:
        return False
    return True


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, never blocking and never following a link
    (`inputs.read_regular`, the one rule for files torchfit did not write itself).

    A cache may hold anything a user or another program left there: a FIFO, a device,
    a symlink. OSError for all of these, and for a file larger than `limit` bytes.
    """
    from torchfit.inputs import read_regular as read

    return read(path, limit, follow_links=False)


def _record_path(directory: str, name: str) -> str:
    return os.path.join(directory, f"{name}.json")


def read_record(name: str, key: str) -> Any:
    """The data stored under `name` for `key`; None when absent, stale or damaged.

    A record is two parts: a header line `{"format", "key", "sha256"}`, then the
    data's JSON text, whose sha256 the header holds.
    """
    from torchfit.inputs import decode_json  # the header: bounded like any JSON read

    directory = cache_dir()
    if not _usable(directory):
        return None
    try:
        head, _, rest = read_regular(_record_path(directory, name), MAX_RECORD_BYTES).partition(b"\n")
        header = decode_json(head[:4096])
        body = rest.decode("utf-8")
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
            return None
        if sha256_hex(body.encode()) != header.get("sha256"):
            return None
        # the body is the one this user wrote (its sha256 is in the header, the directory is
        # private): json.loads alone, its RecursionError caught below, not decode_json's bracket
        # pass (8 ms of the matrix and companions records on every resolve, issue 37)
        return json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None


def write_record(name: str, key: str, data: object) -> bool:
    """Store `data` (JSON values only) under `name` for `key`, atomically; False when not written.

    The directory must be ours and writable by nobody else; the record is a new
    O_EXCL file renamed into place (files.write_private), never a write through a
    name someone else could have planted.
    """
    from torchfit.files import private_dir, write_private

    try:
        body = json.dumps(data, separators=(",", ":"))
        header = json.dumps({"format": FORMAT, "key": key, "sha256": sha256_hex(body.encode())})
        dfd = private_dir(cache_dir())
    except (OSError, ValueError, TypeError, RecursionError):
        return False
    try:
        write_private(dfd, f"{name}.json", f"{header}\n{body}".encode())
        return True
    except OSError:
        return False
    finally:
        os.close(dfd)


def fingerprint(path: str) -> list[int] | None:
    """What changes when a file is replaced or edited: device, inode, size, mtime, ctime (ns)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


T = TypeVar("T")


def _parsed(kind: str, text: str, name: str, parse: Callable[[str, str], T],
            to_data: Callable[[T], Any], from_data: Callable[[Any], T]) -> T:
    """`parse(text, name)` through the cache (the matrix, companions.toml).

    The key is the sha256 of the text, its name and torchfit's version, so an edited
    file (or another torchfit) never meets an old parse; one slot per kind, version and
    name, so an edit replaces its own record. Only a file that validated is stored.
    """
    from torchfit import __version__

    key = sha256_hex(f"{__version__}\0{name}\0{text}".encode())
    slot = f"{kind}-" + sha256_hex(f"{__version__}\0{name}".encode())[:16]
    data = read_record(slot, key)
    if data is not None:
        try:
            return from_data(data)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            pass  # another shape: parse again, and the write below replaces it
    value = parse(text, name)
    try:
        write_record(slot, key, to_data(value))
    except ValueError:  # a field without a codec: uncached, still correct
        pass
    return value


def load_matrix(path: str | None = None) -> Matrix:
    """`compat.matrix.load_matrix`, through the cache: the same `Matrix`, or the same MatrixError.

    The file is read every time; only its parse is cached (`_parsed`).
    """
    from torchfit.compat.matrix import (
        matrix_from_data,
        matrix_to_data,
        parse_matrix,
        read_matrix_text,
    )

    text, name = read_matrix_text(path)
    return _parsed("matrix", text, name, parse_matrix, matrix_to_data, matrix_from_data)


def load_companions(path: str | None = None) -> Companions:
    """`compat.companions.load_companions`, through the cache: the same `Companions`, or the same error."""
    from torchfit.compat.companions import (
        companions_from_data,
        companions_to_data,
        parse_companions,
        read_companions_text,
    )

    text, name = read_companions_text(path)
    return _parsed("companions", text, name, parse_companions, companions_to_data, companions_from_data)
