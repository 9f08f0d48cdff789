"""verify/ddp.py: the DDP run judged from the ranks' records and torchrun's summary."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import torchfit.verify.ddp as vddp
import torchfit.verify.watch as vwatch
from tests.verify.conftest import DATA, by_name


def rank(r: int, *lines: dict[str, Any]) -> vwatch.RankState:
    records = [
        {"kind": "start", "rank": r, "world_size": 2, "local_rank": r, "group_rank": 0},
        *lines,
    ]
    return vwatch.RankState(r, records, "/nonexistent.log")


def stage(name: str, step: str | None = None, t: float = 1.0) -> dict[str, Any]:
    return {"kind": "stage", "stage": name, "step": step, "t": t}


def test_torchrun_exit_codes_from_its_summary() -> None:
    codes = vddp.parse_torchrun_exitcodes((DATA / "torchrun-childfailed-abort.txt").read_text())
    assert codes == {1: -6, 0: 1}


def test_a_peer_reset_is_a_victim_not_the_culprit() -> None:
    victim = rank(
        0,
        stage("allreduce", "collective"),
        {
            "kind": "error",
            "stage": "allreduce",
            "step": "collective",
            "type": "RuntimeError",
            "message": "Connection reset by peer",
            "t": 2.0,
        },
    )
    dead = rank(1, stage("allreduce"))
    checks, _ = vddp.judge_ddp([victim, dead], 2, None, 1, [], 10, False)
    assert checks[0].status == "fail"
    assert checks[0].summary.startswith("rank 1 died at stage 'allreduce' without a Python error")


def test_an_own_error_beats_a_victim() -> None:
    victim = rank(
        0,
        {
            "kind": "error",
            "stage": "allreduce",
            "step": "collective",
            "type": "RuntimeError",
            "message": "reset",
            "t": 2.0,
            "traceback": "x",
        },
    )
    culprit = rank(
        1,
        {
            "kind": "error",
            "stage": "allreduce",
            "step": None,
            "type": "RuntimeError",
            "message": "injected",
            "t": 1.5,
            "traceback": "Traceback...\nRuntimeError: injected",
        },
    )
    checks, _ = vddp.judge_ddp([victim, culprit], 2, None, 1, [], 10, False)
    assert checks[0].summary == "rank 1 failed at stage 'allreduce': RuntimeError: injected"
    assert "RuntimeError: injected" in checks[0].detail


def test_teardown_crash_after_done_is_a_note_not_a_failure() -> None:
    ok = {"kind": "check", "name": "allreduce", "ok": True}
    ranks = [rank(0, ok, {"kind": "done"}), rank(1, ok, {"kind": "done"})]
    tail = (DATA / "torchrun-childfailed-abort.txt").read_text().splitlines()
    checks, notes = vddp.judge_ddp(ranks, 2, None, 1, tail, 10, False)
    assert [c.status for c in checks] == ["pass", "pass"]
    assert any("teardown crash" in n for n in notes)


def test_teardown_crash_does_not_hide_a_failed_check() -> None:
    bad = {
        "kind": "check",
        "name": "allreduce",
        "ok": False,
        "expected": 3.0,
        "got": 1003.0,
        "wrong_elements": 1024,
    }
    ranks = [rank(0, bad, {"kind": "done"}), rank(1, bad, {"kind": "done"})]
    checks, _ = vddp.judge_ddp(ranks, 2, None, -6, [], 10, False)
    assert by_name(checks)["allreduce"].status == "fail"


def test_a_stall_names_the_rank_that_never_joined() -> None:
    waiting = rank(0, stage("allreduce"), stage("allreduce", "collective"))
    stuck = rank(1, stage("allreduce"))
    checks, _ = vddp.judge_ddp(
        [waiting, stuck], 2, {"stage": None, "age": 12.0}, None, [], 10, False
    )
    assert checks[0].summary.startswith(
        "rank 1 stalled at stage 'allreduce' before joining the collective"
    )
    assert "rank 0: waiting inside the 'allreduce' collective" in checks[0].detail


def test_no_rank_started() -> None:
    checks, _ = vddp.judge_ddp([], 2, None, 1, ["ValueError: bad"], 10, False)
    assert checks[0].summary == "torchrun exited 1 before any rank started"



@given(st.text(max_size=400))
def test_torchrun_summary_parser_never_raises(text: str) -> None:
    vddp.parse_torchrun_exitcodes(text)


def test_a_ranks_fatal_signal_is_read_from_its_own_log() -> None:
    """The end of a rank log after SIGABRT (faulthandler's words, as the CPU machine wrote them
    with TORCHFIT_VERIFY_FAULT=abort:1), and logs that name no fatal signal."""
    from torchfit.verify.ddp import fatal_signal

    log = [
        "injected fault TORCHFIT_VERIFY_FAULT=abort:1 (abort at allreduce)",
        "Fatal Python error: Aborted",
        "",
        "Thread 0x00007fee8043e6c0 (most recent call first):",
        "",
        "Current thread 0x00007fee9b02fb80 (most recent call first):",
        "Extension modules: torch._C, torch._C._fft (total: 2)",
    ]
    assert fatal_signal(log) == ("SIGABRT", "Aborted")
    assert fatal_signal(["Fatal Python error: Segmentation fault"]) == ("SIGSEGV", "Segmentation fault")
    assert fatal_signal(["Fatal Python error: init_fs_encoding: failed"]) is None
    assert fatal_signal(["RuntimeError: Aborted", "print('Fatal Python error: Aborted!')"]) is None
    assert fatal_signal([]) is None
