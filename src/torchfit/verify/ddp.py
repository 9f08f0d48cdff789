"""Judging the DDP smoke test: which rank failed or stalled and why (the culprit,
not its victims), the correctness checks every rank reported, torchrun's exit
codes, and whether the DDP phase can run at all (`plan_ddp`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from torchfit.checks import Check, Status
from torchfit.jsontypes import JsonObject
from torchfit.verify.inspection import code_text
from torchfit.verify.model import Options
from torchfit.verify.watch import RankState, exit_text, last_stage, lines_tail, tail_file

if TYPE_CHECKING:
    from torchfit.workers.records import InspectionFacts

_TORCHRUN_FAILURE = re.compile(
    r"rank\s*:\s*([0-9]+)\s*\(local_rank:\s*([0-9]+)\)\s*\n\s*exitcode\s*:\s*(-?[0-9]+)"
)


def parse_torchrun_exitcodes(text: str) -> dict[int, int]:
    """Global rank -> exit code from torchrun's ChildFailedError summary."""
    return {int(m.group(1)): int(m.group(3)) for m in _TORCHRUN_FAILURE.finditer(text)}


def plan_ddp(opts: Options, insp: InspectionFacts) -> tuple[str | None, int, str | None]:
    """(backend, nproc, why not) for the DDP phase, from the inspection's facts."""
    if insp.get("torch_error") or not insp.get("torch"):
        return None, 0, "torch does not import"
    devices = insp.get("devices") or {}
    count = int(devices.get("count") or 0)
    backend = opts.backend or ("nccl" if count else "gloo")
    if backend == "nccl":
        nproc = opts.nproc or count
        if count == 0:
            return backend, 0, "--backend nccl needs GPUs and torch sees none"
        if nproc > count:
            return (
                backend,
                nproc,
                f"--nproc {nproc} but torch sees {count} GPU(s): one process per GPU",
            )
        return backend, nproc, None
    return backend, opts.nproc or 2, None


def visible_gpus_guess(cuda_visible_devices: str | None, host_gpus: int) -> int | None:
    """How many GPUs torch will see, told without importing it; None when it cannot be told.

    CUDA reads CUDA_VISIBLE_DEVICES up to the first entry it cannot use (an index
    past the last GPU, a repeat, anything else) and ignores the rest; "" hides every
    GPU. UUIDs and MIG names need the driver to resolve them: None.
    """
    if cuda_visible_devices is None:
        return host_gpus
    count, seen = 0, set()
    for entry in cuda_visible_devices.split(","):
        e = entry.strip()
        if e.upper().startswith(("GPU-", "MIG-")):
            return None
        if not e.isdigit() or int(e) >= host_gpus or int(e) in seen:
            break
        seen.add(int(e))
        count += 1
    return count


def early_plan(opts: Options, gpus: int | None) -> tuple[str, int] | None:
    """(backend, nproc) to launch torchrun with before the inspection knows the GPUs.

    The same decision `plan_ddp` takes once torch has been imported, taken from a GPU
    count read without torch; None where that count is unknown or the decision could
    come out otherwise (several nodes: the other agents must not see a relaunch).
    The orchestrator keeps the early run only if `plan_ddp` agrees with it.
    """
    if gpus is None or opts.nnodes != 1:
        return None
    # facts as the inspection will give them: a torch that imported (its version not known yet)
    backend, nproc, why = plan_ddp(opts, {"torch": {"version": None}, "devices": {"count": gpus}})
    if backend is None or why is not None:
        return None
    return backend, nproc


