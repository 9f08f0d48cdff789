"""Text about a resolution, pure: why no set fits (conflicts grouped per build line and
per GPU model, with the one change that would open a path as a hint) and a one-line
description of a host. Called by `resolver.resolve` on `ResolutionImpossible`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from packaging.version import Version

from torchfit._backports import FROZEN
from torchfit.compat.facts import Gpu, HostFacts, apply_assumptions
from torchfit.compat.hostlines import fold_host_lines, format_host_names
from torchfit.compat.judgements import describe_gpus
from torchfit.compat.matrix import CONSERVATIVE_GLIBC, Build
from torchfit.compat.project import ProjectReq
from torchfit.compat.provider import Context, ProjectCandidate, PythonChoice, find_python_choice
from torchfit.compat.request import Request
from torchfit.compat.rules import (
    RuleResult,
    driver_floor,
)


@dataclass(**FROZEN)
class Remedy:
    """A hint and the change it names, so the change can be applied and checked.

    `assume`: `--assume KEY=VALUE` items for every host; `drop`: request parts to
    remove ("torch" specifiers, "variant", "cuda", "python", "strict_driver",
    "companions"); `variant`: a `--variant` to ask for; `envs`: one environment per
    entry, each seeing only these GPU indices of the first host (CUDA_VISIBLE_DEVICES).
    A hint is offered only when every environment it describes resolves
    (`resolver.resolve` checks it by resolving again with the change applied).
    """

    text: str
    assume: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    variant: str | None = None
    envs: tuple[tuple[int, ...], ...] = ()
    fallback: bool = False  # offered only when no other hint opens a path (a CPU build on a GPU host)

    def join(self, other: Remedy, text: str) -> Remedy:
        return Remedy(text, self.assume + other.assume, self.drop + other.drop,
                      self.variant or other.variant, self.envs or other.envs)


def apply_remedy(remedy: Remedy, hosts: Sequence[HostFacts],
                 request: Request) -> list[tuple[list[HostFacts], Request]]:
    """The (hosts, request) of each environment the remedy describes, the change applied."""
    from torchfit.compat.gpunames import load_gpu_names

    names = load_gpu_names()
    changed = [apply_assumptions(h, remedy.assume, names) for h in hosts]
    family = request.requirements
    kw: dict[str, Any] = {}
    for part in remedy.drop:
        if part == "torch":
            family = tuple(r for r in family if r.name.lower() != "torch")
        elif part == "companions":
            family = tuple(r for r in family if r.name.lower() == "torch")
        elif part == "strict_driver":
            kw["strict_driver"] = False
        else:
            kw[part] = None
    if remedy.variant:
        kw["variant"] = remedy.variant
    req = replace(request, requirements=family, **kw)
    if not remedy.envs:
        return [(changed, req)]
    first = changed[0]
    return [([replace(first, gpus=tuple(g for g in first.gpus if g.index in env), topology={})], req)
            for env in remedy.envs]


def explain_conflict(ctx: Context) -> tuple[list[str], list[Remedy]]:
    """Why nothing fits, host facts first, and the changes that might open a path.

    Every build the matrix has is checked; the refusals are grouped by the fact
    that caused them, newest build first, among the builds for this host's kind of
    hardware (an AMD-only host hears nothing of NVIDIA drivers). A build refused by
    one category only gives a candidate remedy: the one change (driver, OS, Python,
    constraint) that would let it in. The resolver keeps those that work.
    """
    conflicts: list[str] = []
    binding = _binding_hosts(ctx)
    # a group that alone rules out every build leads (issue 33); groups that say the same are
    # one line naming them (issue 34, R6: 2,000 groups, a line per reason, not per group)
    conflicts += fold_host_lines(((ctx.hosts[k], line) for k, line in binding.items()),
                                 many={"this group alone": "each of these groups alone"})
    conflicts += fold_host_lines((host, f"{host.name}: {describe_host(host)}")
                                 for k, host in enumerate(ctx.hosts) if k not in binding)
    grouped = _grouped_gpu_refusals(ctx) if ctx.request.describe() else []
    conflicts += grouped
    by_category: dict[str, list[tuple[Build, RuleResult]]] = {}
    singles: dict[str, Build] = {}
    pairs: list[tuple[Build, list[str]]] = []
    kind = [b for b in ctx.ordered if _fits_kind(ctx, b)] or list(ctx.ordered)
    for b in kind:
        fails = ctx.refusals(b)
        for c in fails:
            by_category.setdefault(c.category, []).append((b, c))
    cpu_only: Build | None = None  # a build of another kind (CPU on a GPU host) refused for that alone
    for b in ctx.ordered:
        cats = sorted({c.category for c in ctx.refusals(b)})
        if cats == ["gpu"] and b not in kind:
            cpu_only = cpu_only or b
            continue
        if len(cats) == 1:
            singles.setdefault(cats[0], b)
        elif set(cats) <= {"driver", "glibc", "python", "user", "companion"}:
            pairs.append((b, cats))
    order = ["gpu", "driver", "glibc", "platform", "python", "companion", "user"]
    # A Jetson's own CUDA, ROCm under WSL: the platform is the reason, before any other.
    if any(h.jetson == "igpu" or (h.wsl and h.amd_gpus) for h in ctx.hosts):
        order = ["platform", *[c for c in order if c != "platform"]]
    # The builds the user's own constraints allow say why they fail first (a Python mismatch under
    # torch==2.13.0 is told of 2.13.0, not of 2.15.0); with such builds, "outside your constraints"
    # is not the cause and is left out (issue 35: only what bears on the answer).
    allowed = {b for b in ctx.ordered if all(c.ok for c in ctx.user_checks(b))}
    for cat in order:
        items = sorted(by_category.get(cat, []), key=lambda item: item[0] not in allowed)
        if not items or (cat == "gpu" and grouped) or (cat == "user" and allowed & set(kind)):
            continue
        first = items[0][1].text
        more = len({b for b, _ in items}) - 1
        conflicts.append(first + (f" (and {more} more builds for the same reason)" if more else ""))
    # A GPU host never gets a CPU build silently: say so, once, beside the GPU reasons.
    cpu = [c for b in ctx.ordered if b.kind == "cpu" and b not in kind for c in ctx.refusals(b)
           if c.category == "gpu"]
    if cpu:
        more = len({b for b in ctx.ordered if b.kind == "cpu" and b not in kind
                    and any(c.category == "gpu" for c in ctx.refusals(b))}) - 1  # builds, not builds x hosts
        conflicts.append(cpu[0].text + (f" (and {more} more builds for the same reason)" if more else ""))
    remedies: list[Remedy] = []
    for cat in order:
        single = singles.get(cat)
        if single is not None and cat != "gpu":
            remedies.append(_remedy(ctx, cat, single))
    for b, cats in pairs[:3] if not remedies else []:  # a change of two things only where no one change opens a path
        parts = [_remedy(ctx, c, b) for c in cats]
        joined = parts[0]
        for part in parts[1:]:
            joined = joined.join(part, "")
        remedies.append(replace(joined, text="no single change opens a path; together: "
                                + "; and ".join(p.text for p in parts)))
    split = _split_remedy(ctx)
    if split is not None:
        remedies.append(split)
    if "gpu" in singles or not remedies:
        remedies.append(_remedy(ctx, "gpu", singles.get("gpu") or ctx.ordered[0]))
    elif cpu_only is not None:  # a way out (a Jetson's), but no reason to doubt the GPUs beside a real one
        remedies.append(replace(_remedy(ctx, "gpu", cpu_only), fallback=True))
    return conflicts, remedies


def _binding_hosts(ctx: Context) -> dict[int, str]:
    """Of several hosts (a fleet's groups), those whose own facts rule out every build the
    request allows for their kind of GPU (T4s on driver 470 under torch>=2.8: every CUDA
    build of 2.8 on needs driver >= 525.60.13), each as one line: the group, its facts, and
    the fact that refuses the most of those builds, said for the oldest of them. The other groups could
    share a build; this one could not, whatever they were."""
    if len(ctx.hosts) < 2:
        return {}
    allowed = [b for b in ctx.ordered if all(c.ok for c in ctx.user_checks(b))]
    out: dict[int, str] = {}
    for k, host in enumerate(ctx.hosts):
        kinds = {"cuda" for _ in host.nvidia_gpus[:1]} | {"rocm" for _ in host.amd_gpus[:1]} or {"cpu"}
        mine = [b for b in allowed if b.kind in kinds]
        refused = {b: [c for _, c in ctx.host_checks(b, k) if not c.ok] for b in mine}
        if not mine or not all(refused.values()):
            continue
        by_fact: dict[str, list[tuple[Build, RuleResult]]] = {}
        for b in mine:
            for c in refused[b]:
                by_fact.setdefault(c.category, []).append((b, c))
        fact = max(by_fact, key=lambda cat: len({b for b, _ in by_fact[cat]}))
        items = by_fact[fact]
        more = len({b for b, _ in items}) - 1
        asked = [d for d in ctx.request.describe() if d.lower() not in ("torch", "torchvision", "torchaudio")]
        within = f" within {' '.join(asked)}" if asked else ""
        # the oldest build it refuses says the least it would take (torch 2.8.0 cu126: driver >= 525.60.13)
        out[k] = (f"{host.name}: {describe_host(host)}: this group alone rules out every build{within}: "
                  f"{_label_first(items[-1][1].text, items[-1][0])}"
                  + (f" (and {more} more builds for the same reason)" if more else ""))
    return out


def _split_remedy(ctx: Context) -> Remedy | None:
    """GPUs no one build covers together (a GTX 1080 Ti, sm_61, beside an RTX 5090,
    sm_120): one environment per compute capability, each seeing only its GPUs."""
    if len(ctx.hosts) != 1:
        return None
    host = ctx.hosts[0]
    groups: dict[str, list[Gpu]] = {}
    for g in host.gpus:
        key = g.arch.sm if g.vendor == "nvidia" and g.arch else (g.gfx or g.name)
        groups.setdefault(key, []).append(g)
    if len(groups) < 2:
        return None
    parts = []
    for n, (key, gpus) in enumerate(groups.items()):
        ids = ",".join(g.uuid or str(g.index) for g in gpus)
        # nvidia-smi numbers GPUs in PCI order, CUDA fastest first unless told otherwise.
        order = "" if all(g.uuid for g in gpus) else "CUDA_DEVICE_ORDER=PCI_BUS_ID "
        names = describe_gpus(tuple(gpus)).replace("{", "{{").replace("}", "}}")
        parts.append(f"{order}CUDA_VISIBLE_DEVICES={ids} for {names}: {{{n}}} (--assume gpu={key})")
    return Remedy(
        f"no build covers {' and '.join(groups)} together: make one env per GPU kind, each run seeing only "
        f"its GPUs: " + "; ".join(parts),
        envs=tuple(tuple(g.index for g in gpus) for gpus in groups.values()),
    )


_SINGULAR = {"have": "has", "run": "runs", "carry": "carries", "need": "needs"}


def _grouped_gpu_refusals(ctx: Context) -> list[str]:
    """The GPU reason per build the user asked for (a pinned torch, a forced --variant),
    grouped over releases: "cu126 builds of torch 2.6-2.14 have no sm_120 code: arch
    list 5.0-9.0, no PTX". Builds the user's own constraints exclude are left out."""
    groups: dict[tuple[int, str, str], list[Build]] = {}
    # A build for hardware the host has not (a CUDA build on a host without an NVIDIA GPU) says only
    # that, once per variant: noise beside the real reason (issue 35: 25 of 27 lines of a Python
    # mismatch), unless the user asked for that kind (--variant, --cuda) or the host's kind has none.
    forced = bool(ctx.request.variant or ctx.request.cuda)
    mine = forced or not any(_fits_kind(ctx, b) and all(c.ok for c in ctx.user_checks(b)) for b in ctx.ordered)
    for b in ctx.ordered:
        if not all(c.ok for c in ctx.user_checks(b)) or not (mine or _fits_kind(ctx, b)):
            continue
        for k in range(len(ctx.hosts)):
            for _, check in ctx.host_checks(b, k):
                if not check.ok and check.group:
                    groups.setdefault((k, b.variant, check.group), []).append(b)
    out = []
    for (k, variant, group), builds in groups.items():
        host = ctx.hosts[k]
        prefix = f"{host.name}: " if len(ctx.hosts) > 1 else ""
        releases = sorted({b.torch for b in builds})
        if len(releases) == 1:
            verb, _, rest = group.partition(" ")
            out.append((host, f"{prefix}the {variant} build of torch {releases[0]} {_SINGULAR.get(verb, verb)} {rest}"))
        else:
            out.append((host, f"{prefix}{variant} builds of torch {_release_ranges(releases)} {group}"))
    return fold_host_lines(out)  # the groups that say the same, once (issue 34, R6)


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


def _remedy(ctx: Context, cat: str, b: Build) -> Remedy:
    """The one change in `cat` that would admit build `b`, with the change itself."""
    if cat == "driver":
        floor, what = driver_floor(b, ctx.matrix, ctx.request.strict_driver)
        # of several hosts (a fleet's groups), the ones whose driver is below: the hint says where
        low = [h.name for k, h in enumerate(ctx.hosts)
               if any(not c.ok and c.category == "driver" for _, c in ctx.host_checks(b, k))]
        on = f" on {format_host_names(low)}" if len(ctx.hosts) > 1 and low else ""
        return Remedy(f"upgrade the NVIDIA driver{on} to >= {floor} ({what}) to get {b.label}",
                      assume=(f"driver={floor}",) if floor else ())
    if cat == "glibc":
        floor = b.glibc_for(ctx.primary_platform) or CONSERVATIVE_GLIBC
        return Remedy(
            f"{b.label} needs glibc >= {floor}: upgrade the OS "
            "(e.g. CentOS 7 -> Rocky/RHEL 8), or run torchfit in a newer container",
            assume=(f"glibc={floor}",),
        )
    if cat == "python":
        found = _python_for(ctx, b)
        if found is None:
            return Remedy(f"no Python both {b.label}'s wheels and your --python accept", drop=("python",))
        pick, choice = found
        if choice is not None and choice.source == "installed":  # present: name it, nothing to install
            at = f" (present at {choice.path})" if choice.path else " (present)"
            return Remedy(f"--python {choice.version}{at} to get {b.label}",
                          assume=(f"python={choice.version}",), drop=("python",))
        loosen = ctx.request.python is not None and not ctx.request.python.contains(pick, prereleases=True)
        how = (f"--python {pick}: uv installs a prebuilt Python {choice.version}" if choice is not None
               and choice.source == "uv" else f"install Python {pick} (`pyenv install {pick}`)")
        return Remedy(
            (f"loosen --python {ctx.request.python} and " if loosen and "--python" not in how else "")
            + f"{how} to get {b.label}",
            assume=(f"python={pick}",), drop=("python",) if loosen else (),
        )
    if cat == "user":
        drop = tuple(p for p, on in (("torch", bool(str(ctx.request.spec("torch")))),
                                     ("variant", bool(ctx.request.variant)), ("cuda", bool(ctx.request.cuda)),
                                     ("strict_driver", ctx.request.strict_driver)) if on)
        return Remedy(f"loosen your constraints ({' '.join(ctx.request.describe())}): {b.label} would fit",
                      drop=drop)
    if cat == "gpu":
        return Remedy(
            "no build covers these GPUs; check the GPU facts (--assume gpu=), or ask for a CPU build "
            "with --variant cpu",
            variant="cpu",
        )
    if cat == "companion":
        return Remedy(f"drop the torchvision/torchaudio requirement: {b.label} would fit", drop=("companions",))
    return Remedy(f"{b.label} fails only on {cat}")


def _python_for(ctx: Context, b: Build) -> tuple[str, PythonChoice | None] | None:
    """The CPython minor for `b`, and who provides it on the (first) host: a minor with wheels for
    `b` whose every package's Requires-Python admits it (its .0: an installer takes the newest patch,
    which the specifier may exclude); one present on the host first (issue 35: the hint said
    `pyenv install 3.11` beside a present 3.11.7), then the newest uv offers, then pyenv's, then
    the newest."""
    minors = [f"{a}.{m}" for a, m in sorted(b.pythons_for(ctx.primary_platform), reverse=True)]
    fit = [v for v in minors if all(b.python_spec(n).contains(v, prereleases=True) for n in ctx.python_packages())]
    if not fit:
        return None
    rank = {"installed": 0, "uv": 1, "pyenv": 2}
    choices = [(v, find_python_choice(ctx.hosts[0], v)) for v in fit]  # newest first; sorted() keeps that
    return sorted(choices, key=lambda vc: rank.get(vc[1].source, 3) if vc[1] is not None else 3)[0]


def describe_host(host: HostFacts) -> str:
    """One line of the facts that matter for resolution, unknowns with their reason."""
    gpus = describe_gpus(host.gpus) or "no GPU"
    # Numeric order (3.6 before 3.13), not text order; a version that is not numeric goes last.
    py = ", ".join(sorted({p.version for p in host.pythons}, key=_version_order)) or "no Python found"
    return (
        f"driver {host.driver_version or 'unknown'}, {gpus}, glibc {host.glibc or 'unknown'}, "
        f"{host.os or 'OS unknown'}, {host.arch or 'arch unknown'}, Python {py} ({_python_sources(host)})"
    )


def _python_sources(host: HostFacts) -> str:
    """Where more Pythons could come from: pyenv, and uv's managed Pythons (issue 35: the line
    said "(pyenv)" alone, though torchfit installs a missing Python from either)."""
    pyenv = "pyenv" if host.pyenv else "no pyenv"
    minors = sorted({".".join(v.rstrip("t").split(".")[:2]) for v in (host.uv_pythons.installable
                                                                     if host.uv_pythons else ())},
                    key=_version_order)
    uv = f"uv offers {minors[0]} to {minors[-1]}" if len(minors) > 1 else \
        f"uv offers {minors[0]}" if minors else "no uv Pythons"
    return f"{pyenv}; {uv}"


def _version_order(text: str) -> tuple[int, tuple[int, ...], str]:
    parts = text.split(".")
    if all(p.isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), text)


