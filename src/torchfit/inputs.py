"""Input at the edge: one helper per kind of untrusted input, so each class of bad
input is closed in one place.

- numbers from flags: finite, in a documented range (`seconds`, `count`, `port`), as
  argparse `type=` callables, so NaN, inf, 1e309, 0 and negatives are usage errors
  (exit 2, one line) before anything runs;
- files (`-r`, `--project`, `--facts`, `--lock`, `--log`, a matrix file, a cache record):
  `read_regular` opens regular files only, never blocking (a FIFO or a device is refused
  at once; `iter_regular`, the same rule in blocks for a file too big to hold: a wheel a
  lock names), and `read_text_file` reads at most a bounded number of bytes and refuses the rest; `check_depth` bounds nesting, and
  `loads_json` / `loads_toml` turn a parser's RecursionError into one line;
  `decode_json` is the same bounded reader for callers that treat bad JSON as a value
  (a node's answer, an index page, a cache record): ValueError, never RecursionError;
- text on its way to a terminal: `terminal_text` drops control sequences (ANSI
  escapes, C0/C1 controls but tab and newline), so a facts file or a tool's output
  cannot move the cursor, retitle the window or hide a line.

Every failure is `BadInput` (exit 2). Nothing here imports rich.
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import re
import stat
import sys
from collections.abc import Callable, Generator
from itertools import accumulate
from typing import Any

from torchfit.errors import BadInput
from torchfit.text import CSI

# A facts file of a 1 024-GPU host is about 300 KB; a lock of a CUDA torch ~20 KB.
MAX_FACTS_BYTES = 4 << 20
MAX_LOCK_BYTES = 8 << 20
# A lock of a CUDA torch env holds ~30 packages, a big project's a few hundred. A lock of
# 40,000 fits in MAX_LOCK_BYTES (8 MB of short URLs) and kept `install --lock` past 300 s
# (issue 34, T1: ~6 s to parse it twice, then one redirect probe per file URL): refused at
# once past this many, a documented limit (docs/install.md).
MAX_LOCK_PACKAGES = 5000
# A requirements file or pyproject.toml: a big monorepo's is ~100 KB.
MAX_REQUIREMENTS_BYTES = 4 << 20
MAX_MATRIX_BYTES = 16 << 20
# doctor reads a training log to explain its errors; it needs the end of a big one:
# its last 64 MiB (read_text_file's `tail`).
MAX_LOG_BYTES = 64 << 20
MAX_DEPTH = 32
# No single host has more: an NVL72 rack is 72 GPUs over 18 hosts (4 each).
MAX_GPUS = 1024
# The longest torchfit wait worth asking for: a week.
MAX_SECONDS = 7 * 24 * 3600.0


# --- numbers --------------------------------------------------------------------------


def _number(text: str, kind: type[int] | type[float]) -> float:
    try:
        value: float = kind(text)
    except (TypeError, ValueError):
        word = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{text!r} is not {word}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def seconds(*, minimum: float = 0.0, allow_zero: bool = False,
            maximum: float = MAX_SECONDS) -> Callable[[str], float]:
    """argparse type: a finite number of seconds, > minimum (>= with allow_zero), <= maximum."""

    def parse(text: str) -> float:
        value = float(_number(text, float))
        low_ok = value >= minimum if allow_zero else value > minimum
        if not low_ok or value > maximum:
            low = f">= {minimum:g}" if allow_zero else f"> {minimum:g}"
            raise argparse.ArgumentTypeError(f"{text!r}: give seconds {low} and <= {maximum:g}")
        return value

    parse.__name__ = "seconds"
    return parse


def count(*, minimum: int = 1, maximum: int = 1 << 20) -> Callable[[str], int]:
    """argparse type: an integer in [minimum, maximum]."""

    def parse(text: str) -> int:
        value = int(_number(text.strip(), int))
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{text!r}: give an integer from {minimum} to {maximum}")
        return value

    parse.__name__ = "count"
    return parse


def port(text: str) -> int:
    """argparse type: a TCP port 1-65535."""
    return count(minimum=1, maximum=65535)(text)


def check_port_text(value: str, what: str) -> int:
    """'29500' from HOST:PORT -> 29500; BadInput outside 1-65535."""
    try:
        return port(value)
    except argparse.ArgumentTypeError as exc:
        raise BadInput(f"{what}: port {exc}") from None


# --- files ----------------------------------------------------------------------------


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def read_regular(path: str, limit: int, *, follow_links: bool = True) -> bytes:
    """The bytes of the regular file at `path`, at most `limit`; never blocking.

    The one rule for every file torchfit reads that someone else may have placed or
    named (a cache record, `-r`, `--facts`, `--lock`, `--log`, `--project`): a FIFO
    (whose open() waits for a writer forever), a device (/dev/zero, /dev/tty), a
    socket or a directory is refused at once. O_NONBLOCK makes the open of a FIFO
    return at once, and fstat on the opened descriptor refuses whatever is not a
    regular file, so nothing can swap the file between the check and the read.
    `follow_links=False` (a cache: the directory is ours, a link in it is not)
    refuses a symlink too (O_NOFOLLOW). OSError for all of these, and for a file
    larger than `limit` bytes (read `limit + 1` at most, whatever st_size said).
    """
    fd, st = _open_regular(path, follow_links)
    try:
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes")
    return data


def iter_regular(path: str, limit: int, *, block: int = 1 << 20) -> Generator[bytes, None, None]:
    """The bytes of the regular file at `path` in blocks, `limit` at most: `read_regular`'s
    rule (a FIFO, a device, a socket or a directory refused at once, never waited on) for
    a file too big to hold in memory (a wheel a lock names). OSError EFBIG, before a byte
    is read, when the file's size is past `limit`, and as soon as more than `limit` bytes
    come (a file growing while read: st_size is only what it was at the open)."""
    fd, st = _open_regular(path)
    try:
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"{st.st_size} bytes, more than {limit}")
        got = 0
        while True:
            chunk = os.read(fd, min(block, limit + 1 - got))
            if not chunk:
                return
            got += len(chunk)
            if got > limit:
                raise OSError(errno.EFBIG, f"more than {limit} bytes (it grew while read)")
            yield chunk
    finally:
        os.close(fd)


def _open_regular(path: str, follow_links: bool = True) -> tuple[int, os.stat_result]:
    """An O_NONBLOCK descriptor of the regular file at `path`, and its fstat; OSError
    (EINVAL) for anything else, the descriptor closed."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        raise OSError(errno.EINVAL, f"not a regular file ({_kind(st.st_mode)})")
    return fd, st


