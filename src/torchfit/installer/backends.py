"""The two installers, uv and pip, behind one interface.

Both keep the torch family on the torch index alone and both end with a
`LockedDist` for every distribution they installed, with the sha256 of the very
file installed:

- uv (`lock.uv`, the one uv adapter): `uv pip compile --format pylock.toml` of a generated
  pyproject.toml in which
  the torch index is an *explicit* index and the family's `[tool.uv.sources]` point
  at it (uv's documented way to pin PyTorch to its index: no other index or
  find-links directory can provide the family, the dependencies come from the
  user's sources). The env is then installed with ONE `uv pip install -r
  pylock.install.toml`: that resolution's exact files, each by its URL (or path)
  and sha256, so no index is asked again and nothing but those files can be
  installed. The resolution runs with the base interpreter while `uv venv` creates
  the env beside it (see `UvBackend.resolve` for how it asks the indexes only once).
- pip: the family is installed first with `--no-deps` from the torch index alone,
  then its dependencies from the user's sources with the family constrained to the
  exact builds just installed (`torch==2.13.0+cpu`), so pip can never swap in
  another torch; `--report` gives each file's URL and sha256 (pip hashes files the
  index gave no hash for).

`torchfit install --lock` (both installers) installs a lock's files by name,
version and sha256 in two steps, the family from the torch index only, then the
rest from the user's sources, so a lock can be rebuilt from another mirror.

Every command goes through the runner: argv lists, a timeout, output captured into
the install log, redacted.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit.background import Background
from torchfit.compat.matrix import FAMILY_PACKAGES, PYPI_SIMPLE
from torchfit.errors import BadInput, InstallFailed, ToolMissing, ToolStalled, ToolTimeout
from torchfit.index.sources import Sources, is_local
from torchfit.inputs import decode_json
from torchfit.installer.prefix import InstallLog
from torchfit.lock.model import Artifact, LockedDist
from torchfit.lock.pylock import (
    LOCK_VERSION,
    file_name,
    local_file,
    package_table,
    requirements_text,
    sha256_file,
)
from torchfit.lock.toml import dumps_toml
from torchfit.lock.uv import UV_MIN, Compiled, compile_project, uv_version, write_private
from torchfit.lock.uvbin import find_uv
from torchfit.progress import Progress
from torchfit.redact import redact
from torchfit.runner import Runner, RunResult, kill_stray_children, without_index_variables
from torchfit.space import Place, disk_full, space_error_in
from torchfit.text import tail

if TYPE_CHECKING:
    from torchfit.compat.plan import Plan


PIP_MIN = Version("22.2")  # `pip install --report`
# What `uv venv --seed` puts in the env (uv's docs: pip; setuptools and wheel below
# Python 3.12; uv 0.13.9 measured: pip 26.3, setuptools, wheel and wheel's packaging
# for 3.11, pip alone for 3.12), as requirements resolved with the plan (`--seed`).
SEED = ("pip", 'setuptools; python_version < "3.12"', 'wheel; python_version < "3.12"')


@dataclass
class StepContext:
    """What every installer step needs: the runner, the log, the observer, the sources."""

    runner: Runner
    log: InstallLog
    observer: Progress
    sources: Sources
    timeout: float
    timings: dict[str, float]
    # No I/O from the step's processes for this long: a hung index; killed (runner.ToolStalled).
    stall: float | None = None
    # Where the steps write (the env's filesystem, TMPDIR, uv's cache): a step that runs
    # out of space there is DiskFull, naming the place (torchfit.space).
    places: Sequence[Place] = ()
    # The packages a step installs (step name -> dists), for its progress: the total, the
    # percent and the package awaited, from the lock's sizes and uv's cache (fetchwatch.py).
    files: dict[str, Sequence[LockedDist]] = field(default_factory=dict)
    # The https file URLs whose redirects `check_fetch` has asked already (each once per job).
    fetch_checked: set[str] = field(default_factory=set)

    def run(self, step: str, argv: Sequence[str], env: Mapping[str, str], detail: str,
            check: bool = True, quiet: bool = False, show: bool = True) -> RunResult:
        """Run one step; InstallFailed (with the log's tail) when it fails.

        `quiet`: an attempt that may fail harmlessly (check=False): a failure is only
        logged, not shown; success is reported as usual. `show=False`: one command of
        a step the caller reports itself (logged and timed, never shown).
        """
        base = os.environ
        watch = _FetchWatch(self.observer, step, self.files.get(step) or (), env) if show else None
        if not quiet and show:
            self.observer.step(step, detail)
            if watch is not None:
                watch.announce()
        start = time.monotonic()
        on_wait = self.observer.waiting(step, detail)
        if watch is not None:
            on_wait = watch.wrap(on_wait)
        try:
            with self.observer.running(step) if show else contextlib.nullcontext():
                # `env` is the whole environment the step wants: what it dropped from ours is unset.
                res = self.runner.run(argv, timeout=self.timeout, env=env, unset=[k for k in base if k not in env],
                                      stall=self.stall, on_wait=on_wait)
        except ToolStalled as exc:
            self.log.step(step, list(argv), None, exc.timeout, exc.stdout, exc.stderr)
            # The first line says it stalled (issue 34: `doctor --fix`'s hung uv read "failed (it did not finish)")
            raise self.failed(step, argv, None,
                              tail(exc.stdout + "\n" + exc.stderr)
                              + f"\n(no progress for {exc.stall:g} s: nothing was received or written: an index "
                                "or mirror that does not answer, or a package's build that waits on something; "
                                "stopped with every process it started)",
                              what=f"install step '{step}' made no progress for {exc.stall:g} s (nothing received "
                                   f"or written): {os.path.basename(argv[0])} was stopped with every process it "
                                   "started") from None
        except ToolTimeout as exc:
            self.log.step(step, list(argv), None, self.timeout, exc.stdout, exc.stderr)
            raise self.failed(step, argv, None,
                              tail(exc.stdout + "\n" + exc.stderr) + f"\n(timed out after {self.timeout:g} s)") from None
        except ToolMissing as exc:
            self.log.write(f"== {step}: {exc.message}")
            raise self.failed(step, argv, None, exc.message) from None
        seconds = time.monotonic() - start
        self.timings[step] = self.timings.get(step, 0.0) + seconds
        self.log.step(step, list(argv), res.returncode, seconds, res.stdout, res.stderr)
        full = space_error_in(res.stderr + "\n" + res.stdout) if res.returncode != 0 else None
        if full is not None:
            # Out of space is never a harmless failure (not a cache miss to retry: a retry
            # may find the half-installed package "already there" and succeed).
            raise disk_full(f"install step '{step}'", full[0], self.places, quota=full[1])
        if check and res.returncode != 0:
            raise self.failed(step, argv, res.returncode, tail(res.stderr + "\n" + res.stdout))
        if not show or (quiet and res.returncode != 0):
            return res
        if quiet:
            self.observer.step(step, detail)
            if watch is not None:
                watch.announce()
        if watch is not None:
            watch.finish()
        self.observer.done(step, seconds)
        return res

    def check_fetch(self, urls: Iterable[str]) -> None:
        """The fetch step's check, before uv or pip is asked to download `urls`: IndexUnavailable
        naming the first https file whose redirects lead to plain http. uv 0.13.9 and pip follow
        such a hop silently (issue 25, measured), so the file would travel in clear. The one
        place install (a plan or --lock) and add ask it (index.client.check_file_redirects);
        nothing is asked offline or with --allow-insecure-index (the sources' word), nor twice."""
        s = self.sources
        todo = [u for u in dict.fromkeys(urls) if u not in self.fetch_checked]
        if s.offline or s.allow_insecure or not todo:
            return
        from torchfit.index.client import IndexClient, check_file_redirects

        check_file_redirects(IndexClient(retries=1, timeout=min(30.0, self.timeout), progress=self.observer), todo)
        self.fetch_checked.update(todo)

    def failed(self, step: str, argv: Sequence[str], code: int | None, tail: str, *,
               what: str | None = None, hint: str | None = None) -> InstallFailed:
        """The InstallFailed of one of this install's steps, naming its log (argv redacted)."""
        return InstallFailed(step, _clean_argv(argv), code, tail, what=what, hint=hint, log_path=self.log.path)


class _FetchWatch:
    """A step's progress from uv's cache: announced once, polled every POLL_S while the step
    runs (on the runner's wait callback), said whenever another package is ready."""

    POLL_S = 2.0

    def __init__(self, observer: Progress, step: str, dists: Sequence[LockedDist], env: Mapping[str, str]) -> None:
        from torchfit.space import uv_cache_place

        self.observer, self.step, self.dists = observer, step, list(dists)
        self.cache = uv_cache_place(env).path
        self.ready: set[str] = set()
        self.announced = False
        self.next = 0.0

    def announce(self) -> None:
        if not self.dists or self.announced:
            return
        from torchfit.installer.fetchwatch import dist_size, format_dist
        from torchfit.progress import FileItem

        self.announced = True
        self.observer.files(self.step, [FileItem(format_dist(d), dist_size(d)) for d in self.dists])
        self.poll()

    def wrap(self, on_wait: Callable[[float, int], None] | None) -> Callable[[float, int], None] | None:
        if not self.dists:
            return on_wait

        def waited(elapsed: float, io: int) -> None:
            if on_wait is not None:
                on_wait(elapsed, io)
            if self.announced and elapsed >= self.next:
                self.next = elapsed + self.POLL_S
                self.poll()

        return waited

    def poll(self, ready: set[str] | None = None) -> None:
        from torchfit.installer.fetchwatch import cached_names, dist_size, format_dist, ready_share

        now = cached_names(self.cache, self.dists) if ready is None else ready
        if now == self.ready or not now:
            return
        new = [d for d in self.dists if d.name in now - self.ready]
        self.ready = now
        done, total = ready_share(self.dists, now)
        awaited = sorted((d for d in self.dists if d.name not in now), key=lambda d: -dist_size(d))
        self.observer.advance(self.step, [format_dist(d) for d in new], done, total,
                              format_dist(awaited[0]) if awaited else None)

    def finish(self) -> None:
        """The step succeeded: every package is in place."""
        if self.announced:
            self.poll({d.name for d in self.dists})


@dataclass
class StepRunner:
    """A runner whose every command is one step of `ctx` (logged, timed, shown; its
    failures InstallFailed): what a function that takes a runner gets from install
    (`lock.closure.probe_closure`). The step's own timeout holds; the exit status is
    the caller's to judge (check=False)."""

    ctx: StepContext
    step: str
    detail: str

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> RunResult:
        return self.ctx.run(self.step, argv, dict(os.environ) if env is None else env, self.detail, check=False)


def _clean_argv(argv: Sequence[str]) -> list[str]:
    return [redact(str(a)) for a in argv]


def _kind(filename: str) -> str:
    return "wheel" if filename.endswith(".whl") else "sdist"


class Backend:
    """An installer: create a venv, install a plan's packages, install a lock."""

    name = "?"
    version = "?"
    # The project's -c constraints (a plan's `constraints`): they bound what is resolved.
    constraints: tuple[str, ...] = ()
    # Project packages whose binary comes from the torch index (a plan's `routed`).
    routed: tuple[str, ...] = ()
    # Project packages from their own wheel page for this torch build (a plan's `pages`: PyG's).
    pages: tuple[tuple[str, str], ...] = ()
    # The plan's file URLs (a plan's `files`: uv's answer at planning): what pip downloads when it
    # installs the plan, checked before it is asked (uv installs the files of its own resolution).
    planned: tuple[str, ...] = ()

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def create_venv(self, python: str, path: str, seed: bool = False) -> None:
        """A venv at `path`; `seed`: with pip in it (pip's venvs always have it)."""
        raise NotImplementedError

    def build(self, python: str, env_dir: str, seed: bool, specs: Sequence[str], nccl_override: str | None,
              work: str) -> list[LockedDist]:
        """A venv at `env_dir` with the plan's packages (`specs`: the family pins); what it installed.

        `work` is a private directory outside `env_dir`, removed with the temporary env."""
        self.create_venv(python, env_dir, seed)
        return self.install_plan(env_dir, specs, nccl_override, work)

    def install_plan(self, env_dir: str, specs: Sequence[str], nccl_override: str | None,
                     work: str) -> list[LockedDist]:
        raise NotImplementedError

    def install_locked(self, env_dir: str, dists: Sequence[LockedDist], work: str) -> None:
        """Install hash-pinned dists in two steps: the torch family from the torch index
        only, then the rest from the user's sources (never one mixed install)."""
        s = self.ctx.sources
        self.ctx.check_fetch(a.url for d in dists for a in d.artifacts if a.url)
        family = [d for d in dists if d.is_family]
        rest = [d for d in dists if not d.is_family]
        for step, group, fam in (("install-family", family, True), ("install-deps", rest, False)):
            if not group:
                continue
            req = write_private(work, f"{step}.txt", requirements_text(group))
            where = redact(s.torch_index) if fam else "the user's sources"
            argv, env = self._locked_install(env_dir, req, fam)
            self.ctx.files[step] = group
            self._run_locked(step, argv, env, f"{len(group)} package{'s' * (len(group) != 1)} from {where}, hashes checked")

    def _run_locked(self, step: str, argv: list[str], env: dict[str, str], detail: str) -> None:
        self.ctx.run(step, argv, env, detail)

    def _locked_install(self, env_dir: str, req: str, family: bool) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that install requirements file `req` with --require-hashes."""
        raise NotImplementedError


def env_python(env_dir: str) -> str:
    return os.path.join(env_dir, "bin", "python")


# --- uv ------------------------------------------------------------------------------------


class UvBackend(Backend):
    name = "uv"

    def __init__(self, ctx: StepContext, uv: str, version: Version) -> None:
        super().__init__(ctx)
        self.uv = uv
        self.version = str(version)
        self.cache_answered: bool | None = None  # did uv's cache resolve the plan offline? (None: not asked)

    def _venv_args(self) -> list[str]:
        s = self.ctx.sources
        args = ["--no-config", "--no-python-downloads", "--index-strategy", "unsafe-best-match"]
        if s.offline:
            args.append("--offline")
        if s.no_index:
            args.append("--no-index")
        for host in s.trusted_hosts:
            args += ["--allow-insecure-host", host]
        return args  # the find-links locations: in uv_env(find_links=True), never on argv

    def create_venv(self, python: str, path: str, seed: bool = False, show: bool = True) -> None:
        s = self.ctx.sources
        # --seed (pip, and setuptools/wheel below Python 3.12, in the env) only when asked
        # for: it costs most of a warm install (0.7-0.9 s of ~1.5 s, measured) and an
        # env built by uv is kept up with `uv pip install --python PREFIX/bin/python`.
        # Only seeding reads the sources (uv resolves the seed packages from them).
        sources = self._venv_args() if seed else ["--no-config", "--no-python-downloads"]
        argv = [self.uv, "venv", *(["--seed"] if seed else []), "--python", python, *sources, path]
        env = s.uv_env(os.environ, family=False, find_links=True) if seed else without_index_variables()
        self.ctx.run("venv", argv, env,
                     f"uv venv{' --seed' if seed else ''} ({python})", show=show)

    def build(self, python: str, env_dir: str, seed: bool, specs: Sequence[str], nccl_override: str | None,
              work: str) -> list[LockedDist]:
        """Resolve with the base interpreter while `uv venv` runs beside it; link while the indexes answer.

        The env's interpreter is the base interpreter in a venv: the same markers and
        wheel tags, so resolving for `python` gives the env's answer, and the venv
        (tens of ms) costs nothing on the way.

        The resolution asks the indexes (revalidating each level of the dependency
        tree in turn: four HTTP rounds for the CPU set behind this machine's proxy,
        measured with `uv -v`), while the CPU and the disk wait. Meanwhile the answer
        uv's cache gives (`--offline`, ms; possibly stale) is installed from uv's cache
        (`install-early`: linking torch's ~12,000 files is most of an install). Only the
        online resolution decides: the install of its answer then finds in place what
        the cached answer got right, reinstalls every package whose file differs
        (`--reinstall-package`) and removes what it does not name; the env ends up
        exactly the resolved files, as if nothing had been installed early.

        `seed`: uv's seed packages (`SEED`: what `uv venv --seed` puts in) are resolved
        with the plan, from the user's sources, and installed with it, so they are in
        the lock. `uv venv --seed` would resolve them on its own first, online (0.3-0.5 s,
        measured), before anything could be linked into the env.
        """
        # The venv's lines are said from this thread, so that the step lines come in one order
        # whatever the threads do: venv starts, resolve starts, venv done (when its result is
        # first needed), resolve done.
        obs = self.ctx.observer
        obs.step("venv", f"uv venv ({python})")
        venv = Background(self.create_venv, python, env_dir, False, False)
        reported: list[bool] = []

        def venv_ready() -> None:
            venv.result()
            if not reported:
                reported.append(True)
                obs.done("venv", self.ctx.timings.get("venv", 0.0))

        early: list[tuple[list[LockedDist], Background[RunResult]]] = []

        def cached_answer(hint: list[LockedDist]) -> None:
            venv_ready()
            early.append((hint, Background(self._install_early, env_dir, hint, work)))

        try:
            locked = self.resolve(python, [*specs, *SEED] if seed else specs, nccl_override, work,
                                  on_hint=cached_answer)
            venv_ready()
            reinstall: list[str] = []
            for hint, job in early:
                res = job.result()
                if res.returncode < 0:  # killed by a signal: a failed step, not a cache miss
                    raise self.ctx.failed("install-early", [self.uv, "pip", "install", "..."], res.returncode,
                                          tail(res.stderr + "\n" + res.stdout))
                reinstall = self._reconcile(env_dir, hint, locked, res.returncode == 0)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                kill_stray_children()  # the venv's or the early install's uv, if still running
            jobs: list[Background[Any]] = [venv, *(j for _, j in early)]
            for pending in jobs:
                with contextlib.suppress(BaseException):
                    pending.result()
            raise
        self.install_resolved(env_dir, locked, work, reinstall)
        return locked

    def _install_early(self, env_dir: str, hint: list[LockedDist], work: str) -> RunResult:
        """The cached answer's files, from uv's cache only (`--offline`); its result, never raised."""
        s = self.ctx.sources
        dists = [replace(d, index=s.torch_index) if d.is_family else d for d in hint]
        req = write_private(work, "pylock.early.toml", install_lock_text(dists, log_path=self.ctx.log.path))
        argv = [self.uv, "pip", "install", "--python", env_python(env_dir), "-r", req, "--no-config", "--offline"]
        return self.ctx.run("install-early", argv, self._install_env(),
                            "the cached answer's files from uv's cache, while the indexes answer",
                            check=False, show=False)

    def _reconcile(self, env_dir: str, hint: list[LockedDist], locked: Sequence[LockedDist],
                   installed: bool) -> list[str]:
        """What the install of `locked` must reinstall, after the early install of `hint`;
        removes what `hint` installed and `locked` does not name."""
        want = {d.name: _files([d]) for d in locked}
        if not installed:  # a cache miss, or a failure part-way: trust nothing of it
            changed = [d.name for d in hint]
        else:
            changed = [d.name for d in hint if d.name in want and _files([d]) != want[d.name]]
        extra = sorted(d.name for d in hint if d.name not in want)
        if extra:
            self.ctx.run("install", [self.uv, "pip", "uninstall", "--python", env_python(env_dir), "--no-config",
                                     *extra], self._install_env(), f"remove {', '.join(extra)}", show=False)
        if changed or extra:
            self.ctx.log.write(f"== install: the cached answer differed: reinstalling {changed}, removed {extra}")
        return changed

    def install_plan(self, env_dir: str, specs: Sequence[str], nccl_override: str | None,
                     work: str) -> list[LockedDist]:
        locked = self.resolve(env_python(env_dir), specs, nccl_override, work)
        self.install_resolved(env_dir, locked, work)
        return locked

    # -- the resolution ------------------------------------------------------------------------
    def resolve(self, python: str, specs: Sequence[str], nccl_override: str | None, work: str,
                on_hint: Callable[[list[LockedDist]], None] | None = None,
                target: tuple[str, str] | None = None) -> list[LockedDist]:
        """uv's answer for the plan: every distribution with its exact file and sha256.

        One online `uv pip compile` decides. When a source is remote and `on_hint` is
        given, uv's cache is asked first (`--offline`: what the answer was when uv last
        saw these pages, in ms) and `on_hint` gets that answer to act on while the
        indexes are asked; nothing of it is taken into the result. The cached answer
        is asked without the find-links directories: the online resolution reads each
        directory once (a large one costs a listing, and uv hashes a file it picks
        there); a package only a directory holds leaves no cached answer, so nothing
        is installed early. `target`: (Python version, uv platform) when resolving for
        a host rather than for the env `python` runs in.
        """
        s = self.ctx.sources
        from torchfit.index.torchsource import is_flat, local_path

        torch_index = s.torch_index
        if "://" not in torch_index:  # a directory given as a path: uv wants a URL
            torch_index = "file://" + quote(local_path(torch_index) or torch_index)
        args, env = s.uv_compile(os.environ, work)  # no --no-index: it would drop the torch index too
        detail = f"the torch family from {redact(s.torch_index)} only, the rest from your sources"
        log_path = self.ctx.log.path

        def compile_to(out: str, step: Callable[[list[str], dict[str, str]], RunResult],
                       cached: bool = False) -> Compiled:
            # the project, the -c constraints (`uv pip` reads no [tool.uv] constraints) and the NCCL
            # override: 0600 (may hold the index's credentials), removed with the work directory
            return compile_project(
                self.ctx.runner, self.uv, work=work, name="", env=env, options=args, specs=specs,
                torch_index=torch_index, routed=self.routed, flat=is_flat(s.torch_index), pages=dict(self.pages),
                constraints=self.constraints, overrides=[nccl_override] if nccl_override else (), python=python,
                target=target, out=os.path.join(work, out), cached=cached, run=step)

        obs = self.ctx.observer
        obs.step("resolve", detail)
        start = time.monotonic()
        with obs.running("resolve"):
            if on_hint is not None and _any_remote(s):
                hint = None
                try:
                    first = compile_to("pylock.cached.toml", lambda argv, uv_env: self.ctx.run(
                        "resolve", argv, uv_env, detail + " (uv's cache)", check=False, show=False), cached=True)
                except BadInput:  # uv answered, in a lock that cannot be read: no hint
                    self.cache_answered = True
                else:
                    self.cache_answered = first.ok
                    if first.ok:
                        with contextlib.suppress(InstallFailed):  # a file without sha256: no hint
                            hint = with_hashes(first.locked, log_path=log_path)
                if hint:
                    on_hint(hint)
            out = os.path.join(work, "pylock.resolved.toml")
            locked = uv_answer(lambda: compile_to(out, lambda argv, uv_env: self.ctx.run(
                "resolve", argv, uv_env, detail, show=False)), out, log_path=log_path)
        obs.done("resolve", time.monotonic() - start)
        names = [canonicalize_name(Requirement(x).name) for x in specs]
        missing = {n for n, x in zip(names, specs) if Requirement(x).marker is None} - {d.name for d in locked}
        if missing:
            raise self.ctx.failed("resolve", [], None, f"uv's resolution lacks {sorted(missing)}")
        return locked

    # -- the install ---------------------------------------------------------------------------
    def install_resolved(self, env_dir: str, locked: Sequence[LockedDist], work: str,
                         reinstall: Sequence[str] = ()) -> None:
        """ONE `uv pip install -r pylock.install.toml`: exactly the resolved files.

        Each package names its file by URL (or path) and sha256, so uv asks no index
        which file to take: nothing but the file the resolution chose can be installed,
        whatever another index offers (the family's files come from the torch index
        because the resolution could find them nowhere else). The family's entries
        carry `index` (the torch index): uv then keeps their wheels in its index cache,
        the one a plain `uv pip install` from that index fills. First from uv's cache
        (`--offline`); where it lacks a file (cold), from the URLs. `reinstall`: names
        installed earlier whose files the resolution replaces.
        """
        s = self.ctx.sources
        self.ctx.check_fetch(a.url for d in locked for a in d.artifacts if a.url)
        dists = [replace(d, index=s.torch_index) if d.is_family else d for d in locked]
        req = write_private(work, "pylock.install.toml", install_lock_text(dists, log_path=self.ctx.log.path))
        argv = [self.uv, "pip", "install", "--python", env_python(env_dir), "-r", req, "--no-config"]
        for name in reinstall:
            argv += ["--reinstall-package", name]
        for host in s.trusted_hosts:
            argv += ["--allow-insecure-host", host]
        detail = f"{len(dists)} package{'s' * (len(dists) != 1)}, the resolved files by URL and sha256"
        self.ctx.files["install"] = dists
        if s.offline or self.cache_answered is not False:
            self._run_locked("install", [*argv, *(["--offline"] if s.offline else [])], self._install_env(), detail)
        else:
            # uv's cache could not even resolve this set (cold): an --offline attempt
            # would miss too, after unpacking what it could (measured: the CUDA set
            # cold, the files unpacked again by the online run).
            self.ctx.run("install", argv, self._install_env(), detail)

    def _install_env(self) -> dict[str, str]:
        s = self.ctx.sources
        env = s.uv_env(os.environ, family=False)
        # The indexes take no part in choosing files here; uv reads credentials for the
        # files' hosts from them (URLs in the lock carry none).
        env["UV_INDEX"] = " ".join([s.torch_index, *s.extra_index_urls])
        return env

    def _locked_install(self, env_dir: str, req: str, family: bool) -> tuple[list[str], dict[str, str]]:
        s = self.ctx.sources
        argv = [self.uv, "pip", "install", "--python", env_python(env_dir), "--no-deps", "--require-hashes",
                "-r", req, *s.uv_args(family, resolving=False)]
        return argv, s.uv_env(os.environ, family, find_links=not family)

    def _run_locked(self, step: str, argv: list[str], env: dict[str, str], detail: str) -> None:
        """uv's cache first, the indexes only for what it lacks.

        Every file is named by its sha256, so a file from uv's cache is the locked
        file or the step fails. The resolution a moment ago (or an earlier install)
        has just asked the indexes about every one of these packages: asking again
        costs a second round of HTTP revalidations (~0.3 s warm on PyPI, measured),
        the one thing a bare `uv pip install` does not pay twice. Cold, or after the
        cache was pruned, `--offline` fails fast and the step asks the indexes.
        """
        if "--offline" in argv:
            super()._run_locked(step, argv, env, detail)
            return
        res = self.ctx.run(step, [*argv, "--offline"], env, detail + " (uv's cache)", check=False, quiet=True)
        if res.returncode == 0:
            return
        if res.returncode < 0:  # killed by a signal: a failed step, not a cache miss
            raise self.ctx.failed(step, argv, res.returncode, tail(res.stderr + "\n" + res.stdout))
        self.ctx.log.write(f"== {step}: not every file is in uv's cache; asking the indexes")
        super()._run_locked(step, argv, env, detail)


def _files(dists: Sequence[LockedDist]) -> list[tuple[str, str | None, tuple[str | None, ...]]]:
    """What identifies the files of `dists`: name, version, sha256s."""
    return sorted((d.name, d.version, tuple(a.sha256 for a in d.artifacts)) for d in dists)


def _any_remote(s: Sources) -> bool:
    """Does the resolution ask a remote index (the only case where its HTTP rounds cost)?"""
    remote = [s.torch_index, *([] if s.no_index else [s.index_url or PYPI_SIMPLE, *s.extra_index_urls]),
              *s.find_links]
    return not s.offline and not all(is_local(u) for u in remote)


def install_lock_text(dists: Sequence[LockedDist], *, log_path: str | None) -> str:
    """The PEP 751 file `uv pip install -r` gets: each package's exact files and hashes, URLs
    verbatim (written with `write_private`: a signed file URL works only whole). `log_path`:
    the install log, named by the InstallFailed of a file without sha256."""
    for d in dists:
        if not d.artifacts or not all(a.sha256 for a in d.artifacts):
            raise InstallFailed("install", [], None, f"{d.name}: a file without sha256 cannot be installed",
                                log_path=log_path)
    return dumps_toml({"lock-version": LOCK_VERSION, "created-by": "torchfit",
                       "packages": [package_table(d, verbatim=True) for d in dists]})


def uv_answer(compile: Callable[[], Compiled], out: str, *, log_path: str | None) -> list[LockedDist]:
    """The distributions of `compile()` (a `lock.uv.compile_project` writing uv's lock `out`),
    every file with a sha256, or InstallFailed (step "resolve", naming the install log `log_path`):
    a lock that cannot be read, a file without sha256."""
    try:
        compiled = compile()
    except BadInput as exc:
        raise InstallFailed("resolve", [], None, f"cannot read uv's lock {out}: {exc.message}",
                            log_path=log_path) from None
    return with_hashes(compiled.locked, log_path=log_path)


def with_hashes(locked: Sequence[LockedDist], *, log_path: str | None) -> list[LockedDist]:
    """`locked`, every file with a sha256, or InstallFailed naming the install log `log_path`."""
    for d in locked:
        for a in d.artifacts:
            if not a.sha256:
                raise InstallFailed("resolve", [], None, f"no sha256 for {redact(a.url or a.path or d.name)}: "
                                    "the index gives none (try --installer pip)", log_path=log_path)
    return list(locked)


# --- pip -----------------------------------------------------------------------------------


class PipBackend(Backend):
    name = "pip"

    def create_venv(self, python: str, path: str, seed: bool = False) -> None:
        self.ctx.run("venv", [python, "-m", "venv", path], without_index_variables(), f"python -m venv ({python})")
        res = self.ctx.run("venv", [env_python(path), "-m", "pip", "--version"], without_index_variables(),
                           "pip --version")
        m = re.match(r"pip (\S+)", res.stdout)
        try:
            found = Version(m.group(1)) if m else None
        except InvalidVersion:
            found = None
        self.version = str(found) if found else "?"
        if found is None or found < PIP_MIN:
            raise self.ctx.failed("venv", [python, "-m", "venv"], None,
                                f"the venv's pip is {self.version}; torchfit needs pip >= {PIP_MIN} (--report)")

    def _pip(self, env_dir: str, *args: str) -> list[str]:
        return [env_python(env_dir), "-m", "pip", "install", "--progress-bar", "off", *args]

    def install_plan(self, env_dir: str, specs: Sequence[str], nccl_override: str | None,
                     work: str) -> list[LockedDist]:
        s = self.ctx.sources
        self.ctx.check_fetch(self.planned)  # pip picks the same files by the exact pins: uv's answer's
        r1 = os.path.join(work, "report-family.json")
        family_only = [x for x in specs if canonicalize_name(Requirement(x).name) in (*FAMILY_PACKAGES, *self.routed)]
        self.ctx.run("install-family",
                     self._pip(env_dir, "--no-deps", "--only-binary", ":all:", "--report", r1, *family_only),
                     s.pip_env(os.environ, family=True), f"the torch family from {redact(s.torch_index)} only")
        family = parse_pip_report(r1, log_path=self.ctx.log.path)
        names = {canonicalize_name(Requirement(x).name) for x in family_only}
        if {d.name for d in family} != names:
            raise self.ctx.failed("install-family", [], None, f"pip installed {[d.name for d in family]}, not {sorted(names)}")
        # The dependency step may see the family only as the exact builds just
        # installed: pip keeps them and cannot fetch another torch from PyPI.
        pins = write_private(work, "family-pins.txt", "".join(f"{d.name}=={d.version}\n" for d in family)
                      + "".join(f"{c}\n" for c in self.constraints))
        r2 = os.path.join(work, "report-deps.json")
        pages = [a for _, page in self.pages for a in ("--find-links", page)]  # PyG's: its packages only
        self.ctx.run("install-deps", self._pip(env_dir, "--report", r2, "-c", pins, *pages, *specs),
                     s.pip_env(os.environ, family=False), "the dependencies from the user's sources")
        deps = parse_pip_report(r2, log_path=self.ctx.log.path)
        swapped = [d for d in deps if d.is_family]
        if swapped:
            raise self.ctx.failed("install-deps", [], None,
                                f"pip replaced {swapped[0].name} with {swapped[0].version} from another index")
        locked = {d.name: d for d in family + deps}
        if nccl_override:
            r3 = os.path.join(work, "report-nccl.json")
            # --no-deps: torch pins its NCCL wheel exactly; pip warns about the
            # override ("incompatible") and installs it, which is the point.
            self.ctx.run("install-nccl", self._pip(env_dir, "--no-deps", "--report", r3, nccl_override),
                         s.pip_env(os.environ, family=False), nccl_override)
            for d in parse_pip_report(r3, log_path=self.ctx.log.path):
                locked[d.name] = d
        return list(locked.values())

    def _locked_install(self, env_dir: str, req: str, family: bool) -> tuple[list[str], dict[str, str]]:
        argv = self._pip(env_dir, "--no-deps", "--require-hashes", "-r", req)
        return argv, self.ctx.sources.pip_env(os.environ, family)


def parse_pip_report(path: str, *, log_path: str | None) -> list[LockedDist]:
    """The distributions of a `pip install --report` file, each with its file's sha256
    (InstallFailed naming the install log `log_path` otherwise)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = decode_json(fh.read())
    except (OSError, ValueError) as exc:
        raise InstallFailed("install", [], None, f"cannot read pip's report {path}: {exc}",
                            log_path=log_path) from None
    out = []
    for item in data.get("install", []):
        meta = item.get("metadata") or {}
        info = item.get("download_info") or {}
        url = info.get("url") or ""
        archive = info.get("archive_info")
        if archive is None:
            raise InstallFailed("install", [], None,
                                f"{meta.get('name')}: installed from {redact(url)}, not a file; it cannot be locked",
                                log_path=log_path)
        sha = (archive.get("hashes") or {}).get("sha256")
        if not sha and str(archive.get("hash", "")).startswith("sha256="):
            sha = archive["hash"].split("=", 1)[1]
        if not sha:
            local = local_file(url, None, "")
            if local is None:
                raise InstallFailed("install", [], None, f"no sha256 for {redact(url)}", log_path=log_path)
            sha = sha256_file(local)
        name = file_name(url)
        out.append(LockedDist(canonicalize_name(meta["name"]), str(meta["version"]),
                              (Artifact(_kind(name), sha, url, None, name),)))
    return out


def pick_backend(choice: str, ctx: StepContext) -> Backend:
    """--installer auto|uv|pip: uv when it runs here (and is new enough), pip otherwise."""
    if choice == "pip":
        return _chosen(ctx, PipBackend(ctx), "--installer pip")
    uv = find_uv(ctx.runner)
    version = uv_version(ctx.runner, uv) if uv else None
    if uv and version and version >= UV_MIN:
        return _chosen(ctx, UvBackend(ctx, uv, version), uv)
    if not uv:
        why = "found neither beside this torchfit nor on PATH (pip install uv)"
    elif version is None:
        why = f"at {uv} does not run here (`uv --version` failed)"
    else:
        why = f"{version} is older than {UV_MIN}"
    if choice == "uv":
        raise BadInput(f"--installer uv: uv {why}")
    return _chosen(ctx, PipBackend(ctx), f"uv {why}")


def _chosen(ctx: StepContext, backend: Backend, why: str) -> Backend:
    name = backend.label if backend.version != "?" else backend.name
    ctx.observer.info(f"installer: {name} ({why})")
    ctx.log.write(f"installer: {name} ({why})")
    return backend


def family_specs(plan: Plan) -> list[str]:
    """`torch==2.14.1` (public versions: the index chooses the variant) for each package of the plan."""
    out = []
    for name in plan.packages:
        version = getattr(plan, name, None) if name != "torch" else plan.torch
        if name not in FAMILY_PACKAGES or (not version and name == "torch"):
            raise BadInput(f"the plan names {name} without a version")
        # A companion a project package requires but the matrix knows no version of:
        # uv takes the one the project's pins allow, from the torch index only.
        out.append(f"{name}=={version}" if version else name)
    return out


def install_specs(plan: Plan) -> list[str]:
    """What an install resolves: the family pins, then the project's own requirements."""
    return [*family_specs(plan), *getattr(plan, "project", ())]
