"""`resolve(hosts, request, matrix) -> Plan`: resolvelib over the matrix, hosts as virtual packages.

Identifiers: `torch` (candidates are `Build`s: a release in one variant),
`python` (interpreters present or installable by pyenv on the first host),
`torchvision`/`torchaudio` (when asked for), and per host `k` the virtual
packages `<driver>@k`, `<gpu-arch>@k`, `<glibc>@k` and `<platform>@k`, each with
exactly one candidate: that host. A build depends on its host requirements, so a
host mismatch is an ordinary resolvelib conflict with a source, as in pip's
`<Python from Requires-Python>`.

Preference (DESIGN.md): the newest torch that fits; within a release a variant
the driver fully supports (toolkit floor met) before one only minor-version
compatibility allows; among fully supported variants the newer CUDA (or ROCm),
among minor-version-compatibility-only ones the smallest CUDA gap (cu130 before
cu132 on a 13.0 driver: the fewer APIs the driver lacks); Python: the newest
interpreter present that has wheels, else the newest pyenv can install.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from packaging.specifiers import SpecifierSet
from packaging.version import Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, Resolver
from resolvelib.resolvers import ResolutionTooDeep

from torchfit._backports import FROZEN
from torchfit.compat.facts import HostFacts
from torchfit.compat.judgements import group_gpus, refuse_unknown_gpus
from torchfit.compat.matrix import EVIDENCE_WORDS, WEAK_EVIDENCE, Build, Matrix
from torchfit.compat.request import Plan, Request
from torchfit.compat.rules import (
    RuleResult,
    driver_floor,
    has_full_driver,
    host_checks,
)
from torchfit.compat.versions import coverage, python_version
from torchfit.errors import BadInput, NoCompatibleSet

HOST_FACTS = ("driver", "gpu-arch", "cudnn", "glibc", "platform")


@dataclass(**FROZEN)
class PythonChoice:
    """An interpreter the plan could use: present on the host, or installable with pyenv."""

    minor: tuple[int, int]
    version: str
    source: str  # "installed" | "pyenv"
    path: str | None

    identifier = "python"

    @property
    def label(self) -> str:
        return f"{self.minor[0]}.{self.minor[1]}"


@dataclass(**FROZEN)
class Companion:
    identifier: str
    version: str


@dataclass(**FROZEN)
class HostCandidate:
    """The single candidate of a host virtual package: the host itself."""

    identifier: str
    index: int


@dataclass(**FROZEN)
class BuildCandidate:
    build: Build
    identifier = "torch"


Candidate = Union[BuildCandidate, PythonChoice, Companion, HostCandidate]


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


def _always(check: RuleResult) -> Callable[[Any], RuleResult]:
    """A host requirement's verdict is fixed when the build is: the host has one candidate."""
    return lambda _c: check


