"""`torchfit install`: from a plan (or a lock) to a checked, locked env at PREFIX.

The steps, in order; any failure, Ctrl-C or SIGTERM removes the temporary env and
leaves PREFIX as it was:

  interpreter (present, uv python install, or pyenv install -s)  ->  venv beside PREFIX under a temp name
  ->  the torch family from the torch index, the rest from the user's sources
  ->  the build check  ->  bin/torchfit-env + activate hook  ->  pylock.toml
  ->  relocate the env's scripts to PREFIX  ->  atomic swap into PREFIX

The caller holds PREFIX.lock (installer.prefix.PrefixLock) around all of it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from torchfit import __version__
from torchfit.access import find_unreplaceable
from torchfit.background import Background
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import Matrix
from torchfit.compat.plan import Plan, plan_from_json, plan_to_json
from torchfit.compat.request import Request
from torchfit.compat.rules import host_checks
from torchfit.errors import BadInput, DiskFull, InstallFailed, LockMismatch, NoCompatibleSet
from torchfit.index.sources import Sources
from torchfit.inputs import shown
from torchfit.installer.backends import (
    Backend,
    StepContext,
    env_python,
    install_specs,
    pick_backend,
)
from torchfit.installer.buildcheck import (
    BuildReport,
    check_closure,
    compare_build,
    parse_probe,
    probe_argv,
)
from torchfit.installer.nccl import (
    check_nccl_lib,
    hook_activate,
    nccl_package,
    write_env_script,
)
from torchfit.installer.prefix import (
    InstallLog,
    TempEnv,
    relocate,
    state_dir,
    swap_into_place,
    wait_unused,
)
from torchfit.jsontypes import JsonObject
from torchfit.lock.model import Lock, LockedDist, NcclPin, sorted_dists
from torchfit.lock.pylock import LOCK_NAME, write_lock
from torchfit.lock.tool import ToolTable
from torchfit.owned import mounts_under, remove_tree
from torchfit.progress import Progress
from torchfit.redact import redact, strip_credentials
from torchfit.runner import Runner, kill_stray_children, stall_timeout, without_index_variables
from torchfit.space import (
    Place,
    from_oserror,
    is_no_space,
    prefix_place,
    state_place,
    tmpdir_place,
    tree_bytes,
    uv_cache_place,
)

WORK_DIR = ".torchfit-work"


@dataclass
class InstallResult:
    """What an install did, for the summary and `--json`."""

    prefix: str
    plan: Plan
    installer: str
    packages: tuple[LockedDist, ...]
    pin: NcclPin
    report: BuildReport
    lock_path: str
    log_path: str | None
    replaced: bool
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {
            "ok": True,
            "prefix": self.prefix,
            "installer": self.installer,
            "lock": self.lock_path,
            "log": self.log_path,
            "replaced": self.replaced,
            "plan": plan_to_json(self.plan),
            "packages": [{"name": d.name, "version": d.version} for d in self.packages],
            "nccl": self.pin.to_json(),
            "runtime": dict(self.report.runtime),
            "warnings": self.warnings,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


# --- the interpreter ----------------------------------------------------------------------


def find_interpreter(plan: Plan, runner: Runner, observer: Progress, log: InstallLog,
                     timings: dict[str, float], timeout: float, offline: bool = False) -> str:
    """The plan's Python: its path when present; else uv's managed Python (prebuilt, seconds:
    installer/python.py; `offline`: uv told so), then pyenv install -s where the plan says pyenv or
    uv cannot provide it."""
    path = plan.python_path
    if plan.python_source not in ("pyenv", "uv") and path and os.access(path, os.X_OK):
        return path
    from torchfit.host.pythons import interpreter_in, pyenv_root
    from torchfit.installer.pyenv import ensure_python
    from torchfit.installer.python import no_python, provide_python

    # A free-threaded plan needs pyenv's "3.13.2t" build, python3.13t on PATH.
    ft = "t" if plan.free_threaded else ""
    version = plan.python_version + ft
    why_not_uv = ""
    if plan.python_source != "pyenv":
        minor = ".".join(plan.python_version.split(".")[:2])
        found = shutil.which(f"python{minor}{ft}")
        root = pyenv_root(runner.environ())
        pyenv_copy = interpreter_in(os.path.join(root, "versions", version), version) if root else None
        if pyenv_copy or found:
            return pyenv_copy or found  # type: ignore[return-value]
        observer.step("python", f"uv python install {version} (a prebuilt uv-managed Python)")
        start = time.monotonic()
        with observer.running("python"):
            got = provide_python(runner, plan.python_version, plan.free_threaded, timeout=timeout, offline=offline)
        log.write(f"== python: {' '.join(got.argv) or 'uv python find'} -> {got.path or got.why_not}\n{got.output}")
        if got.path:
            timings["python"] = time.monotonic() - start
            observer.done("python", timings["python"], got.path)
            return got.path
        why_not_uv = got.why_not
    from torchfit.host.pythons import find_pyenv

    if why_not_uv and find_pyenv(runner) is None:
        raise no_python(version, why_not_uv)
    if why_not_uv:
        observer.warn(f"uv cannot provide Python {version} ({why_not_uv}): pyenv builds it from source")
    observer.step("python", f"pyenv install -s {version} (a CPython build takes minutes)")
    start = time.monotonic()
    try:
        with observer.running("python"):
            interp, output = ensure_python(runner, version, timeout=timeout, log_path=log.path)
    except InstallFailed as exc:
        log.write(f"== python: pyenv install -s {version}\n{exc.tail}")
        raise
    timings["python"] = time.monotonic() - start
    log.write(f"== python: pyenv install -s {version} -> {interp}\n{output}")
    observer.done("python", timings["python"], interp)
    return interp


# --- lock mode: does this host agree with the lock? ------------------------------------------


def check_lock_host(lock: Lock, hosts: Sequence[HostFacts], matrix: Matrix, force: bool,
                    observer: Progress) -> Plan:
    """Re-run the resolver for the locked build on this host; LockMismatch if it does not fit.

    The request is the lock itself: torch==X, its variant, its companions, its
    Python minor. A conflict (driver too old, glibc, no GPU the build covers, no
    such Python and no pyenv) refuses the rebuild unless `force`.
    """
    locked = plan_from_json(dict(lock.plan()), matrix)
    reqs = [Requirement(f"torch=={locked.torch}")]
    for name in ("torchvision", "torchaudio"):
        if name in locked.packages and getattr(locked, name):
            reqs.append(Requirement(f"{name}=={getattr(locked, name)}"))
    strict = bool(lock.request().get("strict-driver", False))
    request = Request(requirements=tuple(reqs), python=SpecifierSet(f"=={locked.python}.*"),
                      variant=locked.variant, strict_driver=strict)
    build = locked.build
    if build is None:
        conflicts = [f"torch {locked.torch} {locked.variant} is not in this torchfit's matrix"]
    else:
        # The resolver's host rules, applied to the locked build on each host.
        conflicts = []
        for host in hosts:
            checks = [c for _, c in host_checks(build, host, matrix, strict_driver=strict,
                                                 want_cpu=locked.variant == "cpu")]
            prefix = f"{host.name}: " if len(hosts) > 1 else ""
            conflicts += [f"{prefix}{build.label}: {c.text}" for c in checks if not c.ok]
            conflicts += [f"{prefix}{c}" for c in _environment_conflicts(lock, host)]
        if not conflicts:
            from torchfit.compat.resolver import resolve

            try:
                plan = resolve(hosts, request, matrix)  # the interpreter, and anything else
                return replace(plan, packages=locked.packages)
            except NoCompatibleSet as exc:
                conflicts = exc.conflicts[1:] or exc.conflicts
    where = lock.path or "the lock"
    if not force:
        raise LockMismatch(
            f"this host contradicts {where}: {conflicts[0]}", conflicts,
            hint="rebuild on a host that fits, re-lock for this host, or pass --force to install it anyway",
        )
    observer.warn(f"--force: installing {where} although this host contradicts it: {conflicts[0]}")
    from torchfit.compat.provider import find_python_choice

    # Labelled by what will really provide it: present, uv's managed Python, else pyenv's build.
    py = find_python_choice(hosts[0], locked.python, locked.free_threaded)
    return replace(locked, python_path=py.path if py else None, python_source=py.source if py else "pyenv")


# --- the install -----------------------------------------------------------------------------


@dataclass
class InstallJob:
    """Everything one install needs; `run()` does it."""

    prefix: str
    plan: Plan
    hosts: Sequence[HostFacts]
    request: Request | None
    sources: Sources
    pin: NcclPin
    installer: str  # auto | uv | pip
    observer: Progress
    timeout: float
    lock: Lock | None = None  # rebuild this lock instead of resolving packages
    nccl_override: str | None = None  # "nvidia-nccl-cu13==2.28.3"
    seed: bool = False  # pip (and uv's other seed packages) in the env: --seed
    wait: float = 0.0  # --wait: how long processes using the old env may take to end
    timings: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The swap: True from the instant PREFIX holds the new env; `late_signals` arrived after it.
    swapped: bool = False
    late_signals: list[str] = field(default_factory=list)
    # The install log's path once `run()` opened it: what a failed step's InstallFailed names.
    log_path: str | None = field(default=None, init=False)

    def run(self) -> InstallResult:
        runner = Runner()
        label = os.path.basename(self.prefix.rstrip(os.sep)) or "env"
        log = InstallLog(label, on_error=self._log_trouble)
        log.write(f"torchfit {__version__} install into {self.prefix}")
        for line in self.sources.describe():
            log.write(line)
            if line.startswith("--offline"):
                self.observer.warn(line)
        ctx = StepContext(runner, log, self.observer, self.sources, self.timeout, self.timings,
                          stall=stall_timeout(), places=self.places())
        self.log_path = log.path
        try:
            try:
                return self._run(runner, ctx, log)
            except OSError as exc:
                if not is_no_space(exc):
                    raise
                raise from_oserror(exc, "install", ctx.places) from exc
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) and not self.swapped:
                for pid in kill_stray_children():
                    log.write(f"== killed child process group {pid}")
            if log.path:
                log.write(f"== failed: {type(exc).__name__}: {exc}")
            raise

    def places(self) -> list[Place]:
        """Where an install writes: the env's filesystem, TMPDIR, uv's cache, the logs."""
        return [prefix_place(self.prefix), tmpdir_place(), uv_cache_place(os.environ), state_place(state_dir())]

    def _run(self, runner: Runner, ctx: StepContext, log: InstallLog) -> InstallResult:
        python = find_interpreter(self.plan, runner, self.observer, log, self.timings, self.timeout,
                                  offline=self.sources.offline)
        backend = pick_backend(self.installer, ctx)
        replaced = os.path.lexists(self.prefix)
        with TempEnv(self.prefix) as tmp, _measured_on_full_disk(tmp.root, ctx.places):
            # Beside the env, not in it: uv's resolution runs while `uv venv` creates the env.
            work = os.path.join(tmp.root, WORK_DIR)
            os.makedirs(work, mode=0o700, exist_ok=True)
            if self.lock is not None:
                backend.create_venv(python, tmp.path, self.seed)
                dists = list(self.lock.packages)
                backend.install_locked(tmp.path, dists, work)
                self._check_closure(ctx, tmp.path)
            else:
                # The plan is uv's whole set (planning.make_plan): install exactly it, every
                # version pinned, so the install cannot drift from what resolve showed.
                backend.constraints = (*self.plan.constraints, *resolved_pins(self.plan, self.nccl_override))
                backend.routed = tuple(self.plan.routed)
                backend.pages = tuple(self.plan.pages.items())
                backend.planned = self.plan.files
                dists = backend.build(python, tmp.path, self.seed, install_specs(self.plan), self.nccl_override, work)
                # uv and pip resolved from the index's metadata (PEP 658 .metadata, served apart from
                # the wheel); the wheels installed carry their own. The wheel is the truth: a set
                # whole by the index's word but not by the wheels' is refused (issue 25).
                self._check_closure(ctx, tmp.path, dists)
            # The check runs the env's Python; meanwhile write what does not depend on
            # its answer (the pin's script, unless LD_PRELOAD's version comes from it).
            # Its lines are said from this thread, so the steps read in one order: check starts,
            # the pin is written, check is done.
            self.observer.step("check", self._check_detail())
            checking = Background(self._check, ctx, tmp.path, False)
            pin = self.pin
            try:
                if pin.mechanism != "ld-preload":
                    self._write_pin(tmp.path, pin)
            finally:
                report = checking.result()
            self.observer.done("check", ctx.timings.get("check", 0.0))
            if pin.mechanism == "ld-preload":
                pin = replace(pin, version=report.runtime.get("nccl"))
                self._write_pin(tmp.path, pin)
            lock_path = os.path.join(tmp.path, LOCK_NAME)
            with self._python_step("lock", f"{LOCK_NAME}: {len(dists)} package{'s' * (len(dists) != 1)} with sha256"):
                write_lock(lock_path, self._make_lock(dists, pin, report, backend))
                remove_tree(work)
                relocate(tmp.path, self.prefix)
            if replaced:  # a process that started using the old env during the build
                wait_unused(self.prefix, self.wait, self.observer.info, after_build=True)
            with self._python_step("swap", f"{'replace' if replaced else 'create'} {shown(self.prefix)}"):
                def exchanged() -> None:
                    tmp.committed = self.swapped = True

                outcome = swap_into_place(tmp.path, self.prefix, on_exchanged=exchanged)
                self.late_signals = outcome.late
            if outcome.kept:
                self._log_trouble(outcome.kept)
        log_path = log.move_into(self.prefix)
        return InstallResult(
            prefix=self.prefix, plan=self.plan, installer=backend.label, packages=sorted_dists(dists), pin=pin,
            report=report, lock_path=os.path.join(self.prefix, LOCK_NAME), log_path=log_path, replaced=replaced,
            timings=self.timings, warnings=self.warnings,
        )

    def _log_trouble(self, text: str) -> None:
        self.warnings.append(text)
        self.observer.warn(text)

    def _write_pin(self, env_dir: str, pin: NcclPin) -> None:
        with self._python_step("pin", f"bin/torchfit-env: NCCL {pin.describe()}"):
            write_env_script(env_dir, self.prefix, pin)
            hook_activate(env_dir, self.prefix, pin)

    @contextmanager
    def _python_step(self, name: str, detail: str) -> Iterator[None]:
        """A step torchfit does itself: timed, reported, an OSError (disk full) is InstallFailed."""
        self.observer.step(name, detail)
        start = time.monotonic()
        try:
            yield
        except OSError as exc:
            if is_no_space(exc):
                raise from_oserror(exc, f"install step '{name}'", self.places()) from exc
            raise InstallFailed(name, [], None, f"{exc.filename or ''}: {exc.strerror or exc}",
                                log_path=self.log_path) from None
        seconds = time.monotonic() - start
        self.timings[name] = self.timings.get(name, 0.0) + seconds
        self.observer.done(name, seconds)

    def _check_closure(self, ctx: StepContext, env_dir: str, planned: Sequence[LockedDist] | None = None) -> None:
        """A lock is whole or refused (buildcheck.check_closure, which `add` runs too)."""
        where = self.lock.path if self.lock is not None and self.lock.path else "the lock"
        check_closure(ctx, env_dir, nccl_override=self.pin.mechanism == "wheel-override", planned=planned,
                      lock_name=where)

    def _check_detail(self) -> str:
        detail = "the installed build against the plan, and import torch"
        return detail + (" with the NCCL pin" if self.pin.mechanism in ("ld-preload", "wheel-override") else "")

    def _check(self, ctx: StepContext, env_dir: str, show: bool = True) -> BuildReport:
        lib = self.pin.library if self.pin.mechanism == "ld-preload" else ""
        # torch is imported for real: a file damaged in uv's cache is linked into the env and
        # only an import shows it (version.py alone read fine); a chosen NCCL must load too.
        import_torch = True
        argv = probe_argv(env_python(env_dir), lib, import_torch)
        env = without_index_variables()  # the env's Python needs no package source
        if lib:
            env["LD_PRELOAD"] = lib + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
        res = ctx.run("check", argv, env, self._check_detail(), check=False, show=show)
        probe = parse_probe(res.stdout)
        if not probe:
            raise ctx.failed("check", argv, res.returncode, redact((res.stderr or res.stdout)[-3000:]))
        report = compare_build(self.plan, probe, self.pin)
        # Paths the probe saw under the temporary name are the env's paths at PREFIX.
        runtime = {k: (self.prefix + v[len(env_dir):] if isinstance(v, str) and v.startswith(env_dir + os.sep) else v)
                   for k, v in report.runtime.items()}
        report = replace(report, runtime=runtime)
        want = self.plan.python
        got = str(probe.get("python") or "")
        failures = list(report.failures)
        if got and ".".join(got.split(".")[:2]) != want:
            failures.append(f"the env runs Python {got}; the plan is Python {want}")
        for w in report.warnings:
            self.warnings.append(w)
            self.observer.warn(w)
        if failures:
            raise ctx.failed("check", argv, 1, "\n".join(failures),
                             what=f"the installed build does not match the plan: {failures[0]}")
        return report

    def _make_lock(self, dists: Sequence[LockedDist], pin: NcclPin, report: BuildReport, backend: Backend) -> Lock:
        plan = self.plan
        family = [d.name for d in dists if d.is_family]
        tool = ToolTable.for_install(
            plan, pin, self.sources.torch_index, self.hosts, installer=backend.label,
            python_version=report.runtime.get("python"), family=family,
            args=self.request.describe() if self.request else [],
            strict_driver=bool(self.request.strict_driver) if self.request else False,
            rebuilt_from=self.lock.path if self.lock else None, sources=self.sources.describe(),
            # `torchfit verify` compares torch, cuda, cudnn, nccl of this table with what runs.
            expected={k: v for k, v in report.runtime.items() if v is not None})
        arch = (self.hosts[0].arch if self.hosts else None) or os.uname().machine
        dists = [replace(d, index=self.sources.torch_index) if d.is_family else d for d in dists]
        return Lock(
            packages=sorted_dists(dists),
            tool=tool,
            requires_python=f"=={plan.python}.*",
            environments=(f"sys_platform == 'linux' and platform_machine == '{arch}'",),
        )


def _environment_conflicts(lock: Lock, host: HostFacts) -> list[str]:
    """The lock's `environments` (PEP 751: the platforms it was locked for, e.g. `platform_machine
    == 'aarch64'`) against the host's machine: an x86_64 node is not given an aarch64 group's lock
    (its wheels would not install)."""
    from packaging.markers import InvalidMarker, Marker, default_environment

    if not lock.environments or not host.arch:
        return []
    env = {k: str(v) for k, v in default_environment().items()}
    env.update(sys_platform="linux", platform_system="Linux", platform_machine=host.arch)
    try:
        if any(Marker(e).evaluate(env) for e in lock.environments):
            return []
    except InvalidMarker:
        return []  # parse_pylock checked them; a marker packaging cannot evaluate decides nothing
    return [f"the lock is for {' or '.join(lock.environments)}; this host is {host.arch}"]


def locked_torch_index(lock: Lock) -> str:
    """The torch index a lock was built from, credentials removed (they were redacted)."""
    url = lock.torch_index_url()
    return strip_credentials(url)


def check_prefix(prefix: str, force: bool) -> None:
    """BadInput when PREFIX may not be (re)placed: it exists without --force, or is not an env."""
    shown_prefix = shown(prefix)
    if not os.path.lexists(prefix):
        parent = os.path.dirname(prefix.rstrip(os.sep)) or "."
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise BadInput(f"--prefix {shown_prefix}: {shown(parent)} is not a directory")
        return
    if not force:
        raise BadInput(f"--prefix {shown_prefix} exists; pass --force to replace it "
                       "(only once the new env is complete, and never while a process uses the old one)")
    if os.path.islink(prefix) or not os.path.isdir(prefix):
        raise BadInput(f"--prefix {shown_prefix} is not a directory; torchfit replaces only an env it can recognise")
    if os.path.ismount(prefix):
        # The new env is built beside PREFIX and swapped in with one rename; a mount
        # point cannot be renamed (EBUSY), which would fail only after the whole install.
        raise BadInput(f"--prefix {shown_prefix} is a mount point, which cannot be replaced by a rename; "
                       f"install into a directory inside it (e.g. --prefix {shown(os.path.join(prefix, 'env'))})")
    if not os.path.isfile(os.path.join(prefix, "pyvenv.cfg")) and os.listdir(prefix):
        raise BadInput(f"--prefix {shown_prefix} is not a virtual environment (no pyvenv.cfg); "
                       "refusing to replace it, even with --force")
    inside = mounts_under(prefix)
    if inside:
        # Replacing the env removes its tree; the files of a mounted directory are not the env's.
        raise BadInput(f"--prefix {shown_prefix} has a mount point inside it at {shown(inside[0])}; unmount it first "
                       "(torchfit never removes files across a mount point)")
    denied = find_unreplaceable(prefix)
    if denied is not None:
        # Said before the build: the rename or the removal of the old env would fail only
        # after a whole new env was made beside it (EPERM at the swap).
        raise BadInput(f"--prefix {shown_prefix} cannot be replaced: {denied.sentence()}; ask {denied.owner} "
                       "to replace or remove it, or install into a prefix of your own")


def check_ld_preload_lib(pin: NcclPin, lock: Lock | None) -> NcclPin:
    """A locked LD_PRELOAD library must exist on this host (or be replaced with --nccl-lib)."""
    if pin.mechanism != "ld-preload" or not pin.library:
        return pin
    try:
        check_nccl_lib(pin.library)
    except BadInput as exc:
        if lock is None:
            raise
        raise LockMismatch(
            f"the lock pins NCCL with LD_PRELOAD of {pin.library}, which is not usable here ({exc.message})",
            hint="pass --nccl-lib PATH to pin another libnccl on this host",
        ) from None
    return pin


def nccl_pin_for(plan: Plan, nccl_version: str | None, nccl_lib: str | None) -> tuple[NcclPin, str | None]:
    """The pin and, for --nccl, the requirement that overrides torch's own NCCL wheel."""
    if plan.cuda is None:
        if nccl_version or nccl_lib:
            what = f"the {plan.variant} build" if plan.variant != "cpu" else "the CPU build"
            flag = "--nccl" if nccl_version else "--nccl-lib"
            raise BadInput(f"{flag}: {what} of torch {plan.torch} has no NCCL to pin (NCCL comes with CUDA builds)")
        return NcclPin("none"), None
    package = nccl_package(plan.cuda)
    if nccl_lib:
        return NcclPin("ld-preload", None, None, nccl_lib), None
    if nccl_version:
        return NcclPin("wheel-override", package, nccl_version), f"{package}=={nccl_version}"
    return NcclPin("wheel", package, plan.nccl), None


@contextmanager
def _measured_on_full_disk(root: str, places: Sequence[Place]) -> Iterator[None]:
    """Out of space while building: DiskFull, saying how much the temporary env had reached
    (measured before it is removed: at least that much more room is needed)."""
    try:
        yield
    except DiskFull as err:
        raise err.with_grown(tree_bytes(root)) from None
    except OSError as exc:
        if not is_no_space(exc):
            raise
        raise from_oserror(exc, "install", places).with_grown(tree_bytes(root)) from exc


def resolved_pins(plan: Plan, nccl_override: str | None) -> list[str]:
    """`name==version` of every package of the plan's resolved set outside the torch family
    (the family is pinned by `install_specs`); an `--nccl` override's package is left to it."""

    from torchfit.compat.matrix import FAMILY_PACKAGES

    skip = set(FAMILY_PACKAGES)
    if nccl_override:
        skip.add(canonicalize_name(nccl_override.split("=")[0].strip()))
    return [f"{name}=={version}" for name, version in sorted(plan.resolved.items()) if name not in skip]
