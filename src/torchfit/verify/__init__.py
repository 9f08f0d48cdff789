"""`torchfit verify`: prove a torch environment on this host's GPUs, and never hang.

This module is the orchestration only: start the inspection, start the DDP run
as soon as the GPU count is known (or stop there, when the inspection has already
decided the verdict is FAIL), watch both until they end, and turn what they
reported into a `Report`. The parts live beside it:

- model.py       Options, Check, Report
- sizes.py       --sizes, byte formatting, the sweep and its iteration plan
- watch.py       the watched children (Inspection, DdpRun), torchrun's argv, JSONL tailing
- inspection.py  judging the inspection: one function per check; version codes
- ddp.py         judging the DDP run: culprit and stall, torchrun exit codes
- bandwidth.py   the sweep against what the links promise (links: host.links)
- peers.py       nodes and ranks side by side
- slurm.py       the sbatch script of --slurm

The workers themselves are in torchfit/workers/ (run by the TARGET interpreter);
rendering is cli/commands/verify.py's job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torchfit.background import Background, Wake
from torchfit.checks import Check, Status
from torchfit.host.links import Links, probe_links
from torchfit.lock.pylock import load_expected
from torchfit.owned import TreeNotRemoved, hand_over, owned_temp_dir, remove_owned_dir, remove_tree
from torchfit.progress import Progress
from torchfit.redact import redact
from torchfit.space import from_oserror, is_no_space, require_room, tmpdir_place
from torchfit.text import format_bytes_iec
from torchfit.verify.bandwidth import bandwidth_report, smi_indices
from torchfit.verify.ddp import early_plan, judge_ddp, plan_ddp, rank_to_json, visible_gpus_guess
from torchfit.verify.environment import blocking, host_gpu_count, judge_environment, shown
from torchfit.verify.inspection import deciding_failure, judge_inspection
from torchfit.verify.model import Options, Report
from torchfit.verify.peers import compare_peers
from torchfit.verify.sizes import sweep_sizes
from torchfit.verify.transports import (
    debug_env,
    infiniband_devices,
    judge_transports,
    read_nccl_logs,
)
from torchfit.verify.watch import DdpRun, Inspection, child_env

if TYPE_CHECKING:
    from torchfit.compat.judgements import GpuHost
    from torchfit.workers.records import InspectionFacts

__all__ = ["verify"]

POLL_S = 0.1
# Room the work directory must have before any worker starts: their reports, torchrun's and
# NCCL's logs (a two-rank gloo run writes 44 KB, measured; a GPU run's NCCL logs more).
WORK_ROOM = 128 << 10


def find_lock(opts: Options, insp: InspectionFacts) -> str | None:
    if opts.lock:
        return opts.lock
    prefix = opts.env_prefix or (insp.get("python") or {}).get("prefix")
    if prefix:
        path = os.path.join(prefix, "pylock.toml")
        if os.path.isfile(path):
            return path
    return None


# multiprocessing's temp dir (launch_worker's fork server listens on a Unix socket there) is
# made in the launcher's TMPDIR, unless that is too long for an AF_UNIX path (108 bytes, with
# "/pymp-XXXXXXXX/listener-XXXXXXXX" after it): then in a short directory of verify's own,
# named to the launcher by SOCKET_DIR and removed by verify however the launcher ends.
SOCKET_DIR = "TORCHFIT_VERIFY_SOCKET_DIR"
SHORT_TMP = ("/tmp", "/var/tmp")


def _socket_dir(tmpdir: str) -> str | None:
    if len(tmpdir) <= 64:
        return None
    for base in SHORT_TMP:
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            with contextlib.suppress(OSError):
                return owned_temp_dir("verify-socket", base)
    return None  # the launcher's own fallback (workers/launch_worker.py)


def verify(opts: Options, observer: Progress | None = None) -> Report:
    """`_verify`, and the short directory it may make for the fork server's socket removed
    however it ends."""
    made: list[str] = []
    try:
        return _verify(opts, observer, made)
    finally:
        for path in made:
            with contextlib.suppress(TreeNotRemoved):
                remove_owned_dir(path)


def _verify(opts: Options, observer: Progress | None, made: list[str]) -> Report:
    """Inspect, run the DDP smoke test (and sweep), judge; kill whatever is left.

    The inspection and torchrun start together: the DDP plan is taken from the GPU
    count the driver shows (no torch needed), and kept only if the inspection, once
    torch has told it the GPUs, comes to the same plan; otherwise that run is
    discarded and the planned one launched, so the report is the same either way.
    When the inspection's `gpus` check already fails (torch sees no GPU on a GPU host),
    no DDP run starts (an early one is ended): the DDP and bandwidth phases are
    reported as skipped, and verify ends with the inspection (issue 37).
    Each child's exit wakes the watch loop at once.
    """
    obs = observer or Progress()
    t0 = time.monotonic()
    places = [tmpdir_place()]
    try:
        work = owned_temp_dir("verify")  # marked: a SIGKILLed run's is swept by the next one
    except OSError as exc:
        if not is_no_space(exc):
            raise
        raise from_oserror(exc, "verify: its work directory", places, path=places[0].path) from exc
    try:
        # The workers' reports and logs go there: a worker that cannot write them fails
        # without a word, so the room is asked for first.
        require_room(work, WORK_ROOM, "verify: room for the workers' reports and logs", places)
    except BaseException:
        remove_owned_dir(work)
        raise
    report = Report(python=opts.python, env_prefix=opts.env_prefix, work_dir=work)
    env = child_env()
    # The children's TMPDIR is ours: torchrun makes its `torchelastic_*` directory there and
    # removes it only when it ends cleanly, so an interrupted verify left one in the user's
    # TMPDIR each time. Inside the work directory it goes with it (or with the next run's sweep).
    env["TMPDIR"] = os.path.join(work, "tmp")
    os.mkdir(env["TMPDIR"], 0o700)
    socket_dir = _socket_dir(env["TMPDIR"])
    if socket_dir:
        made.append(socket_dir)
        env[SOCKET_DIR] = socket_dir
    # doctor's judgement of the ranks' environment, before any rank starts (verify.environment).
    host_gpus = host_gpu_count()
    nccl = opts.backend == "nccl" or (opts.backend is None and bool(host_gpus))
    pre = judge_environment(env, nccl=nccl, gpu_count=host_gpus,
                            multi_node=f"verify across {opts.nnodes} nodes" if opts.nnodes > 1 else None)
    report.checks.extend(shown(pre))
    links_box: Links = {}
    prober: Background[None] | None = None
    if (
        opts.backend != "gloo"
        and opts.bandwidth is not False
        and opts.nnodes == 1
        and shutil.which("nvidia-smi")
    ):
        prober = Background(lambda: links_box.update(probe_links()))

    obs.phase("inspect", f"inspecting {opts.python}")
    try:
        insp = Inspection(opts.python, work, env, opts.timeout)
    except BaseException:
        remove_owned_dir(work)
        raise
    run = _Run()
    run.env_block = blocking(pre)
    _wake_on_exit(insp.child.proc, run.wake)
    early = early_plan(opts, _gpus_without_torch(env))
    if early is not None and not (run.env_block and early[0] == "nccl"):
        _launch(opts, obs, run, early[0], early[1], work, env)
    try:
        _watch(opts, obs, insp, run, work, env)
    except KeyboardInterrupt as err:
        # Ctrl-C, SIGTERM, SIGHUP: stop everything, then the work dir goes too, unless
        # --keep asked for it, and then the interruption says where it is (the CLI's
        # boundary prints it, --json or not).
        insp.child.stop()
        if run.ddp is not None and not run.ddp.finished:
            run.ddp._finish()
        if opts.keep:
            from torchfit.interrupts import Interrupted

            hand_over(work)
            raise Interrupted(f"{err or 'interrupted'}; verify's work directory is kept at {work}",
                              getattr(err, "signum", None)) from err
        remove_owned_dir(work)
        raise
    finally:
        # Interrupted (Ctrl-C) or not: nothing we started may outlive us.
        insp.child.stop()
        if run.ddp is not None and not run.ddp.finished:
            run.ddp._finish()

    _judge_inspection(opts, insp, report, _gpu_host(opts, insp.facts, run))
    if run.ddp is None and run.stopped:
        # Skipped, not failed: the check named is the failure, these were never tried.
        report.checks.append(Check("ddp", Status.SKIP, f"not run: {run.skip_reason}"))
        if run.backend and sweep_sizes(opts, run.backend) and run.nproc * opts.nnodes >= 2:
            report.checks.append(Check("bandwidth", Status.SKIP, f"not run: {run.skip_reason}"))
    elif run.ddp is None:
        report.checks.append(
            Check(
                "ddp",
                Status.FAIL if run.skip_reason and run.backend else Status.SKIP,
                f"not run: {run.skip_reason or 'the inspection did not finish'}",
            )
        )
    else:
        _judge_ddp(opts, run, report, prober, links_box)
    report.timings["total"] = round(time.monotonic() - t0, 2)
    worth_reading = {"ddp", "inspect"} & set(report.failed)
    if not worth_reading and not opts.keep:
        remove_owned_dir(work)
        report.work_dir = None
    else:  # said to be kept: the next verify's sweep must not take it
        hand_over(work)
    return report


class _Run:
    """What the watch loop decided about the DDP phase."""

    def __init__(self) -> None:
        self.ddp: DdpRun | None = None
        self.backend: str | None = None
        self.nproc = 0
        self.skip_reason: str | None = None
        self.sizes: tuple[int, ...] = ()
        self.sweep_skipped: str | None = None
        self.wake = Wake()  # set when a child exits
        self.env_block: str | None = None  # a failed NCCL environment check: no NCCL ranks
        self.stopped: str | None = None  # the check whose failure stopped verify before the ranks
        self.gpu_host: GpuHost | None = None
        self.gpu_host_probed = False


def _wake_on_exit(proc: Any, wake: Wake) -> None:
    """Set `wake` the moment `proc` exits (Popen's own lock keeps poll() safe meanwhile)."""

    def wait() -> None:
        proc.wait()
        wake.set()

    Background(wait)


def _gpu_host(opts: Options, facts: InspectionFacts, run: _Run) -> GpuHost | None:
    """For a CPU build of torch on one node: is this a GPU host? (the judgement doctor and
    resolve make too). nvidia-smi runs once, for the decision and then the report."""
    torch_facts = facts.get("torch") or {}
    if not torch_facts or torch_facts.get("cuda") or torch_facts.get("hip") or opts.nnodes != 1:
        return None
    if not run.gpu_host_probed:
        from torchfit.host import probe_gpu_host
        from torchfit.runner import Runner

        run.gpu_host = probe_gpu_host(Runner(), timeout=min(opts.timeout, 10.0))
        run.gpu_host_probed = True
    return run.gpu_host


def _gpus_without_torch(env: Mapping[str, str]) -> int | None:
    """The GPUs torch will see, from the driver's /proc entries and CUDA_VISIBLE_DEVICES."""
    try:
        host = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        try:
            host = sum(1 for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:].isdigit())
        except OSError:
            host = 0
    return visible_gpus_guess(env.get("CUDA_VISIBLE_DEVICES"), host)


