"""verify/model.py: the Report's verdict line and its `--json` object (valid against the published
docs/schemas/verify.schema.json), each check in verify's words (pass/warn/fail/skip, detail and
hint only when present)."""

from __future__ import annotations

import json

from tests.cli.ui.test_jsonout import validate
from torchfit.checks import Check
from torchfit.cli.ui.jsonout import json_text
from torchfit.verify.model import Report, check_to_json


def _report(*checks: Check) -> Report:
    return Report(python="/env/bin/python", env_prefix="/env", checks=list(checks), lock="/env/pylock.toml")


def test_the_verdict_names_the_warnings_or_every_failure_and_the_first_ones_summary() -> None:
    ok = _report(Check("torch", "pass", "torch 2.13.0+cpu"), Check("nccl", "warn", "no NCCL in a CPU build"),
                 Check("gpus", "skip", "a CPU build"))
    assert ok.ok and ok.failed == [] and ok.verdict() == "PASS (warnings: nccl)"
    assert _report(Check("torch", "pass", "fine")).verdict() == "PASS"
    bad = _report(Check("torch", "pass", "fine"), Check("lock", "fail", "torch is 2.12.0, the lock says 2.13.0"),
                  Check("ddp", "fail", "rank 1 stalled"))
    assert not bad.ok and bad.failed == ["lock", "ddp"]
    assert bad.verdict() == "FAIL lock, ddp: torch is 2.12.0, the lock says 2.13.0"
    assert bad.check("ddp") == Check("ddp", "fail", "rank 1 stalled") and bad.check("gpus") is None


def test_the_json_is_verifys_contract() -> None:
    report = _report(Check("torch", "pass", "torch 2.13.0+cpu"),
                     Check("lock", "fail", "torch differs", detail=("torch: 2.12.0", "lock: 2.13.0"),
                           hint="torchfit install --lock /env/pylock.toml --force", area="env", title="Lock"))
    data = json.loads(json_text("verify", report.to_json(), default=str))
    assert validate(data) == "verify"
    assert data["ok"] is False and data["failed"] == ["lock"] and data["verdict"].startswith("FAIL lock: ")
    assert data["checks"][0] == {"name": "torch", "status": "pass", "summary": "torch 2.13.0+cpu"}  # nothing empty
    # verify's words: doctor's area and title stay out of verify's JSON
    assert data["checks"][1] == {"name": "lock", "status": "fail", "summary": "torch differs",
                                 "detail": ["torch: 2.12.0", "lock: 2.13.0"],
                                 "hint": "torchfit install --lock /env/pylock.toml --force"}
    assert check_to_json(Check("gpus", "skip", "a CPU build")) == {"name": "gpus", "status": "skip",
                                                                   "summary": "a CPU build"}
