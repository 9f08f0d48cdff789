"""Round 4, export (issue 25): `--format pylock` of a project reads the sources resolve reads."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Box, Case
from _plan_common import CPU, error_line, make_wheel, stand_in_torch


def pylock_ignores_sources(box: Box) -> str | None:
    links = box.work / "links"
    make_wheel(links, "only-here", "1.0", ["purelib"])
    make_wheel(links, "purelib", "1.0")
    torch = stand_in_torch(box)
    args = ("--offline", *CPU, "--torch-index-url", torch.as_uri(), "--find-links", str(links), "only-here")
    resolved = box.tf("resolve", *args, timeout=120)
    if resolved.code != 0:
        return f"(setup) resolve failed: {error_line(resolved.err)}"
    for fmt in ("requirements", "pylock"):
        res = box.tf("export", "--format", fmt, *args, timeout=120)
        if res.code != 0:
            return f"export --format {fmt}: exit {res.code}: {error_line(res.err)[:200]}"
        if "only-here" not in res.out:
            return f"export --format {fmt} has no only-here"
    return None


CASES = [
    Case("4-export-pylock-sources", 4, "export --format pylock finds what resolve finds (--find-links)",
         pylock_ignores_sources),
]