def _kind(mode: int) -> str:
    for test, word in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return word
    return "not a file"


def read_text_file(path: str, what: str, *, limit: int, tail: bool = False) -> str:
    """The UTF-8 text of `path`, at most `limit` bytes; BadInput (`what PATH: ...`) otherwise.

    A regular file only (`read_regular`: a FIFO, a device or a socket is refused at
    once, never waited on); "-" is standard input, read up to `limit + 1` bytes, so
    /dev/zero behind stdin costs no memory either. The path is shown escaped (`shown`).

    `tail` (a log, whose error is at its end): a longer regular file gives its last
    `limit` bytes (standard input its first), and bytes that are not UTF-8 become
    U+FFFD (a log holds what the program printed), instead of BadInput.
    """
    name = shown(path)
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit if tail else limit + 1)
        elif tail:
            data = _read_tail(path, limit)
        else:
            data = read_regular(path, limit)
    except FileNotFoundError:
        raise BadInput(f"{what} {name}: cannot read (no such file)") from None
    except IsADirectoryError:
        raise BadInput(f"{what} {name}: is a directory") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise BadInput(f"{what} {name}: larger than {_mib(limit)}; not a file torchfit reads") from None
        if exc.errno == errno.EINVAL:
            raise BadInput(f"{what} {name}: {exc.strerror}; give a file (or - for standard input)") from None
        raise BadInput(f"{what} {name}: cannot read ({exc.strerror or exc})") from None
    if tail:
        return data.decode("utf-8", errors="replace")
    if len(data) > limit:
        raise BadInput(f"{what} {name}: larger than {_mib(limit)}; not a file torchfit reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} {name}: not a UTF-8 text file") from None


def _read_tail(path: str, limit: int) -> bytes:
    """The last `limit` bytes of the regular file at `path` (read_regular's checks)."""
    fd, st = _open_regular(path)
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > limit:
            fh.seek(st.st_size - limit)
        return fh.read(limit)


