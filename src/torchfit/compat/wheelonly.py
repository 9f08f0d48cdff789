"""Releases a wheels-only answer passed over (issue 33): builds are a choice the user sees.

Planning asks uv for wheels only first (`--no-build`): no package's code runs to plan.
But uv then answers with whatever has a wheel, silently: an unpinned `deepspeed`, whose
releases since 0.3.1 are source distributions only (tests/data/projects/pypi/deepspeed,
PyPI's file list), came back as 0.3.1.dev3, a development release of 2020, where plain
uv takes the newest release. So after a wheels-only answer, each package's file list is
read (the sources uv read, `index.project.SourcePackages`) and `passed_over` names the
packages that have a newer release the user's specifiers and uv's pre-release rule allow
but that has no wheel for the target, only its source distribution. Planning then:

- for a package that does not touch the torch ABI, solves again with that package alone
  from its source (uv's `--only-binary :all: --no-binary NAME`), so the plan has the
  release plain uv would choose, and says that it builds from source;
- for an ABI-bound one (companions.toml, or a METADATA that pins torch exactly: a binary
  built against one torch), keeps the prebuilt wheel and says which, and what it passed over;
- under `--no-build` (wheels only, the user's word), keeps the wheel and says what it traded.

A pre-release is allowed the way uv's default (`if-necessary-or-explicit`, uv's docs on
pre-releases) allows it: the user's specifier names one, or every release is one.

Pure: the file lists and METADATA come from `index.newer`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

# A file of a release: its name and its Requires-Python (PEP 503 data-requires-python, PEP 691).
ReleaseFile = tuple[Version, str, str | None]


@dataclass(frozen=True)
class Passed:
    """`name` answered at `chosen` (a wheel) though `newer`, allowed, exists as a source distribution only."""

    name: str
    chosen: Version
    newer: Version
    # chosen is a pre-release uv would not take where builds are allowed (no specifier asks for one)
    unasked_pre: bool
    # why its binary is bound to one torch (companions.toml, an exact torch pin), else None
    abi: str | None = None


def explicit_pre(spec: SpecifierSet) -> bool:
    """uv's "explicit": the user's specifier names a pre-release (`>=1.0b1`)."""
    for s in spec:
        try:
            if Version(s.version.rstrip(".*")).is_prerelease:
                return True
        except InvalidVersion:
            continue
    return False


def pre_allowed(versions: Iterable[Version], spec: SpecifierSet | None, allow_pre: bool) -> bool:
    """uv's `if-necessary-or-explicit`: pre-releases where asked (`--pre`, a specifier naming
    one) or where every release is one."""
    return allow_pre or (spec is not None and explicit_pre(spec)) or all(v.is_prerelease for v in versions)


def allowed_newer(versions: Iterable[Version], chosen: Version, spec: SpecifierSet | None = None, *,
                  allow_pre: bool = False) -> list[Version]:
    """The releases among `versions` that `passed_over` would weigh against `chosen`, newest first:
    newer ones (any final one where `chosen` is a pre-release nobody asked for) that `spec` and
    uv's pre-release rule allow."""
    versions = set(versions)
    pre_ok = pre_allowed(versions, spec, allow_pre)
    unasked = chosen.is_prerelease and not pre_ok
    # newer releases; and for a pre-release nobody asked for, any final release (uv under
    # --no-build takes `2.0b1` (a wheel) over `1.0` (an sdist); plain uv takes 1.0)
    return sorted((v for v in versions if (v > chosen or (unasked and not v.is_prerelease))
                   and (pre_ok or not v.is_prerelease) and (spec is None or spec.contains(v, prereleases=True))),
                  reverse=True)


def passed_over(name: str, chosen: Version, files: Sequence[ReleaseFile], tags: Iterable[Tag], python: str,
                spec: SpecifierSet | None = None, *, allow_pre: bool = False) -> Passed | None:
    """The newest release of `name` newer than `chosen` (any final release, where `chosen` is a
    pre-release nobody asked for) that `spec` and uv's pre-release rule allow and that has a
    source distribution but no wheel for `tags` (each file's Requires-Python held against
    `python`); None when there is none, or when such a release has a wheel (the graph holds it)."""
    supported = set(tags)
    versions = {v for v, _, _ in files}
    unasked = chosen.is_prerelease and not pre_allowed(versions, spec, allow_pre)
    py = Version(python)

    def fits_python(rp: str | None) -> bool:
        try:
            return rp is None or SpecifierSet(rp).contains(py, prereleases=True)
        except InvalidSpecifier:
            return True

    for v in allowed_newer(versions, chosen, spec, allow_pre=allow_pre):
        mine = [(f, rp) for w, f, rp in files if w == v and fits_python(rp)]
        if any(_wheel_fits(f, supported) for f, _ in mine):
            return None  # a newer wheel uv did not take: the graph holds it back, not the wheels
        if any(not f.endswith(".whl") for f, _ in mine):
            return Passed(name, chosen, v, unasked)
    return None


def _wheel_fits(filename: str, supported: set[Tag]) -> bool:
    if not filename.endswith(".whl"):
        return False
    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return False
    return not supported.isdisjoint(tags)


def exact_torch_pin(requires: Sequence[str]) -> str | None:
    """`torch==2.12.0` when a METADATA's Requires-Dist pins torch exactly (a binary built
    against that torch: torchvision up to 0.29, vllm, xformers' wheels), else None."""
    for text in requires:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() == "torch" and any(s.operator in ("==", "===") and "*" not in s.version
                                               for s in req.specifier):
            return f"torch{req.specifier}"
    return None


def kind(v: Version) -> str:
    """" (a development release)" / " (a pre-release)" / ""."""
    if v.is_devrelease:
        return " (a development release)"
    return " (a pre-release)" if v.is_prerelease else ""


def no_build_line(p: Passed) -> str:
    """`--no-build` kept the wheel: the trade said."""
    return (f"{p.name} {p.chosen}{kind(p.chosen)} taken because --no-build: the newest release, {p.newer}, has no "
            f"wheel for this host, only a source distribution; drop --no-build to build it, or pin "
            f"{p.name}=={p.chosen} to keep this one")


def abi_line(p: Passed) -> str:
    """An ABI-bound package keeps its prebuilt wheel: which, and what it passed over."""
    return (f"{p.name} {p.chosen}{kind(p.chosen)}: its prebuilt wheel, kept ({p.abi}: a binary built for one torch); "
            f"the newer {p.name} {p.newer} has only a source distribution: pin {p.name}=={p.newer} to build it")


def kept_line(p: Passed, why: str) -> str:
    """The build of the newer release failed or did not solve: the wheel kept, and why."""
    return (f"{p.name} {p.chosen}{kind(p.chosen)} taken for its wheel: the newest release, {p.newer}, has no wheel "
            f"for this host and uv could not use its source distribution ({why})")


def built_note(p: Passed, version: str) -> str:
    """Appended to the build-from-source warning of `p` (the plan builds `version`)."""
    return (f"; the newest release with a wheel here is {p.chosen}{kind(p.chosen)}: `--no-build` takes it"
            if version != str(p.chosen) else "")
