"""`resolve(hosts, request, matrix) -> Plan`: resolvelib over the matrix, hosts as virtual packages.

Identifiers: `torch` (candidates are `Build`s: a release in one variant),
`python` (interpreters present or installable by uv or pyenv on the first host),
`torchvision`/`torchaudio` (when asked for), and the virtual packages
`<driver>`, `<gpu-arch>`, `<glibc>`, `<platform>` and `<cudnn>`, each with exactly
one candidate: the hosts (a build's requirement on each names the first host that
refuses it, provider.Context.fleet_checks). A build depends on its host requirements, so a
host mismatch is an ordinary resolvelib conflict with a source, as in pip's
`<Python from Requires-Python>`.

Preference (docs/architecture.md, Contracts): the newest torch that fits; within a release a variant
the driver fully supports (toolkit floor met) before one only minor-version
compatibility allows; among fully supported variants the newer CUDA (or ROCm),
among minor-version-compatibility-only ones the smallest CUDA gap (cu130 before
cu132 on a 13.0 driver: the fewer APIs the driver lacks); Python: the newest
interpreter present that has wheels, else the newest uv (then pyenv) can install.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from resolvelib import BaseReporter, ResolutionImpossible, Resolver
from resolvelib.resolvers import ResolutionTooDeep

from torchfit.compat.binding import binding_reasons
from torchfit.compat.explain import Remedy, apply_remedy, explain_conflict, explain_project_conflict
from torchfit.compat.facts import HostFacts
from torchfit.compat.hostlines import fold_host_lines
from torchfit.compat.judgements import refuse_unknown_gpus
from torchfit.compat.matrix import EVIDENCE_WORDS, WEAK_EVIDENCE, Build, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.project import PackageIndex
from torchfit.compat.provider import (
    Context,
    ProjectCandidate,
    PythonChoice,
    TorchProvider,
    root_requirements,
    version_key,
)
from torchfit.compat.request import Request
from torchfit.compat.rules import host_warnings
from torchfit.errors import BadInput, NoCompatibleSet

if TYPE_CHECKING:
    from torchfit.compat.companions import Companions


def resolve(hosts: Sequence[HostFacts], request: Request, matrix: Matrix,
            packages: PackageIndex | None = None, companions: Companions | None = None,
            *, check_hints: bool = True) -> Plan:
    """Pick one stack that fits every host and the request; `NoCompatibleSet` if none does.

    `packages` reads the project's packages (versions, METADATA) when the request has
    any; `companions` is data/companions.toml (read here when not given). A refusal's
    hints are only those whose change, applied, resolves (`check_hints=False`: the
    inner resolves of that check, which need no hints of their own).
    """
    if not hosts:
        raise BadInput("no host facts to resolve for")
    if request.variant != "cpu":
        refuse_unknown_gpus(hosts)
    if request.project.others and companions is None:
        from torchfit.compat.companions import load_companions

        companions = load_companions()
    ctx = Context(hosts, request, matrix, packages, companions)
    provider = TorchProvider(ctx)
    try:
        result = Resolver(provider, BaseReporter()).resolve(root_requirements(ctx), max_rounds=5000)
    except ResolutionImpossible:
        conflicts, hints = explain_project_conflict(ctx) if ctx.project else ([], [])
        if conflicts:
            raise NoCompatibleSet(conflicts, hints) from None
        conflicts, remedies = explain_conflict(ctx)
        if not check_hints:
            raise NoCompatibleSet(conflicts, [r.text for r in remedies], remedies) from None
        working = _working_remedies(hosts, request, matrix, packages, companions, remedies)
        if not working:
            conflicts.append("no single change torchfit can check opens a path: see the lines above, "
                             "or run with --explain")
        raise NoCompatibleSet(conflicts, [r.text for r in working], working) from None
    except ResolutionTooDeep:  # pragma: no cover - the matrix is far too small for this
        raise NoCompatibleSet(["the search gave up (too many rounds)"], []) from None
    build = result.mapping["torch"].build
    py = result.mapping["python"]
    chosen = [c for k, c in result.mapping.items() if k.startswith("pkg:")]
    ctx.chosen = chosen  # the builds the project's pins exclude are refused for that reason
    return _make_plan(ctx, build, py, chosen)


def _working_remedies(hosts: Sequence[HostFacts], request: Request, matrix: Matrix,
                      packages: PackageIndex | None, companions: Companions | None,
                      remedies: Sequence[Remedy]) -> list[Remedy]:
    """The remedies whose change, applied, lets every environment it describes resolve;
    one that rests on weak evidence (secondary, cycle-level) says so."""
    out: list[Remedy] = []
    for remedy in remedies:
        plans = []
        try:
            for env_hosts, env_request in apply_remedy(remedy, hosts, request):
                plans.append(resolve(env_hosts, env_request, matrix, packages, companions, check_hints=False))
        except (NoCompatibleSet, BadInput):
            continue
        weak = [w for p in plans for w in p.warnings if " rests on " in w]
        text = remedy.text.format(*(f"torch {p.torch} {p.variant}" for p in plans)) if remedy.envs else remedy.text
        if weak:
            text += f" (the plan it opens rests on weak evidence: {weak[0]})"
        if text not in {r.text for r in out}:
            out.append(replace(remedy, text=text))
    return [r for r in out if not r.fallback] or out


def _project_reasons(ctx: Context, build: Build, chosen: Sequence[ProjectCandidate]) -> tuple[list[str], list[str]]:
    """Which project package constrained which family package, and the family names it needs."""
    reasons: list[str] = []
    needed: list[str] = []
    if not chosen:  # the family alone: packaging.utils (packaging.tags, logging, platform) not loaded (issue 37)
        return reasons, needed
    from packaging.utils import canonicalize_name

    for cand in sorted(chosen, key=lambda c: c.name):
        for req in ctx.family_pins(cand):
            name = str(canonicalize_name(req.name))
            version = str(build.torch) if name == "torch" else getattr(build, name, None)
            reasons.append(f"{name} {version}: required by {cand.label} ({req})")
            if name != "torch":
                needed.append(name)
    return reasons, needed


def _companion_notes(ctx: Context, build: Build, py: PythonChoice,
                     chosen: Sequence[ProjectCandidate]) -> tuple[list[str], list[str], list[str]]:
    """What companions.toml says of the project's ABI-bound packages for this build
    (`compat.companions.companion_notes`)."""
    if ctx.companions is None:
        return [], [], []
    from torchfit.compat.companions import companion_notes

    return companion_notes(ctx.companions, build, py.label, [(c.name, c.version) for c in chosen])


def _make_plan(ctx: Context, build: Build, py: PythonChoice, chosen: Sequence[ProjectCandidate] = ()) -> Plan:
    req, hosts = ctx.request, ctx.hosts
    why, reasons, warnings = _host_notes(ctx, build)
    newer = [b for b in ctx.matrix.releases if b > build.torch]
    why.update(_why(ctx, build, py, newer))
    reasons += _python_reasons(build, py)
    warnings += _build_warnings(ctx, build)
    pinned, needed = _project_reasons(ctx, build, chosen)
    notes, cautions, routed = _companion_notes(ctx, build, py, chosen)
    warnings += cautions
    torch_pins = [p.split(": ", 1)[1] for p in pinned if p.startswith("torch ")]
    if torch_pins:  # the project decided the release, not "newest that fits"
        why["torch"] = "; ".join(torch_pins) + (
            " (newer releases: outside that pin; see --explain)" if newer else "")
    reasons += [p for p in pinned if not p.startswith("torch ")] + notes
    reasons.append(f"torch {build.torch}: {why['torch']}")
    reasons.append(f"{build.variant}: {why['variant']}")
    gap = _smallest_gap_reason(ctx, build)
    if gap:
        reasons.append(gap)
    packages = ["torch"] + [n for n in ("torchvision", "torchaudio") if req.wants(n) or n in needed]
    for name in ("torchvision", "torchaudio"):  # what install installs; a match not asked for is said as such
        if name not in packages and getattr(build, name):
            why[name] = f"not installed (not asked for); {getattr(build, name)} matches {build.label}: add {name} " \
                        "to the request"
    for name in packages[1:]:
        if getattr(build, name) is None:  # a project package pins it, the matrix knows no match
            warnings.append(f"{build.label}: the matrix knows no {name} for it; uv resolves {name} from the "
                            "torch index as the project requires")
    relevant, ruled, unknown_only = _ruled_out(ctx, build)
    reasons += binding_reasons(ctx, relevant)  # several hosts: which of them rule out what
    warnings += unknown_only
    return Plan(
        python=py.label,
        python_version=py.version,
        python_source=py.source,
        python_path=py.path,
        free_threaded=py.free_threaded,
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
        project=tuple(r.text for r in req.project.others),
        constraints=tuple(r.text for r in req.project.constraints),
        routed=tuple(routed),
        build=build,
    )


def _host_notes(ctx: Context, build: Build) -> tuple[dict[str, str], list[str], list[str]]:
    """Per host: why this variant, CUDA and glibc (`why`), the CPU-build reason of a host with no
    GPU, and the host rules' warnings (`compat.rules.host_warnings`), each prefixed with the host's
    name when there are several, and folded by reason (`compat.hostlines`: a fleet's 2,000 groups
    say each reason once, naming the groups)."""
    reasons: list[tuple[HostFacts, str]] = []
    warnings: list[tuple[HostFacts, str]] = []
    notes: dict[str, list[tuple[HostFacts, str]]] = {}
    for k, host in enumerate(ctx.hosts):
        checks = dict(ctx.host_checks(build, k))
        prefix = f"{host.name}: " if len(ctx.hosts) > 1 else ""
        why_gpu = checks["gpu-arch"].text
        if build.kind == "cpu" and not host.gpus and not ctx.want_cpu:
            why_gpu = f"no GPU detected on {host.name}, so the CPU build"
            reasons.append((host,
                f"{prefix}no GPU found ({host.reasons.get('gpus', 'nvidia-smi and ROCm list none')}): "
                "resolved for CPU; use --facts or --assume gpu=... to resolve for a GPU host"
            ))
        notes.setdefault("variant", []).append((host, prefix + why_gpu))
        if "driver" in checks:
            notes.setdefault("cuda", []).append((host, prefix + checks["driver"].text))
        warnings += [(host, prefix + w) for w in host_warnings(build, host, ctx.matrix)]
        notes.setdefault("glibc", []).append((host, prefix + checks["glibc"].text))
    why = {key: "; ".join(fold_host_lines(pairs)) for key, pairs in notes.items()}
    return why, fold_host_lines(reasons), fold_host_lines(warnings)


def _why(ctx: Context, build: Build, py: PythonChoice, newer: Sequence[object]) -> dict[str, str]:
    """The plan's `why` of the torch release, Python, cuDNN, NCCL, companions and index."""
    req = ctx.request
    why: dict[str, str] = {}
    why["torch"] = (
        f"newest release that fits ({len(newer)} newer ruled out; see --explain)"
        if newer
        else "newest release in the matrix"
    )
    if str(req.spec("torch")):
        why["torch"] += f"; within torch{req.spec('torch')}"
    ft = "t" if py.free_threaded else ""
    why["python"] = (
        f"Python {py.version}{ft} present at {py.path}" if py.source == "installed" and py.path else
        f"Python {py.version}{ft} present" if py.source == "installed" else
        f"no present interpreter has {build.label} wheels; uv will install a prebuilt {py.version}{ft}"
        f" ({ctx.hosts[0].uv_pythons.source if ctx.hosts[0].uv_pythons else ''})" if py.source == "uv" else
        f"no present interpreter has {build.label} wheels; pyenv will install {py.version}{ft}"
    )
    why["cudnn"] = f"bundled with {build.label}" + ("" if build.cudnn else " (version unknown in the matrix)")
    why["nccl"] = f"bundled with {build.label}" + ("" if build.nccl else " (version unknown in the matrix)")
    why["torchvision"] = f"matches {build.label}" if build.torchvision else "no release matches"
    why["torchaudio"] = f"matches {build.label}" if build.torchaudio else "no release matches this build"
    why["index_url"] = (
        f"{build.variant} builds come only from their own index (never an extra index: "
        "that is how a CPU build slips in)"
    )
    return why