def judge_ddp(
    ranks: Sequence[RankState],
    nproc: int,
    stall: Mapping[str, Any] | None,
    torchrun_code: int | None,
    torchrun_tail: Sequence[str],
    timeout: float,
    multi: bool,
    opts_nnodes: int = 1,
) -> tuple[list[Check], list[str]]:
    """Checks from every local rank's report; notes for things that are not failures.

    A rank that reported `done` passed its part whatever its exit code (the gloo
    teardown abort, docs/architecture.md, Contracts); a failed check or an error in any rank's report
    fails the run even when every exit code is 0.
    """
    checks: list[Check] = []
    notes: list[str] = []
    codes = parse_torchrun_exitcodes("\n".join(torchrun_tail))
    if not ranks:
        if stall:
            what = (
                "the other nodes to join the rendezvous"
                if stall["stage"] == "rendezvous"
                else "torchrun to start the workers"
            )
            checks.append(
                Check(
                    "ddp",
                    Status.FAIL,
                    f"no rank started: waited {stall['age']:.0f} s for {what}",
                    tuple(torchrun_tail),
                )
            )
        else:
            checks.append(
                Check(
                    "ddp",
                    Status.FAIL,
                    f"torchrun exited {exit_text(torchrun_code)} before any rank started",
                    tuple(torchrun_tail),
                    hint="the lines above are torchrun's own output",
                )
            )
        return checks, notes

    own_error = any(r.first("error") and not _is_victim(r) for r in ranks)
    culprit = find_culprit(ranks, codes)
    if stall is not None and not own_error:
        # We killed them: a missing exit code or a waiting rank's timeout error
        # is our doing, the stall is the finding.
        checks.append(_stall_check(ranks, nproc, stall, timeout, multi))
    elif culprit is not None:
        checks.append(_culprit_check(culprit, ranks, codes))
    elif len(ranks) < nproc:
        checks.append(
            Check(
                "ddp", Status.FAIL, f"only {len(ranks)} of {nproc} ranks started", tuple(torchrun_tail)
            )
        )
    else:
        first = ranks[0]
        timing = {x.get("what"): x.get("seconds") for x in first.kind("timing")}
        world = first.start.get("world_size")
        where = f" on {opts_nnodes} nodes" if multi else ""
        here = (
            f"{len(ranks)} rank(s) here, {world} in all{where}"
            if multi
            else f"{len(ranks)} rank(s)"
        )
        checks.append(
            Check(
                "ddp",
                Status.PASS,
                f"{here}: process group initialised, DDP steps trained, every rank reported",
                tuple(
                    f"rank {first.rank} {w}: {s:.2f} s" for w, s in timing.items() if s is not None
                ),
            )
        )
        for r in ranks:
            code = codes.get(r.rank)
            if code not in (None, 0):
                notes.append(
                    f"rank {r.rank} exited {exit_text(code)} after reporting done: a teardown crash, ignored "
                    "(reports are written before teardown)"
                )
        if torchrun_code not in (0, None) and not notes:
            notes.append(
                f"torchrun exited {exit_text(torchrun_code)} after every rank reported done: ignored"
            )

    for name, label in (("allreduce", "all-reduce"), ("params", "parameters after DDP steps")):
        results = [(r, c) for r in ranks for c in r.kind("check") if c.get("name") == name]
        if not results:
            continue
        bad = [(r, c) for r, c in results if not c.get("ok")]
        if name == "allreduce":
            rows = tuple(
                f"rank {r.rank}: expected {c.get('expected')}, got {c.get('got')}, {c.get('wrong_elements')} wrong element(s)"
                for r, c in bad
            )
            good = f"all-reduce correct on {len(results)} rank(s)"
        else:
            rows = tuple(
                f"rank {r.rank}: max spread {c.get('spread')}, moved {c.get('moved')}"
                for r, c in bad
            )
            good = f"parameters identical on every rank after {len(results[0][1].get('losses') or [])} DDP steps"
        checks.append(
            Check(
                name,
                Status.FAIL if bad else Status.PASS,
                f"{label} wrong on rank(s) {', '.join(str(r.rank) for r, _ in bad)}"
                if bad
                else good,
                rows,
            )
        )
    return checks, notes


def _short(text: object, limit: int = 240) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _is_victim(r: RankState) -> bool:
    """An error raised inside a collective: usually a peer that went away."""
    e = r.first("error")
    return e is not None and e.get("step") == "collective"


def find_culprit(ranks: Sequence[RankState], codes: Mapping[int, int]) -> RankState | None:
    """The rank whose failure explains the others, or None when no rank failed.

    When one rank dies, its peers' collectives fail ("Connection reset by peer")
    and torchrun stops the rest, so the lowest failing rank is often a victim (and
    torchrun's own "Root Cause" names the first exit it happened to poll). Order:
    an error raised outside a collective (earliest first); a rank that died without
    reporting (preferring one that was not inside a collective, and one with a
    non-SIGTERM exit code: SIGTERM is torchrun stopping it); then an error inside a
    collective with no other explanation.
    """
    own = [r for r in ranks if r.first("error") and not _is_victim(r)]
    if own:
        return min(own, key=lambda r: (r.first("error") or {}).get("t") or 0.0)
    dead = [r for r in ranks if not r.done and not r.first("error")]
    victims = [r for r in ranks if _is_victim(r)]
    if dead and (victims or any(codes.get(r.rank) not in (None, 0, -15) for r in dead)):
        return min(
            dead,
            key=lambda r: (
                codes.get(r.rank) in (None, -15),
                last_stage(r.records)[1] == "collective",
                r.rank,
            ),
        )
    if victims:
        return min(victims, key=lambda r: (r.first("error") or {}).get("t") or 0.0)
    return None


def _culprit_check(r: RankState, ranks: Sequence[RankState], codes: Mapping[int, int]) -> Check:
    e = r.first("error")
    others = []
    for o in ranks:
        if o is r or o.done:
            continue
        oe = o.first("error")
        if oe is not None:
            why = (
                "in a collective, after a peer failed"
                if _is_victim(o)
                else f"at stage '{oe.get('stage')}'"
            )
            others.append(
                f"rank {o.rank} failed too, {why}: {oe.get('type')}: {_short(oe.get('message'), 160)}"
            )
        else:
            code = codes.get(o.rank)
            others.append(
                f"rank {o.rank} was stopped at stage '{last_stage(o.records)[0]}'"
                + (f" (exit {exit_text(code)})" if code is not None else "")
            )
    if e is not None:
        return Check(
            "ddp",
            Status.FAIL,
            f"rank {r.rank} failed at stage '{e.get('stage')}': {e.get('type')}: {_short(e.get('message'))}",
            lines_tail(e.get("traceback"), 25) + tuple(others),
        )
    stage, step, _t = last_stage(r.records)
    code = codes.get(r.rank)
    watchdog = r.first("watchdog")
    fatal = fatal_signal(tail_file(r.log, 40)) if code is None else None
    why = (
        f"its watchdog ended it ({watchdog.get('reason')})"
        if watchdog
        else f"exit {exit_text(code)}"
        if code is not None
        else f"{fatal[0]}: its log says 'Fatal Python error: {fatal[1]}'"
        if fatal
        else "exit code unknown"
    )
    where = f"stage '{stage}'" + (f" ({step})" if step else "")
    return Check(
        "ddp",
        Status.FAIL,
        f"rank {r.rank} died at {where} without a Python error ({why})",
        tuple(f"rank {r.rank} log: {line}" for line in tail_file(r.log, 12)) + tuple(others),
        hint="a signal or a native crash: the log lines above are the end of that rank's stdout/stderr",
    )