def _launch(
    opts: Options, obs: Progress, run: _Run, backend: str, nproc: int, work: str, env: Mapping[str, str]
) -> None:
    run.backend, run.nproc = backend, nproc
    run.sizes = sweep_sizes(opts, backend)
    run.sweep_skipped = None
    if run.sizes and nproc * opts.nnodes < 2:
        # busbw = algbw * 2(n-1)/n is 0 for one rank: no bars of 0 GB/s, no sweep at all.
        run.sizes = ()
        run.sweep_skipped = "one rank: an all-reduce crosses no link, nothing to measure (sweep skipped)"
    obs.phase(
        "ddp",
        f"DDP smoke test: {nproc} rank(s) per node, {backend}"
        + (
            f", bandwidth sweep {format_bytes_iec(run.sizes[0])}..{format_bytes_iec(run.sizes[-1])}"
            if run.sizes
            else ", no bandwidth sweep (one rank)"
            if run.sweep_skipped
            else ""
        ),
    )
    if backend == "nccl":  # NCCL's own INFO lines tell the transports (verify.transports)
        env = debug_env(env, work)
    run.ddp = DdpRun(opts.python, opts, backend, nproc, run.sizes, work, env)
    _wake_on_exit(run.ddp.child.proc, run.wake)


def _discard(run: _Run, work: str) -> None:
    """End a run launched on a guess the inspection contradicted; keep its logs aside."""
    assert run.ddp is not None
    run.ddp.child.stop()
    aside = os.path.join(work, "ddp-discarded")
    with contextlib.suppress(OSError):
        remove_tree(aside)
    with contextlib.suppress(OSError):
        os.rename(run.ddp.results, aside)
    run.ddp = None