def _python_reasons(build: Build, py: PythonChoice) -> list[str]:
    """What the plan says of its interpreter: uv will fetch it, or pyenv build it; it is free-threaded."""
    ft = "t" if py.free_threaded else ""
    reasons = []
    if py.source == "pyenv":
        reasons.append(f"Python {py.shown} is not present: `pyenv install {py.version}{ft}` will provide it "
                       "(a CPython build from source: minutes and a compiler)")
    if py.source == "uv":
        reasons.append(f"Python {py.shown} is not present: `uv python install {py.version}{ft}` will provide it "
                       "(a prebuilt uv-managed Python, no compiler)")
    if py.free_threaded:
        reasons.append(f"Python {py.shown} is free-threaded: {build.label} and every package of the plan have "
                       f"cp{py.minor[0]}{py.minor[1]}t wheels (matrix: python_freethreaded, "
                       f"{build.sources.get('python_freethreaded', '')})")
    return reasons


def _build_warnings(ctx: Context, build: Build) -> list[str]:
    """The build's own caveats: facts the matrix lacks, weak evidence, a CPU build asked for on a GPU host."""
    warnings = []
    if build.kind == "cuda" and (build.cudnn is None or build.nccl is None):
        warnings.append(f"{build.label}: cuDNN/NCCL versions unknown in the matrix; verify will read them")
    warnings += _weak_evidence_warnings(ctx, build)
    if build.kind == "cpu" and ctx.want_cpu and any(h.gpus for h in ctx.hosts):
        warnings.append("a CPU build on a GPU host, as asked (--variant cpu): the GPUs stay unused")
    return warnings


