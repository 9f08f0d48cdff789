"""The resolvelib side of `resolve`: requirement and candidate types, the context
that holds the matrix and the hosts, and `TorchProvider` (candidate pools, preference,
satisfaction). Each requirement and candidate carries its `source`; the host
constraints are virtual packages (`<driver>`, `<gpu-arch>`, `<glibc>`, `<platform>`,
`<cudnn>`) so a host mismatch is an ordinary resolvelib conflict. There is one per
fact, not one per fact and host: a build's `<driver>` requirement carries the first
host that refuses it (or the first host's verdict when all accept), and each
(build, host) verdict is computed once. A fleet of 2,000 groups thus adds five
identifiers, not 10,000, to every resolvelib round (issue 25: per-host identifiers
made a fleet resolve grow about cubically with its groups).

The user's project takes part as `pkg:NAME` identifiers (issue 18): one per direct
requirement outside the torch family, its candidates the releases the sources offer
(`compat.project.PackageIndex`), its dependencies only what binds the stack: the
Requires-Dist on torch/torchvision/torchaudio of the release's METADATA (each a
requirement on the `torch` build: torchvision==0.23.0 admits the builds whose
torchvision is 0.23.0) and its Requires-Python. Everything else is uv's to resolve,
with the family pinned to the chosen build. Project packages are chosen before
torch, so the newest release of each whose torch pin some host build meets wins,
and torch is the best host build within the pins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from resolvelib import AbstractProvider

from torchfit._backports import FROZEN
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import Build, Matrix
from torchfit.compat.project import (
    PackageIndex,
    PackageMeta,
    ProjectReq,
    applies,
    target_environment,
)
from torchfit.compat.request import Request
from torchfit.compat.rules import (
    RuleResult,
    has_full_driver,
    host_checks,
)
from torchfit.compat.versions import python_version
from torchfit.errors import BadInput

if TYPE_CHECKING:  # read only for a project: not at every start-up
    from packaging.requirements import Requirement

    from torchfit.compat.companions import Companions

HOST_FACTS = ("driver", "gpu-arch", "cudnn", "glibc", "platform")


@dataclass(**FROZEN)
class PythonChoice:
    """An interpreter the plan could use: present on the host, or installable with uv or pyenv."""

    minor: tuple[int, int]
    version: str
    source: str  # "installed" | "uv" | "pyenv"
    path: str | None
    free_threaded: bool = False  # takes only cpXYt wheels

    identifier = "python"

    @property
    def label(self) -> str:
        return f"{self.minor[0]}.{self.minor[1]}"

    @property
    def shown(self) -> str:
        """"3.13t" for a free-threaded interpreter, else the label."""
        return self.label + ("t" if self.free_threaded else "")


@dataclass(**FROZEN)
class Companion:
    identifier: str
    version: str


@dataclass(**FROZEN)
class HostCandidate:
    """The single candidate of a host virtual package: the hosts themselves."""

    identifier: str


@dataclass(**FROZEN)
class BuildCandidate:
    build: Build
    identifier = "torch"


@dataclass(**FROZEN)
class ProjectCandidate:
    """A release of one of the project's packages."""

    identifier: str  # "pkg:vllm"
    name: str
    version: Version

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


Candidate = Union[BuildCandidate, PythonChoice, Companion, HostCandidate, ProjectCandidate]

# Releases of one project package the resolver looks at, newest first: each costs a
# metadata read; a torch pin older than that many releases is out of the matrix anyway.
MAX_RELEASES = 40


@dataclass(frozen=True)
class Req:
    """A requirement with its source, as pip's resolvelib layer has them."""

    identifier: str
    text: str
    source: str
    test: Callable[[Any], RuleResult | bool]

    def check(self, candidate: Any) -> RuleResult:
        out = self.test(candidate)
        if isinstance(out, RuleResult):
            return out
        return RuleResult(bool(out), self.text, "user" if self.source.startswith("user") else "python")

    def format_for_error(self) -> str:
        return f"{self.text} ({self.source})"


def _version_is(version: str | None) -> Callable[[Any], bool]:
    return lambda c: bool(c.version == version)


def _in_spec(spec: SpecifierSet) -> Callable[[Any], bool]:
    return lambda c: spec.contains(c.version, prereleases=True)