def _watch(
    opts: Options, obs: Progress, insp: Inspection, run: _Run, work: str, env: Mapping[str, str]
) -> None:
    """Poll both children until they end; once the inspection knows the GPUs, keep the
    early DDP run if it agrees, else launch the planned one (or none)."""
    decided = False
    while True:
        insp.poll()
        if not decided and (insp.devices_known() or insp.finished):
            decided = True
            backend: str | None = None
            nproc, skip = 0, None
            if insp.devices_known():
                backend, nproc, skip = plan_ddp(opts, insp.facts)
                if skip is None and backend == "nccl" and run.env_block:
                    skip = run.env_block
                # One node only: on several, the other nodes would wait for this one at the
                # rendezvous until --rdzv-timeout; it joins, and its report says the same FAIL.
                failed = (
                    deciding_failure(insp.facts, opts.backend, _gpu_host(opts, insp.facts, run))
                    if skip is None and opts.nnodes == 1
                    else None
                )
                if failed is not None:
                    run.stopped = failed.name
                    skip = (
                        f"the {failed.name} check failed (above), so the verdict is FAIL "
                        "whatever the ranks would do; verify stopped after the inspection"
                    )
                    obs.info(f"{failed.name}: FAIL, {failed.summary}; not running the DDP smoke test")
            else:
                skip = "the inspection stopped before it knew the GPUs"
            if run.ddp is not None and (skip is not None or (backend, nproc) != (run.backend, run.nproc)):
                _discard(run, work)
            elif run.ddp is not None:
                run.ddp.launch_clock = time.monotonic()  # kept: from now on, as if launched now
            if run.ddp is None:
                run.backend, run.nproc, run.skip_reason = backend, nproc, skip
                if backend is not None and skip is None:
                    _launch(opts, obs, run, backend, nproc, work, env)
        if run.ddp is not None:
            run.ddp.poll()
        if insp.finished and decided and (run.ddp is None or run.ddp.finished):
            return
        # Heartbeats are read every POLL_S (stall detection); an exit wakes us at once.
        run.wake.wait(POLL_S)
        run.wake.clear()


