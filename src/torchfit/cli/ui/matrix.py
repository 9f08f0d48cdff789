"""`torchfit matrix`'s text: `show` (the builds, the unknown facts), `check`'s report, the
proposed changes of `update` (a diff on stdout, or the line naming the file it went to),
and `probe`'s tables and lines."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchfit.matrixcheck.report import CheckReport


def render_check_report(report: CheckReport, *, notes: bool, stderr: bool = False) -> None:
    """`matrix check`'s report on stdout; `matrix update`'s on stderr (stdout is the diff)."""
    from torchfit.matrixcheck.report import format_report

    (sys.stderr if stderr else sys.stdout).write(format_report(report, notes=notes))


def write_proposed_changes(diff: str, output: str | None) -> None:
    """`matrix update`'s unified diff: into `output` (--output) and a line on stderr saying
    so, or on stdout as it is (for `git apply`, so never through rich)."""
    if not output:
        sys.stdout.write(diff)
        return
    from torchfit.cli.ui.output import write_output
    from torchfit.inputs import shown

    write_output(output, diff, "--output")
    sys.stderr.write(f"proposed changes written to {shown(output)} ({len(diff.splitlines())} lines); "
                     "review, then apply with `git apply`\n" if diff else
                     f"no changes proposed; {shown(output)} is empty\n")


def render_note(text: str) -> None:
    """One `torchfit: ...` line on stderr while matrix probes or proposes (a page that failed,
    what the proposal changes); stdout stays the table, the JSON or the diff."""
    from torchfit.inputs import terminal_text

    sys.stderr.write(f"torchfit: {terminal_text(text)}\n")


def render_matrix(builds: list[Any], path: str) -> None:
    """`matrix show`: format_matrix at the terminal's width."""
    import shutil

    width = shutil.get_terminal_size((80, 24)).columns
    sys.stdout.write(format_matrix(builds, path, width))


# Columns of `matrix show`: (title, width). 79 characters in all, so a build's first
# line fits an 80-column terminal; the rest of a build (arch list, companions,
# aarch64 differences) goes on indented lines wrapped to the terminal's width.
_COLUMNS = (("torch", 8), ("variant", 10), ("CUDA/ROCm", 10), ("cuDNN", 11), ("NCCL", 8),
            ("Python", 11), ("glibc", 7), ("platforms", 0))


def format_matrix(builds: list[Any], path: str, width: int = 80) -> str:
    """The text of `matrix show`: one line per build plus its details, readable at 80 columns."""
    width = max(60, width)
    out = [f"torchfit matrix: {len(builds)} builds ({path}); * = the build PyPI serves", ""]
    out.append("".join(t.ljust(w) for t, w in _COLUMNS).rstrip())
    last = None
    for b in builds:
        if last is not None and (b.torch.major, b.torch.minor) != (last.torch.major, last.torch.minor):
            out.append("")
        last = b
        cells = (
            str(b.torch),
            b.variant + ("*" if b.pypi_default else ""),
            b.cuda or b.rocm or "-",
            b.cudnn or ("unknown" if b.kind == "cuda" else "-"),
            b.nccl or ("unknown" if b.kind == "cuda" else "-"),
            _py_range(b.pythons),
            str(b.glibc) if b.glibc else "unknown",
            " ".join(b.platforms),
        )
        line = ""
        for (_, w), cell in zip(_COLUMNS, cells):
            line += cell.ljust(w) if w and len(cell) < w else (cell + " " if w else cell)
        out.append(line.rstrip())
        details = []
        arm = "aarch64" in b.platforms
        if b.kind == "cuda":
            arch = " ".join(str(a) for a in b.arch) if b.arch is not None else "unknown"
            details.append(f"arch {arch}")
            if arm:
                arm_list = " ".join(str(a) for a in b.arch_aarch64) if b.arch_aarch64 is not None else "unknown"
                if arm_list != arch:
                    details.append(f"aarch64 arch {arm_list}")
        elif b.kind == "rocm":
            details.append("gfx " + (" ".join(b.gfx) if b.gfx is not None else "unknown"))
        if arm and b.pythons_aarch64 != b.pythons:
            details.append(f"aarch64 Python {_py_range(b.pythons_aarch64)}")
        if arm and b.glibc_aarch64 != b.glibc:
            details.append(f"aarch64 glibc {b.glibc_aarch64 or 'unknown'}")
        comp = [f"torchvision {b.torchvision}" if b.torchvision else "", f"torchaudio {b.torchaudio}" if b.torchaudio else ""]
        if any(comp):
            details.append(", ".join(c for c in comp if c))
        # How each fact of the build is known: the weak ones (secondary, cycle) by name.
        ev = b.evidence
        weak = sorted(f for f, label in ev.items() if label in ("secondary", "cycle"))
        measured = sorted(f for f, label in ev.items() if label == "measured")
        if weak or measured:
            details.append("evidence: " + "; ".join(
                [f"{f} {ev[f]} ({b.sources.get(f, '')})" for f in weak]
                + ([f"measured: {', '.join(measured)}"] if measured else [])))
        out.extend(_pack(details, width - 1, indent=8))
    return "\n".join(out) + "\n"


