"""Plan a request: the one planning step `resolve`, `install` and `export` share (issue 24).

Two kinds of knowledge meet here, each from where it is true:

- **what fits** is the matrix's and the host's (`compat.resolver.resolve`: drivers,
  arch lists, glibc, Pythons with wheels);
- **what exists** is the sources': the torch source is read for the builds it serves
  (`index.torchsource`, cut into the matrix by `compat.served.restrict_matrix`), and
  everything else is uv's to find, once, for the whole graph.

So a request with a project (or a torch source the user named) is planned in steps:

1. the torch builds that fit the hosts *and* that the source serves: the family alone
   through the resolver, which gives the preferred variant and Python;
2. **one solver for the graph**: `uv pip compile` of the whole project with torch
   constrained to exactly those builds (a specifier: `torch>=2.12,<=2.15.0,!=2.14.0`),
   the family routed to the torch index as direct dependencies, the CUDA packages the
   driver cannot run excluded, wheels only (`--no-build`) first, then (still before any build)
   a project's own wheel page for a fitting torch release (PyG's: `lock.pages`). uv chooses torch: a pin
   two levels down holds it where it must be. Once per (variant, Python) in preference
   order, stopping at the first that solves (usually the first);
3. a second, exact pass only where the first needs it: a family member that came in
   transitively (routed now as a direct dependency), a companion (companions.toml) whose
   resolved release has no binary for the chosen torch (constrained to those that do),
   a companion whose binary for this build is the torch index's (routed there);
4. the plan is the matrix's row for the torch uv chose, with `resolved` exactly uv's set:
   what resolve prints is what install installs, the lock records and export writes.

A request of the torch family alone against the public index keeps the fast path: the
matrix alone, no network (the matrix tracks that index).

When uv finds no answer, the old first-level reading explains it in host terms where it
can (`compat.resolver.resolve` with the project's METADATA: the culprit package, its
torch pin and the host fact that rules out each build it needs); otherwise uv's own
explanation is shown, with the builds that fit this host and that the source serves. A
release uv finds no wheel for leads with the host fact that rules its wheels out
(`compat.wheelfit`: glibc, Python ABI, machine), before uv's words; one without a wheel
for the Python tried sends the plan to the host's next Python. A source that cannot be
reached is `index-unavailable`, never "no compatible set".
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING
from urllib.parse import unquote

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import FAMILY_PACKAGES, Build, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.request import Request
from torchfit.errors import (
    BadInput,
    IndexUnavailable,
    NoCompatibleSet,
    ResolveFailed,
    ToolMissing,
    ToolStalled,
    ToolTimeout,
)
from torchfit.progress import Progress
from torchfit.redact import strip_credentials

if TYPE_CHECKING:
    from torchfit.background import Background
    from torchfit.compat.companions import Companions
    from torchfit.compat.served import Served
    from torchfit.compat.wheelonly import Passed
    from torchfit.index.client import IndexClient
    from torchfit.index.project import SourcePackages
    from torchfit.index.sources import Sources
    from torchfit.lock.model import LockedDist
    from torchfit.lock.platforms import Target
    from torchfit.lock.uv import Compiled
    from torchfit.runner import Runner

# (variant, Python) pairs tried before giving up: each is one uv run.
MAX_ATTEMPTS = 4
# Seconds without an answer before a planning read of a torch source gives up (one retry).
PLAN_READ_TIMEOUT = 10.0


@dataclass(frozen=True)
class PlanSettings:
    """What the command line decided (cli/settings.py), as values.

    `sources(variant)`: the install's sources with that variant's torch index;
    `torch_given`: the user named the torch source (flag, environment, a lock), so it is
    read even for a request of the family alone.
    """

    sources: Callable[[str], Sources]
    torch_given: bool = False
    allow_insecure: bool = False
    timeout: float = 600.0
    explain: bool = False
    no_build: bool = False
    # install: the plan's https files are about to be downloaded; check where they redirect first
    check_downloads: bool = False


def make_plan(hosts: Sequence[HostFacts], request: Request, matrix: Matrix, settings: PlanSettings, *,
              progress: Progress | None = None) -> Plan:
    """The plan for `request` on `hosts`: NoCompatibleSet, IndexUnavailable or BadInput if none."""
    from torchfit.compat.resolver import resolve

    if not request.project.others and not settings.torch_given:
        return resolve(hosts, request, matrix)
    return _Planner(hosts, request, matrix, settings, progress or Progress()).plan()


def family_request(request: Request) -> Request:
    """The request without the project's packages (its -c constraints kept: they bind the family too)."""
    return replace(request, project=replace(request.project, requirements=()))


