"""Text helpers every layer shares, each written once (the floor: imports only `redact`).

- `format_bytes`: a size as people read it, decimal units (1.2 MB, 3.0 GB: disk space, downloads);
  `format_bytes_iec`: an exact binary size (1 MiB, 4 GiB: verify's buffer sizes, which are powers
  of two).
- `tail`: the last lines a child printed, for an error (blank lines dropped, credentials redacted).
- `first_line`/`said_lines`: what a program itself said (blank lines and the dynamic loader's
  LD_PRELOAD complaint, which every program started with a bad LD_PRELOAD prints, skipped).
- `CSI`/`strip_ansi`: ECMA-48 control sequences (ESC [ parameters, intermediates, final byte),
  e.g. the underline nvidia-smi puts on `topo -m`'s header; inputs.terminal_text builds its
  wider pattern (OSC, C0/C1, bidirectional marks) from this one.
"""

from __future__ import annotations

import re

from torchfit.redact import redact

# ECMA-48 5.4: ESC [, parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, a final byte 0x40-0x7E.
CSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")

# The dynamic loader's complaint about an LD_PRELOAD entry it cannot load is printed by every
# program started with it; it is not what the program itself said.
LOADER_NOISE = re.compile(r"^ERROR: ld\.so: object .* from LD_PRELOAD cannot be preloaded")

TAIL_LINES = 30
_GIB, _MIB, _KIB = 1 << 30, 1 << 20, 1 << 10


def strip_ansi(text: str) -> str:
    return CSI.sub("", text)


def format_bytes(n: float) -> str:
    """1.2 MB, 740.1 MB, 3.0 GB: sizes as people read them (decimal units)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def format_bytes_iec(n: int) -> str:
    """An exact binary size: 1 GiB, 256 MiB, 4 KiB; `n B` when no binary unit divides it."""
    for unit, size in (("GiB", _GIB), ("MiB", _MIB), ("KiB", _KIB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` non-blank lines of a child's output, credentials redacted."""
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return redact("\n".join(kept[-lines:]))


def said_lines(text: str) -> list[str]:
    """The non-blank lines of `text`, stripped, the loader's LD_PRELOAD complaint skipped."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not LOADER_NOISE.match(ln.strip())]


def first_line(text: str, limit: int = 240) -> str:
    """The first line a program said (see `said_lines`), cut to `limit` characters; "" if none."""
    said = said_lines(text)
    return said[0][:limit] if said else ""