def _judge_inspection(opts: Options, insp: Inspection, report: Report, gpu_host: GpuHost | None) -> None:
    facts = insp.facts
    report.inspection = facts
    report.timings["inspect"] = round(insp.seconds, 2)
    lock_path = find_lock(opts, facts)
    expected = None
    if lock_path:
        expected, lock_error = load_expected(lock_path)
        report.lock = lock_path
        if lock_error:
            # Asked for (--lock) and unreadable: the comparison the user wanted did
            # not happen, so verify cannot pass. Found in the env: a warning.
            report.checks.append(
                Check(
                    "lock",
                    Status.FAIL if opts.lock else Status.WARN,
                    lock_error,
                    hint="give --lock a pylock.toml written by `torchfit install`" if opts.lock else None,
                )
            )
    if lock_path and expected is not None:
        report.checks.append(check_closure(opts.python, lock_path, min(opts.timeout, 60.0)))
    if insp.tail.records and (insp.done or facts.get("python")):
        report.checks.extend(
            judge_inspection(
                facts, opts.backend, expected, lock_path, complete=insp.done, gpu_host=gpu_host
            )
        )
    report.checks.extend(insp.checks())


def check_closure(python: str, lock_path: str, timeout: float) -> Check:
    """Is every dependency of every installed distribution there (lock.closure.probe_closure,
    the check `install --lock` makes too)? A lock that lost an entry fails here."""
    import shlex

    from torchfit.errors import ProbeFailed
    from torchfit.lock.closure import probe_closure
    from torchfit.lock.pylock import load_pin_mechanism
    from torchfit.runner import Runner, index_variables
    from torchfit.verify.watch import lines_tail

    # The lock's own NCCL pin says whether an NCCL wheel over torch's is on purpose (install --nccl).
    override = load_pin_mechanism(lock_path) == "wheel-override"
    try:
        closure = probe_closure(python, Runner(unset=index_variables()), nccl_override=override, timeout=timeout,
                                env=child_env())
    except ProbeFailed as exc:
        return Check("lock-deps", Status.FAIL, f"could not list the env's distributions: {exc.message}")
    problems = closure.problems
    if problems is None:
        return Check("lock-deps", Status.FAIL, "could not list the env's distributions",
                     lines_tail(closure.failure, 5))
    if problems:
        return Check(
            "lock-deps",
            Status.FAIL,
            f"the env is not whole: {problems[0]}",
            tuple(problems[1:8]),
            hint=f"reinstall from a whole lock: `torchfit install --force --lock {shlex.quote(lock_path)} "
            "--prefix ENV`, or re-create the lock from a plan",
        )
    return Check("lock-deps", Status.PASS,
                 f"every dependency of the {closure.count} installed distributions is installed")


