"""The doctor's check model and registry: what a check is, what it returns, how all run.

A check is a function of the `Context` registered with `@check(id, area, title)`;
it returns a `Verdict` (status, the evidence it saw, the fix). `run_checks` turns
verdicts into `Check` values (torchfit.checks, shared with verify; doctor's
status words are mapped at its JSON edge, `check_to_json`) in registry order, and turns a check that raised into
an `unknown` with the reason, so a bug in one check never hides the others (nor
prints a traceback: it goes to the progress the command passes, which shows it under `-v`).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from torchfit._backports import FROZEN
from torchfit.checks import Check, Status

if TYPE_CHECKING:
    from torchfit.doctor.context import Context
    from torchfit.progress import Progress

STATUSES = ("ok", "warn", "fail", "unknown")
# The order areas are run and shown in: the driver first (nothing else works
# without it), the log last (it explains the others).
AREAS = ("driver", "build", "shadowing", "environment", "topology", "log")


class Verdict(NamedTuple):
    status: str  # one of STATUSES
    evidence: str
    fix: str | None = None


def ok(evidence: str, fix: str | None = None) -> Verdict:
    return Verdict("ok", evidence, fix)


def warn(evidence: str, fix: str | None = None) -> Verdict:
    return Verdict("warn", evidence, fix)


def fail(evidence: str, fix: str | None = None) -> Verdict:
    return Verdict("fail", evidence, fix)


def unknown(evidence: str, fix: str | None = None) -> Verdict:
    return Verdict("unknown", evidence, fix)


# doctor's JSON words for the shared Status (docs/architecture.md, Contracts: never renamed).
_WORDS = {Status.PASS: "ok", Status.WARN: "warn", Status.FAIL: "fail", Status.UNKNOWN: "unknown"}
_STATUS = {word: status for status, word in _WORDS.items()}


def status_word(status: Status) -> str:
    """ok / warn / fail / unknown: how doctor says a Status."""
    return _WORDS[status]


def check_to_json(c: Check) -> dict[str, str | None]:
    """doctor's JSON for one check: id, area, title, status, evidence, fix."""
    return {
        "id": c.name,
        "area": c.area,
        "title": c.title,
        "status": status_word(c.status),
        "evidence": c.summary,
        "fix": c.hint,
    }


def summary(checks: Iterable[Check]) -> dict[str, int]:
    """How many checks doctor says ok, warn, fail, unknown."""
    counts = {"ok": 0, "warn": 0, "fail": 0, "unknown": 0}
    for c in checks:
        word = status_word(c.status)
        counts[word] = counts.get(word, 0) + 1
    return counts


@dataclass(**FROZEN)
class Spec:
    id: str
    area: str
    title: str
    func: Callable[[Context], Verdict]
    needs_log: bool = False


REGISTRY: dict[str, Spec] = {}


def check(id: str, area: str, title: str, *, needs_log: bool = False) -> Callable[
    [Callable[[Context], Verdict]], Callable[[Context], Verdict]
]:
    """Register a check function under a kebab-case id, in one of AREAS."""
    if area not in AREAS:
        raise ValueError(f"unknown area {area!r}")

    def register(func: Callable[[Context], Verdict]) -> Callable[[Context], Verdict]:
        if id in REGISTRY:
            raise ValueError(f"check {id!r} registered twice")
        REGISTRY[id] = Spec(id, area, title, func, needs_log)
        return func

    return register


def load_all() -> list[Spec]:
    """Import every area module (each registers its checks) and return the specs in area order."""
    for area_module in ("build", "driver", "container", "environment", "logs", "shadowing", "topology"):
        importlib.import_module(f"torchfit.doctor.{area_module}")

    order = {a: i for i, a in enumerate(AREAS)}
    specs = list(REGISTRY.values())
    return sorted(specs, key=lambda s: order[s.area])  # stable: registration order within an area


def run_checks(ctx: Context, specs: Iterable[Spec], progress: Progress | None = None) -> list[Check]:
    """Every spec's verdict; a check that raises is `unknown`, its traceback sent to `progress`."""
    out = []
    for spec in specs:
        if spec.needs_log and ctx.log_text is None:
            continue
        try:
            verdict = spec.func(ctx)
            if verdict.status not in STATUSES:
                raise ValueError(f"status {verdict.status!r}")
        except Exception as exc:  # a bug in one check must not take the report down
            if progress is not None:
                progress.trace(traceback.format_exc())
            verdict = unknown(
                f"the check itself failed ({type(exc).__name__}: {exc}); please report it",
            )
        out.append(Check(spec.id, _STATUS[verdict.status], verdict.evidence, hint=verdict.fix,
                         area=spec.area, title=spec.title))
    return out