def _ruled_out(ctx: Context, build: Build) -> tuple[list[Build], list[str], list[str]]:
    """The builds preferred to `build` and why each was refused: (those for this hardware, every
    refusal line with them first, the warning when the newer ones lack only a matrix fact)."""
    preferred = ctx.ordered[: ctx.ordered.index(build)]
    # Builds for this kind of hardware first (what --explain lists); the rest is counted.
    relevant = [b for b in preferred if _fits_hardware(b, ctx.hosts)]
    others = [b for b in preferred if not _fits_hardware(b, ctx.hosts)]
    ruled = [f"{b.label}: " + "; ".join(_refusal_parts(ctx, b)) for b in relevant + others]
    # Newer builds for this hardware refused only because the matrix lacks a fact
    # (a gfx or arch list "unknown"): say so, or an old pick looks like incompatibility.
    missing = [b for b in relevant if all("unknown in the matrix" in c.text for c in ctx.refusals(b))]
    if not missing:
        return relevant, ruled, []
    what = "gfx target lists" if build.kind == "rocm" else "arch lists"
    return relevant, ruled, [
        f"{build.label} is the newest build whose {what[:-1]} the matrix knows covers these GPUs; "
        f"{len(missing)} newer builds ({missing[0].label} first) are ruled out only because their "
        f"{what} are unknown in the matrix, not because they were found incompatible "
        "(`torchfit resolve --explain` lists them)"
    ]


def _refusal_parts(ctx: Context, build: Build) -> list[str]:
    """Why `build` was refused, each host's reasons folded by reason (`compat.hostlines`), then
    the rest (Python, companions, the user's constraints)."""
    mine = [(host, _strip(c.text, build)) for k, host in enumerate(ctx.hosts)
            for _, c in ctx.host_checks(build, k) if not c.ok]
    # Context.refusals lists the hosts' refusals first, in this order: the rest follows them.
    rest = [_strip(c.text, build) for c in ctx.refusals(build)[len(mine):]]
    return fold_host_lines(mine) + rest


def _smallest_gap_reason(ctx: Context, build: Build) -> str | None:
    """Say why this CUDA variant and not a newer one, when the driver runs the release's
    variants only through minor-version compatibility."""
    if build.kind != "cuda" or ctx.is_full(build):
        return None
    siblings = [
        b for b in ctx.ordered
        if b is not build and b.torch == build.torch and b.kind == "cuda" and not ctx.is_full(b)
        and version_key(b.cuda or "0") > version_key(build.cuda or "0") and not ctx.refusals(b)
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


def _weak_evidence_warnings(ctx: Context, build: Build) -> list[str]:
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
