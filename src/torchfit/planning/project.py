"""uv's passes over the whole project (`UvPasses`), and what they learn for the plan.

One pass is `lock.uv.compile_project` for the fleet's every platform (`lock.platforms`), its
every file judged against the exact interpreter (`compat.pyfit`: a release that does not
install there is kept out and uv asked again). Wheels only first; then the project's own wheel
pages (`lock.pages`); then, where wheels cannot answer and `--no-build` was not given, with
builds from source. A wheels-only answer that passed over a newer release without a wheel
(`compat.wheelonly`, issue 33) is solved again with it from its source distribution. What
torchfit tells uv (the constraints) is the caller's: `planning.constraints`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from urllib.parse import unquote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.background import Background
from torchfit.cache import fingerprint, read_record, write_record
from torchfit.compat.companions import Companions
from torchfit.compat.matrix import Build
from torchfit.compat.plan import Plan
from torchfit.compat.pyfit import judge_file_set
from torchfit.compat.wheelfit import misfits, no_wheel_releases, requester, target_of
from torchfit.compat.wheelonly import Passed, abi_line, kept_line, no_build_line
from torchfit.errors import (
    BadInput,
    IndexUnavailable,
    NoCompatibleSet,
    ResolveFailed,
    ToolMissing,
    ToolStalled,
    ToolTimeout,
)
from torchfit.index.client import UNREACHABLE_HINT
from torchfit.index.newer import passed_in_answer, start_reading, worth_reading
from torchfit.index.project import SourcePackages, read_requires_pythons, torch_source_packages
from torchfit.index.torchsource import is_flat
from torchfit.lock.pages import format_pages_tried, solve_from_pages
from torchfit.lock.platforms import Target, fleet_targets, solve_for_all
from torchfit.lock.uv import Compiled, classify_failure, compile_project, explanation, uv_version
from torchfit.lock.uvbin import find_uv
from torchfit.planning.refusal import wheels_missing, without_wheels
from torchfit.planning.sources import OnSources, TorchSources, as_url
from torchfit.runner import STALL_ENV, Runner, stall_timeout

# uv is silent while it retries a source that does not answer (uv 0.13.10: 3 retries, 5.8 s against a
# refused port, 12.4 s with its backoff; issue 35 measured 11 s of resolve -r saying nothing): a line
# off a terminal after UV_WAIT_S seconds, then the progress's heartbeat.
UV_WAIT = "uv, reading the project's sources (it retries one that does not answer)"
UV_WAIT_S = 3.0


class UvPasses(OnSources):
    """uv's passes over the project for one planning, and what they learned: the releases kept
    out per interpreter (`pyfit`), the platforms the last answer was checked on, a fleet group
    with no answer, the wheel pages used, the packages planned from source (issue 33) and the
    wheels kept; `routed`: the project packages sent to the torch index (the planner's choice)."""

    def __init__(self, torch: TorchSources) -> None:
        self.torch = torch
        self.fleet_refused: list[tuple[Target, str, Compiled]] = []  # a group whose platform has no answer, uv's words
        self.platforms: tuple[Target, ...] = ()  # the platforms the last answer was checked on
        self.routed: list[str] = []  # project packages sent to the torch index (companions.toml)
        self.pages: dict[str, str] = {}  # project packages from their own wheel page (lock.pages)
        self.unused_pages: dict[str, str] = {}  # ... pages tried that gave no answer, named before a build
        # (Python version, free-threaded) -> releases kept out: no file for that exact interpreter
        self.pyfit: dict[tuple[str, bool], list[tuple[str, str, str]]] = {}
        self.rp: dict[tuple[str, str], str | None] = {}  # (name, version) -> Requires-Python read
        # releases then built from source, without a wheel for the host: the host fact -> its hint (said)
        self.unfit: dict[str, str] = {}
        # issue 33: packages planned from their source distribution (their newest release has no
        # wheel for the host; every later wheels-only pass keeps them so), and what was passed over
        self.build_only: list[str] = []
        self.passed: dict[str, Passed] = {}
        # what the plan says of a wheel kept: (the package, the line, a warning or a reason), said
        # where the final answer still has that wheel (an exact pass may move it)
        self.kept: list[tuple[Passed, str, bool]] = []
        self.reading: list[Background[None]] = []

    def _uv(self) -> tuple[Runner, str]:
        runner = Runner()
        uv = find_uv(runner)
        # `uv --version` once per uv binary (the start-up cache, keyed by the file's fingerprint)
        key = f"{uv}:{fingerprint(uv) if uv else None}"
        known = read_record("uv-version", key) if uv else None
        version = known if isinstance(known, str) else (uv_version(runner, uv) if uv else None)
        if uv and version is not None and known is None:
            write_record("uv-version", key, str(version))
        if uv is None or version is None:
            raise NoCompatibleSet([f"resolving the project's packages needs uv (found: {uv or 'none'})"],
                                  ["pip install uv beside torchfit (it is a dependency of torchfit)"])
        return runner, uv

    def _specs(self, direct: Sequence[str] = ()) -> list[str]:
        """The project as uv resolves it: the family as the user asked (torch always, so its
        routing holds), the family members `direct` (met transitively before), the project."""
        family = [str(r) for r in self.request.requirements]
        names = {canonicalize_name(name_of(r)) for r in family}
        out = list(family)
        if "torch" not in names:
            out.insert(0, "torch")
        out += [n for n in direct if n not in names and n != "torch"]
        return [*out, *(r.text for r in self.request.project.others)]

    def compile(self, plan: Plan, work: str, name: str, constraints: Sequence[str], *,
                 direct: Sequence[str] = (), routed: Sequence[str] = (), no_build: bool = True) -> Compiled:
        """uv's answer, every file of it judged against the exact interpreter (compat.pyfit): a
        release that does not install there is kept out and uv asked again (said in the plan)."""
        key = (plan.python_version, plan.free_threaded)
        for n in range(4):
            out = self.pyfit.setdefault(key, [])
            compiled = self._compile_once(plan, work, f"{name}-py{n}" if n else name,
                                          [*constraints, *(f"{d}!={v}" for d, v, _ in out)],
                                          direct=direct, routed=routed, no_build=no_build)
            if not compiled.ok:
                return compiled
            misfits = self._interpreter_misfits(compiled, plan)
            if not misfits:
                return compiled
            out += misfits
        return compiled

    def _interpreter_misfits(self, compiled: Compiled, plan: Plan) -> list[tuple[str, str, str]]:
        """(name, version, why) of each resolved release with no file for the exact interpreter."""
        files = {(d.name, str(d.version)): [(a.filename or _basename(a.url or a.path or ""),
                                             a.url or "file://" + (a.path or ""), a.sha256) for a in d.artifacts]
                 for d in compiled.locked}
        unread = [(key, f) for key, f in files.items() if key not in self.rp]
        got = read_requires_pythons(lambda: self.torch.client, [(f"{n}=={v}", f) for (n, v), f in unread])
        for (n, v), _ in unread:
            self.rp[(n, v)] = got.get(f"{n}=={v}")
        listed = self._listed_files(plan, list(files)) if plan.free_threaded else {}
        out = []
        for (n, v), f in files.items():
            why = judge_file_set(n, v, listed.get((n, v)) or [unquote(name) for name, _, _ in f], self.rp.get((n, v)),
                                 plan.python_version, plan.free_threaded)
            if why is not None:
                out.append((n, v, why))
        return out

    def _listed_files(self, plan: Plan, releases: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
        """Every file the sources list for each release. uv cannot target a free-threaded CPython by
        version (uv 0.13.10: `--python-version 3.13t` "could not be parsed"), so it locks the GIL
        build's wheel; whether the release has one for `cp313t` is read from the sources' lists."""
        sources = self.settings.sources(plan.variant)
        indexes = [] if sources.no_index else [sources.index_url or "https://pypi.org/simple",
                                               *sources.extra_index_urls]
        reader = SourcePackages(self.torch.client, [as_url(sources.torch_index), *indexes], list(sources.find_links),
                                self.arch)
        out: dict[tuple[str, str], list[str]] = {}
        for n, v in releases:
            try:
                out[(n, v)] = [f.filename for ver, f in reader.files(n) if str(ver) == v]
            except (IndexUnavailable, BadInput):
                continue
        return out

    def _compile_once(self, plan: Plan, work: str, name: str, constraints: Sequence[str], *,
                      direct: Sequence[str] = (), routed: Sequence[str] = (), no_build: bool = True) -> Compiled:
        runner, uv = self._uv()
        sources = self.settings.sources(plan.variant)
        build_only = self.build_only if no_build else []
        options, env = sources.uv_compile(os.environ, work, no_build=no_build, build_only=build_only)
        targets = fleet_targets(self.hosts, self.arch)  # one per architecture of the fleet's groups
        served = self.torch.served.get(plan.variant)
        flat = (served is not None and served.kind == "flat") or is_flat(sources.torch_index)
        env = {**env, "UV_PYTHON_DOWNLOADS": "never"}  # an sdist's build never fetches an interpreter
        python = interpreter_for_uv(plan.python_version, plan.free_threaded, wheels_only="--no-build" in options,
                                    env=env)
        user = [r.text for r in self.request.project.constraints]  # the family's too: the user's word (issue 33)
        how = "wheels only" if no_build else "source distributions allowed: uv may build one to read its metadata"
        if build_only:
            how += f" but {', '.join(build_only)}, from source (no wheel of its newest release for this host)"
        self.progress.info(f"[resolve] uv: the whole project, torch from {self.torch.where(plan.variant)} "
                           f"({plan.variant}, Python {plan.python_version}; {how})")
        building = "" if no_build else " (building a package from source to read its metadata)"

        def compile_for(t: Target, extra: Sequence[str], suffix: str) -> Compiled:
            if suffix:
                self.progress.info(f"[resolve] uv: the same project for {t.label}")
            return compile_project(
                runner, uv, specs=self._specs(direct), torch_index=as_url(sources.torch_index), work=work,
                env=env, options=options, routed=routed, flat=flat, pages=self.pages, python=python,
                target=(plan.python_version, t.platform),
                constraints=[*user, *constraints, *extra], timeout=self.settings.timeout, stall=stall_timeout(),
                name=f"{name}-{suffix}" if suffix else name, on_start=self.start_reading,
                on_wait=self.progress.waiting("resolve", UV_WAIT, UV_WAIT_S))

        try:
            with self.progress.running("resolve"):  # a terminal's ticker while uv reads (and retries) the sources
                fleet = solve_for_all(targets, compile_for, compile_for(targets[0], [], ""))
            compiled = fleet.compiled
            if compiled.ok:  # an answer's platforms (a failed --explain probe leaves the plan's)
                self.platforms = fleet.checked
            if fleet.refused is not None:
                self.fleet_refused.append((fleet.refused, fleet.said, compiled))
        except ToolStalled as exc:  # the runner killed uv and every process it started (a build's too)
            raise ResolveFailed(
                f"uv made no progress for {exc.stall:g} s while resolving the project{building}: stopped",
                hint=f"a source that does not answer, or a build that waits on something: {STALL_ENV}=SECONDS "
                     "sets the limit; `--no-build` plans with wheels only") from None
        except ToolTimeout as exc:
            raise ResolveFailed(f"uv did not finish resolving the project{building} within {exc.timeout:g} s: "
                                "stopped", hint="`--no-build` plans with wheels only") from None
        except ToolMissing as exc:
            raise ResolveFailed(f"uv could not be run: {exc}") from None
        if not compiled.ok:
            kind, what = classify_failure(compiled.stderr)
            if kind == "unreachable":
                raise IndexUnavailable(what or sources.torch_index, explanation(compiled.stderr, 300), kind="connect",
                                       hint=UNREACHABLE_HINT)
            ref = self._reference(what) if kind == "reference" else None
            if ref is not None:  # the user's own `pkg @ URL/path`: bad input, uv's cause
                raise BadInput(f"{ref}: {explanation(compiled.stderr, 300)}")
        return compiled

    def _reference(self, what: str | None) -> str | None:
        """The project requirement (as written) whose direct reference is `what` (a URL or path uv named)."""
        if not what:
            return None
        for r in self.request.project.others:
            url = getattr(r.requirement, "url", None)
            if url and (what == url or unquote(what) in (unquote(url), unquote(url).removeprefix("file://"))):
                return r.text
        return None

    def from_pages(self, plan: Plan, builds: Sequence[Build], work: str, name: str, direct: Sequence[str],
                   routed: Sequence[str], companions: Companions,
                   constraints: Callable[[Plan, Sequence[Build]], list[str]]) -> Compiled | None:
        """Wheels only could not answer: the project's own wheel pages (`lock.pages`) before any build
        (`constraints`: torchfit's for the builds of one torch release)."""

        def compile_with(torch: Version, pages: dict[str, str]) -> Compiled:
            self.pages = pages
            return self.compile(plan, work, f"{name}-page-{torch}", constraints(
                plan, [b for b in builds if b.torch == torch]), direct=direct, routed=routed)

        names = [str(canonicalize_name(r.name)) for r in self.request.project.others]
        got, self.pages, self.unused_pages = solve_from_pages(
            companions, names, builds, plan.variant, compile_with,
            offline=self.settings.sources(plan.variant).offline)
        return got

    def pages_named(self) -> str:
        return format_pages_tried(self.unused_pages)

    def newer_from_source(self, plan: Plan, work: str, name: str, constraints: Sequence[str], compiled: Compiled,
                           *, direct: Sequence[str], routed: Sequence[str]) -> Compiled:
        """A wheels-only answer that passed over a newer release without a wheel (compat.wheelonly):
        solved again with those packages from source, unless --no-build or ABI-bound; said either way."""
        found = self.find_passed(plan, compiled)
        self.passed.update({p.name: p for p in found})
        if self.settings.no_build:
            self.kept += [(p, no_build_line(p), True) for p in found]
            return compiled
        self.kept += [(p, abi_line(p), p.unasked_pre) for p in found if p.abi]
        rebuild = [p for p in found if not p.abi]
        if not rebuild:
            return compiled
        self.build_only = [p.name for p in rebuild]
        for p in rebuild:  # said before uv may build it to read its metadata
            self.progress.info(f"[resolve] {p.name} {p.newer} has no wheel for this host (the newest with one is "
                               f"{p.chosen}): solving with it from its source distribution, as plain uv does (uv "
                               "may build it to read its metadata; `--no-build` keeps the wheel)")
        why, failed = "with it, the project's other requirements solve only with an older release", False
        for n in range(2):  # a second pass keeps from source only the packages the first moved on
            try:
                again = self.compile(plan, work, f"{name}-newer{n}", constraints, direct=direct, routed=routed)
            except ResolveFailed as exc:  # its build stalled or ran out of time: the wheel's answer stands
                why, failed = exc.message, True
                break
            got = {d.name: Version(str(d.version)) for d in again.locked}
            moved = [p.name for p in rebuild if p.name in self.build_only and p.name in got
                     and got[p.name] != p.chosen and (got[p.name] > p.chosen or p.unasked_pre)]
            if again.ok and moved == self.build_only:
                return again
            if not again.ok:
                why, failed = explanation(again.stderr, 300), True
            if not again.ok or not moved:
                break
            self.build_only = moved
        self.build_only = []
        self.kept += [(p, kept_line(p, why), True) for p in rebuild if p.unasked_pre or failed]
        return compiled

    def start_reading(self) -> None:
        """The direct requirements' pages, read while the plan is made and uv solves (issue 33);
        started as planning starts, not when uv does: the thread's first ~80 ms are requests'
        import (issue 37)."""
        if self.reading:
            return

        names = worth_reading(self.request.project.others)
        if names:  # the reader (its client: requests' import) made in that thread too

            def read_pages() -> None:
                for started in start_reading(self.torch.reader(), names):
                    started.wait()

            self.reading = [Background(read_pages, name="pages")]

    def find_passed(self, plan: Plan, compiled: Compiled) -> list[Passed]:
        glibcs = [g.major_minor() for g in (h.glibc_v for h in self.hosts) if g is not None]
        for started in self.reading:
            started.wait()
        wheels = {d.name: Version(str(d.version)) for d in compiled.locked if not d.needs_build}
        return passed_in_answer(self.torch.reader(), wheels, python=plan.python_version, arch=self.arch,
                                glibc=min(glibcs) if glibcs else (2, 28), free_threaded=plan.free_threaded,
                                requirements=self.request.project.others,
                                constraints=self.request.project.constraints,
                                skip=self.routed, allow_pre=self.settings.sources("cpu").pip.get_bool("pre"))

    def compile_pass(self, plan: Plan, work: str, name: str, constraints: Sequence[str], *,
                      direct: Sequence[str], routed: Sequence[str]) -> Compiled:
        """One exact pass: wheels only, then (where wheels cannot answer) source builds allowed."""
        compiled = self.compile(plan, work, name + "-wheels", constraints, direct=direct, routed=routed)
        if compiled.ok or self.settings.no_build or not wheels_missing(compiled.stderr):
            return compiled
        self.say_building(compiled, plan)
        return self.compile(plan, work, name + "-sdists", constraints, direct=direct, routed=routed, no_build=False)

    def say_building(self, compiled: Compiled, plan: Plan) -> None:
        """Said before uv runs anyone's code: which package is built, and why (the host fact that
        rules out its wheels, where it has some: kept for the plan's warning too)."""
        self.unfit.update(self.misfits_of(plan, explanation(compiled.stderr)))
        for label in without_wheels(compiled.stderr) or ["a package"]:
            page = self.unused_pages.get(str(canonicalize_name(label.split()[0])))
            where = f" (its own wheel page {page} gave uv no answer)" if page else ""
            fact = self.unfit_of(label)
            where += f" for this host ({fact})" if fact else ""
            self.progress.info(f"[resolve] {label} has no wheel{where}: building it to read its metadata "
                               "(runs its build; `--no-build` never does)")

    def unfit_of(self, label: str) -> str | None:
        """The host fact ruling out the wheels of `label` ("xformers 0.0.32.post2"), if judged."""
        return next((line.split(": ", 1)[1] for line in self.unfit if line.startswith((label + " ", label + ":"))),
                    None)

    def misfits_of(self, plan: Plan, said: str) -> dict[str, str]:
        """uv's "X==1.0 has no wheels with a matching ... tag": the host fact that rules out each
        wheel of X 1.0 in the user's sources (compat.wheelfit), and who wanted it; line -> hint.
        A package routed to the torch index is read from there alone, as uv does."""
        if not no_wheel_releases(said):
            return {}
        reader, routed = self.torch.reader(), {canonicalize_name(n) for n in self.routed}
        served = self.torch.served.get(plan.variant)
        torch_reader = torch_source_packages(self.torch.client, self.settings.sources(plan.variant).torch_index,
                                             self.arch, flat=served is not None and served.kind == "flat")
        found = misfits(said, lambda name: [(v, f.filename) for v, f in (
            torch_reader if canonicalize_name(name) in routed else reader).files(name)],
            target_of(self.hosts, plan.python_version, plan.free_threaded, self.arch),
            requester({r.name: r.public_text for r in self.request.project.others}))
        return {m.line: m.hint for m in found}


def interpreter_for_uv(python_version: str, free_threaded: bool, *, wheels_only: bool,
                       env: dict[str, str]) -> str | None:
    """The interpreter uv is given (`--python`), so that it runs none of its own search (issue 37).

    Given `--python-version` and no `--python`, `uv pip compile` still looks for an interpreter
    of that version, running each `python3.X` it meets on PATH: a pyenv shim is a chain of ~45
    programs (bash, pyenv-exec, pyenv-which, pyenv-hooks, readlink; uv 0.13.10, counted with
    `strace -f -e trace=execve`), 0.1-0.6 s of every compile before uv reads an index. With
    `--python` uv runs nothing: it reads the interpreter's facts from its cache (path and mtime).
    The target stays what `--python-version` and `--python-platform` say (uv's `--python-version`
    overrides the interpreter's version for the resolution); the interpreter only builds an sdist.
    So: torchfit's own interpreter where its Python (and free-threading) is the plan's; for a
    wheels-only pass (uv builds nothing) any CPython will do, so torchfit's own too; otherwise
    (a build for another Python) uv finds one of the plan's version as before. A `UV_PYTHON` in
    uv's environment is the user's choice, and stays in force.
    """
    if env.get("UV_PYTHON"):
        return None
    ours_ft = "t" in getattr(sys, "abiflags", "")  # a free-threaded build's ABI flag (PEP 703); no sysconfig load
    same = ".".join(python_version.split(".")[:2]) == f"{sys.version_info[0]}.{sys.version_info[1]}"
    if (same and ours_ft == free_threaded) or wheels_only:
        return sys.executable
    return None


def _basename(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[-1]


def name_of(text: str) -> str:
    """The project name a requirement line names (its leading name where it does not parse)."""
    try:
        return Requirement(text).name
    except InvalidRequirement:
        return text.split("=")[0].split("<")[0].split(">")[0].strip()

