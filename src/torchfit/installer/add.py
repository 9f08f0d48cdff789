"""`torchfit add`: more packages into an env torchfit built, its torch family never swapped.

The env's lock (PREFIX/pylock.toml) is the truth: the family is pinned to the locked
builds (`torch==2.13.0+cpu`, the local label included) and routed to the lock's torch
index as an explicit index, exactly as install routes it, so no other index can serve
it. One `uv pip compile` resolves the locked set plus the new requirements:

- every locked package stays a requirement (the env keeps its closure), and the
  locked versions of the packages outside the family are *constraints* (`-c`), so the
  first answer changes nothing that is installed;
- when that fails for a reason outside the family (a new package needs a newer
  dependency than the locked one), it is retried with the family pinned alone and
  the env's lock as uv's preferences (the existing output file uv reads): only what
  must move moves, and the result says what did;
- when it fails on the family pin, the package is refused: the family pin is
  replaced by an override (`--overrides`, so uv finds the set the package would
  bring) and each new package's METADATA is read for its torch-family requirement
  (uv's message names the package only where the conflict is direct). Nothing is
  installed, nothing written.

A compatible answer is installed file by file (the new and changed packages only,
each by its exact URL and sha256, like install's uv path), then the lock is
rewritten atomically (`lock.pylock.replace_lock`) with the grown package list and
the plan's project grown. The caller holds PREFIX.lock around all of it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.compat.project import ProjectReq
from torchfit.compat.versions import is_pep440
from torchfit.errors import AddRefused, BadInput, InstallFailed
from torchfit.index.sources import Sources
from torchfit.index.wheelmeta import read_wheel_member
from torchfit.installer.add_refusals import AddRefusals, parses, uv_reason
from torchfit.installer.backends import (
    PipBackend,
    StepContext,
    UvBackend,
    env_python,
    install_lock_text,
    pick_backend,
    with_hashes,
)
from torchfit.installer.buildcheck import check_closure
from torchfit.installer.journal import clear_pending, read_pending, write_pending
from torchfit.installer.prefix import InstallLog, state_dir
from torchfit.interrupts import signals_deferred
from torchfit.jsontypes import JsonObject
from torchfit.lock.adopted import write_base_stubs
from torchfit.lock.closure import check_env_matches_lock, read_metadata, same_version
from torchfit.lock.model import Lock, LockedDist, sorted_dists
from torchfit.lock.pylock import LOCK_NAME, load_env_lock_file, replace_lock
from torchfit.lock.tool import strings
from torchfit.lock.uv import Compiled, compile_project, uv_version
from torchfit.lock.uvbin import find_uv
from torchfit.owned import temp_dir
from torchfit.progress import Progress
from torchfit.redact import redact, strip_credentials
from torchfit.runner import Runner, RunResult, stall_timeout
from torchfit.space import (
    from_oserror,
    is_no_space,
    prefix_place,
    state_place,
    tmpdir_place,
    uv_cache_place,
)
from torchfit.text import tail

# uv's "no solution" explanation involves the family pin: "... depends on torch==2.12.0",
# "torchfit-env depends on torch==2.13.0+cpu" (not `torch-scatter`, not a build's traceback).
_FAMILY_CONFLICT = re.compile(r"depends? on (torch|torchvision|torchaudio)(?![\w-])")
# "pins-old-torch==1.0 depends on torch==2.12.0", "all versions of X depend on torchvision<0.20"
_DEPENDS = re.compile(r"(?:all versions of |only )?([A-Za-z0-9][A-Za-z0-9._-]*?)(?:==([^\s,]+))? depends? on "
                      r"(torch|torchvision|torchaudio)((?:[<>=!~]=?|===)[^\s,]+)?")


@dataclass
class AddResult:
    """What `torchfit add` did, for the summary and `--json`."""

    prefix: str
    requested: tuple[str, ...]
    added: tuple[LockedDist, ...]
    changed: tuple[tuple[LockedDist, LockedDist], ...]  # (locked, now)
    kept_locked: bool  # True: every locked version was kept (the constraints held)
    lock_path: str
    installer: str
    log_path: str | None
    timings: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        return {
            "ok": True,
            "prefix": self.prefix,
            "requested": list(self.requested),
            "added": [{"name": d.name, "version": d.version} for d in self.added],
            "changed": [{"name": new.name, "from": old.version, "to": new.version} for old, new in self.changed],
            "kept_locked_versions": self.kept_locked,
            "lock": self.lock_path,
            "installer": self.installer,
            "log": self.log_path,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
        }


# --- input ---------------------------------------------------------------------------------


def parse_new_requirements(texts: Sequence[str], project: Sequence[Requirement] = ()) -> list[Requirement]:
    """The PKG arguments as PEP 508 requirements, then the project's (-r FILE, --project DIR,
    parsed already), each once: the one list add resolves. BadInput (one line) for a PKG that
    does not parse, or for nothing to add at all."""
    if not texts and not project:
        raise BadInput("give at least one package to add (a PEP 508 requirement: name, name>=1.2, name[extra]), "
                       "-r FILE or --project DIR with requirements in it")
    out: list[Requirement] = []
    for text in texts:
        try:
            out.append(Requirement(text))
        except InvalidRequirement as exc:
            why = str(exc).splitlines()[0] if str(exc) else "not a PEP 508 requirement"
            raise BadInput(f"requirement {text!r}: does not parse as a PEP 508 requirement ({why})") from None
    seen = {str(r) for r in out}
    return out + [r for r in project if str(r) not in seen]


def load_env_lock(prefix: str) -> Lock:
    """PREFIX's lock, when PREFIX is an env torchfit built; BadInput (one line) otherwise."""
    path = os.path.join(prefix, LOCK_NAME)
    if not os.path.isdir(prefix):
        raise BadInput(f"--env {prefix}: no such directory")
    if not os.path.isfile(path) or not os.access(env_python(prefix), os.X_OK):
        raise BadInput(f"--env {prefix}: not an env torchfit built (no {LOCK_NAME} and bin/python); "
                       "`torchfit add` adds only to envs made by `torchfit install` or taken as they are "
                       "by `torchfit adopt`")
    lock = load_env_lock_file(path)  # BadInput naming the file: no [tool.torchfit], a file without sha256, ...
    if lock.find("torch") is None and not any(d.name == "torch" for d in lock.family()):
        raise BadInput(f"{path}: locks no torch; not an env torchfit built or adopted")
    return lock