class _Context:
    """Everything the provider needs, computed once: hosts, request, candidate pools."""

    def __init__(self, hosts: Sequence[HostFacts], request: Request, matrix: Matrix) -> None:
        self.hosts = list(hosts)
        self.request = request
        self.matrix = matrix
        self.want_cpu = request.variant == "cpu"
        self.pythons = _python_choices(hosts[0])
        self.primary_platform = hosts[0].arch or "x86_64"
        self.ordered = sorted(matrix.builds, key=self.build_order)

    # -- per-build requirement sets ------------------------------------------------
    def host_checks(self, build: Build, k: int) -> list[tuple[str, RuleResult]]:
        return host_checks(build, self.hosts[k], self.matrix,
                           strict_driver=self.request.strict_driver, want_cpu=self.want_cpu)

    def python_req(self, build: Build) -> Req:
        allowed = set(build.pythons_for(self.primary_platform))
        wants_companion = self.request.wants("torchvision") or self.request.wants("torchaudio")
        if wants_companion and build.pythons_companions is not None:
            # torchvision/torchaudio wheels can lag torch's (0.20.x has no cp313).
            allowed &= set(build.pythons_companions)
        shown = ", ".join(f"{a}.{b}" for a, b in sorted(allowed))
        return Req(
            "python",
            f"Python with {build.label} wheels ({shown})",
            f"matrix: {build.label}, {build.origin}",
            lambda c: c.minor in allowed,
        )

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
        return fails

    def _python_refusal(self, build: Build, choices: list[PythonChoice]) -> str:
        wheels = ", ".join(f"{a}.{b}" for a, b in build.pythons_for(self.primary_platform))
        present = ", ".join(sorted({p.label for p in self.pythons if p.source == "installed"})) or "none"
        pyenv = "pyenv can install none of them" if self.hosts[0].pyenv else "no pyenv to install one"
        user = f" within --python {self.request.python}" if self.request.python else ""
        return f"{build.label}: has wheels for Python {wheels}{user}; present: {present}; {pyenv}"

    def _python_ok(self, p: PythonChoice) -> bool:
        return self.request.python is None or self.request.python.contains(p.version, prereleases=True)

    def _companions(self, name: str) -> list[Companion]:
        spec = self.request.spec(name)
        versions = {getattr(b, name) for b in self.matrix.builds} - {None}
        return [
            Companion(name, v)
            for v in sorted(versions, key=Version, reverse=True)
            if spec.contains(v, prereleases=True)
        ]

    def is_full(self, build: Build) -> bool:
        """Every host's driver meets the build's own toolkit floor (PTX JIT, newest APIs)."""
        return all(has_full_driver(build, h, self.matrix) for h in self.hosts)

    def build_order(self, build: Build) -> tuple[Any, ...]:
        """Sort key, smallest first: newest torch, fully supported driver, then the newest
        CUDA/ROCm, or, where only minor-version compatibility runs it, the smallest CUDA gap."""
        full = self.is_full(build)
        accel = _vkey(build.cuda or build.rocm or "0")
        kind_rank = {"cuda": 0, "rocm": 0, "cpu": 1}[build.kind]
        # Under MVC a newer toolkit only widens the gap to the driver (more APIs missing),
        # so the oldest CUDA of the release comes first (cu130 before cu132 on a 13.0 driver).
        return (-_vkey(str(build.torch)), not full, kind_rank, accel if not full else -accel, build.variant)


def _vkey(text: str) -> float:
    """A float that orders versions like 2.10.0 > 2.9.1 > 2.9.0 (enough for sorting)."""
    parts = [int(p) for p in text.split(".")[:3]] + [0, 0, 0]
    return parts[0] * 1e6 + parts[1] * 1e3 + parts[2]


def _python_choices(host: HostFacts) -> list[PythonChoice]:
    """Interpreters present (newest patch per minor) then pyenv-installable ones, newest first."""
    present: dict[tuple[int, int], PythonChoice] = {}
    for p in host.pythons:
        minor = python_version(p.version)
        cur = present.get(minor)
        if cur is None or _vkey(p.version) > _vkey(cur.version):
            present[minor] = PythonChoice(minor, p.version, "installed", p.path)
    installable: dict[tuple[int, int], PythonChoice] = {}
    if host.pyenv is not None:
        for v in host.pyenv.installable:
            try:
                minor = python_version(v)
            except BadInput:
                continue
            if minor in present:
                continue
            cur = installable.get(minor)
            if cur is None or _vkey(v) > _vkey(cur.version):
                installable[minor] = PythonChoice(minor, v, "pyenv", None)
    return sorted(present.values(), key=lambda p: p.minor, reverse=True) + sorted(
        installable.values(), key=lambda p: p.minor, reverse=True
    )


class TorchProvider(AbstractProvider):  # type: ignore[type-arg]
    """resolvelib provider: the matrix's builds, the host as virtual packages."""

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx
        self._builds = [BuildCandidate(b) for b in ctx.ordered]

    def identify(self, requirement_or_candidate: Any) -> str:
        return str(requirement_or_candidate.identifier)

    def get_preference(self, identifier: str, *args: Any, **kwargs: Any) -> Any:
        # torch first (its choice fixes everything else), then Python, then the rest.
        order = {"torch": 0, "python": 1, "torchvision": 2, "torchaudio": 2}
        return order.get(identifier, 3)

    def _pool(self, identifier: str) -> Iterable[Any]:
        if identifier == "torch":
            return self._builds
        if identifier == "python":
            return [p for p in self.ctx.pythons if self.ctx._python_ok(p)]
        if identifier in ("torchvision", "torchaudio"):
            return self.ctx._companions(identifier)
        _, _, k = identifier.partition("@")
        return [HostCandidate(identifier, int(k))]

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
        if not isinstance(candidate, BuildCandidate):
            return []
        b = candidate.build
        deps = [self.ctx.python_req(b), *self.ctx.companion_reqs(b)]
        for k in range(len(self.ctx.hosts)):
            for fact, check in self.ctx.host_checks(b, k):
                deps.append(
                    Req(
                        f"<{fact}>@{k}",
                        check.text,
                        f"matrix: {b.label}, {b.origin}",
                        _always(check),
                    )
                )
        return deps


