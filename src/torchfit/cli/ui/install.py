"""What `install`, `add` and `adopt` say on stderr when the env is built, grown or taken
(its lock, its log, how to use it), and what install says when a signal cut it short."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from torchfit.inputs import shell_word, shown
from torchfit.redact import redact

if TYPE_CHECKING:
    from torchfit.installer.add import AddResult
    from torchfit.installer.flow import InstallResult
    from torchfit.verify.adopt import Adopted


def render_install_summary(result: InstallResult) -> None:
    """`install`: what was built where (torch, its accelerator, Python), its lock, NCCL, how to use it."""
    rt = result.report.runtime
    accel = f"CUDA {rt.get('cuda')}" if rt.get("cuda") else (f"HIP {rt.get('hip')}" if rt.get("hip") else "CPU")
    lines = [
        f"torchfit: {'replaced' if result.replaced else 'created'} {shown(result.prefix)} with {result.installer}: "
        f"torch {rt.get('torch')} ({accel}), Python {rt.get('python')}, {len(result.packages)} package{'s' * (len(result.packages) != 1)}",
        f"  lock:  {shown(result.lock_path)}",
        f"  NCCL:  {result.pin.describe()}" + (f", runtime {rt['nccl']}" if rt.get("nccl") else ""),
        # copied into a shell: a path with a character a terminal acts on is written $'...' (bash)
        f"  use:   source {shell_word(result.prefix + '/bin/activate')}   or   "
        f"torchfit run --env {shell_word(result.prefix)} -- python ...",
    ]
    if result.log_path:
        lines.append(f"  log:   {shown(result.log_path)}")
    _write(lines)


def render_install_result(result: InstallResult, late_signals: Sequence[str], *, as_json: bool) -> None:
    """`install`'s answer: the JSON object on stdout (`late_signals` in it), or the summary on
    stderr; then, either way, the signals that came after the swap."""
    if as_json:
        from torchfit.cli.ui.jsonout import json_text

        out = result.to_json()
        if late_signals:
            out["late_signals"] = list(late_signals)
        print(json_text("install", out))
    else:
        render_install_summary(result)
    if late_signals:
        render_late_signals(late_signals, result.prefix)


def render_add_summary(result: AddResult) -> None:
    """`add`: the packages added and changed, the rewritten lock, the log."""
    added = ", ".join(f"{d.name} {d.version}" for d in result.added) or "nothing new"
    lines = [f"torchfit: added to {result.prefix} with {result.installer}: {added}"]
    if result.changed:
        lines.append("  changed: " + ", ".join(f"{new.name} {old.version} -> {new.version}"
                                              for old, new in result.changed))
    lines.append(f"  lock:  {result.lock_path} (rewritten; the torch family as it was, checked before)")
    if result.log_path:
        lines.append(f"  log:   {result.log_path}")
    _write(lines)


def render_adopt_summary(result: Adopted) -> None:
    """`adopt`: the base recorded, its lock, the constraints honoured, each check's verdict."""
    family = ", ".join(f"{n} {v}" for n, v in result.family.items())
    torch = result.torch
    build = f"CUDA {torch['cuda']}" if torch.get("cuda") else f"ROCm {torch['hip']}" if torch.get("hip") else "CPU"
    lines = [f"torchfit: adopted {result.prefix}: {family} ({build} build), the base `torchfit add` fits around",
             f"  lock:        {result.lock_path} ([tool.torchfit.base]: never replaced)",
             f"  installed:   {result.installed} distributions kept as they are"]
    if result.label:
        lines.append(f"  label:       {result.label} (a package pinning the release alone is refused unless "
                     "`torchfit add --accept-base-label`)")
    lines.append("  constraints: " + (", ".join(result.constraint_files) + f" ({len(result.constraints)} lines)"
                                     if result.constraint_files else "none found"))
    lines += [f"  {c.status.value:5} {c.name}: {c.summary}" for c in result.checks]
    _write(lines)


def render_install_interrupted(why: str, prefix: str, swapped: bool) -> None:
    """`install` cut short by `why` (a signal, Ctrl-C): what PREFIX holds now."""
    if swapped:
        # Reported as it happened: the exchange was done before the signal was seen.
        sys.stderr.write(f"torchfit: {why} after the swap: {shown(prefix)} holds the new env (complete); "
                         "the old env was removed\n")
    else:
        sys.stderr.write(f"torchfit: {why}: the temporary env was removed; {shown(prefix)} was not changed\n")


def render_late_signals(signals: Sequence[str], prefix: str) -> None:
    """Signals that came after the swap: the install was complete and stays."""
    sys.stderr.write(f"torchfit: {', '.join(signals)} arrived after {shown(prefix)} had been replaced: "
                     "the install was already complete and is kept\n")


def _write(lines: list[str]) -> None:
    sys.stderr.write(redact("\n".join(lines)) + "\n")