# --- the job -------------------------------------------------------------------------------


@dataclass
class AddJob:
    """Everything one `torchfit add` needs; `run()` does it (PREFIX.lock held by the caller)."""

    prefix: str
    lock: Lock
    requirements: Sequence[Requirement]
    sources: Sources
    installer: str  # auto | uv | pip
    observer: Progress
    timeout: float
    source_args: Sequence[str] = ()  # the source options given, for the rebuild command
    no_build: bool = False  # wheels only: no package's build runs (uv's --no-build), to resolve or install
    routed: list[str] = field(default_factory=list)  # project packages whose binary is the torch index's
    timings: dict[str, float] = field(default_factory=dict)
    # torchvision/torchaudio asked for where the env has none: the build the matrix pairs with
    # the locked torch (name -> version), added from the torch index (issue 28, item 3)
    companions: dict[str, str] = field(default_factory=dict)
    wait: float = 0.0  # seconds to wait for processes using the env to end (when packages change)
    accept_base_label: bool = False  # an adopted base: a pin differing only by its label is accepted
    label_accepted: list[str] = field(default_factory=list)  # the pins so accepted, for the lock
    allow_in_use: bool = False  # replace packages under running processes anyway
    constraints: Sequence[str] = ()  # the project files' `-c` constraints: they hold like the env's

    def run(self) -> AddResult:
        label = (os.path.basename(self.prefix.rstrip(os.sep)) or "env") + "-add"
        log = InstallLog(label, on_error=self.observer.warn)
        log.write(f"torchfit add {' '.join(str(r) for r in self.requirements)} into {self.prefix}")
        for line in self.sources.describe():
            log.write(line)
        places = [prefix_place(self.prefix, "--env"), tmpdir_place(), uv_cache_place(os.environ),
                  state_place(state_dir())]
        ctx = StepContext(Runner(), log, self.observer, self.sources, self.timeout, self.timings,
                          stall=stall_timeout(), places=places)
        try:
            try:
                return self._run(ctx, log)
            except OSError as exc:  # out of space in torchfit's own writes: where, and what is left
                if not is_no_space(exc):
                    raise
                raise from_oserror(exc, "add", places) from exc
        except BaseException as exc:
            if log.path:
                log.write(f"== failed: {type(exc).__name__}: {exc}")
            raise

    @property
    def says(self) -> AddRefusals:
        """What add says when it refuses, from this job's env, lock and request (installer/add_refusals.py)."""
        return AddRefusals(self.prefix, self.lock, self.requirements, self.sources, self.observer, self.source_args)

    # -- the steps ------------------------------------------------------------------------------
    def _run(self, ctx: StepContext, log: InstallLog) -> AddResult:
        family = {d.name: d for d in self.lock.family()}
        self._recover(ctx)  # an add killed (SIGKILL, power) between its install and its lock
        check_env_matches_lock(self.prefix, self.lock, read_wheel_member)  # before anything: the base is what the lock says
        new = self._check_family_requests(family)
        lock_path = os.path.join(self.prefix, LOCK_NAME)
        if not new:  # only the locked family asked for: nothing to resolve, nothing written
            return AddResult(prefix=self.prefix, requested=tuple(str(r) for r in self.requirements), added=(),
                             changed=(), kept_locked=True, lock_path=lock_path, installer="none",
                             log_path=log.path, timings=self.timings)
        backend = pick_backend(self.installer, ctx)
        uv = backend if isinstance(backend, UvBackend) else uv_for_resolving(ctx)
        with temp_dir("add") as work:
            base = self.says.base_installed()
            if base:  # an adopted env: its installed distributions are what uv resolves around
                stubs = write_base_stubs(self.lock, os.path.join(work, "base"))
                self.sources = replace(self.sources, torch_index=stubs, find_links=(*self.sources.find_links, stubs))
            result, kept = self._resolve(ctx, uv, family, new, work)
            moved = [d for d in result if d.name in base and not same_version(d.version, base[d.name])]
            if moved:
                raise AddRefused(
                    "; ".join(f"{d.name} {d.version} would replace the base's {d.name} {base[d.name]}" for d in moved)
                    + f"; {self.prefix} was adopted (torchfit adopt) and add installs around its packages, never "
                    "over them; nothing was changed", [(d.name, d.version or "", d.name) for d in moved], "",
                    {n: x.version or "" for n, x in family.items()},
                    hint="pick versions of the new packages that accept the base's, or build an env with "
                         "`torchfit install`")
            result = [d for d in result if d.name not in base]  # installed already: the base's own
            locked = {d.name: d for d in self.lock.packages}
            for d in result:
                if d.is_family and d.name not in family and d.name in self.companions \
                        and Version(d.version or "0").public == self.companions[d.name]:
                    continue  # the matching companion asked for: new, from the torch index
                if d.is_family and (d.name not in family or _files(d) != _files(family[d.name])):
                    self.says.refuse_family_change(d, family)
            added = [d for d in result if d.name not in locked]
            changed = [(locked[d.name], d) for d in result if d.name in locked and not d.is_family
                       and _files(d) != _files(locked[d.name])]
            todo = added + [d for _, d in changed]
            recorded = strings(self.lock.plan().get("project"))
            if not todo and all(str(r) in recorded for r in new):
                # Installed and recorded as asked already: the lock stays as it is, byte for byte.
                self.observer.info("nothing to do: every package asked for is in the env and its lock already")
                return AddResult(prefix=self.prefix, requested=tuple(str(r) for r in self.requirements), added=(),
                                 changed=(), kept_locked=kept, lock_path=lock_path, installer=backend.label,
                                 log_path=log.path, timings=self.timings)
            if not todo:
                self.observer.info("nothing to install: every package asked for is in the env already")
            else:  # where the new files redirect, before anything changes (install_* then asks nothing twice)
                ctx.check_fetch(a.url for d in todo for a in d.artifacts if a.url)
            self._check_users(changed)
            committed = False
            try:
                if todo:  # what a SIGKILL between here and the lock's rename leaves: undone by the next add
                    try:
                        write_pending(self.prefix, self.lock, added, changed)
                    except OSError as exc:
                        raise ctx.failed("journal", [], None, f"{exc.filename}: {exc.strerror or exc}",
                                         what=f"cannot record what this add changes ({exc.filename}: "
                                              f"{exc.strerror or exc}); nothing was changed") from None
                if todo and isinstance(backend, UvBackend):
                    backend.install_resolved(self.prefix, todo, work, reinstall=[d.name for _, d in changed])
                elif todo:
                    assert isinstance(backend, PipBackend)
                    backend.install_locked(self.prefix, todo, work)
                if todo:
                    # uv resolved from the index's metadata (PEP 658 .metadata where served); the
                    # wheels just installed carry their own, the truth: a new package whose wheel
                    # needs what the env lacks is named and rolled back, as install refuses it.
                    check_closure(ctx, self.prefix, planned=todo, lock_name=lock_path, judged=self._judged(todo),
                                  nccl_override=self.lock.pin().get("mechanism") == "wheel-override")
                start = time.monotonic()
                self.observer.step("lock", f"{LOCK_NAME}: {len(added)} added, {len(changed)} changed "
                                           "(atomic rewrite)")
                grown = grown_lock(self, result, [str(r) for r in new])
                # The rename is the commit: a signal arriving around it waits until `committed`
                # says which side of it the env is on (rolled back before it, kept after it).
                with signals_deferred():
                    try:
                        replace_lock(lock_path, grown)
                    except OSError as exc:
                        raise ctx.failed("lock", [], None, f"{exc.filename or lock_path}: {exc.strerror or exc}",
                                         what=f"cannot rewrite {lock_path} ({exc.strerror or exc}); the old lock "
                                              "is unchanged") from None
                    committed = True
                    clear_pending(self.prefix)
            except BaseException:
                if todo and not committed:  # the env goes back to what its (unchanged) lock says
                    self._roll_back(ctx, uv, added, changed, work)
                elif committed:
                    self.observer.warn(f"interrupted after {LOCK_NAME} was rewritten: the env and its lock hold "
                                       "the new packages")
                raise
            self.timings["lock"] = time.monotonic() - start
            self.observer.done("lock", self.timings["lock"])
        return AddResult(prefix=self.prefix, requested=tuple(str(r) for r in self.requirements),
                         added=sorted_dists(added), changed=tuple(changed), kept_locked=kept, lock_path=lock_path,
                         installer=backend.label, log_path=log.path, timings=self.timings)

    def _judged(self, todo: Sequence[LockedDist]) -> Callable[[str], bool]:
        """Which closure problems (lock.closure's "N V requires R, but ...") are this add's: those
        of the packages it installed, less a pin on torch's release that --accept-base-label
        accepted, now or in an earlier add (the lock's `accepted-base-label`). A base's own
        problems (an adopted image's packages) are not add's to answer for."""
        names = {d.name for d in todo}
        accepted = [*self.label_accepted, *self.lock.tool.accepted_base_labels()]
        pins = set()
        for entry in accepted:  # "pkg-b 1.0: torch==2.8.0"
            m = re.match(r"(\S+) (\S+): (.+)$", entry)
            if m and parses(m.group(3)):
                pins.add((canonicalize_name(m.group(1)), m.group(2), str(Requirement(m.group(3)))))

        def judged(problem: str) -> bool:
            m = re.match(r"(\S+) (\S+) requires (.+?), but ", problem)
            name = canonicalize_name(problem.split(" ", 1)[0])
            if m and parses(m.group(3)) and (name, m.group(2), str(Requirement(m.group(3)))) in pins:
                return False
            return name in names

        return judged

    def _recover(self, ctx: StepContext) -> None:
        """Undo an add that was killed before its lock was rewritten (its journal is still there):
        remove what it added, put the locked files back of what it changed; the lock was never
        touched. Killed after the rename, the journal is only stale: removed."""
        import glob
        import hashlib

        for stale in glob.glob(os.path.join(glob.escape(self.prefix), f".{LOCK_NAME}.*.torchfit-tmp")):
            # a lock rewrite killed before its rename (we hold PREFIX.lock: no writer is running)
            with contextlib.suppress(OSError):
                os.unlink(stale)
        pending = read_pending(self.prefix)
        if pending is None:
            return
        with open(os.path.join(self.prefix, LOCK_NAME), "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        if pending.get("lock_sha256") != digest:
            clear_pending(self.prefix)  # the lock was rewritten: that add finished
            return
        locked = {d.name: d for d in self.lock.packages}
        added = [LockedDist(str(n), None, ()) for n in pending.get("added") or [] if str(n) not in locked]
        changed = [(locked[str(n)], locked[str(n)]) for n in pending.get("changed") or [] if str(n) in locked]
        self.observer.warn(f"an earlier add into {self.prefix} was stopped before it rewrote {LOCK_NAME} "
                           f"(pid {pending.get('pid', '?')}): undoing it first")
        with temp_dir("add-recover") as work:
            self._roll_back(ctx, uv_for_resolving(ctx), added, changed, work)

    def _check_users(self, changed: Sequence[tuple[LockedDist, LockedDist]]) -> None:
        """Processes using the env: replacing an installed package under them waits (--wait)
        or is refused (exit 1) unless --allow-in-use (prefix.check_in_use, doctor --fix's too)."""
        from torchfit.installer.prefix import check_in_use

        names = ", ".join(f"{old.name} {old.version}" for old, _ in changed) or None
        check_in_use(self.prefix, names, allow=self.allow_in_use, wait=self.wait, command="torchfit add",
                     fix="end those processes, pass --wait SECONDS to wait for them, or --allow-in-use",
                     info=self.observer.info, warn=self.observer.warn)

    def _roll_back(self, ctx: StepContext, uv: UvBackend, added: Sequence[LockedDist],
                   changed: Sequence[tuple[LockedDist, LockedDist]], work: str) -> None:
        """After a failed install or lock write: remove what was added, put the locked files
        of what was changed back (by URL and sha256), so the env matches its lock again.
        Best effort (a second interruption stops it); what it did or could not do is said."""
        python = env_python(self.prefix)
        try:
            if added:
                ctx.run("roll-back", [uv.uv, "pip", "uninstall", "--python", python, "--no-config",
                                      *(d.name for d in added)], self.sources.uv_env(os.environ, family=False),
                        f"remove {', '.join(d.name for d in added)}")
            if changed:
                uv.install_resolved(self.prefix, [old for old, _ in changed], work,
                                    reinstall=[old.name for old, _ in changed])
        except BaseException as exc:
            self.observer.warn(f"the roll-back failed ({type(exc).__name__}: {exc}); the env may hold packages "
                               f"its lock does not list: `torchfit verify --env {self.prefix}` says what")
            return
        clear_pending(self.prefix)
        what = [f"removed {', '.join(d.name for d in added)}"] if added else []
        what += [f"restored {', '.join(f'{o.name} {o.version}' for o, _ in changed)}"] if changed else []
        self.observer.warn(f"rolled back: {'; '.join(what)}; the env matches its lock again")

    def _check_family_requests(self, family: dict[str, LockedDist]) -> list[Requirement]:
        """A family package asked for by name is fine only as the locked build; else refused."""
        out = []
        for req in self.requirements:
            name = canonicalize_name(req.name)
            if name not in FAMILY_PACKAGES:
                out.append(req)
                continue
            have = family.get(name)
            if req.url:
                # A URL is another build by definition (the locked one comes from the lock's index by
                # sha256): never a no-op, never a swap.
                locked = f"the locked {name} {have.version}" if have is not None else f"no {name}"
                raise BadInput(f"{redact(str(req))}: `torchfit add` never swaps the torch family, and this env has "
                               f"{locked}; to build an env with that file: torchfit install --force --prefix "
                               f"{shlex.quote(self.prefix)} ... (see `torchfit docs projects`)")
            if have is not None and _contains(req, have.version):
                self.observer.info(f"{req}: the env has {name} {have.version} already")
                continue
            if have is not None and self.says.base_installed() and self.says.label_only(str(req)):
                # a project's `torch==2.8.0` on a base of 2.8.0a0+...nv25.08: the same rule as a package's pin
                if not self.accept_base_label:
                    self.says.refuse_label([(name, "", str(req))], family, asked=True)
                self.observer.warn(f"--accept-base-label: {req} is met by the base's {name} {have.version}")
                self.label_accepted.append(f"{req} (asked): {name} {have.version}")
                continue
            pair = matching_companion(self.lock, name, family) if have is None else None
            if pair is not None and req.specifier.contains(pair, prereleases=True):
                # The build that matches the locked torch (data/matrix.toml), from the torch index.
                self.companions[name] = pair
                self.observer.info(f"{name} {pair}: the build that matches torch {family['torch'].version} "
                                   "(data/matrix.toml), from the torch index")
                out.append(Requirement(f"{name}=={pair}"))
                continue
            self.says.refuse([(name, "", str(req))], family, asked=True)
        return out

    # -- the resolution ---------------------------------------------------------------------------
    def _resolve(self, ctx: StepContext, uv: UvBackend, family: dict[str, LockedDist],
                 new: Sequence[Requirement], work: str) -> tuple[list[LockedDist], bool]:
        """uv's answer for the locked set plus `new`: (the set, whether every locked version held)."""
        asked = {canonicalize_name(r.name) for r in new}
        self.routed = routed_for(self.lock, family, new, self.observer)
        # Everything the env has stays in the set; the family exactly as locked.
        # The project's recorded requirements hold as they were asked for (unless asked anew).
        project = [p for p in strings(self.lock.plan().get("project"))
                   if parses(p) and canonicalize_name(Requirement(p).name) not in asked]
        named = asked | {canonicalize_name(Requirement(p).name) for p in project}
        specs = [f"{d.name}=={d.version}" for d in family.values()] + project
        specs += [d.name + (f" ; {d.marker}" if d.marker else "") for d in self.lock.rest() if d.name not in named]
        specs += [str(r) for r in new]
        keep = [f"{d.name}=={d.version}" for d in self.lock.rest() if d.name not in asked and d.version]
        base = self.says.base_installed()
        # A base distribution whose version is not PEP 440 cannot be pinned (uv refuses the whole
        # constraints file); left free, it is still never replaced: `moved` below refuses that.
        keep += [f"{n}=={v}" for n, v in base.items() if n not in family and is_pep440(v)]
        keep += strings(self.lock.base().get("constraints"))  # the image's pip constraints
        keep += list(self.constraints)  # the project's own (-c in a requirements file)
        res, compiled = self._compile(ctx, uv, specs, work, "keep", constraints=keep,
                                 detail="the locked set plus the new packages, every locked version kept")
        if res.returncode == 0:
            return with_hashes(compiled.locked, log_path=ctx.log.path), True
        message = _uv_error(res.stderr or res.stdout)
        if "No solution found" not in message:  # a build that failed, a package that does not exist
            raise ctx.failed("resolve", [], res.returncode, tail(res.stderr or res.stdout),
                             what=f"uv cannot add {', '.join(str(r) for r in new)} to this env: "
                                     f"{uv_reason(message)[:200]}; nothing was changed")
        if not _is_family_conflict(message) and base:
            raise ctx.failed("resolve", [], res.returncode, tail(res.stderr or res.stdout),
                             what=f"uv cannot add {', '.join(str(r) for r in new)} around the adopted base "
                                  f"(its packages as installed, its constraints): {uv_reason(message)[:300]}; "
                                  "nothing was changed")
        if not _is_family_conflict(message):
            # Outside the family (a locked dependency too old for a new package): let them move.
            self.observer.info("the locked versions cannot all be kept; resolving with the torch family pinned alone")
            res, compiled = self._compile(ctx, uv, specs, work, "free", prefer=True, constraints=self.constraints,
                                     detail="the locked set plus the new packages, the torch family pinned")
            if res.returncode == 0:
                return with_hashes(compiled.locked, log_path=ctx.log.path), False
            message = _uv_error(res.stderr or res.stdout)
            if not _is_family_conflict(message):
                raise ctx.failed("resolve", [], res.returncode, tail(res.stderr or res.stdout),
                                 what=f"uv cannot add {', '.join(str(r) for r in new)} to this env: "
                                         f"{uv_reason(message)[:200]}; nothing was changed")
        culprits = self._find_culprits(ctx, uv, specs, family, work, message)
        if base and culprits and all(self.says.label_only(req) for _, _, req in culprits):
            # accepted by an earlier add: they stay so
            before = {x.split(" ", 1)[0] for x in self.lock.tool.accepted_base_labels()}
            if not self.accept_base_label and not all(n in before for n, _, _ in culprits):
                self.says.refuse_label(culprits, family)
            # uv's override replaces each package's torch requirement by the base pin: the base stays
            if self.accept_base_label:
                self.says.caveat(culprits, family)
            pins = [f"{d.name}=={d.version}" for d in family.values()]
            res, compiled = self._compile(ctx, uv, specs, work, "label", constraints=keep, overrides=pins,
                                     detail="the new packages around the base, its label accepted (--accept-base-label)")
            if res.returncode == 0:
                self.label_accepted += [f"{n} {v}: {r}" for n, v, r in culprits]
                return with_hashes(compiled.locked, log_path=ctx.log.path), True
        self.says.refuse(culprits, family, uv_message=message)
        raise AssertionError("unreachable")

    def _compile(self, ctx: StepContext, uv: UvBackend, specs: Sequence[str], work: str, name: str, *,
                 detail: str, constraints: Sequence[str] = (), overrides: Sequence[str] = (),
                 prefer: bool = False) -> tuple[RunResult, Compiled]:
        s = self.sources
        from torchfit.index.torchsource import is_flat

        out = os.path.join(work, f"pylock.{name}.toml")  # uv insists on pylock.*.toml
        # no --no-index (it would drop the explicit torch index too): an empty default index instead
        options, env = s.uv_compile(os.environ, work, no_build=self.no_build)
        # prefer: uv prefers the versions of an existing output file: the env's lock, so that only
        # what must move moves (measured: without it uv also moved mpmath and sympy).
        preferred = install_lock_text(self.lock.packages, log_path=ctx.log.path) if prefer else None
        argvs: list[list[str]] = []

        def step(argv: list[str], uv_env: dict[str, str]) -> RunResult:
            argvs.append(argv)
            return ctx.run("resolve", argv, uv_env, detail, check=False)

        try:
            compiled = compile_project(ctx.runner, uv.uv, work=work, name=name, env=env, options=options, specs=specs,
                                       torch_index=s.torch_index, routed=self.routed, flat=is_flat(s.torch_index),
                                       constraints=constraints, overrides=overrides, python=env_python(self.prefix),
                                       out=out, prefer=preferred, quiet=True, run=step)
        except BadInput as exc:
            raise InstallFailed("resolve", [], None, f"cannot read uv's lock {out}: {exc.message}",
                                log_path=ctx.log.path) from None
        res = compiled.result
        assert res is not None  # `step` ran uv
        if res.returncode < 0:
            raise ctx.failed("resolve", argvs[0], res.returncode, redact((res.stderr or res.stdout)[-3000:]))
        return res, compiled

    def _find_culprits(self, ctx: StepContext, uv: UvBackend, specs: Sequence[str], family: dict[str, LockedDist],
                       work: str, message: str) -> list[tuple[str, str, str]]:
        """Which new packages require another torch family, from their METADATA (uv's message as fallback)."""
        pins = [f"{d.name}=={d.version}" for d in family.values()]
        res, compiled = self._compile(ctx, uv, specs, work, "why", overrides=pins, prefer=True, constraints=self.constraints,
                                 detail="which package needs another torch (the family pin as an override)")
        culprits: list[tuple[str, str, str]] = []
        if res.returncode == 0:
            locked = {d.name: d for d in self.lock.packages}
            base = self.says.base_installed()
            env = _marker_env(self.lock)
            for d in with_hashes(compiled.locked, log_path=ctx.log.path):
                if d.is_family or (d.name in locked and _files(d) == _files(locked[d.name])) or d.name in base:
                    continue
                for req in _family_requirements(read_metadata(d, read_wheel_member), env):
                    have = family.get(canonicalize_name(req.name))
                    if have is None or not _contains(req, have.version):
                        culprits.append((d.name, d.version or "", str(req)))
        if not culprits:  # uv's own words: "X==1.0 depends on torch==2.12.0"
            for m in _DEPENDS.finditer(message):
                if m.group(1) not in ("torchfit-env", "your", "requirements") and m.group(4):
                    culprits.append((canonicalize_name(m.group(1)), m.group(2) or "", m.group(3) + m.group(4)))
        return list(dict.fromkeys(culprits))


# --- the new lock, the torch index's packages, a companion's pair: functions of values ---------


def uv_for_resolving(ctx: StepContext) -> UvBackend:
    """uv resolves even when pip installs (--installer pip): the family pin needs its routing."""
    uv = find_uv(ctx.runner)
    version = uv_version(ctx.runner, uv) if uv else None
    if not uv or version is None:
        raise BadInput("torchfit add resolves with uv, which is not installed here (pip install uv)")
    return UvBackend(ctx, uv, version)


def grown_lock(job: AddJob, result: Sequence[LockedDist], asked: Sequence[str]) -> Lock:
    """The lock with uv's answer merged in and the plan's project grown (same family entries)."""
    locked = {d.name: d for d in job.lock.packages}
    merged = dict(locked)
    index = strip_credentials(job.lock.torch_index_url())
    for d in result:
        if d.is_family and d.name in job.companions and d.name not in locked:
            merged[d.name] = replace(d, index=d.index or index or None)  # the companion added
            continue
        if d.is_family:
            continue  # the locked entries (with their index) stay as they are
        merged[d.name] = d
    plan = dict(job.lock.plan())
    for name, version in job.companions.items():
        plan["packages"] = list(dict.fromkeys([*(strings(plan.get("packages")) or ["torch"]), name]))
        plan[name] = version
    project = strings(plan.get("project"))
    for text in asked:
        name = canonicalize_name(Requirement(text).name)
        project = [p for p in project if not (parses(p) and canonicalize_name(Requirement(p).name) == name)]
        project.append(ProjectReq(Requirement(text), "PKG").public_text)  # a URL's credentials never on disk
    plan["project"] = project
    if job.routed:
        plan["routed"] = list(dict.fromkeys(job.routed))
    plan["resolved"] = {d.name: d.version for d in sorted_dists(list(merged.values())) if d.version}
    tool = job.lock.tool.with_added(plan, asked, job.sources.describe(), job.label_accepted)
    return replace(job.lock, packages=sorted_dists(list(merged.values())), tool=tool)


def routed_for(lock: Lock, family: dict[str, LockedDist], new: Sequence[Requirement], observer: Progress) -> list[str]:
    """The packages uv must take from the torch index besides the family: those the lock
    routed there, and the new ones whose binary for the locked build lives there
    (companions.toml: xformers' cuXXX wheels; PyPI's wheel is another CUDA build), as
    install routes them (compat.resolver, `Plan.routed`)."""
    from torchfit.cache import load_companions
    from torchfit.compat.matrix import DEFAULT_INDEX

    routed: list[str] = [canonicalize_name(x) for x in strings(lock.plan().get("routed"))]
    variant = str(lock.plan().get("variant") or "")
    try:
        torch = Version(family["torch"].version or "")
    except InvalidVersion:
        return routed
    companions = load_companions()
    for req in new:
        name = canonicalize_name(req.name)
        comp = companions.get(name)
        if comp is not None and comp.route == DEFAULT_INDEX and name not in routed \
                and companions.routing(name, torch=torch, variant=variant):
            observer.info(f"{name}: its {variant} binary for torch {torch.public} comes from the torch "
                          "index, like torch (companions.toml)")
            routed.append(name)
    return routed


def matching_companion(lock: Lock, name: str, family: dict[str, LockedDist]) -> str | None:
    """The torchvision/torchaudio release the matrix pairs with the locked torch build, if any."""
    from torchfit.cache import load_matrix

    torch = family.get("torch")
    if torch is None or not torch.version or name not in ("torchvision", "torchaudio"):
        return None
    version = Version(torch.version)
    variant = str(lock.plan().get("variant") or version.local or "")
    build = load_matrix().find_build(version.public, variant)
    return getattr(build, name, None) if build is not None else None


# --- helpers -------------------------------------------------------------------------------


def _files(d: LockedDist) -> tuple[str | None, tuple[str | None, ...]]:
    return d.version, tuple(sorted(a.sha256 or "" for a in d.artifacts))


def _contains(req: Requirement, version: str | None) -> bool:
    if version is None:
        return False
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False




def _uv_error(text: str) -> str:
    """uv's failure, its lines joined (it wraps its explanation over several)."""
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _is_family_conflict(message: str) -> bool:
    """Did uv find no solution because of the torch family's pin (not a build failure, not a
    missing package)?"""
    return "No solution found" in message and bool(_FAMILY_CONFLICT.search(message))




def _marker_env(lock: Lock) -> dict[str, str]:
    """The marker environment of the env's Python (its version from the lock), for Requires-Dist."""
    env = {k: str(v) for k, v in default_environment().items()}
    full = str(lock.tool.python_version or lock.plan().get("python_version") or "")
    if re.match(r"^\d+\.\d+", full):
        env["python_full_version"] = full
        env["python_version"] = ".".join(full.split(".")[:2])
    env["extra"] = ""
    return env


def _family_requirements(metadata: str | None, env: dict[str, str]) -> list[Requirement]:
    """The torch-family Requires-Dist of a METADATA text that apply to `env`."""
    out = []
    for line in (metadata or "").splitlines():
        if not line.lower().startswith("requires-dist:"):
            continue
        try:
            req = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        if canonicalize_name(req.name) in FAMILY_PACKAGES and (req.marker is None or req.marker.evaluate(env)):
            out.append(req)
    return out
