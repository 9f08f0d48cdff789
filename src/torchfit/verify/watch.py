"""The two watched children of a verify run and what they write.

`Inspection` runs inspect_worker.py in the target interpreter; `DdpRun` runs
torchrun (workers/launch_worker.py: torchrun's own main), whose fork server forks
ddp_worker's `entry` once per rank. Both write JSON lines
(`torchfit.workers.JsonlTail` reads them while they grow); a child with no heartbeat for the
stage timeout is stalled and killed. Also here: torchrun's argv and rendezvous
configuration, and the text helpers (log tails, exit codes) the judges quote.

Two children run for minutes and must be watched while they run (heartbeats,
stall detection), so they are started with `runner.spawn` (own session, PDEATHSIG) rather than through
`Runner.run`, which blocks until exit. Forked ranks stay in torchrun's session (the fork server is torchrun's child), but
where torchrun runs the script instead (an old torch: launch_worker.py) it starts each
worker in a session of its own (torch/distributed/elastic/multiprocessing/subprocess_handler:
start_new_session), where killing torchrun's process group does not reach them: so
every process whose command line holds this run's unique work path is killed by
pid, and each worker also ends itself when its parent dies or its deadline passes.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from torchfit import runner
from torchfit.checks import Check, Status
from torchfit.errors import BadInput
from torchfit.redact import redact
from torchfit.space import full_place
from torchfit.verify.model import Options
from torchfit.verify.sizes import iteration_plan
from torchfit.workers import JsonlTail, script, worker_argv

if TYPE_CHECKING:
    from torchfit.workers.records import InspectionFacts

DDP_STAGES = (
    "import",
    "device",
    "libraries",
    "init",
    "peers",
    "allreduce",
    "ddp",
    "params",
    "bandwidth",
)


# --- text the judges quote ----------------------------------------------------------------


def lines_tail(text: str | None, n: int = 15) -> tuple[str, ...]:
    return tuple(redact(line) for line in (text or "").rstrip().splitlines()[-n:])


def tail_file(path: str, n: int = 12) -> tuple[str, ...]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16000))
            text = fh.read()
    except OSError:
        return ()
    return lines_tail(text, n)


def exit_text(code: int | None) -> str:
    if code is None:
        return "unknown"
    if code < 0:
        try:
            return f"{code}, {signal.Signals(-code).name}"
        except ValueError:
            return str(code)
    return str(code)


# --- reading worker output ----------------------------------------------------------------


def merge_facts(records: Iterable[Mapping[str, Any]]) -> InspectionFacts:
    """inspect_worker.py's `fact` lines, merged by key: the shape it writes (workers/records.py)."""
    out: dict[str, object] = {}
    for r in records:
        if r.get("kind") == "fact":
            out[r["key"]] = r.get("value")
            if r["key"] == "torch_error":
                out["torch_traceback"] = r.get("traceback")
    return cast("InspectionFacts", out)


def last_stage(records: Sequence[Mapping[str, Any]]) -> tuple[str, Any, float | None]:
    for r in reversed(records):
        if r.get("kind") == "stage":
            return str(r.get("stage")), r.get("step"), r.get("t")
    return "start", None, None


# --- processes -----------------------------------------------------------------------------


