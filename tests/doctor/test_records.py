"""The record of doctor on the lent 2x H200 machine (tests/data/doctor/h200-doctor-run, see its README)
shows what issue 5 asks for, in the JSON contract the code still writes."""

from __future__ import annotations

import json
from pathlib import Path

from torchfit.doctor.model import load_all

RUN = Path(__file__).resolve().parents[1] / "data" / "doctor" / "h200-doctor-run"


def _report(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((RUN / f"{name}.json").read_text())


def _check(report: dict, cid: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in report["checks"] if c["id"] == cid)


def test_record_uses_todays_check_ids() -> None:
    ids = {s.id for s in load_all()}
    for name in ("baseline", "ld-preload", "p2p-disabled"):
        got = {c["id"] for c in _report(name)["checks"]}
        assert got <= ids, got - ids


def test_baseline_nothing_failed_and_the_system_nccl_is_noticed() -> None:
    base = _report("baseline")
    assert base["ok"] is True and base["summary"]["fail"] == 0
    n = _check(base, "nccl-shadowed")
    assert n["status"] == "warn"
    assert "nvidia/nccl/lib/libnccl.so.2 (NCCL 2.28.9, ncclGetVersion() = 22809) via the env's package" in n["evidence"]
    assert "libnccl.so.2.28.3 (NCCL 2.28.3, ldconfig -p)" in n["evidence"]


def test_ld_preload_and_p2p_disable_findings() -> None:
    n = _check(_report("ld-preload"), "nccl-shadowed")
    assert "libnccl.so.2.28.3 (NCCL 2.28.3, ncclGetVersion() = 22803) via LD_PRELOAD" in n["evidence"]
    c = _check(_report("p2p-disabled"), "nccl-env-disables")
    assert c["status"] == "warn" and "NCCL_P2P_DISABLE=1" in c["evidence"]
    assert "ALL EXPECTATIONS HELD" in (RUN / "summary.txt").read_text()