def _family_test(name: str, spec: SpecifierSet) -> Callable[[Any], bool]:
    """A project's requirement on a family package, as a test of a torch build."""
    from packaging.utils import canonicalize_name

    key = canonicalize_name(name)

    def test(c: Any) -> bool:
        build = c.build
        version = build.torch if key == "torch" else getattr(build, key, None)
        return version is not None and spec.contains(version, prereleases=True)

    return test


def _python_in(spec: SpecifierSet) -> Callable[[Any], bool]:
    return lambda c: spec.contains(c.version, prereleases=True)


def _always(check: RuleResult) -> Callable[[Any], RuleResult]:
    """A host requirement's verdict is fixed when the build is: the host has one candidate."""
    return lambda _c: check


class Context:
    """Everything the provider needs, computed once: hosts, request, candidate pools."""

    def __init__(self, hosts: Sequence[HostFacts], request: Request, matrix: Matrix,
                 packages: PackageIndex | None = None, companions: Companions | None = None) -> None:
        self.hosts = list(hosts)
        self.request = request
        self.matrix = matrix
        self.want_cpu = request.variant == "cpu"
        self.pythons = _python_choices(hosts[0])
        self.primary_platform = hosts[0].arch or "x86_64"
        # The project: the direct requirements that apply on the target, and what the
        # resolver learnt of each release it looked at (for the plan and the conflicts).
        self.packages = packages
        python = self.pythons[0].version if self.pythons else "3.12"
        self.env = target_environment(self.primary_platform, python)
        self.project: list[ProjectReq] = [
            r for r in request.project.others if r.requirement.url is None and applies(r.requirement.marker, self.env)
        ]
        # Per name, once (issue 25: a lookup per name over every line was O(n^2), 9 M
        # specifier intersections for a 3,000-line requirements file): the project's and the
        # constraints' specifiers intersected, and the extras asked for.
        self._specs: dict[str, SpecifierSet] = {}
        self._extras: dict[str, set[str]] = {}
        for r in [*self.project, *request.project.constraints]:
            have = self._specs.get(r.name)
            self._specs[r.name] = r.requirement.specifier if have is None else have & r.requirement.specifier
        for r in self.project:
            self._extras.setdefault(r.name, set()).update(r.requirement.extras)
        self.seen: dict[tuple[str, Version], PackageMeta | None] = {}
        self.companions = companions
        self.chosen: list[ProjectCandidate] = []  # set by the resolver once it has chosen
        self.capped: set[str] = set()
        self._full: dict[str, bool] = {}
        self._host_checks: dict[tuple[Build, int], list[tuple[str, RuleResult]]] = {}
        self._fleet_checks: dict[Build, list[tuple[str, RuleResult]]] = {}
        self.ordered = sorted(matrix.builds, key=self.build_order)

    # -- per-build requirement sets ------------------------------------------------
    def host_checks(self, build: Build, k: int) -> list[tuple[str, RuleResult]]:
        """Every host rule of `build` on host `k` (computed once per pair)."""
        key = (build, k)
        got = self._host_checks.get(key)
        if got is None:
            got = self._host_checks[key] = host_checks(
                build, self.hosts[k], self.matrix, strict_driver=self.request.strict_driver, want_cpu=self.want_cpu)
        return got

    def fleet_checks(self, build: Build) -> list[tuple[str, RuleResult]]:
        """One verdict per host fact of `build` over every host: the first host that fails
        it, else the first host's (computed once per build; stops at a host's first failure
        of each fact, so a build every host refuses costs little)."""
        got = self._fleet_checks.get(build)
        if got is None:
            verdicts: dict[str, RuleResult] = {}
            for k in range(len(self.hosts)):
                for fact, check in self.host_checks(build, k):
                    have = verdicts.get(fact)
                    if have is None or (have.ok and not check.ok):
                        verdicts[fact] = check
            got = self._fleet_checks[build] = list(verdicts.items())
        return got

    def python_packages(self) -> tuple[str, ...]:
        """The family packages the plan installs, whose files must each accept the Python."""
        return ("torch", *(n for n in ("torchvision", "torchaudio") if self.request.wants(n)))

    def python_req(self, build: Build) -> Req:
        """The interpreter a build needs: a CPython minor with wheels (per package), inside
        every package's Requires-Python (a specifier: "!=3.14.1" excludes one patch)."""
        allowed = set(build.pythons_for(self.primary_platform))
        packages = self.python_packages()
        if len(packages) > 1 and build.pythons_companions is not None:
            # torchvision/torchaudio wheels can lag torch's (0.20.x has no cp313).
            allowed &= set(build.pythons_companions)
        specs = [(name, build.python_spec(name)) for name in packages]
        specs = [(name, spec) for name, spec in specs if str(spec)]
        shown = ", ".join(f"{a}.{b}" for a, b in sorted(allowed))
        # A specifier finer than the minors (an excluded patch) is said; ">=3.10" the list says.
        ft = "; cpXYt (free-threaded): " + (", ".join(
            f"{a}.{b}t" for a, b in sorted(allowed) if all(_has_freethreaded(build, n, (a, b)) for n in packages))
            or "none")
        rp = ft + "".join(f"; {name} {_family_version(build, name)} Requires-Python {spec}"
                     for name, spec in specs if any(s.operator == "!=" for s in spec))

        def test(c: Any) -> bool:
            if c.free_threaded and not all(_has_freethreaded(build, n, c.minor) for n in packages):
                return False
            return c.minor in allowed and all(spec.contains(c.version, prereleases=True) for _, spec in specs)

        return Req(
            "python",
            f"Python with {build.label} wheels ({shown}){rp}",
            f"matrix: {build.label}, {build.origin}",
            test,
        )

    def python_refusal_reason(self, build: Build, choice: PythonChoice) -> str:
        """Why one interpreter cannot take a build, in words: the package and its fact."""
        if choice.minor not in set(build.pythons_for(self.primary_platform)):
            return f"no cp{choice.minor[0]}{choice.minor[1]} wheel of torch {build.torch}"
        for name in self.python_packages() if choice.free_threaded else ():
            if not _has_freethreaded(build, name, choice.minor):
                return (f"no cp{choice.minor[0]}{choice.minor[1]}t (free-threaded) wheel of {name} "
                        f"{_family_version(build, name)} ({build.sources.get('python_freethreaded', 'none recorded')})")
        for name in self.python_packages():
            spec = build.python_spec(name)
            if str(spec) and not spec.contains(choice.version, prereleases=True):
                version = build.torch if name == "torch" else _family_version(build, name)
                return f"{name} {version} declares Requires-Python {spec} ({build.sources.get('requires_python', '')})"
        return f"no {'/'.join(self.python_packages()[1:])} wheel for Python {choice.label}"

    def companion_reqs(self, build: Build) -> list[Req]:
        out = []
        for name in ("torchvision", "torchaudio"):
            if not self.request.wants(name):
                continue
            ver = getattr(build, name)
            text = f"{name}=={ver}" if ver else f"no {name} release matches {build.label}"
            out.append(
                Req(name, text, f"matrix: {build.label}, {build.origin}", _version_is(ver))
            )
        return out

    def user_checks(self, build: Build) -> list[RuleResult]:
        """The user's own constraints on a build (positional torch spec, --cuda, --variant)."""
        req = self.request
        out = []
        spec = req.spec("torch")
        if str(spec):
            ok = spec.contains(build.torch, prereleases=True)
            out.append(RuleResult(ok, f"{build.label}: outside torch{spec} (user)", "user"))
        if req.variant:
            out.append(RuleResult(build.variant == req.variant, f"{build.label}: not --variant {req.variant}", "user"))
        if req.cuda:
            ok = build.cuda is not None and req.cuda.contains(build.cuda, prereleases=True)
            out.append(RuleResult(ok, f"{build.label}: CUDA {build.cuda or 'none'} outside --cuda {req.cuda}", "user"))
        return out

    # -- explanation ----------------------------------------------------------------
    def refusals(self, build: Build) -> list[RuleResult]:
        """Every unmet requirement of `build`, host facts first, then Python, then the user's."""
        fails: list[RuleResult] = []
        for k in range(len(self.hosts)):
            fails += [c for _, c in self.host_checks(build, k) if not c.ok]
        py = self.python_req(build)
        choices = [p for p in self.pythons if self._python_ok(p)]
        if not any(py.check(p).ok for p in choices):
            fails.append(RuleResult(False, self._python_refusal(build, choices), "python"))
        for comp in self.companion_reqs(build):
            if not any(comp.check(c).ok for c in self._companions(comp.identifier)):
                fails.append(RuleResult(False, f"{build.label}: {comp.text}", "companion"))
        fails += [c for c in self.user_checks(build) if not c.ok]
        for cand in self.chosen:  # the project's pins, once its releases are chosen
            for pin in self.family_pins(cand):
                if not _family_test(pin.name, pin.specifier)(BuildCandidate(build)):
                    fails.append(RuleResult(False, f"{build.label}: outside {pin} ({cand.label})", "user"))
        return fails

    def _python_refusal(self, build: Build, choices: list[PythonChoice]) -> str:
        wheels = ", ".join(f"{a}.{b}" for a, b in build.pythons_for(self.primary_platform))
        present = ", ".join(sorted({p.version for p in self.pythons if p.source == "installed"})) or "none"
        host = self.hosts[0]
        pyenv = ("uv and pyenv can install none of them" if host.uv_pythons and host.pyenv else
                 "uv can install none of them, and no pyenv" if host.uv_pythons else
                 "pyenv can install none of them, and no uv Pythons" if host.pyenv else
                 "neither uv's managed Pythons nor pyenv to install one")
        user = f" within --python {self.request.python}" if self.request.python else ""
        why = "; ".join(dict.fromkeys(f"{p.version}: {self.python_refusal_reason(build, p)}"
                                      for p in choices if p.source == "installed"
                                      and p.minor in set(build.pythons_for(self.primary_platform))))
        return (f"{build.label}: has wheels for Python {wheels}{user}; present: {present}"
                + (f" ({why})" if why else "") + f"; {pyenv}")

    def _python_ok(self, p: PythonChoice) -> bool:
        if self.request.free_threaded is not None and p.free_threaded != self.request.free_threaded:
            return False
        return self.request.python is None or self.request.python.contains(p.version, prereleases=True)

    def _companions(self, name: str) -> list[Companion]:
        spec = self.request.spec(name)
        versions = {getattr(b, name) for b in self.matrix.builds} - {None}
        return [
            Companion(name, v)
            for v in sorted(versions, key=Version, reverse=True)
            if spec.contains(v, prereleases=True)
        ]

    # -- the project ----------------------------------------------------------------------
    def project_spec(self, name: str) -> SpecifierSet:
        """Every specifier the project and its constraints put on `name`, intersected."""
        return self._specs.get(name) or SpecifierSet()

    def project_pool(self, identifier: str) -> list[ProjectCandidate]:
        name = identifier[len("pkg:"):]
        if self.packages is None:
            raise BadInput(f"{name}: the project's packages need an index to read (give --index-url or --find-links)")
        spec = self.project_spec(name)
        pre = self.request.project.pre or any(s.prereleases for s in spec)
        versions = [v for v in self.packages.versions(name) if spec.contains(v, prereleases=pre)]
        if len(versions) > MAX_RELEASES:
            self.capped.add(name)
        return [ProjectCandidate(identifier, name, v) for v in versions[:MAX_RELEASES]]

    def project_meta(self, cand: ProjectCandidate) -> PackageMeta | None:
        key = (cand.name, cand.version)
        if key not in self.seen:
            self.seen[key] = self.packages.metadata(cand.name, cand.version) if self.packages else None
        return self.seen[key]

    def extras_of(self, name: str) -> frozenset[str]:
        return frozenset(self._extras.get(name, ()))

    def family_pins(self, cand: ProjectCandidate) -> tuple[Requirement, ...]:
        """The release's Requires-Dist on the torch family that apply on the target; where its
        METADATA names no torch (PyG's wheels, flash-attn's sdist), companions.toml's torch for it."""
        meta = self.project_meta(cand)
        pins = meta.family_requirements(self.env, self.extras_of(cand.name)) if meta else ()
        if pins or self.companions is None:
            return pins
        comp = self.companions.get(cand.name)
        lines = [r for r in (comp.releases if comp else ()) if r.version == cand.version and r.torch is not None]
        if len(lines) == 1 and str(lines[0].torch):  # one torch line: a pin (several: any of them, routed)
            from packaging.requirements import Requirement

            return (Requirement(f"torch{lines[0].torch}"),)
        return ()

    def admits(self, cand: ProjectCandidate, build: Build) -> bool:
        """Does this release's family pins admit `build`?"""
        return all(_family_test(r.name, r.specifier)(BuildCandidate(build)) for r in self.family_pins(cand))

    def family_reqs(self, cand: ProjectCandidate) -> list[Req]:
        """What a release requires of the stack: family pins on the build, Requires-Python."""
        meta = self.project_meta(cand)
        if meta is None:
            return []
        source = f"{cand.label}: {meta.source or 'its METADATA'}"
        out = []
        for req in self.family_pins(cand):
            out.append(Req("torch", f"{req}", source, _family_test(req.name, req.specifier)))
        if meta.requires_python:
            try:
                rp = SpecifierSet(meta.requires_python)
            except ValueError:
                rp = None
            if rp is not None and str(rp):
                out.append(Req("python", f"Python{rp}", source, _python_in(rp)))
        return out

    def is_full(self, build: Build) -> bool:
        """Every host's driver meets the build's own toolkit floor (PTX JIT, newest APIs);
        once per CUDA version (the floor is the toolkit's), not per build."""
        key = build.cuda if build.kind == "cuda" else ""
        got = self._full.get(key or "")
        if got is None:
            got = self._full[key or ""] = all(has_full_driver(build, h, self.matrix) for h in self.hosts)
        return got

    def build_order(self, build: Build) -> tuple[Any, ...]:
        """Sort key, smallest first: newest torch, fully supported driver, then the newest
        CUDA/ROCm, or, where only minor-version compatibility runs it, the smallest CUDA gap."""
        full = self.is_full(build)
        accel = version_key(build.cuda or build.rocm or "0")
        kind_rank = {"cuda": 0, "rocm": 0, "cpu": 1}[build.kind]
        # Under MVC a newer toolkit only widens the gap to the driver (more APIs missing),
        # so the oldest CUDA of the release comes first (cu130 before cu132 on a 13.0 driver).
        return (-version_key(str(build.torch)), not full, kind_rank, accel if not full else -accel, build.variant)