def _pack(items: list[str], width: int, indent: int) -> list[str]:
    """Items joined by "; " on lines of at most `width`, an item split only when it
    alone is wider than a line (then at spaces)."""
    import textwrap

    lines: list[str] = []
    cur = ""
    pad = " " * indent
    for item in items:
        if cur and len(pad) + len(cur) + 2 + len(item) <= width:
            cur += "; " + item
            continue
        if cur:
            lines.append(pad + cur + ";")
        if len(pad) + len(item) > width:
            wrapped = textwrap.wrap(item, width=width - indent, break_on_hyphens=False)
            lines.extend(pad + w for w in wrapped[:-1])
            cur = wrapped[-1]
        else:
            cur = item
    if cur:
        lines.append(pad + cur)
    return lines


def _py_range(pys: tuple[tuple[int, int], ...]) -> str:
    """(3,9)..(3,13) contiguous -> '3.9-3.13'; otherwise a list."""
    if not pys:
        return "-"
    minors = sorted(p[1] for p in pys)
    if len(minors) > 2 and minors == list(range(minors[0], minors[-1] + 1)):
        return f"3.{minors[0]}-3.{minors[-1]}"
    return ", ".join(f"3.{m}" for m in minors)


def render_unknowns(rows: list[Any], path: str) -> None:
    """`matrix show --unknown`: one row per unknown fact, why, and what it blocks; on a
    terminal narrower than 100 columns one record per fact (a five-column table there
    leaves each cell a few letters wide)."""
    from torchfit.cli.ui.console import console, esc_plain, table, wrap

    con = console(piped_width=220)
    title = f"torchfit matrix: {len(rows)} facts still unknown ({path})"
    if con.is_terminal and con.width < 100:
        con.print(esc_plain(title), soft_wrap=True)
        for u in rows:
            con.print(esc_plain(wrap(f"{u.fact}  {u.label}  line {u.line}", con.width, "", "  ")), soft_wrap=True)
            for key, text in (("blocks", u.blocks), ("why unknown", u.reason)):
                con.print(esc_plain(wrap(f"{key}: {text}", con.width, "    ", "      ")), soft_wrap=True)
        return
    grid = table(title=title, title_justify="left")
    for name in ("fact", "builds", "line", "blocks", "why unknown"):
        grid.add_column(name)
    for u in rows:
        grid.add_row(u.fact, u.label, str(u.line), u.blocks, u.reason)
    con.print(grid)


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def render_probe(results: list[Any]) -> None:
    """`matrix probe`: one table per wheel, each fact beside where it was read."""

    from torchfit.cli.ui.console import console, table

    con = console(piped_width=200)
    for f in results:
        t = table(title=f.file, title_justify="left", show_header=False)
        t.add_column("fact", no_wrap=True)
        t.add_column("value", overflow="fold")
        t.add_column("read from", overflow="fold")
        meta = f.metadata_from or "METADATA"
        t.add_row("build", f"{f.project} {f.build_version or f.version} ({f.variant or '?'})",
                  f"torch/version.py ({f.variant_from})")
        t.add_row("sha256", f.sha256 or "-", f.sha256_from or "-")
        t.add_row("arch list", f.arch_flags or "-", f.arch_member or "-")
        if f.arch_matrix:
            t.add_row("  matrix spelling", f.arch_matrix, "")
        if f.embedded is not None:
            code = f.embedded.get("targets") or (
                "SASS " + " ".join(f.embedded.get("sass", {})) + "; PTX " + (" ".join(f.embedded.get("ptx", {})) or
                                                                           "none"))
            agree = {True: "agrees", False: "DIFFERS", None: "-"}[f.embedded_agrees]
            t.add_row("embedded code", f"{code} ({agree})", f.embedded.get("member", "-"))
        t.add_row("cuDNN", f.pins.get("cudnn", "-"), meta)
        t.add_row("NCCL", f.pins.get("nccl", "-"), meta)
        for k in ("cuda-toolkit", "cuda-runtime"):
            if k in f.pins:
                t.add_row(k, f.pins[k], meta)
        for k, v in f.requires.items():
            t.add_row(f"requires {k}", v, meta)
        pyc = f.python_classifiers
        t.add_row("Python", (f"{pyc[0]}-{pyc[-1]}" if len(pyc) > 1 else pyc[0] if pyc else "-")
                  + f" (Requires-Python {f.requires_python or '-'})", f"{meta} classifiers")
        t.add_row("  this wheel", " ".join(f.python_tags) or "-", "wheel tags")
        if f.index_pythons is not None:
            t.add_row("  on the index", " ".join(f.index_pythons) or "-", "index page")
        t.add_row("platform", f"{f.platform} (manylinux tag: glibc {f.manylinux_glibc or '-'})", "wheel tags")
        if f.glibc_floor is not None or f.elf_files is not None:
            t.add_row("glibc floor", f"{f.glibc_floor or 'none'} (highest GLIBC_ version of {f.elf_files} ELF files)",
                      f.glibc_member or "-")
        whole = " (WHOLE FILE: no range support)" if f.whole_file else ""
        t.add_row("read", f"{mb(f.bytes_read)} of {mb(f.size)}{whole} in {f.seconds:g} s", f.url or "local file")
        for n in f.notes:
            t.add_row("note", n, "")
        con.print(t)