def check_depth(obj: object, where: str, max_depth: int = MAX_DEPTH) -> None:
    """BadInput when lists/objects nest deeper than `max_depth` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            raise BadInput(f"{where}: nested deeper than {max_depth} levels")
        stack.extend((c, depth + 1) for c in children)


class TooDeep(ValueError):
    """JSON nested deeper than the reader's bound."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_json(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads for JSON that is not ours: NaN/Infinity refused, nesting bounded (TooDeep,
    a ValueError), so every failure is a ValueError, never RecursionError or a crash.

    The nesting is measured on the text before it is parsed (one pass over its brackets,
    outside strings), so a 100,000-deep document costs no recursion at all."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if _bracket_depth(text) > max_depth:
        raise TooDeep(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # pragma: no cover - _bracket_depth bounds it first
        raise TooDeep(f"nested deeper than {max_depth} levels") from None


_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _bracket_depth(text: str) -> int:
    """The deepest nesting of [ and { in `text`, strings skipped (upper bound for bad JSON).

    Strings, then everything but brackets, are cut out by the regex engine, and the running
    depth is summed in C (accumulate): a 1 MB record costs about a millisecond, where a
    Python loop over every string took ~25 ms of each resolve (issue 37)."""
    if "[" not in text and "{" not in text:
        return 0
    brackets = _NOT_BRACKETS.sub("", _STRINGS.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=0))


