"""`torchfit matrix update`: a report turned into a unified diff against matrix.toml.

Value edits where the index settles a fact unambiguously (cuDNN/NCCL pins, with a
new source key naming the check), review comments at the right place for
everything else. It never writes the file; strings are written by the one TOML
writer (`lock.toml`). Typed facts come from `compat.matrix`; this module reads the
raw text only to patch it.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import re
from collections import defaultdict
from collections.abc import Sequence

from packaging.version import Version

from torchfit.compat.matrix import Build, Matrix
from torchfit.lock.toml import toml_str
from torchfit.matrixcheck.report import ERROR, NOTE, CheckReport
from torchfit.matrixcheck.wheels import same_version
from torchfit.redact import redact


def _block_end(lines: Sequence[str], start: int) -> int:
    """Index of the first line after the table that starts at `start` (0-based)."""
    for i in range(start + 1, len(lines)):
        if re.match(r"^\s*\[", lines[i]):
            return i
    return len(lines)


def _set_value(lines: list[str], start: int, key: str, value: str) -> bool:
    """Set `key = "value"` inside the table at `start`; insert it after `cuda =`/`name =` if absent."""
    end = _block_end(lines, start)
    pat = re.compile(rf'^(\s*{key}\s*=\s*)"[^"]*"(.*)$', re.S)
    for i in range(start + 1, end):
        m = pat.match(lines[i])
        if m:
            lines[i] = f"{m.group(1)}{toml_str(value)}{m.group(2)}"
            return True
    for anchor in ("cuda", "name"):
        for i in range(start + 1, end):
            if re.match(rf"^\s*{anchor}\s*=", lines[i]):
                lines.insert(i + 1, f"{key} = {toml_str(value)}\n")
                return True
    return False


def set_inline(lines: list[str], start: int, table: str, fact: str, value: str) -> None:
    """Set `<table>.<fact> = "value"` in the inline table `table = {...}` of the entry at `start`.

    Creates `table = { fact = "value" }` after the entry's `source` line when absent.
    One patcher for every inline table of an entry (`source`, `evidence`, `unknown`).
    """
    end = _block_end(lines, start)
    for i in range(start + 1, end):
        m = re.match(rf"^(\s*{table}\s*=\s*\{{)(.*)(\}}\s*(#.*)?\n?)$", lines[i], re.S)
        if not m:
            continue
        body = m.group(2)
        new_body, n = re.subn(rf"(\b{re.escape(fact)}\s*=\s*)\"[^\"]*\"", lambda g: g.group(1) + toml_str(value), body)
        if not n:
            new_body = body.rstrip() + ("," if body.strip() else "") + f" {fact} = {toml_str(value)} "
        lines[i] = m.group(1) + new_body + m.group(3)
        return
    anchor = next((i for i in range(start + 1, end) if re.match(r"^\s*source\s*=", lines[i])), None)
    at = anchor + 1 if anchor is not None else end
    lines.insert(at, f"{table} = {{ {fact} = {toml_str(value)} }}\n")


def _set_source(lines: list[str], start: int, fact: str, key: str) -> None:
    """Point `source.<fact>` of the table at `start` to `key` (inline-table form)."""
    set_inline(lines, start, "source", fact, key)


def _add_source_key(lines: list[str], key: str, text: str) -> None:
    entry = f"{toml_str(key)} = {toml_str(text)}\n"
    if any(line.startswith(toml_str(key) + " =") for line in lines):
        return
    start = next((i for i, line in enumerate(lines) if line.strip() == "[sources]"), None)
    if start is None:
        return
    last = start
    for i in range(start + 1, _block_end(lines, start)):
        if re.match(r'^\s*"[^"]+"\s*=', lines[i]):
            last = i
    lines.insert(last + 1, entry)


def propose_update(
    text: str, matrix: Matrix, report: CheckReport, *, today: _dt.date | None = None,
    path: str = "src/torchfit/data/matrix.toml",
) -> str:
    """A unified diff that brings `text` in line with `report`; "" when nothing is proposed."""
    from torchfit.compat.matrix import parse_matrix

    today = today or _dt.date.today()
    stamp = f"matrix update {today.isoformat()}"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    source_key = f"TORCHFIT-CHECK {today.isoformat()}"
    edits: dict[int, dict[str, str]] = defaultdict(dict)  # entry line -> fact -> value
    comments: dict[int, list[str]] = defaultdict(list)  # 1-based line to comment above -> texts
    tail: list[str] = []
    by_line: dict[int, list[Build]] = defaultdict(list)
    for b in matrix.builds:
        by_line[b.line].append(b)
    # Value edits: a pin every release of the entry agrees on.
    for line, group in by_line.items():
        for fact in ("cudnn", "nccl"):
            seen = [report.observed.get((str(b.torch), b.variant), {}).get(fact) for b in group]
            if None in seen or len(set(seen)) != 1:
                continue
            value = seen[0]
            assert value is not None
            current = getattr(group[0], fact)
            if current is None or not same_version(current, value):
                edits[line][fact] = value
    for f in report.findings:
        if f.level == ERROR or (f.level == NOTE and f.fact not in ("glibc",)):
            continue
        if f.fact in ("cudnn", "nccl") and f.line in edits and f.fact in edits[f.line]:
            continue
        msg = f"# {stamp} (review): {f.subject}: {f.message}"
        if f.line:
            comments[f.line].append(msg)
            continue
        v = Version(f.torch) if f.torch else None
        series = [b for b in matrix.builds if v and (b.torch.major, b.torch.minor) == (v.major, v.minor)]
        if series:
            comments[min(b.series_line for b in series)].append(
                msg + "; add it (docs/matrix-format.md), each fact with its source")
        else:
            tail.append(msg)
    if tail:
        tail.append(f"# {stamp} (review): add a [[series]] per new release line (docs/matrix-format.md), "
                    "each fact with its source")
    out = list(lines)
    # Apply from the bottom up so earlier line numbers stay valid.
    points = sorted(set(edits) | set(comments), reverse=True)
    used_source = False
    for line in points:
        idx = line - 1
        for fact, value in sorted(edits.get(line, {}).items()):
            if _set_value(out, idx, fact, value):
                _set_source(out, idx, fact, source_key)
                used_source = True
        for msg in reversed(list(dict.fromkeys(comments.get(line, [])))):
            out.insert(idx, redact(msg) + "\n")
    if tail:
        out.append("\n")
        out.extend(redact(m) + "\n" for m in dict.fromkeys(tail))
    if used_source:
        _add_source_key(out, source_key, (
            f"torchfit matrix check: Requires-Dist pins in the METADATA (PEP 658) of torch wheels on "
            f"{report.target}, read {today.isoformat()}"
        ))
    if out == lines:
        return ""
    # The proposal must still be a valid matrix: a broken diff helps no reviewer.
    parse_matrix("".join(out), path)
    return "".join(difflib.unified_diff(lines, out, f"a/{path}", f"b/{path}"))
