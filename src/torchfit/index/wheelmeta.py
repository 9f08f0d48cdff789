"""Read a wheel without unpacking it: its zip central directory, then single members.

A wheel is a zip file (PEP 427). Its central directory sits at the end, so the last
64 KiB of the file name every member, its size and its offset; a member is then
one more read of its local header and its (deflated) bytes. That works the same
over any random-access byte source: a local file (`FileSource`) or a URL read with
HTTP range requests (`HttpRangeSource`, through `IndexClient`, so timeouts,
retries and redaction apply). A server that ignores `Range` is read whole, once,
into a temporary file, with a warning through the client's observer.

Every source counts the bytes it transferred (`bytes_read`): reading torch's
compiled arch list out of a 900 MB wheel costs the central directory and one
~10 MB member, and the tests hold the probe to that.

The parsers (`parse_eocd`, `parse_central_directory`, `parse_local_header`) are
pure and raise only `WheelFormatError`, as does everything else here for a file
that is not a readable zip; HTTP failures stay `IndexUnavailable`.
"""

from __future__ import annotations

import hashlib
import re
import struct
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol
from urllib.parse import urldefrag

from torchfit._backports import FROZEN
from torchfit.errors import WheelFormatError
from torchfit.redact import redact
from torchfit.space import from_oserror, is_no_space, temp_root, tmpdir_place

if TYPE_CHECKING:
    from torchfit.index.client import IndexClient
    from torchfit.index.pages import IndexFile

TAIL = 65536  # the EOCD record plus a comment of at most 65535 bytes fits in this
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_CHUNK = 1 << 20
# Bounds for an archive from anywhere (a zip bomb, a crafted central directory): torch's
# biggest wheels have ~20,000 members and a central directory of a few MB; its biggest
# member (libtorch_cuda.so) is ~1.5 GB inflated, its wheels at most a few GB.
MAX_CENTRAL_DIRECTORY = 64 << 20
MAX_MEMBERS = 200_000
MAX_MEMBER_IN_MEMORY = 2 << 30  # `WheelArchive.read`: what may be held in memory at once
MAX_MEMBER_BYTES = 8 << 30  # `extract`/`iter_member`: a member written to a temporary file
MAX_WHEEL_BYTES = 16 << 30  # a wheel downloaded whole from a server that ignores Range
# A METADATA file (and torch/version.py) is text of a few KB: torch 2.13's METADATA is 32 KB,
# the biggest on PyPI a few hundred KB. Read with this bound, a bombed one (hundreds of MB of
# zeros, declared honestly) is refused from its central-directory entry, before it is inflated.
MAX_METADATA_BYTES = 4 << 20
METADATA_MEMBER = r"^[^/]+\.dist-info/METADATA$"


@dataclass(**FROZEN)
class ZipMember:
    """One central-directory entry: where a member's bytes are and how they are packed."""

    name: str
    method: int  # 0 stored, 8 deflated
    compressed_size: int
    size: int
    header_offset: int
    crc32: int


# ---------------------------------------------------------------------------
# Pure parsers
# ---------------------------------------------------------------------------


