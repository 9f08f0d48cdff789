"""Turn wheel measurements (`torchfit matrix probe --json`) into a reviewable matrix diff.

A measured fact fills an `"unknown"`, corrects a value the wheel contradicts, or,
when the value agrees, replaces the weaker source with the wheel: the entry's
`source.<fact>` becomes `WHEEL <file> sha256:<first 16 hex>` (defined in
`[sources]` with the full sha256, the URL and what was read) and its
`evidence.<fact>` becomes "measured". An entry covering several patch releases
is edited only when every release was measured and all agree; otherwise, and for
facts that belong to a whole series (Pythons, glibc floor) or builds the matrix
lacks, the diff carries a review comment instead. Never writes the file.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import re
from collections import defaultdict
from collections.abc import Sequence

from packaging.version import InvalidVersion, Version

from torchfit.compat.matrix import Build, Matrix
from torchfit.matrixcheck.probe import WheelFacts
from torchfit.matrixcheck.update import _add_source_key, _set_value, set_inline
from torchfit.matrixcheck.wheels import same_version as _same_version
from torchfit.redact import redact


def source_key(f: WheelFacts) -> str:
    sha = (f.sha256 or "")[:16]
    return f"WHEEL {f.file} sha256:{sha}" if sha else f"WHEEL {f.file}"


def source_text(f: WheelFacts, today: _dt.date) -> str:
    where = f.url or "a local copy"
    read = ["METADATA" + (" (PEP 658)" if f.metadata_from == "PEP 658" else ""), "WHEEL tags", "torch/version.py"]
    if f.arch_member:
        read.append(f"the arch-list string in {f.arch_member}")
    if f.embedded:
        read.append(f"the embedded GPU code of {f.embedded.get('member')}")
    if f.glibc_floor:
        read.append(f"GLIBC symbol versions of {f.elf_files} ELF files")
    return (f"{f.file}, sha256 {f.sha256 or 'not computed'} ({f.size} bytes) from {where}: "
            f"{', '.join(read)} read by `torchfit matrix probe` on {today.isoformat()} "
            f"({f.bytes_read} bytes transferred)")


def _public(v: str | None) -> Version | None:
    try:
        return Version(Version(v).public) if v else None
    except InvalidVersion:
        return None


def _current(b: Build, fact: str) -> str | None:
    if fact == "arch":
        if b.kind == "rocm":
            return ";".join(b.gfx) if b.gfx is not None else None
        return ";".join(str(a) for a in b.arch) if b.arch is not None else None
    if fact == "arch_aarch64":
        return ";".join(str(a) for a in b.arch_aarch64) if b.arch_aarch64 is not None else None
    value = getattr(b, fact)
    return str(value) if value is not None else None


def _same(fact: str, a: str, b: str) -> bool:
    if fact in ("cudnn", "nccl"):
        return _same_version(a, b)
    return a.replace(" ", "") == b.replace(" ", "")


def propose_from_probe(
    text: str, matrix: Matrix, facts: Sequence[WheelFacts], *, today: _dt.date | None = None,
    path: str = "src/torchfit/data/matrix.toml",
) -> tuple[str, list[str]]:
    """(unified diff, one summary line per proposal); the diff is "" when nothing is proposed."""
    from torchfit.compat.matrix import parse_matrix

    today = today or _dt.date.today()
    stamp = f"matrix probe {today.isoformat()}"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    by_key: dict[tuple[Version, str], Build] = {(b.torch, b.variant): b for b in matrix.builds}
    # (torch, variant, platform) -> the newest record measured for it
    measured: dict[tuple[Version, str, str], WheelFacts] = {}
    comments: dict[int, list[str]] = defaultdict(list)
    tail: list[str] = []
    summary: list[str] = []
    for f in facts:
        v = _public(f.version)
        if v is None or not f.variant or (f.project or "").lower() != "torch":
            summary.append(f"{f.file}: not a torch build with a known variant; skipped")
            continue
        plat = f.platform or "x86_64"
        b = by_key.get((v, f.variant))
        if b is None:
            tail.append(f"# {stamp} (review): torch {v} {f.variant} ({plat}) is not in the matrix; measured "
                        f"from {f.file}: arch {f.arch_matrix or 'none'}, cuDNN {f.pins.get('cudnn', '-')}, "
                        f"NCCL {f.pins.get('nccl', '-')}, Python {' '.join(f.index_pythons or f.python_classifiers)}"
                        f", manylinux glibc {f.manylinux_glibc or '-'}")
            continue
        if plat not in b.platforms:
            comments[b.line].append(f"# {stamp} (review): {b.label}: the index has a {plat} wheel ({f.file}); "
                                    f"the matrix lists {', '.join(b.platforms)}")
            continue
        measured[(v, f.variant, plat)] = f
    # Entry-level facts: every release of the entry measured, all agreeing.
    by_line: dict[int, list[Build]] = defaultdict(list)
    for b in matrix.builds:
        by_line[b.line].append(b)
    edits: dict[int, list[tuple[str, str | None, list[WheelFacts]]]] = defaultdict(list)
    for line, group in by_line.items():
        group = sorted(group, key=lambda b: b.torch)
        kind = group[0].kind
        plan: list[tuple[str, str]] = []
        if kind in ("cuda", "rocm"):
            plan.append(("arch", "x86_64"))
        if kind == "cuda" and "aarch64" in group[0].platforms:
            plan.append(("arch_aarch64", "aarch64"))
        if kind == "cuda":
            plan += [("cudnn", "x86_64"), ("nccl", "x86_64")]
        for fact, plat in plan:
            recs = [measured.get((b.torch, b.variant, plat)) for b in group]
            got = [r for r in recs if r is not None]
            if not got:
                continue
            values = [_value(r, fact) for r in got]
            if None in values:
                continue
            if len(set(values)) != 1:
                comments[line].append(f"# {stamp} (review): {group[0].label.rsplit(' ', 1)[0]}.x "
                                      f"{group[0].variant}: {fact} differs between releases: " + ", ".join(
                                          f"{r.version} {val}" for r, val in zip(got, values)))
                continue
            if len(got) < len(group):
                missing = [str(b.torch) for b, r in zip(group, recs) if r is None]
                comments[line].append(f"# {stamp} (review): {group[0].variant} {fact} measured as "
                                      f"{values[0]} in {', '.join(r.version or '?' for r in got)}; "
                                      f"not measured for {', '.join(missing)}")
                continue
            edits[line].append((fact, values[0], got))
    # Series-level facts: compare, comment.
    for (v, variant, plat), f in measured.items():
        b = by_key[(v, variant)]
        if f.index_pythons is not None:
            have = [f"{a}.{m}" for a, m in b.pythons_for(plat)]
            if sorted(have, key=_vk) != sorted(f.index_pythons, key=_vk):
                comments[b.series_line].append(
                    f"# {stamp} (review): {b.label} {plat}: the index has CPython {' '.join(f.index_pythons)}; "
                    f"the matrix lists {' '.join(have)}")
        if f.glibc_floor:
            have_g = b.glibc_for(plat)
            if have_g is None or str(have_g) != f.glibc_floor:
                comments[b.series_line].append(
                    f"# {stamp} (review): {b.label} {plat}: measured glibc floor {f.glibc_floor} "
                    f"({f.glibc_member} needs GLIBC_{f.glibc_floor}; {source_key(f)}); "
                    f"the matrix says {have_g or 'unknown'}")
    out = list(lines)
    new_sources: dict[str, str] = {}
    for line in sorted(set(edits) | set(comments), reverse=True):
        idx = line - 1
        for fact, value, wheels in edits.get(line, []):
            b0 = next(b for b in by_line[line])
            current = _current(b0, fact)
            key = "; ".join(dict.fromkeys(source_key(r) for r in wheels))
            src_now = b0.sources.get(fact, "")
            if current is not None and value is not None and _same(fact, current, value) and src_now == key:
                continue
            assert value is not None
            if current is None or not _same(fact, current, value):
                if not _set_value(out, idx, fact, value):
                    continue
                summary.append(f"{b0.variant} of torch {', '.join(str(b.torch) for b in by_line[line])}: "
                               f"{fact} {current or 'unknown'} -> {value} (measured)")
            else:
                summary.append(f"{b0.variant} of torch {', '.join(str(b.torch) for b in by_line[line])}: "
                               f"{fact} {value} re-sourced from {src_now or 'none'} to the wheel")
            if fact == "arch" and b0.arch_aarch64 is not None and "arch_aarch64" not in b0.sources \
                    and not any(f == "arch_aarch64" for f, _v, _r in edits.get(line, [])) and src_now:
                # `source.arch` also stood for arch_aarch64: keep that fact's sources.
                set_inline(out, idx, "source", "arch_aarch64", src_now)
            set_inline(out, idx, "source", fact, key)
            set_inline(out, idx, "evidence", fact, "measured")
            for r in wheels:
                new_sources[source_key(r)] = source_text(r, today)
        for msg in reversed(list(dict.fromkeys(comments.get(line, [])))):
            out.insert(idx, redact(msg) + "\n")
            summary.append(msg.split("(review): ", 1)[-1])
    if tail:
        out.append("\n")
        out.extend(redact(m) + "\n" for m in dict.fromkeys(tail))
        summary.extend(m.split("(review): ", 1)[-1] for m in tail)
    for key in sorted(new_sources):
        _add_source_key(out, key, new_sources[key])
    if out == lines:
        return "", summary
    parse_matrix("".join(out), path)  # a proposal always loads
    return "".join(difflib.unified_diff(lines, out, f"a/{path}", f"b/{path}")), summary


def _vk(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def _value(f: WheelFacts, fact: str) -> str | None:
    if fact in ("arch", "arch_aarch64"):
        return f.arch_matrix
    return f.pins.get(fact)


__all__ = ["propose_from_probe", "source_key", "source_text"]
