"""One `torchfit install` into PREFIX, from a plan or a lock: the work around the steps.

`PrefixInstall.from_plan` takes a plan (`planning.make_plan`'s), `PrefixInstall.from_lock` a
pylock.toml (held to this host, `check_lock_host`, and to --no-build); each picks the NCCL pin
and asks the command for the sources of the plan's variant. `run()` checks where the torch index
leads (its redirects; each file's are the fetch step's, `backends.StepContext.check_fetch`), says
the plan, takes PREFIX.lock, removes the temporary envs a killed install left, and runs the steps
(`flow.InstallJob`).
The command line (cli/commands/install.py) gives it settings and shows what it returns.

A module apart from flow.py: flow.py owns the steps and the lock they write; this one what
happens before them and around them, as installer/add.py's AddJob does for `add`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from torchfit.access import shared_group, umask
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import DEFAULT_INDEX, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.request import Request
from torchfit.errors import BadInput
from torchfit.index.sources import Sources
from torchfit.inputs import shown
from torchfit.installer.flow import (
    InstallJob,
    InstallResult,
    check_ld_preload_lib,
    check_lock_host,
    check_prefix,
    locked_torch_index,
    nccl_pin_for,
)
from torchfit.installer.prefix import PrefixLock, scan_temps, wait_unused
from torchfit.interrupts import interrupts_raise
from torchfit.lock.model import Lock, NcclPin, pin_from_json
from torchfit.owned import TreeNotRemoved, remove_marked
from torchfit.progress import Progress

# The sources of a variant, given the torch index the plan or the lock names (the fallback of
# cli/settings.py's precedence): the command's settings, asked once the variant is known.
SourcesFor = Callable[[str, str], Sources]


@dataclass(frozen=True)
class InstallOptions:
    """How the command line asks for the install (what to install is the plan or the lock)."""

    given: str  # PREFIX as the user gave it (--prefix, or the default), for a message
    installer: str = "auto"  # auto | uv | pip
    timeout: float = 3600.0  # one step's bound
    seed: bool = False  # --seed: pip in the env
    wait: float = 0.0  # --wait: for another install into PREFIX, and with --force for the old env's users
    force: bool = False  # replace an env at PREFIX; with a lock, install it although this host contradicts it
    offline: bool = False  # local sources only: nothing is fetched, so no redirect is checked
    allow_insecure: bool = False  # --allow-insecure-index
    no_build: bool = False  # --no-build: a lock that installs a source distribution is refused
    nccl: str | None = None  # --nccl VERSION (a plan's only: a lock pins its own)
    nccl_lib: str | None = None  # --nccl-lib PATH: a libnccl.so.2 preloaded


@dataclass
class PrefixInstall:
    """An install into PREFIX, ready to run: its steps and how the command asked for them."""

    steps: InstallJob
    options: InstallOptions

    @classmethod
    def from_plan(cls, prefix: str, plan: Plan, hosts: Sequence[HostFacts], request: Request,
                  sources_for: SourcesFor, options: InstallOptions, observer: Progress) -> PrefixInstall:
        """The install of a plan just made: the NCCL pin torch's (or --nccl's, --nccl-lib's)."""
        pin, nccl_override = nccl_pin_for(plan, options.nccl, options.nccl_lib)
        sources = sources_for(plan.variant, plan.index_url or DEFAULT_INDEX)
        return cls(_steps(prefix, plan, hosts, sources, pin, options, observer, request=request,
                          nccl_override=nccl_override), options)

    @classmethod
    def from_lock(cls, prefix: str, lock: Lock, path: str, hosts: Sequence[HostFacts], matrix: Matrix,
                  sources_for: SourcesFor, options: InstallOptions, observer: Progress) -> PrefixInstall:
        """The rebuild of `lock` (read from `path`): BadInput for a source distribution under
        --no-build, LockMismatch for a host that contradicts it (unless --force)."""
        if options.no_build:
            refuse_builds(lock, path)
        plan = check_lock_host(lock, hosts, matrix, options.force, observer)
        pin = pin_from_json(lock.pin())
        if options.nccl_lib:
            pin = NcclPin("ld-preload", None, None, options.nccl_lib)
        pin = check_ld_preload_lib(pin, lock)
        sources = sources_for(plan.variant, locked_torch_index(lock))
        return cls(_steps(prefix, plan, hosts, sources, pin, options, observer, lock=lock), options)

    @property
    def swapped(self) -> bool:
        """PREFIX holds the new env (an interruption after this point leaves it there)."""
        return self.steps.swapped

    @property
    def late_signals(self) -> list[str]:
        """Signals that arrived after the swap: the install was complete and stays."""
        return self.steps.late_signals

    def run(self) -> InstallResult:
        """Check the fetches, say the plan, then under PREFIX.lock: PREFIX again, the stale
        temporary envs, the old env's users (--force), the steps."""
        steps, options, observer = self.steps, self.options, self.steps.observer
        self._check_fetches()
        for warning in steps.plan.warnings:
            observer.warn(warning)
        observer.info(format_plan_line(steps.plan, steps.pin))
        parent = os.path.dirname(steps.prefix)
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"--prefix {options.given}: cannot create {parent} ({exc.strerror})") from None
        warn_unshared(steps.prefix, observer)
        with interrupts_raise(), PrefixLock(steps.prefix, options.wait, observer.info):
            check_prefix(steps.prefix, options.force)  # again, now that no other install can race us
            self._clean()
            return steps.run()

    def _check_fetches(self) -> None:
        """Where the torch index leads, before uv or pip is asked (the files' own redirects are the
        fetch step's: backends.StepContext.check_fetch, just before they are downloaded)."""
        options, sources = self.options, self.steps.sources
        if not options.offline and not options.allow_insecure and sources.torch_index.lower().startswith("https://"):
            # uv and pip follow an https -> http redirect silently (uv 0.13.9, measured): the torch
            # index is read once here, each hop checked, before either is asked.
            from torchfit.index.client import IndexClient, check_no_downgrade

            check_no_downgrade(IndexClient(retries=1, honor_max_age=True), sources.torch_index)

    def _clean(self) -> None:
        """Under PREFIX.lock: wait for the old env's users (--force), remove the temporary envs of
        killed installs (their marker proves it), leave alone what only looks like one."""
        prefix, observer = self.steps.prefix, self.steps.observer
        scan = scan_temps(prefix)
        if self.options.force:
            wait_unused(prefix, self.options.wait, observer.info)
        for stale in scan.stale:
            # Its marker proves a torchfit run made it, and that run is gone.
            observer.info(f"removing {stale}, left by a torchfit install that was killed")
            try:
                remove_marked(stale)
            except TreeNotRemoved as exc:
                observer.warn(f"leaving {stale}: {exc.strerror}")
        for other in scan.unproven:
            observer.warn(f"leaving {other} alone: its name looks like a torchfit temporary env, "
                          "but nothing proves torchfit made it")


