"""Why no wheel of a release fits the host: the host fact, named, before uv's sentence.

uv's refusal for a release without a usable wheel names no host fact: "xformers==0.0.32.post2
has no wheels with a matching platform tag (e.g., `manylinux_2_17_x86_64`)" (uv 0.13.10, measured). The
host fact behind it is one of:

- the host's glibc is below every wheel's manylinux floor (PEP 600: `manylinux_2_28` needs
  glibc >= 2.28; the legacy names' floors are compat.tags.LEGACY_MANYLINUX);
- the Python the plan targets has no wheel (cp39..cp312 only, a 3.13 host; an abi3 wheel
  does not serve a free-threaded Python: PEP 703, packaging.tags.cpython_tags);
- the wheels are for another machine (aarch64 only, an x86_64 host) or another OS.

`judge_wheels` reads the release's wheel filenames (packaging parses them) against the
tags the target accepts (packaging.tags.cpython_tags / compatible_tags over the host's
manylinux platforms, what uv's `--python-platform x86_64-manylinux_2_X` accepts) and says
the first of those facts that rules every wheel out, as one line. `no_wheel_releases` and
`wanted_by` read uv's text for the releases it names and who asked for them. Pure: the file
lists come from the caller (planning reads them from the user's sources).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from torchfit.compat.facts import HostFacts
from torchfit.compat.tags import LEGACY_MANYLINUX, parse_linux_tag
from torchfit.errors import NoCompatibleSet, TorchfitError

# uv's glibc when the host's is unknown (compat.tags.uv_platform): the judgement uses the same.
UNKNOWN_GLIBC = (2, 28)


@dataclass(frozen=True)
class WheelTarget:
    """What uv was asked to install for: CPython `python` (free-threaded or not) on Linux `arch`
    with `glibc` (None: unknown, taken as UNKNOWN_GLIBC like uv_platform)."""

    python: tuple[int, int]
    arch: str
    glibc: tuple[int, int] | None = None
    free_threaded: bool = False
    # every Python the host has (the plan's among them): "its only Python" or "the Python tried"
    pythons: tuple[tuple[int, int], ...] = ()

    @property
    def abi(self) -> str:
        return f"cp{self.python[0]}{self.python[1]}{'t' * self.free_threaded}"

    @property
    def python_text(self) -> str:
        ft = ", free-threaded" if self.free_threaded else ""
        mine = f"{self.python[0]}.{self.python[1]} ({self.abi}{ft})"
        others = sorted({p for p in self.pythons if p != self.python})
        if not others:
            return f"this host's only Python is {mine}"
        return f"the Python tried is {mine} (this host also has {', '.join(f'{a}.{b}' for a, b in others)})"

    def platforms(self) -> list[str]:
        """The Linux platform tags this host accepts, newest first: manylinux_2_X down to 2_0
        for its glibc (PEP 600), the legacy aliases its glibc meets, and linux_ARCH."""
        major, minor = self.glibc or UNKNOWN_GLIBC
        out = [f"manylinux_{major}_{m}_{self.arch}" for m in range(minor, -1, -1)]
        out += [f"{alias}_{self.arch}" for alias, floor in LEGACY_MANYLINUX.items() if (major, minor) >= floor]
        return [*out, f"linux_{self.arch}"]

    def tags(self, platforms: Sequence[str]) -> set[Tag]:
        version = self.python
        return {*cpython_tags(version, [self.abi], platforms),
                *compatible_tags(version, f"cp{version[0]}{version[1]}", platforms)}


@dataclass(frozen=True)
class Misfit:
    """One release no wheel of which fits: the line (the host fact first) and what would help."""

    line: str
    hint: str


def judge_wheels(name: str, version: str, filenames: Iterable[str], target: WheelTarget,
                 wanted: str = "") -> Misfit | None:
    """The host fact that rules out every wheel of `name` `version` among `filenames`; None
    when one fits (or there is no wheel at all: an sdist-only release is another refusal).

    `wanted`: who asked for it ("your requirement xformers==0.0.32.post2"), said in the line.
    """
    wheels: list[tuple[str, frozenset[Tag]]] = []
    for filename in filenames:
        try:
            _, _, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            continue
        wheels.append((filename, tags))
    if not wheels:
        return None
    if any(tags & target.tags(target.platforms()) for _, tags in wheels):
        return None
    head = f"{name} {version}" + (f" ({wanted})" if wanted else "")
    fact, hint = _fact(name, version, wheels, target)
    return Misfit(f"{head}: {fact}", hint)


def _fact(name: str, version: str, wheels: list[tuple[str, frozenset[Tag]]],
          target: WheelTarget) -> tuple[str, str]:
    arch = target.arch
    pin = f"a release of {name} with a wheel for this host (pin it), or a source that has one (--find-links)"
    linux = [(f, t) for f, t in wheels if any(_linux_or_any(tag.platform) for tag in t)]
    musl = sorted({tag.platform for _, t in wheels for tag in t if tag.platform.startswith("musllinux_")})
    if not linux and musl:  # PEP 656: musl libc, which a glibc host does not have
        return f"its Linux wheels are only for musl libc ({', '.join(musl)}); this host's Linux uses glibc", pin
    if not linux:
        platforms = sorted({tag.platform for _, t in wheels for tag in t})
        return f"its wheels are only for {', '.join(platforms)}; this host is Linux {arch}", pin
    here = [(f, t) for f, t in linux if any(_platform_arch(tag.platform) in (arch, None) for tag in t)]
    if not here:
        archs = sorted({a for _, t in linux for tag in t if (a := _platform_arch(tag.platform))})
        return f"its Linux wheels are only for {', '.join(archs)}; this host is {arch}", pin
    # The Python: the (interpreter, abi) pairs the target accepts, on any platform.
    pairs = {(tag.interpreter, tag.abi) for tag in target.tags(["any"])}
    fits_python = [(f, t) for f, t in here if any((tag.interpreter, tag.abi) in pairs for tag in t)]
    if not fits_python:
        labels = sorted({_abi_label(tag) for _, t in here for tag in t}, key=_abi_order)
        return (f"its {arch} wheels are only for {', '.join(labels)}; "
                f"{target.python_text}",
                f"a Python that {name} {version} has wheels for ({', '.join(labels)}), or a release of {name} "
                f"with a {target.abi} wheel (pin it)")
    floors = [min((g for tag in t if (g := _glibc_floor(tag.platform)) is not None), default=None)
              for _, t in fits_python]
    known = [f for f in floors if f is not None]
    have = target.glibc or UNKNOWN_GLIBC
    if known and min(known) > have:
        need = min(known)
        tag_text = next(tag.platform for _, t in fits_python for tag in t if _glibc_floor(tag.platform) == need)
        host = f"{have[0]}.{have[1]}" if target.glibc else f"an unknown glibc (taken as {have[0]}.{have[1]})"
        return (f"its wheels need glibc >= {need[0]}.{need[1]} ({tag_text}); this host has "
                f"{'glibc ' if target.glibc else ''}{host}",
                f"a host (or container image) with glibc >= {need[0]}.{need[1]}, or {pin}")
    return (f"none of its wheels ({', '.join(f for f, _ in wheels[:3])}) is for CPython "
            f"{target.python[0]}.{target.python[1]} ({target.abi}) on manylinux {have[0]}.{have[1]} {arch}", pin)


def _linux_or_any(platform: str) -> bool:
    return platform == "any" or parse_linux_tag(platform) is not None


def _platform_arch(platform: str) -> str | None:
    """The machine of a Linux platform tag; None for `any`."""
    parsed = parse_linux_tag(platform)
    return parsed.arch if parsed is not None else None


def _glibc_floor(platform: str) -> tuple[int, int] | None:
    parsed = parse_linux_tag(platform)
    return parsed.glibc.major_minor() if parsed is not None and parsed.glibc is not None else None


def _abi_label(tag: Tag) -> str:
    """cp310-cp310 -> "cp310"; cp39-abi3 -> "cp39-abi3"; py3-none -> "py3"."""
    return tag.interpreter if tag.abi in (tag.interpreter, "none") else f"{tag.interpreter}-{tag.abi}"


def _abi_order(label: str) -> tuple[int, str]:
    m = re.match(r"[a-z]+(\d)(\d*)", label)
    return (int(m.group(1)) * 100 + int(m.group(2) or 0), label) if m else (0, label)


# uv 0.13.10 (measured, tests/test_planning.py): "xformers==0.0.32.post2 has no wheels with a matching platform tag (e.g., ...)",
# "... matching Python ABI tag", "... matching Python implementation tag"; with a range or
# every release: "all versions of xformers have no wheels with a matching ..."; with an sdist
# beside the wheels: "xformers==0.0.32.post2 has no usable wheels" (no wheel at all: judged None).
_NO_WHEELS = re.compile(r"(?:all versions of )?(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)"
                        r"(?P<spec>(?:[=<>!~]=?[A-Za-z0-9.+!*]+,?)*) (?:has|have) no (?:wheels with a matching|usable "
                        r"wheels)")


def no_wheel_releases(text: str) -> list[tuple[str, str]]:
    """The (name, specifier) uv says have no wheel with a matching tag: ("xformers", "==0.0.32.post2")."""
    return list(dict.fromkeys((m.group("name"), m.group("spec").rstrip(",")) for m in _NO_WHEELS.finditer(text)))


def wanted_by(text: str, name: str) -> list[str]:
    """Who uv says depends on `name`: "torchfit-env" (the project itself), "vllmx==1.0", ..."""
    pattern = re.compile(r"(?:all versions of )?(?P<who>[A-Za-z0-9][A-Za-z0-9._-]*(?:==[A-Za-z0-9.+!]+)?) "
                         rf"depends? on {re.escape(name)}(?![A-Za-z0-9_-])", re.IGNORECASE)
    return list(dict.fromkeys(m.group("who") for m in pattern.finditer(text)))


def misfits(text: str, files: Callable[[str], Sequence[tuple[Version, str]]], target: WheelTarget,
            wanted: Callable[[str, str], str]) -> list[Misfit]:
    """For each release uv's `text` says has no matching wheel: the host fact, from its file list
    (`files(name)`: (version, filename) pairs the sources offer; one whose read fails is skipped). `wanted(name, who)` says a
    requester of uv's text in the user's terms. A range names its newest release."""
    out = []
    for name, spec in no_wheel_releases(text):
        try:
            specifier = SpecifierSet(spec)
        except InvalidSpecifier:
            continue
        try:
            offered = files(name)
        except TorchfitError:  # a source that cannot be read now (IndexUnavailable, ...): uv's words alone
            continue
        versions = sorted({v for v, _ in offered if specifier.contains(v, prereleases=True)}, reverse=True)
        if not versions:
            continue
        newest = versions[0]
        who = "; ".join(dict.fromkeys(wanted(name, w) for w in wanted_by(text, name)))
        found = judge_wheels(name, str(newest), [f for v, f in offered if v == newest], target, who)
        if found is not None:
            out.append(found)
    return out


def target_of(hosts: Sequence[HostFacts], python_version: str, free_threaded: bool, arch: str) -> WheelTarget:
    """What uv was told (planning `_compile`): the plan's Python, the lowest glibc of the hosts."""
    glibcs = [g.major_minor() for g in (h.glibc_v for h in hosts) if g is not None]
    pythons = {(int(m.group(1)), int(m.group(2))) for h in hosts for p in h.pythons
               if (m := re.match(r"(\d+)\.(\d+)", p.version))}
    major, minor = (int(x) for x in python_version.split(".")[:2])
    return WheelTarget((major, minor), arch, min(glibcs) if glibcs else None, free_threaded, tuple(sorted(pythons)))


def requester(own: Mapping[str, str]) -> Callable[[str, str], str]:
    """uv's requester in the user's terms: "torchfit-env" (uv's name for the project torchfit
    resolves) is the user's own line (`own`: name -> requirement as written); "appx==1.0" is appx 1.0."""
    mine = {canonicalize_name(n): text for n, text in own.items()}

    def say(name: str, who: str) -> str:
        if who == "torchfit-env":
            return f"your requirement {mine.get(canonicalize_name(name), name)}"
        return "required by " + who.replace("==", " ", 1)
    return say


def lead_with(exc: NoCompatibleSet, found: Mapping[str, str]) -> NoCompatibleSet:
    """The refusal with the host facts (`found`: line -> hint) first, its own conflicts and hints after."""
    if not found:
        return exc
    return NoCompatibleSet([*found, *(c for c in exc.conflicts if c not in found)],
                           list(dict.fromkeys([*found.values(), *exc.hints])), exc.remedies)