# faulthandler's names of the fatal signals (Modules/faulthandler.c), as a rank's log ends.
_FATAL = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
          "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}


def fatal_signal(lines: Sequence[str]) -> tuple[str, str] | None:
    """(signal, faulthandler's words) from a rank log's 'Fatal Python error: Aborted' line.

    torchrun's summary holds one exit code per failed rank where it starts scripts, but only
    the first it saw where it forks functions (torch.multiprocessing's ProcessContext.join):
    a second rank's signal is then read from its own log."""
    for line in reversed(lines):
        words = line.strip().removeprefix("Fatal Python error: ")
        if words != line.strip() and words in _FATAL:
            return _FATAL[words], words
    return None


def _stall_check(
    ranks: Sequence[RankState],
    nproc: int,
    stall: Mapping[str, Any],
    timeout: float,
    multi: bool = False,
) -> Check:
    """Name the rank and stage that stalled: one that never entered the collective
    is the culprit; ranks waiting inside it are its victims."""
    if stall.get("stage") in ("launch", "rendezvous"):
        return Check(
            "ddp",
            Status.FAIL,
            f"only {len(ranks)} of {nproc} local ranks started within {stall['age']:.0f} s "
            f"(stalled at {stall['stage']})",
        )
    waiting: list[tuple[RankState, str, Any]] = []
    stuck: list[tuple[RankState, str, Any]] = []
    for r in ranks:
        if r.done or r.first("error"):
            continue
        stage, step, _t = last_stage(r.records)
        (waiting if step == "collective" else stuck).append((r, stage, step))
    if stuck:
        r, stage, step = stuck[0]
        where = f"stage '{stage}'" + (f" ({step})" if step else "")
        summary = (
            f"rank {r.rank} stalled at {where}"
            + (" before joining the collective" if any(w for w in waiting) else "")
            + f"; killed after {timeout:g} s without progress"
        )
    else:
        r, stage, step = waiting[0]
        summary = f"every rank waited in the '{stage}' collective for {timeout:g} s: the collective itself does not complete; killed"
    detail = tuple(
        f"rank {o.rank}: waiting inside the '{s}' collective" for o, s, _ in waiting
    ) + tuple(
        f"rank {o.rank}: stalled at stage '{s}'" + (f" ({p})" if p else "") for o, s, p in stuck[1:]
    )
    hint = None
    if not stuck:
        hint = (
            "run again with NCCL_DEBUG=INFO; a firewall, a wrong network interface "
            "(NCCL_SOCKET_IFNAME) or a dead link is typical"
        )
        if multi:
            hint = (
                "a rank on another node may have failed or stalled: read that node's report; "
                + hint
            )
    return Check("ddp", Status.FAIL, summary, detail + tail_file(r.log, 8), hint=hint)


def rank_to_json(r: RankState) -> JsonObject:
    stage, step, _t = last_stage(r.records)
    err = r.first("error")
    imported = next((x for x in r.kind("timing") if x.get("what") == "import"), {})
    return {
        "rank": r.rank,
        "local_rank": r.start.get("local_rank"),
        "node": r.start.get("group_rank"),
        "host": r.start.get("host"),
        "pid": r.start.get("pid"),
        "done": r.done,
        "last_stage": stage,
        "last_step": step,
        "error": {k: err.get(k) for k in ("stage", "type", "message", "traceback")}
        if err
        else None,
        "checks": {c.get("name"): c.get("ok") for c in r.kind("check")},
        "timings": {x.get("what"): x.get("seconds") for x in r.kind("timing")},
        # True: forked from launch_worker.py's fork server with torch (and torch._dynamo) imported.
        "torch_inherited": imported.get("inherited"),
        "dynamo_inherited": imported.get("dynamo_inherited"),
        # What the worker saw: proof that NCCL_*, LD_PRELOAD, CUDA_VISIBLE_DEVICES reached it.
        "env": ((r.first("runtime") or {}).get("info") or {}).get("env"),
        "nccl": {
            "version": code_text(
                ((r.first("runtime") or {}).get("info") or {}).get("nccl_code")
            ),
            "path": ((r.first("runtime") or {}).get("info") or {}).get("nccl_path"),
        },
    }
