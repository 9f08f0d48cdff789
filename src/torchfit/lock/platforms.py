"""A fleet's platforms: one resolution that every group's platform must install (issue 33).

A fleet of x86_64 and aarch64 groups (H100 beside GH200) is planned as one set of packages,
and that set must have a wheel (or a build) for every group. uv is asked once per distinct
platform, each with the same project and constraints, the later ones held to the first's
answer; the fleet's plan is that one answer, or a refusal that names the group whose
platform has none.

Why not one `uv pip compile --universal` (measured with uv 0.13.10, 2026-12-07, a project
of `torch` and `decord` against a find-links directory holding decord 0.6.0 for x86_64 only
and decord 0.5.2 for x86_64 and aarch64, torch 2.10.0 for both): the universal resolution
answers decord 0.6.0, whose one wheel is x86_64's, and says nothing of aarch64: it checks
METADATA, not that a wheel exists for each platform. `--universal` cannot be given with
`--python-platform` ("the argument '--universal' cannot be used with '--python-platform'"),
and `uv pip compile` has no `--environments`. Per platform (`--python-platform
aarch64-manylinux_2_28`) uv takes the wheels that install there, and says so when none does
("decord==0.6.0 has no wheels with a matching platform tag"): that is the check a fleet needs.
Its cost on that case: 0.45 s (x86_64) and 0.47 s (aarch64) against 0.47 s for the one
universal run (offline, file:// sources): one more uv run per further architecture.

One platform per architecture, at the lowest glibc among that architecture's groups: a
manylinux wheel for an older glibc installs on a newer one, so the lowest floor admits
only wheels every group of that architecture can install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchfit.compat.facts import HostFacts
from torchfit.compat.tags import uv_platform
from torchfit.lock.uv import Compiled

if TYPE_CHECKING:
    from torchfit.compat.served import Served


@dataclass(frozen=True)
class Target:
    """One platform uv resolves for: `platform` is uv's `--python-platform`; `groups` the
    names of the hosts (a fleet's groups: their hostlists) that run it."""

    arch: str
    platform: str
    glibc: str | None
    groups: tuple[str, ...]

    @property
    def label(self) -> str:
        glibc = f", glibc {self.glibc}" if self.glibc else ""
        return f"{', '.join(self.groups)} ({self.arch}{glibc}; uv platform {self.platform})"


def fleet_targets(hosts: Sequence[HostFacts], default_arch: str) -> list[Target]:
    """One target per architecture among `hosts`, the first host's first (its answer is the
    plan's, as for one host); each at the lowest glibc of its groups."""
    by_arch: dict[str, list[HostFacts]] = {}
    for h in hosts:
        by_arch.setdefault(h.arch or default_arch, []).append(h)
    out = []
    for arch, group in by_arch.items():
        glibcs = [g for g in (h.glibc_v for h in group) if g is not None]
        low = min(glibcs) if glibcs else None
        floor = low.major_minor() if low is not None else None
        out.append(Target(arch, uv_platform(arch, floor), f"{floor[0]}.{floor[1]}" if floor else None,
                          tuple(h.name for h in group)))
    return out


@dataclass(frozen=True)
class FleetAnswer:
    """What the platforms said together: `compiled` the answer of the first platform that every
    other platform installs too (or the first platform's refusal); `refused` the target whose
    platform has no answer while another's has, with uv's words for it; `checked` the targets
    that took the answer (for the plan's reasons)."""

    compiled: Compiled
    refused: Target | None = None
    said: str = ""
    checked: tuple[Target, ...] = ()


# compile(target, extra constraints, name suffix) -> uv's answer for that platform
CompileFor = Callable[[Target, Sequence[str], str], Compiled]


def pins_of(compiled: Compiled) -> list[str]:
    """The answer as exact pins (`name==version`, local labels kept): the same set elsewhere."""
    return [f"{d.name}=={d.version}" for d in compiled.locked]


def solve_for_all(targets: Sequence[Target], compile_for: CompileFor, first: Compiled) -> FleetAnswer:
    """`first` is uv's answer for `targets[0]`; check the others.

    - `first` solved: each other platform is asked for exactly that set. Where it does not
      install, that platform is asked again with only torch held (torch must agree); no
      answer: that group is refused. An answer with other releases (decord 0.5.2 on aarch64
      where x86_64 took 0.6.0): the first platform is asked for that set, which becomes the
      fleet's answer where it installs there too (once: a third set is not sought).
    - `first` did not solve: another platform that solves with the same input makes the
      first's platform the one that binds (named); none: a refusal of the project itself.
    """
    from torchfit.lock.uv import classify_failure, explanation

    if len(targets) < 2:
        return FleetAnswer(first, checked=tuple(targets))
    head, rest = targets[0], list(targets[1:])
    if not first.ok:
        if classify_failure(first.stderr)[0] != "no-solution":
            return FleetAnswer(first)
        for t in rest:
            if compile_for(t, [], f"{t.arch}-alone").ok:
                return FleetAnswer(first, head, explanation(first.stderr))
        return FleetAnswer(first)
    answer = first
    agreed = False
    while True:
        pins = pins_of(answer)
        failed: tuple[Target, Compiled] | None = None
        for t in rest:
            got = compile_for(t, pins, f"{t.arch}-same")
            if not got.ok:
                failed = (t, got)
                break
        if failed is None:
            return FleetAnswer(answer, checked=tuple(targets))
        t, _ = failed
        torch = [p for p in pins if p.startswith("torch==")]
        own = compile_for(t, torch, f"{t.arch}-torch")
        if not own.ok:
            return FleetAnswer(Compiled(False, (), own.stderr, own.argv, own.seconds), t, explanation(own.stderr))
        if agreed:
            break
        again = compile_for(head, pins_of(own), f"{head.arch}-agree")
        if not again.ok:
            break
        answer, agreed = again, True
    mine = {d.name: str(d.version) for d in answer.locked}
    theirs = {d.name: str(d.version) for d in own.locked}
    differ = sorted(n for n in mine.keys() | theirs.keys() if mine.get(n) != theirs.get(n))
    said = "; ".join(f"{n} {mine.get(n, '(none)')} on {head.arch}, {theirs.get(n, '(none)')} on {t.arch}"
                     for n in differ[:6])
    return FleetAnswer(Compiled(False, (), said, own.argv, own.seconds), t,
                       f"uv's answers differ and no one set installs on both: {said}")


def group_refusal(hosts: Sequence[HostFacts], default_arch: str, target: Target,
                  said: str) -> tuple[list[str], list[str]]:
    """(conflicts, hints) of a refusal for the group whose platform (its architecture, its
    glibc) installs no answer the other groups share: that group first, then uv's words."""
    others = [t.label for t in fleet_targets(hosts, default_arch) if t != target]
    return ([f"{target.label}: uv finds no answer for this group's platform that the fleet's other groups "
             f"share: {said}", *(f"{o}: uv finds an answer there" for o in others)],
            [f"give a source with a wheel for {target.arch} of the package uv names (--find-links), pin a "
             f"release that has one, or plan {', '.join(target.groups)} apart (--exclude {target.groups[0]})"])


def bare_groups(hosts: Sequence[HostFacts], default_arch: str,
                measured: Mapping[str, Served]) -> tuple[list[str], list[str]]:
    """(lines, hints) for a fleet's groups of an architecture the torch source serves nothing
    for while it serves another group's: named first (the fact that binds), with the way out."""
    targets = fleet_targets(hosts, default_arch)
    served = [t.arch for t in targets if any(s.for_any(t.arch) for s in measured.values())]
    if not served:
        return [], []
    bare = [t for t in targets if t.arch not in served]
    where = ", ".join(sorted({s.where for s in measured.values()}))
    return ([f"{t.label}: {where} serves no torch wheel for {t.arch} (read: {'/'.join(measured)}), "
             "and one plan must install on every group" for t in bare],
            [f"give a torch source with {t.arch} builds (--torch-index-url), or plan {', '.join(t.groups)} "
             f"apart (--exclude {t.groups[0]})" for t in bare])