class _Planner:
    def __init__(self, hosts: Sequence[HostFacts], request: Request, matrix: Matrix, settings: PlanSettings,
                 progress: Progress) -> None:
        self.hosts = list(hosts)
        self.request = request
        self.matrix = matrix
        self.settings = settings
        self.progress = progress
        self.arch = hosts[0].arch or os.uname().machine
        # every group's architecture (a fleet of x86_64 and aarch64): builds must be served for each
        self.archs = list(dict.fromkeys(h.arch or self.arch for h in hosts))
        self.fleet_refused: list[tuple[Target, str, Compiled]] = []  # a group whose platform has no answer, uv's words
        self.platforms: tuple[Target, ...] = ()  # the platforms the last answer was checked on
        # variant -> what its torch source serves; None: not read (the public index, which
        # the matrix tracks: a request of the default source keeps the matrix's word)
        self.served: dict[str, Served | None] = {}
        self._client: IndexClient | None = None
        self._client_lock = threading.Lock()
        self._companions: Companions | None = None
        self.tried: list[str] = []  # what each uv run said, for a refusal
        self.direct: list[str] = []  # family members made direct dependencies (routed to the torch index)
        self.python_failed = False  # the last uv run failed on the interpreter (Requires-Python)
        self.uv_said: list[str] = []  # uv's own explanations, in order
        self.routed: list[str] = []  # project packages sent to the torch index (companions.toml)
        self.unrouted: set[str] = set()  # ... that the torch source lacks: left to the user's other sources
        self.pages: dict[str, str] = {}  # project packages from their own wheel page (lock.pages)
        self.unused_pages: dict[str, str] = {}  # ... pages tried that gave no answer, named before a build
        self.notes: list[str] = []  # warnings of the planning itself (a source that could not be read)
        self.force_read: set[str] = set()  # variants whose remote source uv's answer asks to read
        # (Python version, free-threaded) -> releases kept out: no file for that exact interpreter
        self._pyfit: dict[tuple[str, bool], list[tuple[str, str, str]]] = {}
        self._rp: dict[tuple[str, str], str | None] = {}  # (name, version) -> Requires-Python read
        self.held: list[str] = []  # torch narrowed by the user's companion pins (companions.toml), said
        self.companion_refused = False  # a companion pin left no torch build: said in `self.tried`
        self.misfits: dict[str, str] = {}  # releases without a wheel for the host: the host fact -> its hint
        self.unfit: dict[str, str] = {}  # the same, for releases then built from source (said, not refused)
        # issue 33: packages planned from their source distribution (their newest release has no
        # wheel for the host; every later wheels-only pass keeps them so), and what was passed over
        self.build_only: list[str] = []
        self.passed: dict[str, Passed] = {}
        # what the plan says of a wheel kept: (the package, the line, a warning or a reason), said
        # where the final answer still has that wheel (an exact pass may move it)
        self.kept: list[tuple[Passed, str, bool]] = []
        self.reading: list[Background[None]] = []
        self._sources_reader: SourcePackages | None = None

    # -- the torch source ---------------------------------------------------------------
    @property
    def companions(self) -> Companions:
        """data/companions.toml, loaded once per planning (each load decodes the cached record)."""
        if self._companions is None:
            from torchfit.cache import load_companions

            self._companions = load_companions()
        return self._companions

    @property
    def client(self) -> IndexClient:
        with self._client_lock:  # made once, whichever thread asks first (a page read runs beside uv)
            return self._make_client()

    def _make_client(self) -> IndexClient:
        if self._client is None:
            from torchfit.index.client import IndexClient

            # A planning read, bounded well below install's stall limit: a mirror that does not answer
            # leaves a family-only plan to the matrix (warned) instead of holding the command.
            self._client = IndexClient(progress=self.progress, honor_max_age=True,
                                       allow_insecure=self.settings.allow_insecure,
                                       timeout=min(PLAN_READ_TIMEOUT, self.settings.timeout), retries=1)
        return self._client

    def read_source(self, variant: str) -> Served | None:
        if variant not in self.served:
            from torchfit.index.torchsource import local_path, read_torch_source

            where = self.settings.sources(variant).torch_index
            # A remote source with a project is uv's to read (it reads the same page): read here only
            # when uv's answer asks for it (no answer, a build of another variant); local ones cost ms.
            deferred = bool(self.request.project.others) and local_path(where) is None \
                and variant not in self.force_read
            try:
                self.served[variant] = read_torch_source(self.client, where, variant) \
                    if self.settings.torch_given and not deferred else None
                served = self.served[variant]
                if served is not None and served.off_site:
                    from torchfit.index.pages import format_off_site

                    self.notes.append(format_off_site(f"the torch source {served.where}", served.off_site))
            except IndexUnavailable as exc:
                if self.request.project.others:
                    raise  # uv must read it anyway: say so now
                # The family alone (an export written on a login node for a mirror it cannot reach):
                # the matrix's plan, said to be unchecked against the source.
                self.served[variant] = None
                self.notes.append(f"the torch source {exc.url} could not be read ({exc.why}): the plan is the "
                                  "matrix's, not checked against what that source serves")
        return self.served[variant]

    def measured(self) -> dict[str, Served]:
        return {v: s for v, s in self.served.items() if s is not None}

    def where(self, variant: str) -> str:
        """The torch source of `variant`, as shown (credentials redacted)."""
        from torchfit.redact import redact

        served = self.served.get(variant)
        return served.where if served is not None else redact(self.settings.sources(variant).torch_index)

    def present(self, variant: str) -> list[Version]:
        """What the source lists for `variant`, or (not read) the matrix's releases of it."""
        served = self.served.get(variant)
        if served is not None:
            return sorted({v for a in self.archs for v in served.versions(a)}, reverse=True)
        return sorted({b.torch for b in self.matrix.builds if b.variant == variant}, reverse=True)

    def fitting(self, excluded: set[str], request: Request) -> tuple[Plan, Matrix]:
        """The resolver's plan for the family among builds that fit and that the sources
        serve (each variant's source read when the resolver first prefers it)."""
        from torchfit.compat.resolver import resolve
        from torchfit.compat.served import restrict_for_all

        while True:
            cut = restrict_for_all(self.matrix, self.measured(), self.archs)
            cut = replace(cut, builds=tuple(b for b in cut.builds if b.variant not in excluded))
            try:
                plan = resolve(self.hosts, request, cut)  # hints checked against the builds that exist
            except NoCompatibleSet as exc:
                raise self._with_sources(exc) from None
            if plan.variant in self.served:
                return plan, cut
            self.read_source(plan.variant)

    def _with_sources(self, exc: NoCompatibleSet) -> NoCompatibleSet:
        """A refusal among served builds says what the sources had (variants a mirror does not
        hold on one line), then what uv said."""
        from torchfit.compat.served import describe_served

        measured = self.measured()
        if not measured and not self.tried:
            return exc
        exc = NoCompatibleSet(exc.conflicts, self._served_hints(exc.hints), exc.remedies)
        measured = self.measured()
        lines = []
        for arch in self.archs:  # a fleet's every architecture: each must be served
            on = f" for {arch}" if len(self.archs) > 1 else ""
            lines += [f"{s.where} ({s.variant}) serves torch{on} {describe_served(s, arch)}"
                      for s in measured.values() if s.for_any(arch)]
            empty = [s.variant for s in measured.values() if not s.for_any(arch)]
            if empty:
                where = {s.where for s in measured.values() if s.variant in empty}
                lines.append(f"no {'/'.join(empty)} torch wheel for {arch} on "
                             f"{', '.join(sorted(where)) if len(where) < 3 else 'the torch source'}")
        from torchfit.lock.platforms import bare_groups

        lead, fix = bare_groups(self.hosts, self.arch, measured)
        return NoCompatibleSet(list(dict.fromkeys([*lead, *exc.conflicts, *lines, *self.tried])),
                               [*fix, *exc.hints] or ["give a torch source that holds a build for this host "
                                                      "(--torch-index-url; `torchfit docs mirrors`)"])

    def _served_hints(self, hints: Sequence[str]) -> list[str]:
        """The resolver checked its hints against the matrix; with a torch source of the user's,
        a hint whose build that source does not serve is dropped (its variant read to know)."""
        from packaging.version import InvalidVersion

        if not self.settings.torch_given:
            return list(hints)
        out = []
        for hint in hints:
            m = re.search(r"to get torch (\S+) (\S+?)\b(?![.\d])", hint)
            if m:
                try:
                    version = Version(m.group(1))
                except InvalidVersion:
                    out.append(hint)
                    continue
                try:
                    served = self.read_source(m.group(2))
                except IndexUnavailable:
                    served = None
                if served is not None and not all(served.for_build(version, a) for a in self.archs):
                    continue
            out.append(hint)
        return out

    # -- the plan -------------------------------------------------------------------------
    def plan(self) -> Plan:
        fam = family_request(self.request)
        if not self.request.project.others:
            plan, _ = self.fitting(set(), fam)
            return self._finish_family(plan)
        return self._plan_project(fam)

    def _finish_family(self, plan: Plan) -> Plan:
        source = self.settings.sources(plan.variant)
        said = [f"torch {plan.torch} {plan.variant}: served by {self.where(plan.variant)} (read from the source: "
                "measured)"] if self.served.get(plan.variant) is not None else []
        return replace(plan, index_url=strip_credentials(source.torch_index), reasons=(*plan.reasons, *said),
                       warnings=tuple(dict.fromkeys([*plan.warnings, *self.notes])))

    def _plan_project(self, fam: Request) -> Plan:
        from torchfit.owned import temp_dir

        for r in self.request.project.others:
            check_local_reference(r.text, getattr(r.requirement, "url", None))
        self._start_reading()

        excluded: set[str] = set()
        request = fam
        with temp_dir("resolve") as work:
            for attempt in range(MAX_ATTEMPTS):
                try:
                    first, cut = self.fitting(excluded, request)
                except NoCompatibleSet:
                    if not self.tried:
                        raise
                    break  # no other (variant, Python) to try: uv's answers explain it
                builds = self._fitting_builds(request, cut, first)
                got = self._solve(first, builds, work, f"try{attempt}")
                unread = self.settings.torch_given and self.served.get(first.variant) is None \
                    and first.variant not in self.force_read
                if got is not None and (not unread or Version(got[1]).local in (None, first.variant)):
                    compiled, torch = got
                    first, builds, compiled = self._best_variant(request, cut, excluded, first, builds, compiled,
                                                                 Version(Version(torch).public), work)
                    return self._final(first, cut, builds, compiled, _version_of(compiled, "torch") or torch, work)
                if unread:  # read the remote source now: its builds and Pythons decide the retry
                    self.force_read.add(first.variant)
                    self.served.pop(first.variant, None)
                    self.tried = self.tried[:-1] if got is None else self.tried
                    continue
                if self.python_failed:
                    # the interpreter is what fails (Requires-Python): the next Python, same variant
                    from packaging.specifiers import SpecifierSet

                    python = (request.python or SpecifierSet()) & SpecifierSet(f"!={first.python}.*")
                    # a release the user pinned exactly that declares a Requires-Python: only a Python it
                    # accepts is tried next (vllm==0.10.1.1, <3.13: pyenv's 3.12, not 3.14)
                    for n, v, _ in self._pyfit.get((first.python_version, first.free_threaded), []):
                        rp = self._rp.get((n, v))
                        if rp and self._pinned_exactly(n, v):
                            with contextlib.suppress(InvalidSpecifier):
                                python &= SpecifierSet(rp)
                    request = replace(request, python=python)
                else:
                    excluded.add(first.variant)
            raise self._refusal(fam)

    def _pinned_exactly(self, name: str, version: str) -> bool:
        """Does the user's own requirement or constraint pin `name` to exactly `version`?"""
        for r in (*self.request.project.others, *self.request.project.constraints):
            spec = r.requirement.specifier
            if r.name == name and any(s.operator in ("==", "===") and "*" not in s.version for s in spec) \
                    and spec.contains(version, prereleases=True):
                return True
        return False

    def _best_variant(self, request: Request, cut: Matrix, excluded: set[str], first: Plan,
                      builds: list[Build], compiled: Compiled, torch: Version,
                      work: str) -> tuple[Plan, list[Build], Compiled]:
        """The variants were tried in the order of the newest release; uv chose `torch`, maybe an
        older one, for which the host may prefer another variant (2.8.0 cu128 before cu126 on
        driver 570): that variant, torch pinned, when its source has the build and uv solves."""
        from torchfit.compat.resolver import resolve

        pinned = replace(request, requirements=(*request.requirements, Requirement(f"torch=={torch}")))
        try:
            best = resolve(self.hosts, pinned, replace(cut, builds=tuple(
                b for b in cut.builds if b.variant not in excluded)), check_hints=False)
        except NoCompatibleSet:
            return first, builds, compiled
        if best.variant == first.variant or self.pages:  # a wheel page is of one torch build
            return first, builds, compiled
        self.read_source(best.variant)
        alt_cut = replace(cut, builds=tuple(b for b in cut.builds if b.variant == best.variant))
        alt_builds = self._fitting_builds(request, alt_cut, best)
        constraints = self._base_constraints(best, [b for b in alt_builds if b.torch == torch])
        if not constraints:
            return first, builds, compiled
        again = self._compile(best, work, f"variant-{best.variant}", constraints, direct=self.direct,
                              routed=self.routed, no_build=self.settings.no_build or not self._built(compiled))
        if not again.ok:
            return first, builds, compiled
        return best, alt_builds, again

    @staticmethod
    def _built(compiled: Compiled) -> bool:
        """Does the answer hold a package built from source (an sdist, no wheel)?"""
        return any(d.needs_build for d in compiled.locked)

    def _fitting_builds(self, request: Request, cut: Matrix, first: Plan) -> list[Build]:
        """The builds of the plan's variant that fit every host with the plan's Python."""

        from torchfit.compat.provider import Context

        pinned = replace(request, python=SpecifierSet(f"=={first.python}.*"), free_threaded=first.free_threaded)
        ctx = Context(self.hosts, pinned, cut)
        return [b for b in ctx.ordered if b.variant == first.variant and not ctx.refusals(b)]

    # -- uv -------------------------------------------------------------------------------
    def _uv(self) -> tuple[Runner, str]:
        from torchfit.cache import fingerprint, read_record, write_record
        from torchfit.lock.uv import find_uv, uv_version
        from torchfit.runner import Runner

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
        names = {canonicalize_name(_name(r)) for r in family}
        out = list(family)
        if "torch" not in names:
            out.insert(0, "torch")
        out += [n for n in direct if n not in names and n != "torch"]
        return [*out, *(r.text for r in self.request.project.others)]

    def _compile(self, plan: Plan, work: str, name: str, constraints: Sequence[str], *,
                 direct: Sequence[str] = (), routed: Sequence[str] = (), no_build: bool = True) -> Compiled:
        """uv's answer, every file of it judged against the exact interpreter (compat.pyfit): a
        release that does not install there is kept out and uv asked again (said in the plan)."""
        key = (plan.python_version, plan.free_threaded)
        for n in range(4):
            out = self._pyfit.setdefault(key, [])
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
        from torchfit.compat.pyfit import judge_file_set
        from torchfit.index.project import read_requires_pythons

        files = {(d.name, str(d.version)): [(a.filename or _basename(a.url or a.path or ""),
                                             a.url or "file://" + (a.path or ""), a.sha256) for a in d.artifacts]
                 for d in compiled.locked}
        unread = [(key, f) for key, f in files.items() if key not in self._rp]
        got = read_requires_pythons(lambda: self.client, [(f"{n}=={v}", f) for (n, v), f in unread])
        for (n, v), _ in unread:
            self._rp[(n, v)] = got.get(f"{n}=={v}")
        listed = self._listed_files(plan, list(files)) if plan.free_threaded else {}
        out = []
        for (n, v), f in files.items():
            why = judge_file_set(n, v, listed.get((n, v)) or [unquote(name) for name, _, _ in f], self._rp.get((n, v)),
                                 plan.python_version, plan.free_threaded)
            if why is not None:
                out.append((n, v, why))
        return out

    def _listed_files(self, plan: Plan, releases: Sequence[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
        """Every file the sources list for each release. uv cannot target a free-threaded CPython by
        version (uv 0.13.10: `--python-version 3.13t` "could not be parsed"), so it locks the GIL
        build's wheel; whether the release has one for `cp313t` is read from the sources' lists."""
        from torchfit.index.project import SourcePackages

        sources = self.settings.sources(plan.variant)
        indexes = [] if sources.no_index else [sources.index_url or "https://pypi.org/simple",
                                               *sources.extra_index_urls]
        reader = SourcePackages(self.client, [_as_url(sources.torch_index), *indexes], list(sources.find_links),
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
        from torchfit.index.torchsource import is_flat
        from torchfit.lock.platforms import fleet_targets, solve_for_all
        from torchfit.lock.uv import classify_failure, compile_project
        from torchfit.runner import STALL_ENV, stall_timeout

        runner, uv = self._uv()
        sources = self.settings.sources(plan.variant)
        build_only = self.build_only if no_build else []
        options, env = sources.uv_compile(os.environ, work, no_build=no_build, build_only=build_only)
        targets = fleet_targets(self.hosts, self.arch)  # one per architecture of the fleet's groups
        served = self.served.get(plan.variant)
        flat = (served is not None and served.kind == "flat") or is_flat(sources.torch_index)
        env = {**env, "UV_PYTHON_DOWNLOADS": "never"}  # an sdist's build never fetches an interpreter
        user = [r.text for r in self.request.project.constraints]  # the family's too: the user's word (issue 33)
        how = "wheels only" if no_build else "source distributions allowed: uv may build one to read its metadata"
        if build_only:
            how += f" but {', '.join(build_only)}, from source (no wheel of its newest release for this host)"
        self.progress.info(f"[resolve] uv: the whole project, torch from {self.where(plan.variant)} "
                           f"({plan.variant}, Python {plan.python_version}; {how})")
        building = "" if no_build else " (building a package from source to read its metadata)"

        def compile_for(t: Target, extra: Sequence[str], suffix: str) -> Compiled:
            if suffix:
                self.progress.info(f"[resolve] uv: the same project for {t.label}")
            return compile_project(
                runner, uv, specs=self._specs(direct), torch_index=_as_url(sources.torch_index), work=work,
                env=env, options=options, routed=routed, flat=flat, pages=self.pages, target=(plan.python_version, t.platform),
                constraints=[*user, *constraints, *extra], timeout=self.settings.timeout, stall=stall_timeout(),
                name=f"{name}-{suffix}" if suffix else name)

        try:
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
            from torchfit.lock.uv import explanation

            kind, what = classify_failure(compiled.stderr)
            if kind == "unreachable":
                raise IndexUnavailable(what or sources.torch_index, explanation(compiled.stderr, 300), kind="connect",
                                       hint="check the URL and the network, or give a reachable mirror with "
                                            "--torch-index-url / --index-url (`torchfit docs mirrors`)")
            ref = self._reference(what) if kind == "reference" else None
            if ref is not None:  # the user's own `pkg @ URL/path`: bad input, uv's cause
                raise BadInput(f"{ref}: {explanation(compiled.stderr, 300)}")
        return compiled

    def _reference(self, what: str | None) -> str | None:
        """The project requirement (as written) whose direct reference is `what` (a URL or path uv named)."""
        from urllib.parse import unquote

        if not what:
            return None
        for r in self.request.project.others:
            url = getattr(r.requirement, "url", None)
            if url and (what == url or unquote(what) in (unquote(url), unquote(url).removeprefix("file://"))):
                return r.text
        return None

    def _base_constraints(self, plan: Plan, builds: Sequence[Build]) -> list[str]:
        from torchfit.compat.served import allowed_for_all, torch_constraint

        allowed = allowed_for_all(builds, self.served.get(plan.variant), self.archs)
        if not allowed:
            return []
        companions = self.companions
        allowed = self._held_by_companion_pins(companions, allowed, plan.variant)
        if not allowed:
            return []
        # torchfit's facts enter uv before it solves (issue 33): the companions' binary tables too
        return [f"torch{torch_constraint(allowed, self.present(plan.variant))}", *self._cuda_exclusions(),
                *companions.torch_exclusions(allowed)]

    def _held_by_companion_pins(self, companions: Companions, allowed: list[Version], variant: str) -> list[Version]:
        """A companion the user pins whose METADATA names no torch (torchcodec==0.10.0) holds
        torch to what its binary needs (companions.toml), before uv solves; none left: why, in
        `self.tried` (a refusal names both the pin and the builds)."""
        for r in self.request.project.others:
            rels = companions.torch_needed(r.name, r.requirement.specifier)
            if rels is None:
                continue
            needs = [companions.torch_of(rel) for rel in rels]
            kept = [v for v in allowed if any(n is not None and n.contains(Version(v.public), prereleases=True)
                                              for n in needs)]
            srcs = ", ".join(dict.fromkeys(rel.source.get("torch", "inferred") for rel in rels))
            what = "; ".join(dict.fromkeys(f"torch{n}" for n in needs if n is not None))
            if not kept:
                self.tried.append(f"{r.text}: its binary needs {what} (companions.toml: {srcs}); the {variant} "
                                  f"torch builds that fit this host and your pins: "
                                  f"{', '.join(str(v) for v in allowed[:6])}")
                self.companion_refused = True
                return []
            if kept != allowed:
                self.held.append(f"torch held to {what} by your {r.text}: its binary needs it and its METADATA "
                                 f"does not say so (companions.toml: {srcs})")
            allowed = kept
        return allowed

    def _routed_first(self, plan: Plan, builds: Sequence[Build]) -> list[str]:
        """Direct requirements whose binary for these builds is the torch index's (companions.toml:
        xformers' cuXXX wheels, where PyPI's is another CUDA): routed there from the first pass."""
        from torchfit.compat.matrix import DEFAULT_INDEX

        companions = self.companions
        out = []
        for r in self.request.project.others:
            comp = companions.get(r.name)
            if comp is None or comp.route != DEFAULT_INDEX:
                continue
            if any(companions.routing(r.name, torch=b.torch, variant=b.variant) for b in builds):
                out.append(comp.name)
        return out

    def _from_pages(self, plan: Plan, builds: Sequence[Build], work: str, name: str, direct: Sequence[str],
                    routed: Sequence[str]) -> Compiled | None:
        """Wheels only could not answer: the project's own wheel pages (`lock.pages`) before any build."""
        from torchfit.lock.pages import solve_from_pages

        def compile_with(torch: Version, pages: dict[str, str]) -> Compiled:
            self.pages = pages
            return self._compile(plan, work, f"{name}-page-{torch}", self._base_constraints(
                plan, [b for b in builds if b.torch == torch]), direct=direct, routed=routed)

        names = [str(canonicalize_name(r.name)) for r in self.request.project.others]
        got, self.pages, self.unused_pages = solve_from_pages(
            self.companions, names, builds, plan.variant, compile_with,
            offline=self.settings.sources(plan.variant).offline)
        return got

    def _pages_named(self) -> str:
        from torchfit.lock.pages import format_pages_tried

        return format_pages_tried(self.unused_pages)

    def _cuda_exclusions(self) -> list[str]:
        """Constraints that keep out CUDA packages of a major the driver cannot run."""
        from torchfit.compat.cudapkgs import cuda_exclusions

        return cuda_exclusions(self.matrix, self.hosts)

    def _solve(self, plan: Plan, builds: Sequence[Build], work: str, name: str) -> tuple[Compiled, str] | None:
        """uv's answer for the project with torch among `builds`; None (and why, in
        `self.tried`) when there is none. Wheels only first; then with builds from source."""
        from torchfit.lock.uv import explanation, routed_missing

        self.companion_refused = False
        constraints = self._base_constraints(plan, builds)
        if not constraints and self.companion_refused:
            return None
        if not constraints:
            self.tried.append(f"{plan.variant}: no build of it that fits this host is served by "
                              f"{self.where(plan.variant)}")
            return None
        routed = self._routed_first(plan, builds)
        self.routed = routed  # where a release uv finds no wheel for is read from (_misfits)
        self._start_reading()
        compiled = None
        direct: list[str] = []
        for no_build in [True, False]:
            while True:
                compiled = self._compile(plan, work, f"{name}-{'wheels' if no_build else 'sdists'}-{len(direct)}",
                                         constraints, direct=direct, routed=routed, no_build=no_build)
                # uv routes only direct dependencies to the torch index ([tool.uv.sources]): a
                # companion that came in further down and was not found elsewhere is made direct.
                missing = [n for n in ("torchvision", "torchaudio")
                           if not compiled.ok and n not in direct and re.search(rf"\b{n}\b", compiled.stderr)]
                # A companion routed to the torch index that this torch source lacks (a mirror of the
                # family only): looked for in the user's other sources instead (issue 33, class 9).
                lacking = routed_missing(compiled.stderr, routed) if not compiled.ok else []
                if not missing and not lacking:
                    break
                direct += missing
                routed = [n for n in routed if n not in lacking]
                self.unrouted |= set(lacking)
            if no_build and not compiled.ok and _wheels_missing(compiled.stderr):
                compiled = self._from_pages(plan, builds, work, name, direct, routed) or compiled
            # Builds from source only where wheels alone cannot answer, and never with --no-build.
            if compiled.ok or self.settings.no_build or not _wheels_missing(compiled.stderr):
                break
            if no_build:
                self._say_building(compiled, plan)
        assert compiled is not None
        if compiled.ok and (no_build or self.settings.no_build):
            compiled = self._newer_from_source(plan, work, name, constraints, compiled, direct=direct, routed=routed)
        self.direct = direct
        self.routed = routed
        if not compiled.ok:
            from torchfit.lock.uv import classify_failure, names_family, not_found

            said = explanation(compiled.stderr)
            kind, _ = classify_failure(compiled.stderr)
            self.misfits.update(self._misfits(plan, said))
            misfit = self._pyfit.get((plan.python_version, plan.free_threaded), [])
            if misfit and kind == "no-solution":  # no release of it installs on this interpreter: the next Python
                self.python_failed = True
                self.tried += [m[2] for m in misfit if m[2] not in self.tried]
                self.uv_said.append(said)
                return None
            group = next(((t, why) for t, why, c in self.fleet_refused if c is compiled), None)
            if group is not None:  # one group's platform has no answer the others share
                if not names_family(group[1]):
                    raise self._group_refusal(*group)
                self.tried.append(f"{group[0].label}: {group[1]}")  # torch itself: another variant may serve it
                return None
            if kind == "build":  # a build that failed: no other variant would help
                raise ResolveFailed(
                    f"uv could not build a package to read its metadata ({plan.variant}, Python "
                    f"{plan.python_version}): {said}",
                    hint=f"give a source with its wheel (--find-links{self._pages_named()}), or `--no-build` to "
                         "plan with wheels only")
            if kind != "no-solution":  # uv itself, or what it could not read: uv's words
                raise ResolveFailed(f"uv could not resolve the project: {said}")
            # uv names the interpreter when Requires-Python is what fails ("the requested Python version"),
            # or a release without a wheel for its ABI ("no wheels with a matching Python ABI tag"): another
            # of the host's Pythons may have one
            self.python_failed = bool(re.search(r"requested Python version|requires Python|Python ?[<>=!~]|"
                                                r"matching Python (?:ABI|implementation) tag", said, re.IGNORECASE))
            if not self.python_failed and not names_family(said):
                # The torch family is not in uv's cause (a name no source has, two of the project's own
                # pins): no other variant or Python would help, and no torch hint applies.
                missing = not_found(said)
                if missing:  # not a conflict: a name no source has
                    raise ResolveFailed(f"{', '.join(missing)}: in none of your sources (uv: {said})",
                                        hint="check the name, or give the index or directory that has it "
                                             "(--index-url, --extra-index-url, --find-links)")
                wheels = _without_wheels(compiled.stderr) if self.settings.no_build else []
                hint = (f"{', '.join(wheels)}: no wheel for this host in your sources, and --no-build plans with "
                        f"wheels only: give a source with its wheel (--find-links{self._pages_named()}), or drop "
                        "--no-build" if wheels else
                        "the project's own requirements conflict as uv says: relax the pins it names")
                # a release with no wheel for this host: the host fact leads, uv's words follow
                from torchfit.compat.wheelfit import lead_with

                raise lead_with(NoCompatibleSet([said], [] if self.misfits and not wheels else [hint]), self.misfits)
            self.tried.append(f"uv, with torch limited to the {plan.variant} builds that fit this host and "
                              f"that {self.where(plan.variant)} serves ({constraints[0]}) and Python "
                              f"{plan.python_version}: {said}")
            self.uv_said.append(said)
            return None
        torch = next((d.version for d in compiled.locked if d.name == "torch"), None)
        if torch is None:
            return None
        return compiled, str(torch)

    def _newer_from_source(self, plan: Plan, work: str, name: str, constraints: Sequence[str], compiled: Compiled,
                           *, direct: Sequence[str], routed: Sequence[str]) -> Compiled:
        """A wheels-only answer that passed over a newer release without a wheel (compat.wheelonly):
        solved again with those packages from source, unless --no-build or ABI-bound; said either way."""
        from torchfit.compat.wheelonly import abi_line, kept_line, no_build_line
        from torchfit.lock.uv import explanation

        found = self._find_passed(plan, compiled)
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
                again = self._compile(plan, work, f"{name}-newer{n}", constraints, direct=direct, routed=routed)
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

    def _start_reading(self) -> None:
        """The direct requirements' pages, read while the plan is made and uv solves (issue 33);
        started as planning starts, not when uv does: the thread's first ~80 ms are requests'
        import (issue 37)."""
        if self.reading:
            return
        from torchfit.index.newer import start_reading, worth_reading

        names = worth_reading(self.request.project.others)
        if names:  # the reader (its client: requests' import) made in that thread too
            from torchfit.background import Background

            def read_pages() -> None:
                for started in start_reading(self._reader(), names):
                    started.wait()

            self.reading = [Background(read_pages, name="pages")]

    def _find_passed(self, plan: Plan, compiled: Compiled) -> list[Passed]:
        from torchfit.index.newer import passed_in_answer

        glibcs = [g.major_minor() for g in (h.glibc_v for h in self.hosts) if g is not None]
        for started in self.reading:
            started.wait()
        wheels = {d.name: Version(str(d.version)) for d in compiled.locked if not d.needs_build}
        return passed_in_answer(self._reader(), wheels, python=plan.python_version, arch=self.arch,
                                glibc=min(glibcs) if glibcs else (2, 28), free_threaded=plan.free_threaded,
                                requirements=self.request.project.others,
                                constraints=self.request.project.constraints,
                                skip=self.routed, allow_pre=self.settings.sources("cpu").pip.get_bool("pre"))

    # -- the answer -------------------------------------------------------------------------
    def _final(self, first: Plan, cut: Matrix, builds: Sequence[Build], compiled: Compiled, torch: str,
               work: str) -> Plan:
        from torchfit.compat.resolver import resolve

        companions = self.companions
        compiled, notes, warnings, routed = self._refine(first, builds, compiled, Version(Version(torch).public),
                                                         companions, work)
        self._refuse_plain_http(compiled, first.variant)
        _refuse_lying_metadata(compiled, work)
        resolved = {d.name: str(d.version) for d in compiled.locked}
        chosen = Version(Version(resolved["torch"]).public)  # the exact pass may have moved it (torchvision)
        # The matrix's row for what uv chose: the resolver again, among that release only.
        # An unlabelled torch (PyPI's, a flat mirror's) is the CUDA its set pins: the wheel's word, not the slot
        # the plan had for it (issue 33: PyPI's 2.6.0 is cu124, never "cu126")
        from torchfit.compat.served import variant_of_resolved

        variant = variant_of_resolved(resolved) or first.variant
        keep = tuple(b for b in cut.builds if b.torch < chosen or (b.torch == chosen and b.variant == variant))

        pinned = replace(self.request, project=replace(self.request.project, requirements=()),
                         requirements=tuple(r for r in self.request.requirements
                                            if canonicalize_name(_name(str(r))) == "torch"),
                         python=SpecifierSet(f"=={first.python}.*"), free_threaded=first.free_threaded)
        try:
            plan = resolve(self.hosts, pinned, replace(cut, builds=keep))
        except NoCompatibleSet as exc:
            if variant == first.variant:
                raise
            raise NoCompatibleSet([f"torch {chosen} from {self.where(first.variant)} is a {variant} build (the resolved "
                                   "set pins its CUDA runtime: the wheel's METADATA), not the "
                                   f"{first.variant} build that fits this host", *exc.conflicts],
                                  ["give a torch source whose wheels carry their variant (--torch-index-url "
                                   "https://download.pytorch.org/whl/VARIANT or a mirror of it)"]) from None
        if plan.variant != first.variant:
            notes = [f"torch {chosen} {plan.variant}: the build {self.where(first.variant)} serves (its METADATA pins "
                     f"the CUDA {plan.cuda} runtime; the wheel carries no variant label)", *notes]
        held = [b for b in builds if b.torch > chosen]
        from torchfit.compat.companions import companion_notes

        build = plan.build
        assert build is not None
        comp_reasons, comp_warnings, routed = companion_notes(
            companions, build, first.python,
            [(d.name, Version(str(d.version))) for d in compiled.locked if d.name not in FAMILY_PACKAGES],
            off_torch_index=self.unrouted, torch_index=self.where(first.variant), pages=self.pages)
        here = (first.python_version, first.free_threaded)
        kept_out = [f"{why}; kept out, uv chose again" for _, _, why in self._pyfit.get(here, [])]
        kept_out += [f"passed over: {why}; planned instead: Python {first.python_version}"
                     for key, items in self._pyfit.items() if key != here for _, _, why in items]
        kept = [(line, warn) for p, line, warn in self.kept if resolved.get(p.name) == str(p.chosen)]
        notes = [*dict.fromkeys(self.held), *kept_out, *notes, *comp_reasons,
                 *_held_companions(companions, compiled, Version(build.torch.public)),
                 *(f"passed over: {line}; planned instead: {first.variant}, Python {first.python}"
                   for line in self.misfits), *(line for line, warn in kept if not warn)]
        warnings = [*warnings, *comp_warnings, *(line for line, warn in kept if warn)]
        sdists = [d for d in compiled.locked if d.needs_build]
        return self._assemble(plan, first, builds, held, resolved, routed, notes,
                              warnings + [_sdist_line(d.name, str(d.version), companions, self.passed.get(d.name)) +
                                          (f"; {fact}" if (fact := self._unfit_of(f"{d.name} {d.version}")) else "")
                                          for d in sdists],
                              compiled, work)

    def _refuse_plain_http(self, compiled: Compiled, variant: str) -> None:
        """IndexUnavailable (exit 1) when a file of the resolved set is fetched over plain http and
        --allow-insecure-index was not given: an https index that lists http:// links sends uv and
        pip there silently, and the file would travel in clear (what install, the lock and export
        would then carry). The user's own http:// sources need the flag already. For install
        (`check_downloads`), each https file's redirects too (index.client.check_file_redirects)."""
        from urllib.parse import urlsplit

        if self.settings.allow_insecure:
            return
        plain = [a.url for d in compiled.locked for a in d.artifacts
                 if a.url and urlsplit(a.url).scheme.lower() == "http"]
        if plain:
            raise IndexUnavailable(plain[0], f"the index lists this file over plain http ({len(plain)} file"
                                             f"{'s' * (len(plain) != 1)} of the plan); refused: it would travel "
                                             "unencrypted", hint="fix the index, or pass --allow-insecure-index to "
                                                                 "accept it")
        if self.settings.check_downloads and not self.settings.sources(variant).offline:
            from torchfit.index.client import check_file_redirects

            # uv and pip follow an https -> http redirect of a file silently (issue 25, measured)
            urls = [a.url for d in compiled.locked for a in d.artifacts if a.url]
            check_file_redirects(self.client, urls)

    def _refine(self, first: Plan, builds: Sequence[Build], compiled: Compiled, torch: Version,
                companions: Companions, work: str) -> tuple[Compiled, list[str], list[str], list[str]]:
        """The exact second pass, where the first needs one (the module's step 3)."""
        resolved = {d.name: d for d in compiled.locked}
        direct = {canonicalize_name(_name(str(r))) for r in self.request.requirements} | {"torch", *self.direct}
        transitive = [n for n in FAMILY_PACKAGES if n in resolved and n not in direct]
        constraints: list[str] = []  # companions held to the releases built for the chosen torch
        cnotes: list[str] = []
        torch_moves: list[str] = []  # or: torch moved to what a companion's binary needs
        tnotes: list[str] = []
        warnings: list[str] = []
        held_notes: list[str] = []  # companions whose binary needs the very torch uv chose
        python = first.python
        for name, dist in resolved.items():
            comp = companions.get(name)
            if comp is None or name in FAMILY_PACKAGES:
                continue
            fits = companions.releases_for(name, torch=torch, variant=first.variant, python=python)
            known = {r.version for r in comp.releases}
            version = Version(str(dist.version))
            if version not in known or version in {r.version for r in fits}:
                continue
            if fits:
                from torchfit.compat.served import torch_constraint

                constraints.append(name + torch_constraint([r.version for r in fits], sorted(known)))
                cnotes.append(f"{name} {version} has no binary for torch {torch} {first.variant} (companions.toml); "
                              f"constrained to the releases that do ({', '.join(str(r.version) for r in fits[:4])})")
            rel = next(r for r in comp.releases if r.version == version)
            if rel.torch is None:
                continue
            if rel.torch.contains(torch, prereleases=True):  # uv chose its torch: said, nothing to move
                held_notes.append(f"{name} {version}: its binary needs torch{rel.torch} (companions.toml, "
                                  f"{rel.source.get('torch', 'measured')}); the torch uv chose")
                continue
            held = [b for b in builds if rel.torch.contains(b.torch, prereleases=True)]
            if held:
                torch_moves.append(f"torch{self._torch_spec(first, held)}")
                tnotes.append(f"{name} {version}: its binary needs torch{rel.torch} (companions.toml, "
                              f"{rel.source.get('torch', 'measured')}); torch follows it")
        build = first.build
        assert build is not None
        from torchfit.compat.companions import companion_notes

        _, _, routed = companion_notes(companions, self.matrix.find_build(str(torch), first.variant) or build,
                                       python, [(n, Version(str(d.version))) for n, d in resolved.items()],
                                       off_torch_index=self.unrouted)
        routed = list(dict.fromkeys([*self.routed, *routed]))
        pins = self._vision_pairs(first, builds, torch, resolved)
        # The exact passes to try, in order, each with the notes it earns.
        tries: list[tuple[list[str], list[str]]] = [(pin, ["torchvision"]) for pin in pins]
        if not pins:
            if constraints or not torch_moves:
                tries.append(([self._exact_torch(first, builds, torch), *constraints], cnotes))
            if torch_moves:
                tries.append((torch_moves[:1], tnotes))
        if not (transitive or constraints or torch_moves or set(routed) - set(self.routed) or pins):
            return compiled, held_notes, warnings, routed
        from torchfit.lock.uv import explanation

        second = None
        for n, (pin, earned) in enumerate(tries):
            second = self._compile_pass(first, work, f"exact-{n}", [*pin, *self._cuda_exclusions()],
                                        direct=[*self.direct, *transitive, *(["torchvision"] if pins else [])],
                                        routed=routed)
            if second.ok:
                if pins:
                    earned = [f"torchvision {_public(_version_of(second, 'torchvision'))}: the build that matches "
                              f"torch {_public(_version_of(second, 'torch'))} (data/matrix.toml), from the torch index"]
                return second, [*held_notes, *earned], warnings, routed
        assert second is not None
        warnings += [f"{note}: kept as uv first resolved it; no exact pass found an answer "
                     f"({explanation(second.stderr, 300)})" for note in [*cnotes, *tnotes]]
        if pins:
            warnings.append(f"torchvision {_public(str(resolved['torchvision'].version))} is not the build the matrix pairs "
                            f"with torch {torch}, and no pairing the project allows was found: its C++ operators may "
                            "not load (verify checks)")
        return compiled, held_notes, warnings, list(self.routed)

    def _torch_spec(self, first: Plan, builds: Sequence[Build]) -> str:
        """The specifier admitting exactly `builds` on the plan's source (`torch_constraint`)."""
        from torchfit.compat.served import allowed_for_all, torch_constraint

        allowed = allowed_for_all(builds, self.served.get(first.variant), self.archs)
        return torch_constraint(allowed, self.present(first.variant)) if allowed else "<0"

    def _exact_torch(self, first: Plan, builds: Sequence[Build], torch: Version) -> str:
        from torchfit.compat.served import allowed_for_all

        exact = [v for v in allowed_for_all(builds, self.served.get(first.variant), self.archs)
                 if Version(v.public) == torch]
        return f"torch=={exact[0]}" if exact else f"torch=={torch}"

    def _vision_pairs(self, first: Plan, builds: Sequence[Build], torch: Version,
                      resolved: dict[str, LockedDist]) -> list[list[str]]:
        """torchvision's C++ operators load only with the torch they were built against; its
        METADATA says so up to 0.29.0 (torch==X) and no longer after (torch>=X). When uv's
        torchvision is not the matrix's pair of its torch: the pairs to try, the chosen torch's
        first, then the torch whose pair is the torchvision uv chose (a project that pins it)."""
        dist = resolved.get("torchvision")
        if dist is None:
            return []
        vision = Version(Version(str(dist.version)).public)
        pair = {b.torch: b.torchvision for b in builds if b.torchvision}
        if pair.get(torch) is None or Version(pair[torch]) == vision:
            return []
        out = [[self._exact_torch(first, builds, torch), f"torchvision=={pair[torch]}"]]
        back = [t for t, v in pair.items() if Version(v) == vision]
        if back:
            out.append([self._exact_torch(first, builds, max(back)), f"torchvision=={vision}"])
        return out

    def _compile_pass(self, plan: Plan, work: str, name: str, constraints: Sequence[str], *,
                      direct: Sequence[str], routed: Sequence[str]) -> Compiled:
        """One exact pass: wheels only, then (where wheels cannot answer) source builds allowed."""
        compiled = self._compile(plan, work, name + "-wheels", constraints, direct=direct, routed=routed)
        if compiled.ok or self.settings.no_build or not _wheels_missing(compiled.stderr):
            return compiled
        self._say_building(compiled, plan)
        return self._compile(plan, work, name + "-sdists", constraints, direct=direct, routed=routed, no_build=False)

    def _say_building(self, compiled: Compiled, plan: Plan) -> None:
        """Said before uv runs anyone's code: which package is built, and why (the host fact that
        rules out its wheels, where it has some: kept for the plan's warning too)."""
        from torchfit.lock.uv import explanation

        self.unfit.update(self._misfits(plan, explanation(compiled.stderr)))
        for label in _without_wheels(compiled.stderr) or ["a package"]:
            page = self.unused_pages.get(str(canonicalize_name(label.split()[0])))
            where = f" (its own wheel page {page} gave uv no answer)" if page else ""
            fact = self._unfit_of(label)
            where += f" for this host ({fact})" if fact else ""
            self.progress.info(f"[resolve] {label} has no wheel{where}: building it to read its metadata "
                               "(runs its build; `--no-build` never does)")

    def _unfit_of(self, label: str) -> str | None:
        """The host fact ruling out the wheels of `label` ("xformers 0.0.32.post2"), if judged."""
        return next((line.split(": ", 1)[1] for line in self.unfit if line.startswith((label + " ", label + ":"))),
                    None)

    def _assemble(self, plan: Plan, first: Plan, builds: Sequence[Build], held: Sequence[Build],
                  resolved: dict[str, str], routed: Sequence[str], notes: Sequence[str],
                  warnings: Sequence[str], compiled: Compiled, work: str) -> Plan:
        torch = plan.torch
        where = self.where(plan.variant)
        read = self.served.get(plan.variant) is not None
        user_pin = str(self.request.spec("torch"))
        count = len({b.torch for b in builds})
        fit = f"that fit this host and that {where} serves" if read else \
            f"that fit this host (uv read {where} for what it serves)"
        if count == 1:
            fit = fit.replace("that fit", "that fits", 1)
        if held:
            newer = ", ".join(dict.fromkeys(str(b.torch) for b in held))
            why = (f"{_newest(count)} {fit} which the project's dependencies allow "
                   f"(uv resolved the whole project; newer: {newer})")
            culprit = self._held_by(plan, builds, held, work, resolved) if self.settings.explain else None
            if culprit:
                why += f"; {culprit}"
            elif user_pin and not any(Version(str(b.torch)) in self.request.spec("torch") for b in held):
                why = f"within your torch{user_pin} ({_newest(count)} {fit})"
        else:
            why = f"{_newest(count)} {fit}"
            if user_pin:
                why += f", within your torch{user_pin}"
        reasons = [r for r in plan.reasons if not r.startswith(f"torch {torch}:")]
        reasons.insert(0, f"torch {torch}: {why}")
        reasons.append(f"the whole project ({len(resolved)} package{'s' * (len(resolved) != 1)}) resolved by uv in one pass; "
                       f"the torch family from {where} only")
        if len(self.platforms) > 1:  # a fleet of several architectures: the one set installs on each
            reasons.append("the same set for every group's platform (uv, once per platform): "
                           + "; ".join(t.label for t in self.platforms))
        reasons += list(notes)
        family = [n for n in FAMILY_PACKAGES if n in resolved]
        ruled = [*plan.ruled_out[: plan.ruled_out_relevant],
                 *(f"{b.label}: the project's dependencies need another torch (uv's resolution)" for b in held),
                 *plan.ruled_out[plan.ruled_out_relevant:]]
        why_map = dict(plan.why)
        why_map["torch"] = why
        why_map["torchvision"] = "required by the project; resolved by uv from the torch index" \
            if "torchvision" in resolved else "not part of the plan"
        why_map["torchaudio"] = "required by the project; resolved by uv from the torch index" \
            if "torchaudio" in resolved else "not part of the plan"
        why_map["index_url"] = f"the torch source given ({where})" if self.settings.torch_given \
            else why_map.get("index_url", "")
        return replace(
            plan,
            torchvision=_public(resolved.get("torchvision")),
            torchaudio=_public(resolved.get("torchaudio")),
            packages=tuple(family),
            index_url=strip_credentials(self.settings.sources(plan.variant).torch_index),
            reasons=tuple(dict.fromkeys(reasons)),
            warnings=tuple(dict.fromkeys([*plan.warnings, *warnings, *self.notes])),
            ruled_out=tuple(ruled),
            ruled_out_relevant=plan.ruled_out_relevant + len(held),
            why=why_map,
            project=tuple(r.public_text for r in self.request.project.others),
            constraints=tuple(r.public_text for r in self.request.project.constraints),
            resolved=resolved,
            routed=tuple(routed),
            pages=dict(self.pages),
        )

    def _held_by(self, first: Plan, builds: Sequence[Build], held: Sequence[Build], work: str,
                 resolved: dict[str, str]) -> str | None:
        """`--explain`: why no newer build: uv's own explanation with a newer torch asked for
        (the fitting builds of the plan's variant above the chosen one)."""
        from torchfit.lock.uv import explanation

        newer = [b for b in builds if b.variant == first.variant and b.torch > Version(first.torch)]
        base = self._base_constraints(first, newer) if newer else []
        if not base:
            return None
        probe = self._compile(first, work, "why", [*base, f"torch>{first.torch}"], direct=self.direct,
                              routed=self.routed, no_build=self.settings.no_build)
        if probe.ok:
            # uv prefers the newest releases of the project's own packages: a newer torch was possible
            # with other releases of them. Name the difference, the pins that would get it.
            other = {d.name: str(d.version) for d in probe.locked}
            companions = self.companions
            direct = {r.name for r in self.request.project.others}
            names = sorted((n for n in other if n in resolved and other[n] != resolved[n] and n not in FAMILY_PACKAGES),
                           key=lambda n: (n not in direct, companions.get(n) is None, n))
            moved = [f"{n} {resolved[n]} -> {other[n]}" for n in names]
            return (f"a newer torch ({_public(other.get('torch'))}) also resolves, with "
                    f"{', '.join(moved[:6]) or 'other releases'}: uv prefers the newest releases of the "
                    "project's packages; pin those (or torch) to choose")
        said = explanation(probe.stderr, 600)
        pins = [f"required by {_dist_label(m.group(1), resolved)} (torch{m.group(2)})"
                for m in re.finditer(r"(?:all versions of )?([A-Za-z0-9_.-]+(?:[=<>!~]=?[A-Za-z0-9_.+*-]+)?) "
                                     r"depends? on torch([=<>!~]=?[^\s,]+)", said)
                if not m.group(1).startswith("torchfit-env")]
        head = "; ".join(dict.fromkeys(pins))
        return (head + "; " if head else "") + f"with torch {held[0].torch}, uv says: {said}"

    # -- no answer ---------------------------------------------------------------------------
    def _refusal(self, fam: Request) -> NoCompatibleSet:
        """No (variant, Python) solved: the first-level reading names the culprit in host terms
        where it can; uv's explanations (with what the sources serve) otherwise. A release
        without a wheel for this host leads with the host fact (compat.wheelfit)."""
        from torchfit.compat.wheelfit import lead_with

        return lead_with(self._refusal_of_uv(fam), self.misfits)

    def _refusal_of_uv(self, fam: Request) -> NoCompatibleSet:
        from torchfit.compat.resolver import resolve
        from torchfit.compat.served import restrict_for_all

        if self.fleet_refused:  # a group's platform: that group, named, before anything else
            target, said, _ = self.fleet_refused[-1]
            return self._group_refusal(target, said)
        interp = [t for t in self.tried if "declares Requires-Python" in t or "takes none of them" in t]
        if interp:  # the exact interpreter rules the files out: the host fact leads, uv's words follow
            return self._with_sources(NoCompatibleSet(
                interp, ["use a Python those files accept (--python, or pyenv for another), or pin a release that "
                         "has a file for this one"]))
        pins = [t for t in self.tried if "its binary needs" in t and "(companions.toml" in t]
        if pins and len(pins) == len(self.tried):  # the user's companion pin and the torch builds disagree
            return self._with_sources(NoCompatibleSet(
                [pins[0]], ["pin a release of it built for one of those torch builds, or pin torch to what it needs"]))
        cuda = self._cuda_line()
        if cuda is not None:  # a host fact uv's refusal rests on: it leads, uv's words follow
            return self._with_sources(NoCompatibleSet(
                [cuda[0]], [cuda[1], "or give a source with a release that does not need them (--find-links)"]))
        try:
            reader = self._reader()
            resolve(self.hosts, self.request, restrict_for_all(self.matrix, self.measured(), self.archs), reader,
                    self.companions)
        except NoCompatibleSet as exc:
            # Kept where it names what the first level shows for sure (a pin every host build refuses,
            # two pins together, a Requires-Python); its companion pairing is the matrix's, which
            # uv's reading of the METADATA overrules ("no build in the matrix meets it" is not said).
            if any(w in c for c in exc.conflicts for w in ("ruled out", "meets both", "Requires-Python")):
                return self._with_sources(NoCompatibleSet([*exc.conflicts], exc.hints, exc.remedies))
        except (IndexUnavailable, BadInput):
            pass
        from torchfit.compat.wheelfit import no_wheel_releases

        if self.misfits and all(no_wheel_releases(said) for said in self.uv_said):
            # every uv run failed on a release without a wheel for this host, not on torch: no torch hint
            return self._with_sources(NoCompatibleSet([], list(self.misfits.values())))
        return self._with_sources(NoCompatibleSet(
            ["uv finds no set of the project's packages with a torch build that fits this host "
             "and that the torch source serves"],
            ["pin the package uv names to a release whose torch fits this host, or give a source that "
             "has one (--torch-index-url, --find-links)"]))

    def _group_refusal(self, target: Target, said: str) -> NoCompatibleSet:
        from torchfit.lock.platforms import group_refusal

        return self._with_sources(NoCompatibleSet(*group_refusal(self.hosts, self.arch, target, said)))

    def _cuda_line(self) -> tuple[str, str] | None:
        """When uv's refusal names a CUDA package this host's driver cannot run: the host fact and the fix."""
        from torchfit.compat.cudapkgs import blocked_majors

        blocked = blocked_majors(self.matrix, self.hosts)
        excluded = {re.split(r"[<>=!]", line, maxsplit=1)[0] for line in self._cuda_exclusions()}
        named = sorted(n for n in excluded
                       if any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", said) for said in self.uv_said))
        if not blocked or not named:
            return None
        major, floor = blocked[0]
        drivers = ", ".join(sorted({str(h.driver) for h in self.hosts if h.driver is not None}))
        return (f"{', '.join(named)}: CUDA {major} packages, and this host's driver {drivers} is below CUDA "
                f"{major}.x's floor {floor} (NVIDIA's minor-version compatibility; data/matrix.toml [[cuda]]): "
                "the project's releases that need them cannot run here",
                f"upgrade the NVIDIA driver to >= {floor}, or pin a release of the project that does not need "
                f"CUDA {major} packages")

    def _misfits(self, plan: Plan, said: str) -> dict[str, str]:
        """uv's "X==1.0 has no wheels with a matching ... tag": the host fact that rules out each
        wheel of X 1.0 in the user's sources (compat.wheelfit), and who wanted it; line -> hint.
        A package routed to the torch index is read from there alone, as uv does."""
        from torchfit.compat.wheelfit import misfits, no_wheel_releases, requester, target_of
        from torchfit.index.project import torch_source_packages

        if not no_wheel_releases(said):
            return {}
        reader, routed = self._reader(), {canonicalize_name(n) for n in self.routed}
        served = self.served.get(plan.variant)
        torch_reader = torch_source_packages(self.client, self.settings.sources(plan.variant).torch_index,
                                             self.arch, flat=served is not None and served.kind == "flat")
        found = misfits(said, lambda name: [(v, f.filename) for v, f in (
            torch_reader if canonicalize_name(name) in routed else reader).files(name)],
            target_of(self.hosts, plan.python_version, plan.free_threaded, self.arch),
            requester({r.name: r.public_text for r in self.request.project.others}))
        return {m.line: m.hint for m in found}

    def _reader(self) -> SourcePackages:
        """The project's packages as the user's sources list them, each page read once."""
        from torchfit.compat.matrix import PYPI_SIMPLE
        from torchfit.index.project import SourcePackages

        if self._sources_reader is None:
            sources = self.settings.sources("cpu")
            indexes = [] if sources.no_index else [sources.index_url or PYPI_SIMPLE, *sources.extra_index_urls]
            self._sources_reader = SourcePackages(self.client, indexes, list(sources.find_links), self.arch)
        return self._sources_reader


# What uv installs from a path (uv 0.13.9's message lists them): a wheel, an sdist archive, or a
# directory (a project it builds).
ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tar.lz", ".tar.lzma", ".tar.xz", ".tar.zst", ".tar",
                    ".tbz", ".tgz", ".tlz", ".txz")


def _refuse_lying_metadata(compiled: Compiled, work: str) -> None:
    """MetadataMismatch (exit 1) when a local wheel of the plan has a PEP 658 `.metadata` beside it
    that says otherwise than the wheel (issue 34, R3): the wheel is what install installs and the
    lock hashes, so a plan read from that file would promise a set the wheel does not give. Local
    wheels only (the zip's directory and one member); a remote one is install's to check."""
    from torchfit.errors import MetadataMismatch
    from torchfit.index.metacheck import find_disagreement, local_path

    paths = [os.path.join(work, p) for d in compiled.locked for a in d.artifacts if a.kind == "wheel"
             for p in [local_path(a.url or a.path or "")] if p]
    found = find_disagreement(paths)
    if found is not None:
        path, diff = found
        raise MetadataMismatch(
            f"{path}: the index's metadata for it (PEP 658 {os.path.basename(path)}.metadata) disagrees with the "
            f"wheel's own METADATA, so the plan would promise what the wheel does not install: {'; '.join(diff)}",
            hint="the wheel is what is installed: ask the index's owner to fix its .metadata file (or remove it, "
                 "and resolvers read the wheel), or use a source that serves the wheel's own")


def _basename(location: str) -> str:
    return location.rstrip("/").rsplit("/", 1)[-1]


def _held_companions(companions: Companions, compiled: Compiled, torch: Version) -> list[str]:
    """Why a METADATA-silent companion is not its newest release: the newer ones need another torch."""
    out = []
    for d in compiled.locked:
        newer = companions.newer_for_other_torch(d.name, Version(str(d.version)), torch)
        if newer:
            shown = ", ".join(f"{r.version} needs torch{companions.torch_of(r)}" for r in newer[:3])
            out.append(f"{d.name} {d.version}: the newest release with a binary for torch {torch} "
                       f"(companions.toml; {shown}{', ...' if len(newer) > 3 else ''})")
    return out


def check_local_reference(text: str, url: str | None) -> None:
    """BadInput (exit 2) for `pkg @ file:///PATH` whose PATH is missing or is neither a directory
    nor a wheel or source archive (`/etc/passwd`): the user's input, said before uv runs (uv's own
    words for it depend on what it could fetch to try a build). The file is never read."""
    from urllib.parse import unquote, urlsplit

    if not url or not url.lower().startswith("file:"):
        return
    path = unquote(urlsplit(url).path)
    if not os.path.exists(path):
        raise BadInput(f"{text}: no such file or directory")
    if not os.path.isdir(path) and not path.lower().endswith(ARCHIVE_SUFFIXES):
        raise BadInput(f"{text}: not a wheel, a source archive ({', '.join(ARCHIVE_SUFFIXES[:3])}, ...) or a "
                       "project directory")


def _name(text: str) -> str:
    try:
        return Requirement(text).name
    except InvalidRequirement:
        return text.split("=")[0].split("<")[0].split(">")[0].strip()


def _newest(count: int) -> str:
    return "the one release" if count == 1 else f"the newest of the {count} releases"


def _version_of(compiled: Compiled, name: str) -> str | None:
    return next((str(d.version) for d in compiled.locked if d.name == name), None)


def _wheels_missing(text: str) -> bool:
    """uv's refusal under `--no-build` is about a package without a usable wheel."""
    return bool(re.search(r"building from source is disabled|--no-build|no usable wheels|source distribution",
                          text, re.IGNORECASE))


def _without_wheels(text: str) -> list[str]:
    """The packages uv's wheels-only refusal names as having no usable wheel ("hangpkg 1.0")."""
    found = re.findall(r"([A-Za-z0-9][\w.-]*)==([\w.+!]+) (?:has|have) no usable wheels", text)
    found += [(m, "") for m in re.findall(r"Building source distributions for `([^`]+)` is disabled", text)]
    return list(dict.fromkeys(f"{n} {v}".strip() for n, v in found))


def _dist_label(text: str, resolved: dict[str, str]) -> str:
    """uv's "pinlib==1.0" as "pinlib 1.0"; a bare name or a range ("vllmx<=1.0") as the version
    the plan has of it ("vllmx 1.0"), else as uv wrote it."""
    name = re.split(r"[=<>!~]", text, maxsplit=1)[0]
    if "==" in text:
        return f"{name} {text.split('==', 1)[1]}"
    version = resolved.get(str(canonicalize_name(name)))
    return f"{name} {version}" if version else text


def _public(version: str | None) -> str | None:
    """"0.29.0" of "0.29.0+cpu": the plan names releases, the lock the exact builds."""
    return Version(version).public if version else None


def _as_url(location: str) -> str:
    """A torch source for uv: a plain path becomes a file:// URL."""
    if "://" in location:
        return location
    from urllib.parse import quote

    return "file://" + quote(os.path.abspath(location))


def _sdist_line(name: str, version: str, companions: Companions, passed: Passed | None = None) -> str:
    from torchfit.compat.companions import format_sdist_warning
    from torchfit.compat.wheelonly import built_note

    comp = companions.get(name)
    rel = next((r for r in comp.releases if str(r.version) == version), None) if comp else None
    if rel is not None and rel.sdist_only:
        return format_sdist_warning(rel)
    if passed is not None:  # its newest release, as plain uv takes it; an older one has a wheel
        return (f"{name} {version} has no wheel for this host in your sources: installing it builds it from its "
                f"source distribution (runs its build, needs its compilers){built_note(passed, version)}")
    return (f"{name} {version} has no wheel for this host in your sources: installing it builds it from its "
            "source distribution (runs its build, needs its compilers); `resolve --no-build` refuses instead")