def loads_json(text: str, where: str, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads with one-line errors, NaN/Infinity refused and nesting bounded."""
    try:
        return decode_json(text, max_depth)
    except TooDeep:
        raise BadInput(f"{where}: nested deeper than {max_depth} levels") from None
    except ValueError as exc:
        raise BadInput(f"{where}: not valid JSON ({exc})") from None


def loads_toml(text: str, where: str, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """tomllib.loads with one-line errors and nesting bounded."""
    from torchfit._backports import tomllib

    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise BadInput(f"{where}: nested deeper than {max_depth} levels") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{where}: not a TOML file ({exc})") from None
    check_depth(data, where, max_depth)
    return dict(data)


# --- text for a terminal --------------------------------------------------------------

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte escapes, then any
# remaining C0/C1 control but tab and newline. DEL too.
_CONTROL = re.compile(
    CSI.pattern
    + r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-_]?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    # the bidirectional controls (U+202E shows "evil\u202etxt.exe" as "evilexe.txt"), invisible marks
    r"|[\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


_RAW_BYTE = re.compile("[\udc80-\udcff]")


def terminal_text(text: str) -> str:
    """`text` without control sequences: safe to print to a terminal. A byte of a name that
    is not UTF-8 (os.fsdecode's surrogateescape) is written `\\xff`, as `shown` does."""
    text = _CONTROL.sub("", text)
    if text.isascii():
        return text
    return _RAW_BYTE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", text)


def has_control(text: str) -> bool:
    return _CONTROL.search(text) is not None


# --- paths ----------------------------------------------------------------------------

_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def shown(text: str) -> str:
    """`text` (a path, a name) as it may be printed: every character a terminal would act
    on or hide is escaped, the way Python writes it (`\\n`, `\\t`, `\\x1b`, `\\u202e` for a
    right-to-left override), a byte that is not UTF-8 as `\\xff` (os.fsdecode's
    surrogateescape); the rest, spaces and letters of any script, as is."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif "\udc80" <= ch <= "\udcff":  # a raw byte of a non-UTF-8 name
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ord(ch) < 0x80:
            out.append(_ESCAPES.get(ch) or f"\\x{ord(ch):02x}")
        else:  # \u0080, never \x80: that is a raw byte's
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return "".join(out)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + "..."


def shell_word(text: str) -> str:
    """`text` as one word a POSIX shell reads back as `text` (shlex.quote), in bash's
    $'...' form, escaped as `shown` does, when it holds a character a terminal acts on."""
    import shlex

    if text.isprintable():
        return shlex.quote(text)

    def word(ch: str) -> str:
        if ch == "\\" or ch == "'":
            return "\\" + ch
        if ch.isprintable():
            return ch
        # the very bytes, whatever the shell's locale: \x1b, \xe2\x80\xae (U+202E), \xff (a raw byte)
        return "".join(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))

    return "$'" + "".join(word(ch) for ch in text) + "'"


# What a name beside PREFIX adds to its last component: `.NAME.torchfit-PID-XXXXXX` (the
# temporary env, installer.prefix.temp_name) is 25 bytes longer; and the deepest file of an
# env lies ~300 bytes below it (torch's include/ tree under lib/pythonX.Y/site-packages).
_NAME_ROOM = 32
_TREE_ROOM = 400


def check_prefix_text(path: str, what: str) -> None:
    """BadInput (exit 2, one line, the path `shown`) for an env prefix that cannot work,
    before anything is made:

    - a newline or a tab: the kernel ends a `#!` line at a newline and splits it at a
      tab, so every script of the env (bin/torchrun, bin/pip) could not start;
    - a `:`: PATH (bin/activate, `torchfit run`) splits there; no quoting exists;
    - a name that is not UTF-8: the lock (TOML), pyvenv.cfg and the scripts are UTF-8;
    - a name too long for its filesystem (with the room the temporary name beside it
      needs), or a path too long for the files an env holds (PATH_MAX).
    """
    bad = next((ch for ch in path if ch in "\n\t:"), None)
    if bad is not None:
        why = {"\n": "a newline", "\t": "a tab", ":": "a ':'"}[bad]
        use = ("a #! line cannot hold it, so the env's scripts (bin/torchrun, bin/pip) could not start"
               if bad != ":" else "PATH is split at ':', so bin/activate and `torchfit run` could not put "
               "the env's bin/ first")
        raise BadInput(f"{what} {shown(path)}: contains {why}; {use}: choose another directory")
    try:
        raw = path.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(f"{what} {shown(path)}: the name is not UTF-8; an env's lock, pyvenv.cfg and "
                       "scripts are written in UTF-8: choose a UTF-8 name") from None
    import os

    limit_path = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096
    if len(raw) + _TREE_ROOM > limit_path:
        raise BadInput(f"{what} {_clip(shown(path), 120)}: {len(raw)} bytes long; an env's files lie up to "
                       f"{_TREE_ROOM} bytes deeper, past this system's limit of {limit_path}: choose a shorter path")
    where = os.path.dirname(path.rstrip(os.sep)) or os.sep
    while not os.path.isdir(where) and where != os.path.dirname(where):
        where = os.path.dirname(where)
    try:
        name_max = os.pathconf(where, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    for part in path.split(os.sep):
        size = len(part.encode("utf-8"))
        if size + _NAME_ROOM > name_max:
            raise BadInput(f"{what} {_clip(shown(path), 120)}: the name {_clip(shown(part), 40)} is {size} bytes; "
                           f"this filesystem allows {name_max}, and torchfit builds the env beside it under "
                           f"a name {_NAME_ROOM} bytes longer: choose a shorter name")


# --- URLs -----------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def check_index_url(url: str, what: str, *, allow_path: bool = False, placeholders: bool = True) -> str:
    """An index URL with a scheme, a parsable host and port, and no placeholder but
    `{variant}`; BadInput (one line) otherwise. `allow_path`: a bare local path is
    fine too (--find-links). Returns `url` unchanged."""
    from urllib.parse import urlsplit

    from torchfit.redact import redact

    shown = redact(url)[:200]
    if not url or any(ch.isspace() for ch in url) or has_control(url):
        raise BadInput(f"{what} {shown!r}: not a URL")
    bad = [p for p in _PLACEHOLDER.findall(url) if p != "{variant}" or not placeholders]
    if bad:
        raise BadInput(f"{what} {shown}: unknown placeholder {bad[0]} (the one torchfit fills is {{variant}})")
    try:
        parts = urlsplit(url.replace("{variant}", "cpu"))
        parts.port  # noqa: B018 - raises ValueError on a bad port or IPv6 literal
    except ValueError as exc:
        raise BadInput(f"{what} {shown}: not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if "://" not in url or len(scheme) < 2:
        if allow_path:
            return url
        raise BadInput(f"{what} {shown}: not a URL (give https://HOST/PATH or file:///PATH)")
    if scheme in ("http", "https") and not parts.hostname:
        raise BadInput(f"{what} {shown}: no host in the URL")
    return url
