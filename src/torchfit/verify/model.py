"""verify's value types: what to verify (`Options`), one verdict line (`Check`,
torchfit.checks' type, and `check_to_json`, verify's JSON words for it),
and everything found (`Report`, whose `to_json()` is the `--json` output). Progress of
the long phases goes through torchfit.progress, as for every command."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchfit._backports import FROZEN
from torchfit.checks import Check, Status
from torchfit.jsontypes import JsonObject
from torchfit.workers.records import InspectionFacts


@dataclass(**FROZEN)
class Options:
    """What to verify and how. `python` is the target interpreter (already resolved)."""

    python: str
    env_prefix: str | None = None
    nproc: int | None = None
    backend: str | None = None  # None: nccl when torch sees a GPU, else gloo
    timeout: float = 120.0  # per stage: a process with no progress for this long is stalled
    bandwidth: bool | None = None  # None: on for nccl, off for gloo
    sizes: tuple[int, ...] | None = None
    iters: int | None = None
    warmup: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str = "torchfit-verify"
    master_addr: str | None = None
    master_port: int | None = None
    rdzv_timeout: float = 300.0
    lock: str | None = None
    keep: bool = False


def check_to_json(c: Check) -> JsonObject:
    """verify's JSON for one check: name, status (pass/warn/fail/skip), summary,
    and detail/hint when present."""
    out: JsonObject = {"name": c.name, "status": c.status.value, "summary": c.summary}
    if c.detail:
        out["detail"] = list(c.detail)
    if c.hint:
        out["hint"] = c.hint
    return out


@dataclass
class Report:
    """Everything verify found; `to_json()` is the `--json` output."""

    python: str
    env_prefix: str | None
    checks: list[Check] = field(default_factory=list)
    inspection: InspectionFacts = field(default_factory=lambda: InspectionFacts())
    ddp: dict[str, Any] | None = None
    nodes: list[dict[str, Any]] = field(default_factory=list)
    node_disagreements: list[str] = field(default_factory=list)
    bandwidth: dict[str, Any] | None = None
    lock: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    work_dir: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.failed]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def verdict(self) -> str:
        if self.ok:
            warns = [c.name for c in self.checks if c.status is Status.WARN]
            return "PASS" + (f" (warnings: {', '.join(warns)})" if warns else "")
        first = self.check(self.failed[0])
        why = f": {first.summary}" if first else ""
        return f"FAIL {', '.join(self.failed)}{why}"

    def to_json(self) -> JsonObject:
        return {
            "ok": self.ok,
            "verdict": self.verdict(),
            "failed": self.failed,
            "python": self.python,
            "env": self.env_prefix,
            "lock": self.lock,
            "checks": [check_to_json(c) for c in self.checks],
            "nodes": self.nodes,
            "node_disagreements": self.node_disagreements,
            "bandwidth": self.bandwidth,
            "ddp": self.ddp,
            "inspection": self.inspection,
            "timings": self.timings,
            "work_dir": self.work_dir,
        }