# --- the project's pins ---------------------------------------------------------------------

# Releases read to find a working one for a hint (each is one metadata read).
HINT_RELEASES = 15


def explain_project_conflict(ctx: Context) -> tuple[list[str], list[str]]:
    """Why the project's packages leave no build, naming each package and its torch pin.

    ([], []) when the host (or the user's own constraints) alone leaves no build: the
    classic explanation says that better. Otherwise: each package none of whose
    releases pins a torch this host runs ("vllm 0.6.3 requires torch==2.4.0; every
    such build is ruled out: 2.4.0 cu124: ... sm_120"), else the packages whose pins
    exclude each other, named together. A hint names a release of the package whose
    pin a host build meets, found by reading a few more releases' metadata.
    """
    feasible = [b for b in ctx.ordered if not ctx.refusals(b)]
    if not feasible:
        return [], []
    conflicts = [f"{host.name}: {describe_host(host)}" for host in ctx.hosts]
    hints: list[str] = []
    fits: dict[str, tuple[list[ProjectCandidate], set[Build]]] = {}
    # Once per package, not per line (issue 25: a 3,000-line file named each package once per
    # line, each time scanning every release read): its first line speaks for it.
    first: dict[str, ProjectReq] = {}
    for r in ctx.project:
        first.setdefault(r.name, r)
    read: dict[str, list[ProjectCandidate]] = {}
    for n, v in ctx.seen:
        read.setdefault(n, []).append(ProjectCandidate(f"pkg:{n}", n, v))
    for r in first.values():
        tried = sorted(read.get(r.name, ()), key=lambda c: c.version, reverse=True)
        if not tried:
            spec = ctx.project_spec(r.name)
            if not ctx.project_pool(f"pkg:{r.name}"):
                conflicts.append(f"{r.text} ({r.origin}): the sources offer no release of {r.name}"
                                 + (f" within {spec}" if str(spec) else ""))
            continue
        good = [c for c in tried if _runs(ctx, c, feasible)]
        fits[r.name] = (tried, {b for c in good for b in feasible if ctx.admits(c, b)})
        if good:
            continue
        newest = tried[0]
        conflicts.append(f"{_pins(ctx, newest)}; {_why_not(ctx, newest)}"
                         + (f" ({len(tried) - 1} more {r.name} releases read: none fits either)" if len(tried) > 1 else "")
                         + (f" [{r.origin}]" if r.origin != "command line" else ""))
        hint = _working_release(ctx, r.name, {c.version for c in tried}, feasible)
        if hint:
            hints.append(hint)
    if len(conflicts) == len(ctx.hosts):
        names = list(fits)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if fits[a][1] and fits[b][1] and not fits[a][1] & fits[b][1]:
                    ca = next(c for c in fits[a][0] if _runs(ctx, c, feasible))
                    cb = next(c for c in fits[b][0] if _runs(ctx, c, feasible))
                    conflicts.append(f"{_pins(ctx, ca)} and {_pins(ctx, cb)}: no torch build meets both")
    if len(conflicts) == len(ctx.hosts):
        return [], []
    return conflicts, hints