def parse_eocd(tail: bytes, total: int) -> tuple[int, int, int | None]:
    """(central directory offset, its size, offset of a zip64 EOCD record or None) from the file's tail.

    `tail` is the last `len(tail)` bytes of a file of `total` bytes. A zip64 archive
    keeps the real values in the zip64 record the locator points to; the caller
    reads it with `parse_eocd64` (it may lie before the tail).
    """
    where = "end of central directory"
    if total < 22 or len(tail) < 22 or len(tail) > total:
        raise WheelFormatError(where, "file too short for a zip")
    pos = tail.rfind(_EOCD)
    while pos >= 0 and pos + 22 > len(tail):
        pos = tail.rfind(_EOCD, 0, pos)
    if pos < 0:
        raise WheelFormatError(where, "no end-of-central-directory record")
    cd_size, cd_offset = struct.unpack("<II", tail[pos + 12:pos + 20])
    loc = pos - 20
    if loc >= 0 and tail[loc:loc + 4] == _EOCD64_LOCATOR:
        (eocd64,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
        if eocd64 + 56 > total:
            raise WheelFormatError(where, "zip64 locator points past the end of the file")
        return 0, 0, eocd64
    eocd_at = total - len(tail) + pos
    if cd_offset + cd_size > eocd_at:
        raise WheelFormatError(where, "central directory overlaps its own end record")
    return cd_offset, cd_size, None


def parse_eocd64(record: bytes, total: int) -> tuple[int, int]:
    """(central directory offset, size) from a zip64 end-of-central-directory record."""
    if len(record) < 56 or record[:4] != _EOCD64:
        raise WheelFormatError("zip64 end of central directory", "bad signature")
    cd_size, cd_offset = struct.unpack("<QQ", record[40:56])
    if cd_offset + cd_size > total:
        raise WheelFormatError("zip64 end of central directory", "central directory past the end of the file")
    return cd_offset, cd_size


def _zip64_extra(extra: bytes, size: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Apply a zip64 extended-information field (id 0x0001) to the 0xFFFFFFFF placeholders."""
    pos = 0
    while pos + 4 <= len(extra):
        hid, hlen = struct.unpack("<HH", extra[pos:pos + 4])
        body = extra[pos + 4:pos + 4 + hlen]
        if hid == 1:
            vals = [struct.unpack("<Q", body[i:i + 8])[0] for i in range(0, len(body) - 7, 8)]
            it = iter(vals)
            try:
                if size == 0xFFFFFFFF:
                    size = next(it)
                if csize == 0xFFFFFFFF:
                    csize = next(it)
                if offset == 0xFFFFFFFF:
                    offset = next(it)
            except StopIteration:
                raise WheelFormatError("central directory", "short zip64 extra field") from None
            break
        pos += 4 + hlen
    return size, csize, offset


def parse_central_directory(cd: bytes) -> tuple[ZipMember, ...]:
    """Every entry of a central directory, in order."""
    out: list[ZipMember] = []
    pos = 0
    while pos + 4 <= len(cd) and cd[pos:pos + 4] == _CENTRAL:
        if len(out) >= MAX_MEMBERS:
            raise WheelFormatError("central directory", f"more than {MAX_MEMBERS} members; not a wheel torchfit reads")
        if pos + 46 > len(cd):
            raise WheelFormatError("central directory", "truncated entry")
        (method,) = struct.unpack("<H", cd[pos + 10:pos + 12])
        crc, csize, size, nlen, elen, clen = struct.unpack("<IIIHHH", cd[pos + 16:pos + 34])
        (offset,) = struct.unpack("<I", cd[pos + 42:pos + 46])
        end = pos + 46 + nlen + elen + clen
        if end > len(cd):
            raise WheelFormatError("central directory", "truncated entry")
        raw = cd[pos + 46:pos + 46 + nlen]
        extra = cd[pos + 46 + nlen:pos + 46 + nlen + elen]
        size, csize, offset = _zip64_extra(extra, size, csize, offset)
        name = raw.decode("utf-8", errors="replace")
        out.append(ZipMember(name, method, csize, size, offset, crc))
        pos = end
    if pos != len(cd) and not out:
        raise WheelFormatError("central directory", "no central-directory entries")
    return tuple(out)


def parse_local_header(head: bytes) -> int:
    """Length of a local file header (30 bytes + name + extra): the member's data starts after it."""
    if len(head) < 30 or head[:4] != _LOCAL:
        raise WheelFormatError("local file header", "bad signature")
    nlen, elen = struct.unpack("<HH", head[26:30])
    return 30 + int(nlen) + int(elen)


# ---------------------------------------------------------------------------
# Byte sources
# ---------------------------------------------------------------------------


class ByteSource(Protocol):
    """Random access to a file's bytes, counting what was transferred."""

    name: str
    size: int
    bytes_read: int

    def read(self, start: int, length: int) -> bytes: ...


class FileSource:
    """A local wheel. `bytes_read` counts the bytes read from disk for the probe."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.name = self.path.name
        try:
            self._fh: IO[bytes] = open(self.path, "rb")
        except OSError as exc:
            raise WheelFormatError(str(path), exc.strerror or "cannot open") from None
        self.size = self._fh.seek(0, 2)
        self.bytes_read = 0

    def read(self, start: int, length: int) -> bytes:
        if start < 0 or length < 0 or start + length > self.size:
            raise WheelFormatError(self.name, f"read of bytes {start}+{length} past the end ({self.size})")
        self._fh.seek(start)
        data = self._fh.read(length)
        self.bytes_read += len(data)
        return data

    def sha256(self) -> str:
        """The file's sha256 (reads it whole; not counted in `bytes_read`, which measures the probe)."""
        h = hashlib.sha256()
        self._fh.seek(0)
        for block in iter(lambda: self._fh.read(_CHUNK), b""):
            h.update(block)
        return h.hexdigest()

    def close(self) -> None:
        self._fh.close()


class HttpRangeSource:
    """A wheel on an HTTP server, read with `Range` requests through an `IndexClient`.

    The first read asks for the file's last 64 KiB (`bytes=-65536`), which gives
    the size too. When the server answers 200 instead of 206 it does not honour
    ranges: the whole body is then kept in a temporary file and later reads are
    served from it (`whole_file` says so, `warning` says it once).
    """

    def __init__(self, client: IndexClient, url: str) -> None:
        self.client = client
        self.url = urldefrag(url)[0]
        self.name = redact(self.url.rsplit("/", 1)[-1])
        self.size = -1
        self.bytes_read = 0
        self.requests = 0
        self.whole_file = False
        self.warning: str | None = None
        self._spool: IO[bytes] | None = None
        self._tail: tuple[int, bytes] | None = None

    def _get(self, spec: str) -> tuple[int, bytes, int | None]:
        from torchfit.errors import IndexUnavailable

        self.requests += 1
        resp = self.client._send(self.url, {"Range": f"bytes={spec}", "Accept-Encoding": "identity"}, stream=True)
        try:
            if resp.status_code == 206:
                first, _, last = spec.partition("-")
                wanted = int(last) if not first else int(last) - int(first) + 1
                body = self.client.body(resp, self.url, limit=wanted)
                self.bytes_read += len(body)
                m = re.search(r"/(\d+)\s*$", resp.headers.get("Content-Range", ""))
                return 206, body, int(m.group(1)) if m else None
            if resp.status_code == 200:
                self._spool_body(resp)
                return 200, b"", None
            raise IndexUnavailable(self.url, f"HTTP {resp.status_code} {resp.reason or ''}".strip())
        finally:
            resp.close()

    def _spool_body(self, resp: object) -> None:
        """The server ignored `Range`: keep the whole body in a temporary file (deleted on close)."""
        self.whole_file = True
        spool = tempfile.TemporaryFile(prefix="torchfit-wheel-", dir=temp_root())
        n = 0
        try:
            for block in self.client.iter_body(resp, self.url, _CHUNK, limit=MAX_WHEEL_BYTES):  # type: ignore[arg-type]
                spool.write(block)
                n += len(block)
        except BaseException as exc:
            spool.close()
            if not isinstance(exc, OSError) or not is_no_space(exc):
                raise
            length = str(getattr(resp, "headers", {}).get("Content-Length", ""))
            raise from_oserror(exc, f"downloading {self.name} whole (the server ignores Range)", [tmpdir_place()],
                               path=tempfile.gettempdir(), needed=int(length) if length.isdigit() else None,
                               needed_what="the wheel is") from exc
        self.bytes_read += n
        self.size = n
        self._spool = spool
        self.warning = (f"{self.url}: the server does not honour HTTP range requests; "
                        f"downloaded the whole file ({n} bytes)")
        self.client._say(self.warning)

    def open(self) -> bytes:
        """The file's tail (up to 64 KiB); sets `size`."""
        status, body, total = self._get(f"-{TAIL}")
        if status == 206:
            if total is None:
                raise WheelFormatError(self.url, "range answer without a total size (Content-Range)")
            self.size = total
            self._tail = (total - len(body), body)
            return body
        return self.read(max(0, self.size - TAIL), min(TAIL, self.size))

    def read(self, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        if start < 0 or (self.size >= 0 and start + length > self.size):
            raise WheelFormatError(self.name, f"read of bytes {start}+{length} past the end ({self.size})")
        if self._tail and start >= self._tail[0] and start + length <= self._tail[0] + len(self._tail[1]):
            off = start - self._tail[0]
            return self._tail[1][off:off + length]
        if self._spool is not None:
            self._spool.seek(start)
            return self._spool.read(length)
        status, body, _total = self._get(f"{start}-{start + length - 1}")
        if status == 200 and self._spool is not None:
            self._spool.seek(start)
            return self._spool.read(length)
        if len(body) != length:
            raise WheelFormatError(self.name, f"range {start}-{start + length - 1} returned {len(body)} bytes")
        return body

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None


# ---------------------------------------------------------------------------
# The archive
# ---------------------------------------------------------------------------


class WheelArchive:
    """A wheel's member list, and its members read one at a time from a `ByteSource`."""

    def __init__(self, source: ByteSource, tail: bytes | None = None) -> None:
        self.source = source
        if tail is None:
            tail = source.read(max(0, source.size - TAIL), min(TAIL, source.size))
        cd_offset, cd_size, eocd64 = parse_eocd(tail, source.size)
        if eocd64 is not None:
            cd_offset, cd_size = parse_eocd64(self._read(eocd64, 56, tail), source.size)
        if cd_size > MAX_CENTRAL_DIRECTORY:
            raise WheelFormatError(source.name, f"a central directory of {cd_size} bytes (at most "
                                                f"{MAX_CENTRAL_DIRECTORY} read); not a wheel torchfit reads")
        self.members = {m.name: m for m in parse_central_directory(self._read(cd_offset, cd_size, tail))}

    def _read(self, start: int, length: int, tail: bytes) -> bytes:
        tail_start = self.source.size - len(tail)
        if start >= tail_start and start + length <= self.source.size:
            return tail[start - tail_start:start - tail_start + length]
        return self.source.read(start, length)

    def find(self, pattern: str) -> list[ZipMember]:
        """Members whose name matches the regular expression `pattern` (in archive order)."""
        rx = re.compile(pattern)
        return [m for m in self.members.values() if rx.search(m.name)]

    def _data_offset(self, m: ZipMember) -> int:
        return m.header_offset + parse_local_header(self.source.read(m.header_offset, 30))

    def iter_member(self, m: ZipMember, limit: int = MAX_MEMBER_BYTES) -> Iterator[bytes]:
        """The member's uncompressed bytes in blocks of at most 1 MiB, reading its compressed
        bytes in 8 MiB ranges. Bounded: a member that declares more than `limit` bytes, or
        inflates past the size it declares (a zip bomb), is a WheelFormatError before its
        output is held."""
        if m.method not in (0, 8):
            raise WheelFormatError(m.name, f"compression method {m.method} is not supported")
        if m.size > limit:
            raise WheelFormatError(m.name, f"declares {m.size} bytes; torchfit reads members of at most {limit}")
        start = self._data_offset(m)
        if start + m.compressed_size > self.source.size:
            raise WheelFormatError(m.name, "member runs past the end of the file")
        inflater = zlib.decompressobj(-15) if m.method == 8 else None
        crc = 0
        produced = 0
        done = 0

        def counted(out: bytes) -> bytes:
            nonlocal crc, produced
            produced += len(out)
            if produced > m.size:
                raise WheelFormatError(m.name, f"inflates past the {m.size} bytes it declares (a zip bomb?)")
            crc = zlib.crc32(out, crc)
            return out

        while done < m.compressed_size:
            block = self.source.read(start + done, min(_CHUNK * 8, m.compressed_size - done))
            done += len(block)
            if inflater is None:
                yield counted(block)
                continue
            try:
                # At most 1 MiB of output per call: a block of a bomb never inflates at once.
                while block:
                    out = counted(inflater.decompress(block, _CHUNK))
                    block = inflater.unconsumed_tail
                    if out:
                        yield out
            except zlib.error as exc:
                raise WheelFormatError(m.name, f"bad deflate data ({exc})") from None
        if inflater:
            try:
                tail = counted(inflater.flush())
            except zlib.error as exc:
                raise WheelFormatError(m.name, f"bad deflate data ({exc})") from None
            if tail:
                yield tail
        if produced != m.size:
            raise WheelFormatError(m.name, f"inflates to {produced} bytes, not the {m.size} it declares")
        if crc != m.crc32:
            raise WheelFormatError(m.name, "CRC-32 mismatch")

    def read(self, name: str | ZipMember, limit: int = MAX_MEMBER_IN_MEMORY) -> bytes:
        """One member, uncompressed, in memory (METADATA, a 10 MB library); at most `limit` bytes."""
        m = self.members.get(name) if isinstance(name, str) else name
        if m is None:
            raise WheelFormatError(str(name), "no such member")
        if m.method == 0 and m.size == m.compressed_size:
            if m.size > limit:
                raise WheelFormatError(m.name, f"declares {m.size} bytes; torchfit reads members of at most {limit}")
            data = self.source.read(self._data_offset(m), m.compressed_size)
            if zlib.crc32(data) != m.crc32:
                raise WheelFormatError(m.name, "CRC-32 mismatch")
            return data
        return b"".join(self.iter_member(m, limit))

    def metadata(self, limit: int = MAX_METADATA_BYTES) -> tuple[ZipMember, bytes] | None:
        """The wheel's `*.dist-info/METADATA` (member, bytes), at most `limit` bytes (WheelFormatError
        past it, from its directory entry); None when it has none. Every reader of a wheel's
        METADATA goes through here."""
        found = self.find(METADATA_MEMBER)
        if not found:
            return None
        return found[0], self.read(found[0], limit)

    def extract(self, m: ZipMember, fh: IO[bytes]) -> None:
        """Write one member, uncompressed, to `fh` (for members too big to hold in memory)."""
        for block in self.iter_member(m):
            fh.write(block)


def copy_to_temp(archive: WheelArchive, m: ZipMember, directory: str | None = None) -> IO[bytes]:
    """A temporary file holding member `m`, positioned at 0; deleted when closed."""
    fh = tempfile.TemporaryFile(prefix="torchfit-member-", dir=directory or temp_root())
    try:
        archive.extract(m, fh)
    except BaseException as exc:
        fh.close()
        if is_no_space(exc):
            raise from_oserror(exc, f"extracting {m.name}", [tmpdir_place()],  # type: ignore[arg-type]
                               path=directory or tempfile.gettempdir(), needed=m.size,
                               needed_what="the member is") from exc
        raise
    fh.seek(0)
    return fh


# ---------------------------------------------------------------------------
# METADATA of an index file, for `matrix check`
# ---------------------------------------------------------------------------


def wheel_metadata(client: IndexClient, file: IndexFile, *, limit: int = MAX_METADATA_BYTES) -> str | None:
    """A wheel's `*.dist-info/METADATA`, read from the zip with a few range requests.

    For wheels whose index serves no PEP 658 file. None when the server does not
    honour ranges (nothing is downloaded whole for this) or the archive is not a
    plain zip, or its METADATA is larger than `limit`. Cached under the wheel's sha256
    when the index gives one (the content is then fixed).
    """
    try:
        found = remote_metadata(client, file, limit=limit)
    except WheelFormatError:
        return None
    return None if found == NO_RANGES else found


NO_RANGES = "the server does not honour HTTP range requests"


def remote_metadata(client: IndexClient, file: IndexFile, *, limit: int = MAX_METADATA_BYTES) -> str | None:
    """`wheel_metadata`'s read, saying why not: the METADATA's text; None when the wheel has
    none; NO_RANGES when the server ignores `Range` (nothing is downloaded whole: a torch wheel is
    gigabytes). WheelFormatError for a file that is not a readable wheel (or a METADATA past
    `limit`), IndexUnavailable when the server fails. Cached as `wheel_metadata` says."""
    from torchfit.index.cache import DiskCache
    from torchfit.redact import strip_credentials

    url = urldefrag(file.url)[0]
    digest = file.hashes.get("sha256")
    key = DiskCache.key(url, f"wheel-metadata {digest}") if digest else None
    if key and client.cache:
        hit = client.cache.load(key)
        if hit and len(hit[1]) <= limit:
            return hit[1].decode("utf-8", errors="replace")
    src = _NoFallbackSource(client, url)
    try:
        tail = src.open()
        if src.whole_file:
            return NO_RANGES
        found = WheelArchive(src, tail).metadata(limit)
        if found is None:
            return None
        raw = found[1]
    finally:
        src.close()
    if key and client.cache:
        client.cache.store(key, {"url": strip_credentials(url), "content_type": "text/plain"}, raw)
    return raw.decode("utf-8", errors="replace")


class _NoFallbackSource(HttpRangeSource):
    """For METADATA alone a whole-file download is never worth it: a 200 ends the read."""

    def _spool_body(self, resp: object) -> None:
        self.whole_file = True
        self.size = 0


def read_wheel_member(location: str, member: str, *, filename: str | None = None, sha256: str | None = None,
                      remote: bool = False) -> str | None:
    """`*.dist-info/MEMBER` of the wheel at `location` (a path, a file:// URL, an http(s) URL):
    a local file read directly; a remote one's METADATA with range requests (`remote`; nothing
    downloaded whole, `wheel_metadata`). None where unreadable or not asked (a remote file and
    `remote` off, or another member than METADATA). add reads a locked wheel's METADATA and
    RECORD through here (lock.closure.find_family_drift, installer.add), and so do metacheck (a
    local wheel beside its `.metadata`) and index.project (a file:// wheel): one zip reader."""
    from urllib.parse import unquote, urlsplit

    from torchfit.errors import IndexUnavailable

    parts = urlsplit(location)
    try:
        if parts.scheme in ("", "file"):
            src = FileSource(unquote(parts.path) if parts.scheme == "file" else location)
            try:
                archive = WheelArchive(src)
                if member == "METADATA":  # bounded as every METADATA read (MAX_METADATA_BYTES)
                    meta = archive.metadata()
                    return meta[1].decode("utf-8", "replace") if meta else None
                found = archive.find(rf"^[^/]+\.dist-info/{member}$")
                return archive.read(found[0]).decode("utf-8", "replace") if found else None
            finally:
                src.close()
        if not remote or member != "METADATA":
            return None
        from torchfit.index.client import IndexClient
        from torchfit.index.pages import IndexFile

        client = IndexClient(timeout=30.0, retries=1)
        name = filename or location.rsplit("/", 1)[-1]
        return wheel_metadata(client, IndexFile(name, location, {"sha256": sha256} if sha256 else {}))
    except (WheelFormatError, IndexUnavailable, OSError):
        return None


def sha256_of(source: ByteSource) -> str | None:
    """The sha256 of a local file source; None for sources that would have to download it."""
    if isinstance(source, FileSource):
        return source.sha256()
    return None


__all__ = [
    "MAX_METADATA_BYTES",
    "ByteSource",
    "FileSource",
    "HttpRangeSource",
    "WheelArchive",
    "ZipMember",
    "copy_to_temp",
    "parse_central_directory",
    "parse_eocd",
    "parse_eocd64",
    "parse_local_header",
    "read_wheel_member",
    "remote_metadata",
    "sha256_of",
    "wheel_metadata",
]