def _judge_ddp(
    opts: Options,
    run: _Run,
    report: Report,
    prober: Background[None] | None,
    links_box: Links,
) -> None:
    ddp = run.ddp
    assert ddp is not None
    facts = report.inspection
    nproc = run.nproc
    ranks = ddp.ranks()
    checks, notes = judge_ddp(
        ranks,
        nproc,
        ddp.stall,
        ddp.returncode,
        ddp.child.output_tail(40),
        opts.timeout,
        ddp.multi,
        opts.nnodes,
    )
    report.checks.extend(checks)
    report.timings["ddp"] = round(ddp.seconds, 2)
    for r in ranks[:1]:
        for tline in r.kind("timing"):
            report.timings[f"ddp.{tline.get('what')}"] = float(tline.get("seconds") or 0.0)
    peers = next((p["peers"] for r in ranks if (p := r.first("peers"))), None)
    if peers is None:
        peers = [dict(rt["info"]) for r in ranks if (rt := r.first("runtime"))]
    nodes, node_diffs, rank_diffs = compare_peers(peers)
    report.nodes = nodes
    report.node_disagreements = node_diffs
    if peers:
        if ddp.multi:
            report.checks.append(
                Check(
                    "nodes-agree",
                    Status.FAIL if node_diffs else Status.PASS,
                    f"nodes disagree on {', '.join(d.split(':')[0] for d in node_diffs)}"
                    if node_diffs
                    else f"{len(nodes)} nodes run the same driver, torch, CUDA, cuDNN and NCCL",
                    tuple(node_diffs),
                )
            )
        same = (
            "the ranks of each node run the same torch, CUDA, cuDNN and NCCL"
            if ddp.multi
            else f"{len(peers)} rank(s) run the same torch, CUDA, cuDNN and NCCL"
            + (
                f" (NCCL {nodes[0]['nccl']} from {nodes[0]['nccl_path']})"
                if nodes and nodes[0]["nccl"] != "none"
                else ""
            )
        )
        report.checks.append(
            Check(
                "ranks-agree",
                Status.FAIL if rank_diffs else Status.PASS,
                rank_diffs[0] if rank_diffs else same,
                tuple(rank_diffs[1:]),
            )
        )
    if ddp.backend == "nccl":
        counts = read_nccl_logs(os.path.dirname(ddp.results), ddp.results)
        report.checks.append(judge_transports(counts, ddp.multi, infiniband_devices()))
    bw_rows = next((b["rows"] for r in ranks if (b := r.first("bandwidth"))), None)
    if run.sweep_skipped:
        report.checks.append(Check("bandwidth", Status.SKIP, run.sweep_skipped))
    if run.sizes:
        if prober is not None:
            prober.wait(timeout=opts.timeout)
        env_seen = peers[0].get("env", {}) if peers else {}
        if bw_rows:
            used = smi_indices(
                (facts.get("devices") or {}).get("gpus", [])[:nproc],
                links_box.get("uuids") or {},
                (facts.get("env") or {}).get("CUDA_VISIBLE_DEVICES"),
            )
            report.bandwidth, check = bandwidth_report(
                bw_rows, links_box or None, used, env_seen, ddp.multi, ddp.backend
            )
            report.checks.append(check)
        else:
            report.checks.append(
                Check("bandwidth", Status.SKIP, "the sweep did not run (an earlier stage failed)")
            )
    report.ddp = {
        "backend": ddp.backend,
        "nproc": nproc,
        "nnodes": opts.nnodes,
        "argv": [redact(a) for a in ddp.argv],
        "returncode": ddp.returncode,
        "stall": ddp.stall,
        "notes": notes,
        "ranks": [rank_to_json(r) for r in ranks],
    }
