"""Which hosts bind a plan: for several hosts (a fleet's groups), the hosts that rule
out the builds the resolver would have preferred, one line per host (pure).

With one host the plan's reasons say everything. With a fleet, the question an admin
asks is "why not cu130?", and the answer is a group of nodes: "gpu[07-09] (TITAN V
(sm_70)) rules out cu130, cu132 (torch 2.9.0-2.11.0): have no sm_70 code". The
verdicts are the host rules' own (compat.rules.host_checks through the provider's
Context); this module only groups them by host, and folds the hosts that say the same
(compat.hostlines: "a, b, c and 97 more groups (..., driver 470.0.02-470.99.02) rules out ...").
"""

from __future__ import annotations

from collections.abc import Sequence

from torchfit.compat.facts import HostFacts
from torchfit.compat.hostlines import fold_host_lines
from torchfit.compat.judgements import describe_gpus
from torchfit.compat.matrix import Build
from torchfit.compat.provider import Context
from torchfit.compat.rules import RuleResult


def _host_label(ctx: Context, k: int) -> str:
    host = ctx.hosts[k]
    bits = [describe_gpus(host.gpus)] if host.gpus else []
    if host.driver_version and host.nvidia_gpus:
        bits.append(f"driver {host.driver_version}")
    return f"{host.name} ({', '.join(bits)})" if bits else host.name


def _why(result: RuleResult, build: Build) -> str:
    if result.group:
        return result.group
    for prefix in (f"{build.label}: ", f"{build.variant}: "):
        if result.text.startswith(prefix):
            return result.text[len(prefix):]
    return result.text


def binding_reasons(ctx: Context, preferred: Sequence[Build]) -> list[str]:
    """One line per host that refuses a build preferred over the pick (`preferred`: those
    builds, most preferred first, already narrowed to the hosts' kind of hardware)."""
    if len(ctx.hosts) < 2 or not preferred:
        return []
    lines: list[tuple[HostFacts, str]] = []
    for k in range(len(ctx.hosts)):
        refused: dict[Build, RuleResult] = {}
        for build in preferred:
            fail = next((c for _, c in ctx.host_checks(build, k) if not c.ok), None)
            if fail is not None:
                refused[build] = fail
        if not refused:
            continue
        variants = ", ".join(dict.fromkeys(b.variant for b in refused))
        torches = sorted({b.torch for b in refused})
        span = str(torches[0]) if len(torches) == 1 else f"{torches[0]}\u2013{torches[-1]}"
        first, result = next(iter(refused.items()))
        lines.append((ctx.hosts[k], f"{_host_label(ctx, k)} rules out {variants} (torch {span}): {_why(result, first)}"))
    return fold_host_lines(lines)  # a reason once, with the groups it concerns (issue 34, R6)