def _root_requirements(ctx: _Context) -> list[Req]:
    req = ctx.request
    roots = [
        Req(
            "torch",
            " ".join(req.describe()) or "torch",
            "user" if req.describe() else "default",
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
    return roots


def resolve(hosts: Sequence[HostFacts], request: Request, matrix: Matrix) -> Plan:
    """Pick one stack that fits every host and the request; `NoCompatibleSet` if none does."""
    if not hosts:
        raise BadInput("no host facts to resolve for")
    if request.variant != "cpu":
        refuse_unknown_gpus(hosts)
    ctx = _Context(hosts, request, matrix)
    provider = TorchProvider(ctx)
    try:
        result = Resolver(provider, BaseReporter()).resolve(_root_requirements(ctx), max_rounds=2000)
    except ResolutionImpossible:
        conflicts, hints = explain_conflict(ctx)
        raise NoCompatibleSet(conflicts, hints) from None
    except ResolutionTooDeep:  # pragma: no cover - the matrix is far too small for this
        raise NoCompatibleSet(["the search gave up (too many rounds)"], []) from None
    build = result.mapping["torch"].build
    py = result.mapping["python"]
    return _make_plan(ctx, build, py)


def _make_plan(ctx: _Context, build: Build, py: PythonChoice) -> Plan:
    req, hosts, matrix = ctx.request, ctx.hosts, ctx.matrix
    reasons: list[str] = []
    warnings: list[str] = []
    why: dict[str, str] = {}
    for k, host in enumerate(hosts):
        checks = dict(ctx.host_checks(build, k))
        prefix = f"{host.name}: " if len(hosts) > 1 else ""
        why_gpu = checks["gpu-arch"].text
        if build.kind == "cpu" and not host.gpus and not ctx.want_cpu:
            why_gpu = f"no GPU detected on {host.name}, so the CPU build"
            reasons.append(
                f"{prefix}no GPU found ({host.reasons.get('gpus', 'nvidia-smi and ROCm list none')}): "
                "resolved for CPU; use --facts or --assume gpu=... to resolve for a GPU host"
            )
        why.setdefault("variant", "")
        why["variant"] += prefix + why_gpu + "; "
        if "driver" in checks:
            why.setdefault("cuda", "")
            why["cuda"] += prefix + checks["driver"].text + "; "
            if not has_full_driver(build, host, matrix):
                floor = matrix.cuda[build.cuda or ""].toolkit_driver
                warnings.append(
                    f"{prefix}{build.variant} runs on driver {host.driver} only through CUDA minor-version "
                    f"compatibility: no PTX JIT, and the newest CUDA APIs need driver >= {floor or 'unknown'} "
                    "(supported by NVIDIA and PyTorch; upgrade the driver to lift it)"
                )
            archs = build.arch_for(host.arch or "x86_64") or ()
            for gpu in host.nvidia_gpus:
                if gpu.arch and coverage(gpu.arch, archs).kind == "ptx":
                    warnings.append(
                        f"{prefix}{gpu.label()} runs {build.variant} through PTX JIT: the first launch of "
                        "each kernel compiles it, and startup is slower"
                    )
        why.setdefault("glibc", "")
        why["glibc"] += prefix + checks["glibc"].text + "; "
    why = {k: v.rstrip("; ") for k, v in why.items()}
    newer = [b for b in matrix.releases if b > build.torch]
    why["torch"] = (
        f"newest release that fits ({len(newer)} newer ruled out; see --explain)"
        if newer
        else "newest release in the matrix"
    )
    if str(req.spec("torch")):
        why["torch"] += f"; within torch{req.spec('torch')}"
    why["python"] = (
        f"Python {py.version} present at {py.path}" if py.source == "installed" and py.path else
        f"Python {py.version} present" if py.source == "installed" else
        f"no present interpreter has {build.label} wheels; pyenv will install {py.version}"
    )
    if py.source == "pyenv":
        reasons.append(f"Python {py.label} is not present: `pyenv install {py.version}` will provide it")
    why["cudnn"] = f"bundled with {build.label}" + ("" if build.cudnn else " (version unknown in the matrix)")
    why["nccl"] = f"bundled with {build.label}" + ("" if build.nccl else " (version unknown in the matrix)")
    why["torchvision"] = f"matches {build.label}" if build.torchvision else "no release matches"
    why["torchaudio"] = f"matches {build.label}" if build.torchaudio else "no release matches this build"
    why["index_url"] = (
        f"{build.variant} builds come only from their own index (never an extra index: "
        "that is how a CPU build slips in)"
    )
    if build.kind == "cuda" and (build.cudnn is None or build.nccl is None):
        warnings.append(f"{build.label}: cuDNN/NCCL versions unknown in the matrix; verify will read them")
    warnings += _weak_evidence_warnings(ctx, build)
    if build.kind == "cpu" and ctx.want_cpu and any(h.gpus for h in hosts):
        warnings.append("a CPU build on a GPU host, as asked (--variant cpu): the GPUs stay unused")
    reasons.append(f"torch {build.torch}: {why['torch']}")
    reasons.append(f"{build.variant}: {why['variant']}")
    gap = _smallest_gap_reason(ctx, build)
    if gap:
        reasons.append(gap)
    packages = ["torch"] + [n for n in ("torchvision", "torchaudio") if req.wants(n)]
    preferred = ctx.ordered[: ctx.ordered.index(build)]
    # Builds for this kind of hardware first (what --explain lists); the rest is counted.
    relevant = [b for b in preferred if _fits_hardware(b, hosts)]
    others = [b for b in preferred if not _fits_hardware(b, hosts)]
    ruled = [
        f"{b.label}: " + "; ".join(_strip(c.text, b) for c in ctx.refusals(b))
        for b in relevant + others
    ]
    # Newer builds for this hardware refused only because the matrix lacks a fact
    # (a gfx or arch list "unknown"): say so, or an old pick looks like incompatibility.
    missing = [b for b in relevant if all("unknown in the matrix" in c.text for c in ctx.refusals(b))]
    if missing:
        what = "gfx target lists" if build.kind == "rocm" else "arch lists"
        newest = missing[0]
        warnings.append(
            f"{build.label} is the newest build whose {what[:-1]} the matrix knows covers these GPUs; "
            f"{len(missing)} newer builds ({newest.label} first) are ruled out only because their "
            f"{what} are unknown in the matrix, not because they were found incompatible "
            "(`torchfit resolve --explain` lists them)"
        )
    return Plan(
        python=py.label,
        python_version=py.version,
        python_source=py.source,
        python_path=py.path,
        torch=str(build.torch),
        variant=build.variant,
        cuda=build.cuda,
        rocm=build.rocm,
        cudnn=build.cudnn,
        nccl=build.nccl,
        torchvision=build.torchvision,
        torchaudio=build.torchaudio,
        index_url=build.index_url,
        packages=tuple(packages),
        reasons=tuple(reasons),
        warnings=tuple(dict.fromkeys(warnings)),
        ruled_out=tuple(ruled),
        ruled_out_relevant=len(relevant),
        why=why,
        hosts=tuple(h.name for h in hosts),
        build=build,
    )


def _smallest_gap_reason(ctx: _Context, build: Build) -> str | None:
    """Say why this CUDA variant and not a newer one, when the driver runs the release's
    variants only through minor-version compatibility."""
    if build.kind != "cuda" or ctx.is_full(build):
        return None
    siblings = [
        b for b in ctx.ordered
        if b is not build and b.torch == build.torch and b.kind == "cuda" and not ctx.is_full(b)
        and _vkey(b.cuda or "0") > _vkey(build.cuda or "0") and not ctx.refusals(b)
    ]
    if not siblings:
        return None
    others = ", ".join(b.variant for b in siblings)
    drivers = ", ".join(sorted({str(h.driver) for h in ctx.hosts if h.driver is not None})) or "unknown"
    return (
        f"{build.variant} before {others}: driver {drivers} runs these {build.torch} variants only through "
        f"CUDA minor-version compatibility, and {build.variant} has the smallest CUDA gap to it "
        "(the fewest CUDA APIs the driver lacks)"
    )


def _weak_evidence_warnings(ctx: _Context, build: Build) -> list[str]:
    """One warning per fact the plan rests on that is labelled weak (secondary or cycle-level)."""
    used = ["exists", "glibc"]
    if build.kind != "cpu" and any(h.gpus for h in ctx.hosts):
        used.append("arch")
    if build.kind == "cuda":
        used += ["cudnn", "nccl"]
    if ctx.request.wants("torchaudio"):
        used.append("torchaudio")
    names = {"exists": "its existence", "arch": "its GPU arch list" if build.kind == "cuda" else "its gfx target list",
             "glibc": "its glibc floor", "cudnn": "its cuDNN version", "nccl": "its NCCL version",
             "torchaudio": "torchaudio on its index"}
    out = []
    for fact in used:
        label = build.evidence_of(fact)
        if label in WEAK_EVIDENCE:
            keys = build.sources.get(fact, "")
            out.append(
                f"{build.label}: {names[fact]} rests on {EVIDENCE_WORDS[label or '']} ({keys}); "
                "verify proves it on this host"
            )
    return out


def _fits_hardware(build: Build, hosts: Sequence[HostFacts]) -> bool:
    """Is `build` for the kind of hardware every host has (CUDA for NVIDIA GPUs,
    ROCm for AMD ones, CPU for none)? Only such builds are worth listing one by one."""
    for host in hosts:
        kinds = ({"cuda"} if host.nvidia_gpus else set()) | ({"rocm"} if host.amd_gpus else set())
        if build.kind not in (kinds or {"cpu"}):
            return False
    return True


def _strip(text: str, build: Build) -> str:
    """Drop the build's own label from a refusal when the line already starts with it."""
    for prefix in (f"{build.label}: ", f"{build.variant}: "):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def explain_conflict(ctx: _Context) -> tuple[list[str], list[str]]:
    """Why nothing fits, host facts first, and which single change would open a path.

    Every build the matrix has is checked; the refusals are grouped by the fact
    that caused them, newest build first. A build refused by one category only
    gives a hint: that is the one change (driver, OS, Python, constraint) that
    would let it in.
    """
    conflicts: list[str] = []
    for host in ctx.hosts:
        conflicts.append(f"{host.name}: {describe_host(host)}")
    grouped = _grouped_gpu_refusals(ctx) if ctx.request.describe() else []
    conflicts += grouped
    by_category: dict[str, list[tuple[Build, RuleResult]]] = {}
    singles: dict[str, Build] = {}
    pairs: list[tuple[Build, list[str]]] = []
    for b in ctx.ordered:
        fails = ctx.refusals(b)
        for c in fails:
            by_category.setdefault(c.category, []).append((b, c))
        cats = sorted({c.category for c in fails})
        if len(cats) == 1:
            singles.setdefault(cats[0], b)
        elif set(cats) <= {"driver", "glibc", "python", "user", "companion"}:
            pairs.append((b, cats))
    order = ["gpu", "driver", "glibc", "platform", "python", "companion", "user"]
    for cat in order:
        items = by_category.get(cat, [])
        if not items or (cat == "gpu" and grouped):
            continue
        first = items[0][1].text
        more = len({b for b, _ in items}) - 1
        conflicts.append(first + (f" (and {more} more builds for the same reason)" if more else ""))
    hints = []
    for cat in order:
        single = singles.get(cat)
        # A GPU cannot be changed by a flag: its hint comes only when nothing else helps.
        if single is not None and cat != "gpu":
            hints.append(_hint(ctx, cat, single))
    if not hints and pairs:
        # No one change suffices: name the changes that together open the newest build.
        b, cats = pairs[0]
        hints.append("no single change opens a path; together: " + "; and ".join(_hint(ctx, c, b) for c in cats))
    if not hints and "gpu" in singles:
        hints.append(_hint(ctx, "gpu", singles["gpu"]))
    if not hints:
        hints.append("no single change opens a path; see the conflicts above, or run with --explain")
    return conflicts, hints


_SINGULAR = {"have": "has", "run": "runs", "carry": "carries", "need": "needs"}


def _grouped_gpu_refusals(ctx: _Context) -> list[str]:
    """The GPU reason per build the user asked for (a pinned torch, a forced --variant),
    grouped over releases: "cu126 builds of torch 2.6-2.14 have no sm_120 code: arch
    list 5.0-9.0, no PTX". Builds the user's own constraints exclude are left out."""
    groups: dict[tuple[str, str, str], list[Build]] = {}
    for b in ctx.ordered:
        if not all(c.ok for c in ctx.user_checks(b)):
            continue
        for k, host in enumerate(ctx.hosts):
            for _, check in ctx.host_checks(b, k):
                if not check.ok and check.group:
                    prefix = f"{host.name}: " if len(ctx.hosts) > 1 else ""
                    groups.setdefault((prefix, b.variant, check.group), []).append(b)
    out = []
    for (prefix, variant, group), builds in groups.items():
        releases = sorted({b.torch for b in builds})
        if len(releases) == 1:
            verb, _, rest = group.partition(" ")
            out.append(f"{prefix}the {variant} build of torch {releases[0]} {_SINGULAR.get(verb, verb)} {rest}")
        else:
            out.append(f"{prefix}{variant} builds of torch {_release_ranges(releases)} {group}")
    return out


def _release_ranges(releases: list[Version]) -> str:
    """2.6.0, 2.7.0, 2.7.1, ..., 2.14.1 -> "2.6\u20132.14"; gaps between minor lines split ranges."""
    minors = sorted({(v.major, v.minor) for v in releases})
    runs: list[list[tuple[int, int]]] = []
    for m in minors:
        if runs and runs[-1][-1][0] == m[0] and runs[-1][-1][1] + 1 == m[1]:
            runs[-1].append(m)
        else:
            runs.append([m])
    return ", ".join(
        f"{r[0][0]}.{r[0][1]}" if len(r) == 1 else f"{r[0][0]}.{r[0][1]}\u2013{r[-1][0]}.{r[-1][1]}" for r in runs
    )


def _hint(ctx: _Context, cat: str, b: Build) -> str:
    if cat == "driver":
        floor, what = driver_floor(b, ctx.matrix, ctx.request.strict_driver)
        return f"upgrade the NVIDIA driver to >= {floor} ({what}) to get {b.label}"
    if cat == "glibc":
        return (
            f"{b.label} needs glibc >= {b.glibc_for(ctx.primary_platform)}: upgrade the OS "
            "(e.g. CentOS 7 -> Rocky/RHEL 8), or run torchfit in a newer container"
        )
    if cat == "python":
        wheels = ", ".join(f"{x}.{y}" for x, y in b.pythons_for(ctx.primary_platform))
        return f"install one of Python {wheels} (pyenv) or loosen --python to get {b.label}"
    if cat == "user":
        return f"loosen your constraints ({' '.join(ctx.request.describe())}): {b.label} would fit"
    if cat == "gpu":
        return (
            f"no build covers these GPUs under the other facts (nearest: {b.label}); "
            "check the GPU facts (--assume gpu=), or ask for a CPU build with --variant cpu"
        )
    if cat == "companion":
        return f"drop the torchvision/torchaudio requirement: {b.label} would fit"
    return f"{b.label} fails only on {cat}"


def describe_host(host: HostFacts) -> str:
    """One line of the facts that matter for resolution, unknowns with their reason."""
    gpus = group_gpus([g.label() for g in host.gpus]) or "no GPU"
    py = ", ".join(sorted({p.version for p in host.pythons})) or "no Python found"
    pyenv = "pyenv" if host.pyenv else "no pyenv"
    return (
        f"driver {host.driver_version or 'unknown'}, {gpus}, glibc {host.glibc or 'unknown'}, "
        f"{host.os or 'OS unknown'}, {host.arch or 'arch unknown'}, Python {py} ({pyenv})"
    )
