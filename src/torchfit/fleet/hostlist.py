"""Slurm hostlist notation, both ways (pure): `gpu[01-03,07]` <-> gpu01 gpu02 gpu03 gpu07.

Slurm's own engine for this is `scontrol show hostnames` / `show hostlistsorted`; it
runs only where Slurm is installed and configured. A fleet file is resolved on a
login node, a laptop or in CI as well, so the notation is read and written here too,
and the Slurm tests hold this module to scontrol's answers (tests/fleet/test_slurm.py).
The grammar is Slurm's (slurm.conf(5) "NodeName", scontrol(1) "hostnames"): items
separated by commas outside brackets; an item is literal text and bracketed lists of
numbers and ranges (`[1-4,7]`, zero-padded `[01-16]`), any number of them, expanded as
their product left to right as scontrol does: `rack[1-2]-gpu[01-02]` is rack1-gpu01,
rack1-gpu02, rack2-gpu01, rack2-gpu02, and no text may follow the last bracket
(`gpu[1-2]z` is invalid to scontrol 22.05; tests/fleet/test_cluster.py holds it to scontrol).
Written here (with scontrol as the oracle) rather than taken from ClusterShell's NodeSet
or python-hostlist: the whole grammar is this module's forty lines, and a fleet file is
read where neither may be installed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from torchfit.errors import BadInput

# More names than any cluster has: a typo like `n[1-99999999]` must not exhaust memory.
MAX_NAMES = 1_000_000
_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,253}$")
_TAIL = re.compile(r"^(.*?)([0-9]+)$")
# A number in brackets is ASCII digits only, as Slurm reads it (hostlist.c parses with strtoul):
# str.isdigit() also takes "²" (int() then fails) and Arabic-Indic digits (U+0661 read as 1), neither a host
# name Slurm or DNS would write. The width bound keeps int() off a 5,000-digit string (Python refuses
# past 4,300 digits); 18 digits fit Slurm's unsigned long and exceed any real node number.
MAX_DIGITS = 18
_NUMBER = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}", re.ASCII)


def _split_items(text: str) -> list[str]:
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise BadInput(f"hostlist {text[:80]!r}: ']' without '['")
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise BadInput(f"hostlist {text[:80]!r}: '[' without ']'")
    items.append("".join(cur))
    return [i.strip() for i in items if i.strip()]


_SEGMENT = re.compile(r"\[([^\[\]]*)\]|([^\[\]]+)")


def _numbers(part_list: str, text: str) -> list[str]:
    """`01-03,7` -> ["01", "02", "03", "7"] (zero-padding kept: the width of the lower bound)."""
    out: list[str] = []
    for part in part_list.split(","):
        lo, sep, hi = part.partition("-")
        if not _NUMBER.fullmatch(lo) or (sep and not _NUMBER.fullmatch(hi)):
            raise BadInput(f"hostlist {text[:80]!r}: {part[:40]!r} is not a number or a range a-b "
                           f"(ASCII digits, at most {MAX_DIGITS})")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise BadInput(f"hostlist {text[:80]!r}: range {part} runs backwards")
        if len(out) + b - a >= MAX_NAMES:
            raise BadInput(f"hostlist {text[:80]!r}: more than {MAX_NAMES} names")
        width = len(lo) if len(lo) > 1 and lo.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(a, b + 1)]
    return out


def expand_hostlist(text: str) -> list[str]:
    """`gpu[01-02,05],login` -> ["gpu01", "gpu02", "gpu05", "login"]; `r[1-2]-n[1-2]` -> r1-n1 r1-n2
    r2-n1 r2-n2 (order kept, duplicates dropped); BadInput (one line) for anything that is not
    Slurm's notation."""
    out: dict[str, None] = {}
    for item in _split_items(text.strip()):
        segments = _SEGMENT.findall(item)
        if "".join(f"[{b}]" if b or not lit else lit for b, lit in segments) != item or "[]" in item:
            raise BadInput(f"hostlist {text[:80]!r}: {item[:40]!r} is not a name or name[ranges]")
        if "[" in item and not item.endswith("]"):  # scontrol 22.05: "Invalid hostlist: gpu[1-2]z"
            raise BadInput(f"hostlist {text[:80]!r}: {item[:40]!r}: Slurm allows no text after the last ']'")
        names = [""]
        for brackets, literal in segments:
            choices = _numbers(brackets, text) if brackets else [literal]
            if len(names) * len(choices) + len(out) >= MAX_NAMES:
                raise BadInput(f"hostlist {text[:80]!r}: more than {MAX_NAMES} names")
            names = [n + c for n in names for c in choices]
        for name in names:
            if not _NAME.match(name):
                raise BadInput(f"hostlist {text[:80]!r}: {name[:60]!r} is not a host name")
            out[name] = None
    return list(out)


def _key(name: str, padded: dict[str, list[int]] | None = None) -> tuple[str, int, int, str]:
    """(prefix, zero-padding width, number, name). A number without leading zeros joins the
    widest padded run of its prefix that its digits fill (gpu099, gpu100 -> gpu[099-100]),
    as Slurm writes them."""
    m = _TAIL.match(name)
    if not m:
        return (name, -1, -1, name)
    prefix, digits = m.groups()
    if digits.startswith("0") and len(digits) > 1:
        width = len(digits)
    else:
        width = max((w for w in (padded or {}).get(prefix, ()) if w <= len(digits)), default=0)
    return (prefix, width, int(digits), name)


def _padded_widths(names: Iterable[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name in names:
        m = _TAIL.match(name)
        if m and m.group(2).startswith("0") and len(m.group(2)) > 1:
            out.setdefault(m.group(1), []).append(len(m.group(2)))
    return out


def compress_hostlist(names: Iterable[str]) -> str:
    """The names in Slurm's notation, sorted and without duplicates: ["gpu02", "gpu01",
    "gpu03", "gpu07"] -> "gpu[01-03,07]" (what `scontrol show hostlistsorted` prints)."""
    unique = set(names)
    padded = _padded_widths(unique)
    keys = sorted({_key(n, padded) for n in unique})
    parts: list[str] = []
    i = 0
    while i < len(keys):
        prefix, width, num, name = keys[i]
        if num < 0:
            parts.append(name)
            i += 1
            continue
        ranges: list[tuple[int, int]] = []
        while i < len(keys) and keys[i][0] == prefix and keys[i][1] == width and keys[i][2] >= 0:
            n = keys[i][2]
            if ranges and n == ranges[-1][1] + 1:
                ranges[-1] = (ranges[-1][0], n)
            else:
                ranges.append((n, n))
            i += 1

        def fmt(n: int, w: int = width) -> str:
            return str(n).zfill(w)

        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            parts.append(f"{prefix}{fmt(ranges[0][0])}")
        else:
            body = ",".join(fmt(a) if a == b else f"{fmt(a)}-{fmt(b)}" for a, b in ranges)
            parts.append(f"{prefix}[{body}]")
    return ",".join(parts)
