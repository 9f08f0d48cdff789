"""What a torch source really serves, as values, and the matrix cut down to it.

The matrix says which builds *fit* a host; the source (the torch index, a mirror, a
`file://` tree, a flat directory of wheels) says which builds *exist*. A plan is chosen
among builds that do both (issue 24): a mirror holding only torch 2.13.0 gives 2.13.0,
not a 2.15.0 the install then cannot find. Measured from the artifacts' file names
(PEP 427: `torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl`), so this is
`measured` evidence: it beats the matrix's `python` lists, which come from the public
index on the day the row was written.

`Served` is filled by `index.torchsource` (the I/O); `restrict_matrix` and
`torch_constraint` are pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import Build, Matrix

Minor = tuple[int, int]


@dataclass(**FROZEN)
class ServedFile:
    """One torch wheel a source lists, reduced to what decides a plan."""

    version: Version  # with its local label: 2.13.0+cpu
    pythons: frozenset[Minor]  # GIL CPython minors (cp311)
    freethreaded: frozenset[Minor]  # cp313t
    platform: str  # "x86_64" | "aarch64"
    any_python: bool = False  # a py3-none-any file: every CPython the matrix lists
    # A file without a local label: the variant its METADATA says (`variant_from_metadata`);
    # None where it was not read (a remote source) or says nothing sure: then any variant.
    said: str | None = None

    @property
    def label(self) -> str | None:
        """The variant this file is: its local label (`+cu126`), else what its METADATA says."""
        return self.version.local or self.said


@dataclass(**FROZEN)
class Served:
    """The torch builds one source serves for one variant: `where` (redacted) and its files."""

    where: str
    variant: str
    files: tuple[ServedFile, ...] = ()
    kind: str = "index"  # "index" (PEP 503/691) | "flat" (a directory or page of wheels)
    notes: tuple[str, ...] = ()
    off_site: tuple[str, ...] = ()  # hosts other than the source's own its torch files are on

    def for_build(self, torch: Version, platform: str) -> list[ServedFile]:
        """The files of release `torch` (public version) for this variant on `platform`.

        A file's local label must be the variant's (`+cu128` on the cu128 index); a file
        without one counts as the variant its METADATA says (`said`: PyPI's torch 2.8.0
        pins the CUDA 12.8 runtime, so it is cu128), or as any variant where that is
        unknown (a remote mirror that strips labels): a flat directory that mixes
        variants gives each variant only its own files.
        """
        return [f for f in self.files if f.platform == platform and Version(f.version.public) == torch
                and f.label in (None, self.variant)]

    def for_any(self, platform: str) -> bool:
        """Does the source hold any build of this variant for `platform`?"""
        return any(f.platform == platform and f.label in (None, self.variant) for f in self.files)

    def versions(self, platform: str) -> list[Version]:
        """Every version (local label kept) this source lists for `platform`, newest first."""
        return sorted({f.version for f in self.files if f.platform == platform}, reverse=True)


def parse_wheel_tags(tags: Iterable[tuple[str, str, str]]) -> tuple[frozenset[Minor], frozenset[Minor], set[str], bool]:
    """(GIL minors, free-threaded minors, Linux platforms, pure) of a wheel's (interpreter,
    abi, platform) tags; CPython on Linux counts (`manylinux*`, `linux_*`), and a pure
    `py3-none-any` file counts for every Python and platform."""
    gil: set[Minor] = set()
    ft: set[Minor] = set()
    platforms: set[str] = set()
    pure = False
    for interp, abi, plat in tags:
        if plat == "any" and abi == "none" and interp.startswith("py3"):
            pure = True
            platforms |= {"x86_64", "aarch64"}
            continue
        if "linux" not in plat:
            continue
        for arch in ("x86_64", "aarch64"):
            if plat.endswith(arch):
                platforms.add(arch)
        if not interp.startswith("cp") or not interp[2:].isdigit() or len(interp) < 4:
            continue
        minor = (int(interp[2]), int(interp[3:]))
        (ft if abi.endswith("t") else gil).add(minor)
    return frozenset(gil), frozenset(ft), platforms, pure


def restrict_matrix(matrix: Matrix, served: Mapping[str, Served], platform: str) -> Matrix:
    """The matrix with every measured variant cut down to the builds its source serves.

    A variant missing from `served` keeps its rows (not measured: the matrix is the
    evidence). A served build keeps the Python minors the source has wheels for on
    `platform` (measured beats the matrix's list); a build the source lacks, or serves
    with no wheel for `platform`, is gone.
    """
    if not served:
        return matrix
    builds: list[Build] = []
    for b in matrix.builds:
        source = served.get(b.variant)
        if source is None:
            builds.append(b)
            continue
        files = source.for_build(b.torch, platform)
        gil: frozenset[Minor] = frozenset().union(*(f.pythons for f in files))
        ft: frozenset[Minor] = frozenset().union(*(f.freethreaded for f in files))
        if any(f.any_python for f in files):
            builds.append(b)  # a pure file: the matrix's Pythons stand
            continue
        if not gil and not ft:
            continue
        pythons = tuple(sorted(gil | ft))
        threaded = {**b.pythons_freethreaded, "torch": tuple(sorted(ft))}
        if platform == "aarch64":
            builds.append(replace(b, pythons_aarch64=pythons, pythons_freethreaded=threaded))
        else:
            builds.append(replace(b, pythons=pythons, pythons_freethreaded=threaded))
    return replace(matrix, builds=tuple(builds))


def describe_served(served: Served, platform: str, limit: int = 6) -> str:
    """"torch 2.13.0+cpu (cp311), ..." for a message: the builds of `served.variant` a source
    has, newest first; a source whose wheels are all another variant's says so."""
    mine = sorted({f.version for f in served.files if f.platform == platform
                   and f.label in (None, served.variant)}, reverse=True)
    if not mine:
        others = served.versions(platform)
        if not others:
            return "no torch wheel for " + platform
        return (f"no {served.variant} build (its torch wheels are another variant's: "
                + ", ".join(str(v) for v in others[:3]) + (" ..." if len(others) > 3 else "") + ")")
    out = []
    for v in mine[:limit]:
        minors = sorted(frozenset().union(*(f.pythons | f.freethreaded for f in served.files
                                            if f.version == v and f.platform == platform)))
        out.append(f"{v} ({', '.join(f'cp{a}{b}' for a, b in minors) or 'any Python'})")
    more = len(mine) - limit
    return ", ".join(out) + (f" and {more} more" if more > 0 else "")


def torch_constraint(allowed: Sequence[Version], present: Sequence[Version]) -> str:
    """A PEP 440 specifier admitting exactly the `allowed` torch versions among `present`.

    uv takes a specifier per constraint line, and a specifier has no "or": so the range
    from the oldest to the newest allowed release, minus every other version `present`
    holds inside it. Local labels count: `!=2.13.0+cu128` in a flat directory that mixes
    variants; a public `!=2.14.0` excludes every build of 2.14.0 (PEP 440 ignores the
    candidate's label). `present`: what the source lists, or (the source unread) the
    matrix's releases. `allowed` must not be empty.
    """
    if not allowed:
        raise ValueError("no allowed torch version")
    publics = sorted({Version(v.public) for v in allowed})
    lo, hi = publics[0], publics[-1]
    parts = [f"=={lo}"] if lo == hi else [f">={lo}", f"<={hi}"]
    span = SpecifierSet(",".join(parts))
    keep = set(allowed)
    for v in sorted(set(present)):
        if v in keep or not span.contains(v, prereleases=True):
            continue
        if v.local is None and any(Version(a.public) == v for a in keep):
            continue  # a public version whose labelled build is allowed: `!=` would drop that too
        parts.append(f"!={v}")
    return ",".join(parts)


def allowed_versions(builds: Sequence[Build], served: Served | None, platform: str) -> list[Version]:
    """The exact torch versions (local labels as the source names them) of `builds` that
    the source lists; without a measured source, the builds' public versions."""
    if served is None:
        return sorted({b.torch for b in builds}, reverse=True)
    out: set[Version] = set()
    for b in builds:
        out |= {f.version for f in served.for_build(b.torch, platform)}
    return sorted(out, reverse=True)


def restrict_for_all(matrix: Matrix, served: Mapping[str, Served], platforms: Sequence[str]) -> Matrix:
    """`restrict_matrix` for every platform of a fleet (x86_64 and aarch64 groups): a build
    stays only where its source serves it for each (issue 33: one plan, every group installs it)."""
    for platform in dict.fromkeys(platforms):
        matrix = restrict_matrix(matrix, served, platform)
    return matrix


def allowed_for_all(builds: Sequence[Build], served: Served | None, platforms: Sequence[str]) -> list[Version]:
    """`allowed_versions` that the source serves for every one of `platforms`."""
    found = [set(allowed_versions(builds, served, p)) for p in dict.fromkeys(platforms)]
    common = set.intersection(*found) if found else set()
    return sorted(common, reverse=True)


# The CUDA runtime a torch wheel pins: `nvidia-cuda-runtime-cu12==12.8.90` (PyPI's torch 2.8.0,
# tests/data/projects/pypi/torch); CUDA 13's packages drop the suffix (`nvidia-cuda-runtime`, 13.x).
_RUNTIME = re.compile(r"^nvidia-cuda-runtime(?:-cu(\d+))?$")
# Any CUDA package: a wheel naming one but no runtime pin read above is not called CPU.
_CUDA_PACKAGE = re.compile(r"^(?:nvidia-|cuda-)")


def variant_from_metadata(text: str, platform: str) -> str | None:
    """The variant an unlabelled torch wheel is, from its METADATA, on Linux `platform`.

    Its `Requires-Dist` lines whose markers hold on Linux `platform` (an extra's never):
    a pinned CUDA runtime names the CUDA build (`nvidia-cuda-runtime-cu12==12.8.90` ->
    "cu128"); no CUDA package at all is a CPU build (PyPI's torch 2.8.0 aarch64 wheel: the
    same METADATA, its CUDA pins all under `platform_machine == "x86_64"`); anything else
    (a CUDA package without a readable runtime pin, ROCm's triton) is None: not known.
    """
    env = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": platform, "extra": ""}
    cuda = False
    for line in re.findall(r"^Requires-Dist:[ \t]*(.+?)[ \t]*$", text, re.M):
        try:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidRequirement, UndefinedEnvironmentName):
            continue  # a marker on the Python version alone is not about CUDA: skip, as unreadable
        if "rocm" in req.name:
            return None
        if not _CUDA_PACKAGE.match(req.name):
            continue
        cuda = True
        m = _RUNTIME.match(req.name)
        pins = [x.version for x in req.specifier if x.operator in ("==", "===")]
        if m and pins:
            try:
                v = Version(pins[0].rstrip(".*"))
            except InvalidVersion:
                return None
            if m.group(1) and m.group(1) != str(v.major):
                return None
            return f"cu{v.major}{v.minor}"
    return None if cuda else "cpu"


def variant_of_resolved(resolved: Mapping[str, str]) -> str | None:
    """The variant a resolved set's torch really is, where its version carries no label:
    the CUDA runtime the set holds (`nvidia-cuda-runtime-cu12 12.4.127` beside PyPI's torch
    2.6.0: a cu124 build, whatever slot the plan had for it). None: a label, or no runtime."""
    torch = resolved.get("torch")
    if torch is None or "+" in torch:
        return None
    for name, version in resolved.items():
        m = _RUNTIME.match(name)
        if m:
            try:
                v = Version(version)
            except InvalidVersion:
                return None
            return f"cu{v.major}{v.minor}" if not m.group(1) or m.group(1) == str(v.major) else None
    return None