class Child:
    """A watched child in its own session; `stop()` ends it and everything it started."""

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        marker: str,
        out_path: str,
        cwd: str | None = None,
    ) -> None:
        self.argv = list(argv)
        self.marker = marker
        self.out_path = out_path
        self.started = time.monotonic()
        self._out = open(out_path, "wb")
        try:
            from torchfit.runner import DEVNULL, STDOUT, spawn

            # Own session, PDEATHSIG, registered: dies with torchfit whatever kills it.
            self.proc = spawn(
                self.argv,
                stdin=DEVNULL,
                stdout=self._out,
                stderr=STDOUT,
                env=dict(env),
                cwd=cwd,
            )
        except OSError as exc:  # not an executable (a text file, a wrong architecture)
            raise BadInput(f"{self.argv[0]}: cannot be run ({exc.strerror or exc})") from None
        finally:
            self._out.close()
        self.killed = False

    def poll(self) -> int | None:
        return self.proc.poll()

    def output_tail(self, n: int = 20) -> tuple[str, ...]:
        return tail_file(self.out_path, n)

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after `grace`, the child's group and every process
        marked with this run's path (torchrun's workers live in other sessions)."""
        from torchfit.runner import stop_marked

        self.killed = stop_marked(self.marker, self.proc, grace) or self.killed
        try:
            self.proc.wait(timeout=grace)
        except runner.TimeoutExpired:
            pass
        if self.proc.returncode is not None:
            from torchfit.runner import release

            release(self.proc)


# --- the inspection ---------------------------------------------------------------------


class Inspection:
    """The one-process inspection, watched: stage heartbeats, a stall timeout."""

    def __init__(self, python: str, work: str, env: Mapping[str, str], timeout: float) -> None:
        self.out = os.path.join(work, "inspect.jsonl")
        open(self.out, "w").close()
        self.tail = JsonlTail(self.out)
        self.timeout = timeout
        self.child = Child(
            worker_argv(python, "inspect", self.out),
            env,
            self.out,
            os.path.join(work, "inspect.log"),
        )
        self.tail.last_seen = self.child.started
        self.stalled: str | None = None
        self.returncode: int | None = None
        self.seconds = 0.0

    @property
    def facts(self) -> InspectionFacts:
        return merge_facts(self.tail.records)

    @property
    def done(self) -> bool:
        return any(r.get("kind") == "done" for r in self.tail.records)

    @property
    def finished(self) -> bool:
        return self.returncode is not None or self.stalled is not None

    def devices_known(self) -> bool:
        return any(
            r.get("kind") == "fact" and r.get("key") in ("devices", "torch_error")
            for r in self.tail.records
        )

    def poll(self) -> None:
        if self.finished:
            return
        self.tail.poll()
        code = self.child.poll()
        if code is not None:
            self.tail.poll()
            self.returncode = code
            self.seconds = time.monotonic() - self.child.started
            self.child.stop()  # anything it left behind
            return
        if time.monotonic() - self.tail.last_seen > self.timeout:
            stage, step, _t = last_stage(self.tail.records)
            self.stalled = stage + (f" ({step})" if step else "")
            self.seconds = time.monotonic() - self.child.started
            self.child.stop()
            self.tail.poll()

    def checks(self) -> list[Check]:
        """Checks for a run that did not end in `done`; [] when it did."""
        if self.done:
            return []
        if self.stalled is not None:
            return [
                Check(
                    "inspect",
                    Status.FAIL,
                    f"the inspection stalled at stage '{self.stalled}' for {self.timeout:g} s and was killed",
                    self.child.output_tail(),
                    hint="the last stage names what hung (a wedged GPU or driver is the usual cause)",
                )
            ]
        errors = [r for r in self.tail.records if r.get("kind") == "error"]
        if errors:
            e = errors[-1]
            what = f"the inspection failed at stage '{e.get('stage')}': {e.get('type')}: {e.get('message')}"
            hint = None
            if e.get("stage") == "import-torch":
                # A file damaged in uv's cache (linked into the env) is the cause to rule out first.
                from torchfit.lock.closure import DAMAGED_FIX, explain_damaged_torch

                prefix = os.path.dirname(os.path.dirname(os.path.abspath(self.child.argv[0])))
                damage = explain_damaged_torch(prefix)
                if damage:
                    what += f"; {damage}"
                    hint = DAMAGED_FIX
            return [Check("inspect", Status.FAIL, what, lines_tail(e.get("traceback"), 20), hint=hint)]
        if not self.tail.records:
            full = full_place(self.tail.path)
            if full is not None:  # the report could not be written: say where the space ran out
                return [Check("inspect", Status.FAIL, f"the inspection's report could not be written: {full.message}",
                              self.child.output_tail(), hint=full.hint)]
            return [
                Check(
                    "python",
                    Status.FAIL,
                    f"{self.child.argv[0]} did not run the inspection (exit {self.returncode}, no report)",
                    self.child.output_tail(),
                    hint="is it a Python 3.8+ interpreter?",
                )
            ]
        stage, _step, _t = last_stage(self.tail.records)
        return [
            Check(
                "inspect",
                Status.FAIL,
                f"the inspection died at stage '{stage}' (exit {exit_text(self.returncode)})",
                self.child.output_tail(),
            )
        ]


# --- the DDP run ------------------------------------------------------------------------------


_LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def rdzv_conf(opts: Options) -> str:
    """torchrun's --rdzv-conf: the join timeout, and who hosts the store on loopback.

    c10d makes every agent whose host matches the endpoint try to host the TCP
    store (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py,
    _create_tcp_store); on a loopback endpoint that is every agent, racing for one
    port. There all agents are on this machine, so node rank 0 hosts, the others
    connect. Elsewhere c10d's own choice stands.
    """
    conf = f"join_timeout={int(opts.rdzv_timeout)}"
    host = (opts.rdzv_endpoint or "").rsplit(":", 1)[0]
    if host.startswith(_LOOPBACK):
        conf += f",is_host={1 if opts.node_rank == 0 else 0}"
    return conf


def torchrun_argv(python: str, opts: Options, nproc: int, config_path: str) -> list[str]:
    """The env's own torchrun, whatever its PATH, through workers/launch_worker.py: torchrun's
    `main` with the ranks forked from a fork server that imported torch while torchrun did
    (`--start-method forkserver`), not a new interpreter importing torch again for each rank."""
    argv = [
        python,
        script("launch"),
        "--start-method",
        "forkserver",
        "--nproc-per-node",
        str(nproc),
        "--max-restarts",
        "0",
    ]
    if opts.nnodes > 1 and opts.rdzv_endpoint:
        argv += [
            "--nnodes",
            str(opts.nnodes),
            "--node-rank",
            str(opts.node_rank),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            opts.rdzv_endpoint,
            "--rdzv-id",
            opts.rdzv_id,
            "--rdzv-conf",
            rdzv_conf(opts),
        ]
    elif opts.nnodes > 1:
        argv += [
            "--nnodes",
            str(opts.nnodes),
            "--node-rank",
            str(opts.node_rank),
            "--master-addr",
            str(opts.master_addr),
            "--master-port",
            str(opts.master_port),
        ]
    else:
        argv += ["--standalone"]
    return [*argv, script("ddp"), config_path]


@dataclass
class RankState:
    rank: int
    records: list[dict[str, Any]]
    log: str

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self.kind(kind)
        return found[-1] if found else None

    @property
    def done(self) -> bool:
        return self.first("done") is not None

    @property
    def start(self) -> dict[str, Any]:
        return self.first("start") or {}


class DdpRun:
    """torchrun + N workers, watched until they report, fail, stall or exit."""

    def __init__(
        self,
        python: str,
        opts: Options,
        backend: str,
        nproc: int,
        sizes: Sequence[int],
        work: str,
        env: Mapping[str, str],
    ) -> None:
        self.opts = opts
        self.backend = backend
        self.nproc = nproc
        self.results = os.path.join(work, "ddp")
        os.makedirs(self.results, exist_ok=True)
        self.multi = opts.nnodes > 1
        self.launch_limit = opts.timeout + (opts.rdzv_timeout if self.multi else 0)
        stages_budget = opts.timeout * (len(DDP_STAGES) + len(sizes) + 2)
        cfg = {
            "results": self.results,
            "backend": backend,
            # The process group's own timeout is a backstop behind the stall timeout:
            # the orchestrator must see a stall first, or the waiting rank's timeout
            # error would be blamed instead of the rank that never joined.
            "pg_timeout": max(2 * opts.timeout, opts.timeout + 30),
            "deadline": time.time() + self.launch_limit + stages_budget + 60,
            "sizes": list(sizes),
            "plan": {
                str(n): list(p) for n, p in iteration_plan(sizes, opts.iters, opts.warmup).items()
            },
            "ddp_steps": 3,
            "node_rank": opts.node_rank,
            "owner_pid": os.getpid(),
        }
        self.config = os.path.join(self.results, "config.json")
        with open(self.config, "w", encoding="utf-8") as fh:
            json.dump(cfg, fh)
        self.argv = torchrun_argv(python, opts, nproc, self.config)
        self.child = Child(self.argv, env, self.config, os.path.join(work, "torchrun.log"))
        # The launch limit counts from here, or, for a run started before the inspection
        # knew the GPUs, from when it did (verify resets it then): starting early must not
        # leave torchrun less time than starting late did.
        self.launch_clock = self.child.started
        self.tails: dict[str, JsonlTail] = {}
        self.stall: dict[str, Any] | None = None
        self.returncode: int | None = None
        self.after_done_since: float | None = None
        self.seconds = 0.0
        self.finished = False

    def _scan(self) -> None:
        try:
            names = os.listdir(self.results)
        except OSError:
            return
        for name in names:
            if name.startswith("rank-") and name.endswith(".jsonl") and name not in self.tails:
                t = JsonlTail(os.path.join(self.results, name))
                t.last_seen = time.monotonic()
                self.tails[name] = t
        for t in self.tails.values():
            t.poll()

    def _ended(self, t: JsonlTail) -> bool:
        return any(r.get("kind") in ("done", "error", "watchdog") for r in t.records)

    def poll(self) -> None:
        if self.finished:
            return
        self._scan()
        now = time.monotonic()
        code = self.child.poll()
        if code is not None:
            self._scan()
            self.returncode = code
            self._finish()
            return
        tails = list(self.tails.values())
        all_reported = len(tails) >= self.nproc and all(self._ended(t) for t in tails)
        any_error = any(r.get("kind") == "error" for t in tails for r in t.records)
        if all_reported or any_error:
            # torchrun should exit now (or tear the others down after an error);
            # give it a moment, then end it ourselves.
            self.after_done_since = self.after_done_since or now
            if now - self.after_done_since > min(15.0, self.opts.timeout):
                self._finish()
            return
        if len(tails) < self.nproc and now - self.launch_clock > self.launch_limit:
            self.stall = {
                "stage": "rendezvous" if self.multi else "launch",
                "started": len(tails),
                "age": now - self.launch_clock,
            }
            self._finish()
            return
        stuck = [t for t in tails if not self._ended(t) and now - t.last_seen > self.opts.timeout]
        if stuck:
            self.stall = {"stage": None, "age": max(now - t.last_seen for t in stuck)}
            self._finish()

    def _finish(self) -> None:
        self.child.stop()
        self._scan()
        if self.returncode is None:
            self.returncode = self.child.proc.returncode
        self.seconds = time.monotonic() - self.child.started
        self.finished = True

    def ranks(self) -> list[RankState]:
        out = []
        for name, t in sorted(self.tails.items()):
            rank = int(name[len("rank-") : -len(".jsonl")])
            out.append(RankState(rank, t.records, os.path.join(self.results, f"rank-{rank}.log")))
        return sorted(out, key=lambda r: r.rank)


def child_env() -> dict[str, str]:
    """The ranks' environment: ours, less the package sources and credentials they never need."""
    from torchfit.runner import without_index_variables

    env = without_index_variables()
    # Unbuffered worker output: a crash's last words must reach the log.
    env["PYTHONUNBUFFERED"] = "1"
    return env