def _runs(ctx: Context, cand: ProjectCandidate, feasible: list[Build]) -> bool:
    """Does some build this host runs meet the release's pins, with a Python both accept?"""
    meta = ctx.project_meta(cand)
    rp = meta.requires_python if meta else None
    for b in feasible:
        if not ctx.admits(cand, b):
            continue
        py = ctx.python_req(b)
        if any(py.check(p).ok and ctx._python_ok(p) and _python_meets(rp, p.version) for p in ctx.pythons):
            return True
    return False


def _python_meets(requires_python: str | None, version: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(version, prereleases=True)
    except InvalidSpecifier:
        return True


def _pins(ctx: Context, cand: ProjectCandidate) -> str:
    pins = ctx.family_pins(cand)
    meta = ctx.project_meta(cand)
    what = ", ".join(str(p) for p in pins) or "no torch"
    if meta and meta.requires_python and not pins:
        what = f"Python{meta.requires_python}"
    return f"{cand.label} requires {what}"


def _why_not(ctx: Context, cand: ProjectCandidate) -> str:
    """Why no build this host runs meets a release's pins: the host fact per build."""
    allowed = [b for b in ctx.ordered if ctx.admits(cand, b)]
    if not allowed:
        return "no build in the matrix meets it"
    texts: list[str] = []
    # Builds for this host's kind of hardware first (CUDA on NVIDIA...): their refusals say why.
    for b in sorted(allowed, key=lambda b: not _fits_kind(ctx, b)):
        fails = ctx.refusals(b)
        if not fails:
            texts = []
            break
        texts.append(_label_first(fails[0].text, b))
        if len(texts) == 3:
            break
    if not texts:  # a build runs here: the release's Requires-Python is what fails
        meta = ctx.project_meta(cand)
        have = ", ".join(p.version for p in ctx.pythons) or "none"
        return f"its Requires-Python {meta.requires_python if meta else '?'} admits none of the Pythons here ({have})"
    more = len(allowed) - len(texts)
    return "every such build is ruled out: " + "; ".join(texts) + (f" (and {more} more builds)" if more > 0 else "")


def _fits_kind(ctx: Context, b: Build) -> bool:
    kinds = {"cuda" for h in ctx.hosts if h.nvidia_gpus} | {"rocm" for h in ctx.hosts if h.amd_gpus}
    return b.kind in (kinds or {"cpu"})


def _label_first(text: str, b: Build) -> str:
    """The refusal led by the build's full label ("torch 2.5.1 cu124: ..."), once."""
    if text.startswith(b.label):
        return text
    if text.startswith(f"{b.variant}: "):
        text = text[len(b.variant) + 2:]
    return f"{b.label}: {text}"


def _working_release(ctx: Context, name: str, tried: set[Version], feasible: list[Build]) -> str | None:
    """`name==V`, the newest release outside those tried whose pins a build here meets."""
    if ctx.packages is None:
        return None
    for version in list(ctx.packages.versions(name))[:HINT_RELEASES]:
        if version in tried or version.is_prerelease:
            continue
        cand = ProjectCandidate(f"pkg:{name}", name, version)
        if _runs(ctx, cand, feasible):
            build = next(b for b in feasible if ctx.admits(cand, b))
            pins = ", ".join(str(p) for p in ctx.family_pins(cand)) or "no torch pin"
            return f"{name}=={version} ({pins}) fits: {build.label} runs here"
    return None