def _steps(prefix: str, plan: Plan, hosts: Sequence[HostFacts], sources: Sources, pin: NcclPin,
           options: InstallOptions, observer: Progress, *, request: Request | None = None,
           lock: Lock | None = None, nccl_override: str | None = None) -> InstallJob:
    return InstallJob(prefix=prefix, plan=plan, hosts=hosts, request=request, sources=sources, pin=pin,
                      installer=options.installer, observer=observer, timeout=options.timeout, lock=lock,
                      nccl_override=nccl_override, seed=options.seed, wait=options.wait)


def format_plan_line(plan: Plan, pin: NcclPin) -> str:
    """`plan: torch 2.8.0 cu128, Python 3.12 (pyenv), NCCL ...`: what is about to be installed
    (a Python to be installed says by whom: pyenv, or uv's managed Pythons)."""
    source = {"pyenv": " (pyenv)", "uv": " (uv-managed)"}.get(plan.python_source, "")
    return f"plan: torch {plan.torch} {plan.variant}, Python {plan.python_version}{source}, NCCL {pin.describe()}"


def refuse_builds(lock: Lock, path: str) -> None:
    """--no-build with a lock: BadInput naming the first package the lock installs from a
    source distribution only (installing it runs its build)."""
    for d in lock.packages:
        if d.needs_build:
            name = next((a.filename for a in d.artifacts if a.filename), d.name)
            raise BadInput(f"--no-build: {path} installs {d.name} {d.version} from a source distribution "
                           f"({name}), which would be built; lock a wheel of it, or drop --no-build")


def warn_unshared(prefix: str, observer: Progress) -> None:
    """A shared machine: the env is built with this process's umask; say so when the group
    that shares PREFIX's parent directory could then not use it (umask 077 in a team's directory)."""
    parent = os.path.dirname(prefix)
    group = shared_group(parent)
    mask = umask()
    if group is None or not mask & 0o050:  # the group keeps r-x: nothing lost
        return
    mode = stat.filemode(os.stat(parent).st_mode)
    observer.warn(f"umask {mask:04o}: the env will be usable by you only, though {shown(parent)} ({mode}) is shared "
                  f"with group {group}: its members could not run it; install under `umask 002` (or 022), or "
                  f"run `chmod -R g+rX {shown(prefix)}` afterwards")