def _has_freethreaded(build: Build, name: str, minor: tuple[int, int]) -> bool:
    """Has `name` a free-threaded (cpXYt) wheel for `minor`, or a pure-Python one?"""
    from torchfit.compat.matrix import ANY_PYTHON

    have = build.pythons_freethreaded.get(name, ())
    return have == ANY_PYTHON or minor in have


def _family_version(build: Build, name: str) -> str:
    return str(build.torch) if name == "torch" else str(getattr(build, name, None) or "?")


def version_key(text: str) -> float:
    """A float that orders versions like 2.10.0 > 2.9.1 > 2.9.0 (enough for sorting)."""
    parts = [int(p) for p in text.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 1e6 + parts[1] * 1e3 + parts[2]


def _python_choices(host: HostFacts) -> list[PythonChoice]:
    """Interpreters present (newest patch per minor and kind) then pyenv-installable ones,
    newest first; at one minor the GIL build before the free-threaded one ("3.13t")."""
    present: dict[tuple[tuple[int, int], bool], PythonChoice] = {}
    for p in host.pythons:
        key = (python_version(p.version), p.free_threaded)
        cur = present.get(key)
        if cur is None or version_key(p.version) > version_key(cur.version):
            present[key] = PythonChoice(key[0], p.version, "installed", p.path, p.free_threaded)
    installable: dict[tuple[tuple[int, int], bool], PythonChoice] = {}
    # uv's prebuilt Pythons first (seconds, no compiler: issue 35); pyenv's builds only
    # for a minor uv's downloads list lacks (or with uv's downloads off).
    tools = [("uv", host.uv_pythons.installable if host.uv_pythons else ()),
             ("pyenv", host.pyenv.installable if host.pyenv else ())]
    for source, versions in tools:
        offered: dict[tuple[tuple[int, int], bool], PythonChoice] = {}
        for v in versions:
            ft = v.endswith("t")
            number = v[:-1] if ft else v
            try:
                key = (python_version(number), ft)
            except BadInput:
                continue
            if key in installable or (key in present and present[key].version == number):
                continue
            cur = offered.get(key)
            if cur is None or version_key(number) > version_key(cur.version):
                offered[key] = PythonChoice(key[0], number, source, None, ft)
        installable.update(offered)

    def order(p: PythonChoice) -> tuple[int, int, bool]:
        return (-p.minor[0], -p.minor[1], p.free_threaded)

    return sorted(present.values(), key=order) + sorted(installable.values(), key=order)


def find_python_choice(host: HostFacts, version: str, free_threaded: bool = False) -> PythonChoice | None:
    """The interpreter the resolver would take for `version`'s minor on `host`: one present, else
    uv's prebuilt one, else pyenv's build (`_python_choices`' order); None when none offers it.
    `install --lock --force` labels the lock's Python by it (issue 35: it said "pyenv" where uv
    would provide it)."""
    minor = python_version(".".join(version.split(".")[:2]))
    return next((c for c in _python_choices(host) if c.minor == minor and c.free_threaded == free_threaded), None)


class TorchProvider(AbstractProvider):  # type: ignore[type-arg]
    """resolvelib provider: the matrix's builds, the host as virtual packages."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._builds = [BuildCandidate(b) for b in ctx.ordered]

    def identify(self, requirement_or_candidate: Any) -> str:
        return str(requirement_or_candidate.identifier)

    def get_preference(self, identifier: str, *args: Any, **kwargs: Any) -> Any:
        # The project's packages first (their torch pins narrow the builds), then torch
        # (its choice fixes everything else), then Python, then the rest.
        if identifier.startswith("pkg:"):
            return 0
        order = {"torch": 1, "python": 2, "torchvision": 3, "torchaudio": 3}
        return order.get(identifier, 4)

    def _pool(self, identifier: str) -> Iterable[Any]:
        if identifier == "torch":
            return self._builds
        if identifier == "python":
            return [p for p in self.ctx.pythons if self.ctx._python_ok(p)]
        if identifier in ("torchvision", "torchaudio"):
            return self.ctx._companions(identifier)
        if identifier.startswith("pkg:"):
            return self.ctx.project_pool(identifier)
        return [HostCandidate(identifier)]

    def find_matches(
        self,
        identifier: str,
        requirements: Mapping[str, Iterator[Req]],
        incompatibilities: Mapping[str, Iterator[Any]],
    ) -> list[Any]:
        reqs = list(requirements[identifier])
        bad = set(incompatibilities[identifier])
        return [c for c in self._pool(identifier) if c not in bad and all(r.check(c).ok for r in reqs)]

    def is_satisfied_by(self, requirement: Req, candidate: Any) -> bool:
        return requirement.check(candidate).ok

    def get_dependencies(self, candidate: Any) -> list[Req]:
        if isinstance(candidate, ProjectCandidate):
            return self.ctx.family_reqs(candidate)
        if not isinstance(candidate, BuildCandidate):
            return []
        b = candidate.build
        deps = [self.ctx.python_req(b), *self.ctx.companion_reqs(b)]
        for fact, check in self.ctx.fleet_checks(b):
            deps.append(Req(f"<{fact}>", check.text, f"matrix: {b.label}, {b.origin}", _always(check)))
        return deps


def root_requirements(ctx: Context) -> list[Req]:
    req = ctx.request
    roots = [
        Req(
            "torch",
            " ".join(req.describe(project=False)) or "torch",
            "user" if req.describe(project=False) else "default",
            lambda c: all(chk.ok for chk in ctx.user_checks(c.build)),
        )
    ]
    if req.python is not None:
        roots.append(Req("python", f"Python {req.python}", "user: --python", lambda c: ctx._python_ok(c)))
    for name in ("torchvision", "torchaudio"):
        if req.wants(name):
            spec = req.spec(name)
            roots.append(
                Req(name, f"{name}{spec}", "user", _in_spec(spec))
            )
    for r in ctx.project:
        roots.append(Req(f"pkg:{r.name}", r.text, r.origin, _release_in(r.requirement.specifier, req.project.pre)))
    return roots


def _release_in(spec: SpecifierSet, pre: bool) -> Callable[[Any], bool]:
    """A project requirement's test of a release (pre-releases only with --pre or a pre specifier)."""
    return lambda c: spec.contains(c.version, prereleases=pre or None)
