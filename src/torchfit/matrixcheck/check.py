"""Compare data/matrix.toml with the package indexes it describes, and propose fixes.

`check_matrix` reads, for every selected build, the torch, torchvision and
torchaudio pages of the build's variant index (or PyPI, for the PyPI-default
rows) and reports each disagreement as a `Finding`:

- the claimed wheels exist, for every claimed CPython and platform;
- the manylinux tag they carry implies a glibc floor no higher than the matrix's
  (the matrix holds the *real* floor, which may be above the tag: 2.0-2.6 wheels
  are tagged manylinux1 but need glibc 2.17, DESIGN.md);
- the nvidia-cudnn-* / nvidia-nccl-* pins in the wheel's METADATA (PEP 658) equal
  the matrix's cuDNN and NCCL;
- and every release or variant the index has that the matrix lacks.

`propose_update` turns a report into a unified diff against the matrix text: value
edits where the index settles a fact unambiguously (cuDNN/NCCL pins, with a new
source key naming the check), review comments at the right place for everything
else. It never writes the file. Typed facts come from `torchfit.compat.matrix`
(the only parser of the matrix); this module reads the raw text only to patch it.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import email.parser
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urldefrag, urlsplit

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import DEFAULT_INDEX, PLATFORMS, Build, Matrix
from torchfit.compat.versions import Dotted
from torchfit.errors import BadInput
from torchfit.index.client import (
    PYPI_SIMPLE,
    IndexClient,
    IndexFile,
    IndexMalformed,
    IndexUnavailable,
    ProjectPage,
)
from torchfit.index.wheelmeta import wheel_metadata
from torchfit.redact import redact

DEFAULT_BASE = DEFAULT_INDEX.rsplit("/{variant}", 1)[0]  # https://download.pytorch.org/whl
# The variants torchfit tracks (the matrix reader accepts the same spellings). Other
# labels on the index (xpu, cpu.cxx11.abi, cu118.* debug builds) are out of scope.
VARIANT_RE = re.compile(r"^(cu\d{3}|rocm\d+\.\d+(\.\d+)?|cpu)$")
# The glibc floors of the manylinux names before PEP 600 (PEP 513, 571, 599).
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_PLATFORM_TAG = re.compile(r"^(?:manylinux_(\d+)_(\d+)|(manylinux1|manylinux2010|manylinux2014)|linux)_(\w+)$")

DRIFT, NOTE, ERROR = "drift", "note", "error"


# ---------------------------------------------------------------------------
# Wheels as the index lists them
# ---------------------------------------------------------------------------


@dataclass(**FROZEN)
class Wheel:
    """What a wheel's file name says: project, version, variant, Pythons, platform, glibc floor."""

    project: str
    version: Version
    variant: str | None  # local label, else the index directory it sits in (None: neither)
    pythons: frozenset[tuple[int, int]]  # CPython minors of cpXY-cpXY / cpXY-abi3 tags
    any_python: bool  # py3 / py2.py3 wheels
    abi3_from: tuple[int, int] | None
    arch: str | None  # x86_64 | aarch64 | "any" | None (another OS)
    glibc: Dotted | None  # floor implied by the manylinux tag; None for linux_* tags
    tag: str  # platform tag(s) as written, for messages
    file: IndexFile

    @property
    def public(self) -> Version:
        return Version(self.version.public)

    def covers(self, python: tuple[int, int], platform: str) -> bool:
        if self.arch not in (platform, "any"):
            return False
        return (
            self.any_python
            or python in self.pythons
            or (self.abi3_from is not None and python >= self.abi3_from)
        )


def parse_wheel(file: IndexFile) -> Wheel | None:
    """A `Wheel` for a Linux (or any-platform) wheel; None for sdists, other OSes, garbage names."""
    if not file.filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(file.filename)
    except (InvalidWheelFilename, ValueError):
        return None
    pythons: set[tuple[int, int]] = set()
    any_python = False
    abi3_from = None
    arches: set[str] = set()
    floors: list[Dotted] = []
    plats: set[str] = set()
    for tag in tags:
        plat = tag.platform
        if plat == "any":
            arches.add("any")
        else:
            m = _PLATFORM_TAG.match(plat)
            if not m or m.group(4) not in PLATFORMS:
                continue
            arches.add(m.group(4))
            plats.add(plat)
            if m.group(1):
                floors.append(Dotted((int(m.group(1)), int(m.group(2))), f"{m.group(1)}.{m.group(2)}"))
            elif m.group(3):
                major, minor = _LEGACY_MANYLINUX[m.group(3)]
                floors.append(Dotted((major, minor), f"{major}.{minor}"))
        interp, abi = tag.interpreter, tag.abi
        cp = re.match(r"^cp3(\d+)$", interp)
        if cp and abi == interp:
            pythons.add((3, int(cp.group(1))))
        elif cp and abi == "abi3":
            mv = (3, int(cp.group(1)))
            abi3_from = min(abi3_from, mv) if abi3_from else mv
        elif re.match(r"^py3\d*$", interp) and abi == "none":
            any_python = True
        # cp313-cp313t (free-threaded) and other ABIs: not counted (the matrix ignores them)
    if not arches or (not pythons and not any_python and abi3_from is None):
        return None
    label = version.local
    variant = label if label else _directory_variant(file.url)
    return Wheel(
        project=str(name),
        version=version,
        variant=variant,
        pythons=frozenset(pythons),
        any_python=any_python,
        abi3_from=abi3_from,
        arch=sorted(arches)[0] if len(arches) == 1 else next(iter(sorted(arches - {"any"}))),
        # pip installs a multi-tag wheel when any tag fits: the lowest floor is the wheel's.
        glibc=min(floors) if floors else None,
        tag=".".join(sorted(plats)) or "any",
        file=file,
    )


def _directory_variant(url: str) -> str | None:
    """download.pytorch.org keeps unlabelled wheels of a variant in its directory (/whl/cpu/...)."""
    parts = unquote(urlsplit(url).path).rstrip("/").split("/")
    return parts[-2] if len(parts) >= 2 and VARIANT_RE.match(parts[-2]) else None


def parse_pins(metadata: str, platform: str = "x86_64") -> dict[str, str]:
    """cuDNN and NCCL versions a torch METADATA pins (`nvidia-cudnn-cu12==9.10.2.21`).

    Only requirements whose marker holds on Linux/`platform` count. Returns
    {"cudnn": ..., "nccl": ...} for the pins found.
    """
    msg = email.parser.HeaderParser().parsestr(metadata)
    env = {
        "platform_system": "Linux", "sys_platform": "linux", "os_name": "posix",
        "platform_machine": platform, "python_version": "3.11", "python_full_version": "3.11.0",
        "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": "",
    }
    pins: dict[str, str] = {}
    for raw in msg.get_all("Requires-Dist") or []:
        try:
            req = Requirement(str(raw))
        except InvalidRequirement:
            continue
        fact = (
            "cudnn" if re.match(r"^nvidia-cudnn-cu\d+$", req.name.lower().replace("_", "-")) else
            "nccl" if re.match(r"^nvidia-nccl-cu\d+$", req.name.lower().replace("_", "-")) else None
        )
        if fact is None:
            continue
        try:
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except InvalidMarker:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
        if exact:
            pins[fact] = exact[0]
    return pins


# ---------------------------------------------------------------------------
# Findings and the report
# ---------------------------------------------------------------------------


@dataclass(**FROZEN)
class Finding:
    """One disagreement (drift), one fact the index adds (note), or a page that failed (error)."""

    level: str  # drift | note | error
    subject: str  # "torch 2.8.0 cu128", "cu128 index", "index"
    fact: str  # exists|python|platform|glibc|cudnn|nccl|torchvision|torchaudio|release|variant|metadata|page
    message: str
    matrix: str | None = None
    index: str | None = None
    url: str | None = None  # redacted
    line: int | None = None  # the matrix entry (its [[series.variant]] header line)
    series_line: int | None = None
    torch: str | None = None
    variant: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["where"] = f"matrix.toml:{self.line}" if self.line else None
        return out


@dataclass(**FROZEN)
class CheckReport:
    """What one `matrix check` found, and what it read."""

    target: str  # redacted description of the indexes read
    builds: int
    findings: tuple[Finding, ...]
    pages: tuple[str, ...]
    observed: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (torch, variant) -> pins

    @property
    def drift(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == DRIFT)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == ERROR)

    @property
    def ok(self) -> bool:
        return not self.drift and not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "target": self.target,
            "builds_checked": self.builds,
            "drift": len(self.drift),
            "errors": len(self.errors),
            "notes": sum(1 for f in self.findings if f.level == NOTE),
            "findings": [f.to_json() for f in self.findings],
            "pages": list(self.pages),
        }


# ---------------------------------------------------------------------------
# Selecting builds and index URLs
# ---------------------------------------------------------------------------


def select_builds(matrix: Matrix, torch: str | None, variant: str | None) -> list[Build]:
    """The builds `--torch` (2.8 or 2.8.0 or a specifier) and `--variant` pick; BadInput when none."""
    from torchfit.compat.request import parse_spec

    builds = list(matrix.builds)
    if variant:
        if variant not in {b.variant for b in builds}:
            raise BadInput(f"--variant {variant}: no such variant in the matrix (e.g. cu128, rocm6.4, cpu)")
        builds = [b for b in builds if b.variant == variant]
    if torch:
        spec = parse_spec(torch, "--torch")
        builds = [b for b in builds if spec.contains(b.torch, prereleases=True)]
        if not builds:
            raise BadInput(f"--torch {torch}: no matching release in the matrix")
    return builds


def check_base_url(url: str, option: str) -> str:
    """An index URL torchfit can read over HTTP; BadInput otherwise."""
    from torchfit.inputs import check_index_url

    check_index_url(url, option)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{option} {redact(url)}: not an http(s) URL")
    return url.rstrip("/")


def variant_index(build: Build, base: str | None) -> str:
    """The build's index URL, with the default https://download.pytorch.org/whl replaced by `base`.

    `base` may hold `{variant}`; without it the variant is appended as a path
    segment. A build whose matrix entry names its own `index_url` keeps it.
    """
    if base is None or build.index_url != DEFAULT_INDEX.replace("{variant}", build.variant):
        return build.index_url
    if "{variant}" in base:
        return base.replace("{variant}", build.variant)
    return f"{base.rstrip('/')}/{build.variant}"


def combined_index(base: str | None) -> str | None:
    """The index listing every variant's files (download.pytorch.org/whl/torch/), if derivable."""
    base = base or DEFAULT_BASE
    if "{variant}" not in base:
        return base
    if base.rstrip("/").endswith("/{variant}") and base.count("{variant}") == 1:
        return base.rstrip("/")[: -len("/{variant}")]
    return None


# ---------------------------------------------------------------------------
# The check
# ---------------------------------------------------------------------------


class _Reader:
    """Fetches pages once each, records what was read, and stops hammering a dead host."""

    def __init__(self, client: IndexClient, say: Callable[[str], None]) -> None:
        self.client = client
        self.say = say
        self.pages: dict[tuple[str, str], ProjectPage | None] = {}
        self.read: list[str] = []
        self.dead_hosts: dict[str, str] = {}
        self.failures: dict[tuple[str, str], Finding] = {}
        self.reported: list[Finding] = []
        self.skipped: dict[str, int] = {}
        self.parsed: dict[tuple[str, str], list[Wheel]] = {}

    def error_findings(self) -> list[Finding]:
        """Each failed page, then one line per unreachable host for the pages skipped after it."""
        out = list(self.reported)
        for host, n in self.skipped.items():
            out.append(Finding(ERROR, "index", "page", f"{n} more page{'s' if n > 1 else ''} not read: "
                               f"{self.dead_hosts[host]}"))
        return out

    def page(self, index: str, project: str) -> ProjectPage | None:
        """The page, None on 404; raises _PageFailed (with its Finding) on an error."""
        key = (index, project)
        if key in self.failures:
            raise _PageFailed(self.failures[key])
        if key in self.pages:
            return self.pages[key]
        host = urlsplit(index).hostname or ""
        url = redact(f"{index.rstrip('/')}/{project}/")
        if host in self.dead_hosts:
            # One line per dead host (see `skipped_findings`), not one per page.
            self.skipped[host] = self.skipped.get(host, 0) + 1
            finding = Finding(ERROR, "index", "page", f"{url}: not read ({self.dead_hosts[host]})", url=url)
            self.failures[key] = finding
            raise _PageFailed(finding)
        self.say(f"reading {url}")
        try:
            page = self.client.project_page(index, project)
        except (IndexUnavailable, IndexMalformed) as exc:
            if isinstance(exc, IndexUnavailable) and exc.kind == "connect":
                # Connection-level failure after all retries: the host is down for this run.
                self.dead_hosts[host] = f"{urlsplit(redact(index)).netloc} unreachable: {exc.why}"
            finding = Finding(ERROR, "index", "page", exc.message, url=url)
            self.failures[key] = finding
            self.reported.append(finding)
            raise _PageFailed(finding) from None
        self.read.append(redact(page.url) if page else url + " (404)")
        self.pages[key] = page
        return page

    def wheels(self, index: str, project: str) -> list[Wheel]:
        """The page's wheels (parsed once per page; yanked files left out, PEP 592)."""
        key = (index, project)
        if key not in self.parsed:
            page = self.page(index, project)
            files = page.files if page else ()
            self.parsed[key] = [w for w in (parse_wheel(f) for f in files) if w is not None and not w.file.yanked]
        return self.parsed[key]


class _PageFailed(Exception):
    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _py(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def _pys(vs: Iterable[tuple[int, int]]) -> str:
    return ", ".join(_py(v) for v in sorted(vs))


def check_matrix(
    matrix: Matrix,
    client: IndexClient,
    *,
    base: str | None = None,
    torch: str | None = None,
    variant: str | None = None,
    pypi: bool = False,
    pypi_url: str = PYPI_SIMPLE,
    say: Callable[[str], None] = lambda _m: None,
) -> CheckReport:
    """Check the selected builds against their indexes (or PyPI with `pypi=True`)."""
    builds = select_builds(matrix, torch, variant)
    reader = _Reader(client, say)
    findings: list[Finding] = []
    observed: dict[tuple[str, str], dict[str, str]] = {}
    if pypi:
        builds = [b for b in builds if b.pypi_default]
        if not builds:
            raise BadInput("no PyPI-default build among the selected ones (the matrix's `pypi` rows)")
        groups: dict[str, list[Build]] = {pypi_url: builds}
        target = f"{redact(pypi_url)} (PyPI-default builds, x86_64)"
    else:
        groups = defaultdict(list)
        for b in builds:
            groups[variant_index(b, base)].append(b)
        target = redact(base or DEFAULT_BASE) + ("" if base and "{variant}" in base else "/{variant}")
    for index, group in groups.items():
        for b in group:
            findings.extend(_check_build(b, index, reader, client, pypi, observed))
    findings.extend(_discover(matrix, builds, groups, reader, base, torch, variant, pypi, pypi_url))
    findings.extend(reader.error_findings())
    return CheckReport(target, len(builds), tuple(_dedupe(findings)), tuple(reader.read), observed)


def _dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, str]] = set()
    out = []
    for f in findings:
        key = (f.level, f.subject, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _check_build(
    b: Build, index: str, reader: _Reader, client: IndexClient, pypi: bool,
    observed: dict[tuple[str, str], dict[str, str]],
) -> list[Finding]:
    out: list[Finding] = []
    url = redact(f"{index.rstrip('/')}/torch/")
    read_at = {"torch": url}  # the page actually read (after redirects), for the findings

    def add(level: str, fact: str, message: str, matrix: str | None = None, index_val: str | None = None,
            page: str | None = None) -> None:
        out.append(Finding(level, b.label, fact, message, matrix, index_val, page or read_at["torch"], b.line,
                           b.series_line, str(b.torch), b.variant))

    try:
        torch_page = reader.page(index, "torch")
        all_torch = reader.wheels(index, "torch")
    except _PageFailed:
        return out  # the page's error finding says why; nothing else can be said
    if torch_page is None:
        add(DRIFT, "exists", f"the index has no torch page ({url} is 404)", "exists", "no page")
        return out
    read_at["torch"] = redact(torch_page.url)
    mine = [w for w in all_torch if w.public == b.torch and (pypi or w.variant == b.variant)]
    linux = [w for w in mine if w.arch in PLATFORMS]
    platforms = ("x86_64",) if pypi else b.platforms
    if not linux:
        where = "on PyPI" if pypi else f"for {b.variant}"
        add(DRIFT, "exists", f"no Linux torch {b.torch} wheel {where} on the index", "exists", "none")
        return out
    for p in platforms:
        ws = [w for w in linux if w.arch == p]
        if not ws:
            add(DRIFT, "platform", f"the matrix lists {p}, the index has no {p} wheel", p, "none")
            continue
        have = set().union(*(w.pythons for w in ws))
        claimed = set(b.pythons_for(p))
        if claimed - have:
            add(DRIFT, "python", f"the matrix claims CPython {_pys(claimed - have)} on {p}; "
                f"the index has no such wheel", _pys(claimed), _pys(have))
        if have - claimed:
            add(DRIFT, "python", f"the index has CPython {_pys(have - claimed)} wheels on {p} "
                "that the matrix does not list", _pys(claimed), _pys(have))
        floors = [w for w in ws if w.glibc is not None]
        mfloor = b.glibc_for(p)
        if floors:
            top = max(floors, key=lambda w: w.glibc or Dotted(()))
            assert top.glibc is not None
            if mfloor is None:
                add(NOTE, "glibc", f"glibc floor unknown in the matrix; {p} wheels are tagged {top.tag} "
                    f"(glibc >= {top.glibc})", "unknown", str(top.glibc))
            elif top.glibc > mfloor:
                add(DRIFT, "glibc", f"{p} wheels are tagged {top.tag} (glibc >= {top.glibc}); "
                    f"the matrix says {mfloor}", str(mfloor), str(top.glibc))
    if not pypi:
        extra = sorted({w.arch for w in linux if w.arch and w.arch not in b.platforms})
        for p in extra:
            add(DRIFT, "platform", f"the index has {p} wheels; the matrix lists {', '.join(b.platforms)} only",
                ", ".join(b.platforms), p)
    if b.kind == "cuda":
        _check_pins(b, linux, platforms, client, observed, add)
    for name, ver in (("torchvision", b.torchvision), ("torchaudio", b.torchaudio)):
        if ver:
            _check_companion(b, name, ver, index, reader, pypi, platforms, add)
    return out


def _check_pins(
    b: Build, linux: Sequence[Wheel], platforms: Sequence[str], client: IndexClient,
    observed: dict[tuple[str, str], dict[str, str]], add: Callable[..., None],
) -> None:
    """cuDNN/NCCL from the METADATA of one wheel (x86_64 cp311 preferred, as the matrix's sources)."""
    plat = "x86_64" if "x86_64" in platforms else platforms[0]
    ws = [w for w in linux if w.arch == plat and w.pythons]
    if not ws:
        return
    wheel = min(ws, key=lambda w: ((3, 11) not in w.pythons, [-m for _, m in sorted(w.pythons)]))
    murl = redact(wheel.file.metadata_url)
    try:
        text = client.core_metadata(wheel.file)
        if text is None:
            # No PEP 658 file: read METADATA out of the wheel with range requests.
            murl = redact(urldefrag(wheel.file.url)[0])
            text = wheel_metadata(client, wheel.file)
    except (IndexUnavailable, IndexMalformed) as exc:
        add(ERROR, "metadata", f"METADATA of {wheel.file.filename} not read: {exc.why}", page=murl)
        return
    if text is None:
        add(NOTE, "metadata", f"no METADATA for {wheel.file.filename}: the index serves no PEP 658 file "
            "and the wheel could not be read by range requests; cuDNN/NCCL pins not checked", page=murl)
        return
    pins = parse_pins(text, plat)
    observed[(str(b.torch), b.variant)] = pins
    for fact, label, have in (("cudnn", "nvidia-cudnn", b.cudnn), ("nccl", "nvidia-nccl", b.nccl)):
        pin = pins.get(fact)
        if pin is None:
            if have:
                add(NOTE, fact, f"METADATA of {wheel.file.filename} pins no {label}-* (bundled in the wheel?); "
                    f"the matrix's {have} is not checked", have, None, murl)
            continue
        if have is None:
            add(NOTE, fact, f"{fact} unknown in the matrix; METADATA pins {label}=={pin}", "unknown", pin, murl)
        elif not _same_version(pin, have):
            add(DRIFT, fact, f"METADATA pins {label}=={pin}; the matrix says {have}", have, pin, murl)


def _same_version(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _check_companion(
    b: Build, name: str, ver: str, index: str, reader: _Reader, pypi: bool,
    platforms: Sequence[str], add: Callable[..., None],
) -> None:
    page_url = redact(f"{index.rstrip('/')}/{name}/")
    try:
        page = reader.page(index, name)
        wheels = reader.wheels(index, name)
    except _PageFailed:
        return
    if page is None:
        add(DRIFT, name, f"the matrix pairs {name} {ver}; the index has no {name} page", ver, "no page", page_url)
        return
    page_url = redact(page.url)
    want = Version(ver)
    # Companions may be unlabelled (py3-none-any builds): any file of the version that is
    # not another variant's counts.
    ws = [w for w in wheels if w.public == want and (pypi or w.variant in (b.variant, None))]
    if not ws:
        add(DRIFT, name, f"the matrix pairs {name} {ver}; the index has no such wheel", ver, "none", page_url)
        return
    for p in platforms:
        missing = [py for py in b.pythons_for(p) if not any(w.covers(py, p) for w in ws)]
        if missing:
            add(DRIFT, name, f"{name} {ver} has no {p} wheel for CPython {_pys(missing)}", ver, "missing", page_url)


def _discover(
    matrix: Matrix, builds: Sequence[Build], groups: dict[str, list[Build]], reader: _Reader,
    base: str | None, torch: str | None, variant: str | None, pypi: bool, pypi_url: str,
) -> list[Finding]:
    """Releases and variants the index has and the matrix lacks (from the oldest matrix release on)."""
    from torchfit.compat.request import parse_spec

    oldest = min(matrix.releases)
    spec = parse_spec(torch, "--torch") if torch else SpecifierSet()
    known = {(b.torch, b.variant) for b in matrix.builds}
    found: dict[Version, set[str]] = defaultdict(set)
    sources: list[tuple[str, bool]] = []  # (index, is_combined)
    comb: str | None = None
    if pypi:
        sources.append((pypi_url, False))
    else:
        sources.extend((idx, False) for idx in groups)
        comb = combined_index(base)
        if comb is not None:
            sources.append((comb, True))
    out: list[Finding] = []
    if not pypi and comb is None:
        out.append(Finding(NOTE, "index", "variant", f"no combined index can be derived from {redact(base or '')}: "
                           "only the matrix's own variants were searched for new releases"))
    for idx, is_combined in sources:
        try:
            page = reader.page(idx, "torch")
            wheels = reader.wheels(idx, "torch")
        except _PageFailed:
            continue
        if page is None:
            if is_combined:
                out.append(Finding(NOTE, "index", "variant", f"no combined index at {redact(idx)}/torch/: "
                                   "only the matrix's own variants were searched for new releases",
                                   url=redact(idx)))
            continue
        for w in wheels:
            v = w.public
            if w.arch not in PLATFORMS or v.is_prerelease or v.is_devrelease or v < oldest:
                continue
            if not spec.contains(v, prereleases=True):
                continue
            if pypi:
                found[v].add("(PyPI)")
            elif w.variant and VARIANT_RE.match(w.variant) and (variant is None or w.variant == variant):
                found[v].add(w.variant)
    for v in sorted(found):
        if pypi:
            if v not in matrix.releases:
                out.append(Finding(DRIFT, f"torch {v}", "release",
                                   f"PyPI has torch {v} that the matrix lacks", None, str(v),
                                   redact(pypi_url), torch=str(v)))
            continue
        new = sorted(var for var in found[v] if (v, var) not in known)
        if not new:
            continue
        if v not in matrix.releases:
            out.append(Finding(DRIFT, f"torch {v}", "release",
                               f"the index has torch {v} ({', '.join(new)}) that the matrix lacks",
                               None, ", ".join(new), torch=str(v)))
        else:
            for var in new:
                out.append(Finding(DRIFT, f"torch {v} {var}", "variant",
                                   f"the index has torch {v} for {var}, a variant the matrix lacks",
                                   None, var, torch=str(v), variant=var))
    return out


# ---------------------------------------------------------------------------
# Text output
# ---------------------------------------------------------------------------


def format_report(report: CheckReport, *, notes: bool = True) -> str:
    """The human report: one line per finding, grouped by build, then a summary line."""
    lines = [f"torchfit matrix check: {report.builds} builds against {report.target}"]
    mark = {DRIFT: "DRIFT", NOTE: "note ", ERROR: "ERROR"}
    for f in report.findings:
        if f.level == NOTE and not notes:
            continue
        where = f" (matrix.toml:{f.line})" if f.line else ""
        lines.append(redact(f"  {mark[f.level]} {f.subject}{where}: {f.message}"))
    n_notes = sum(1 for f in report.findings if f.level == NOTE)
    if report.ok:
        lines.append(f"ok: the matrix agrees with the index ({len(report.pages)} pages read, {n_notes} notes)")
    elif report.drift:
        unread = f", and {len(report.errors)} index errors" if report.errors else ""
        n = len(report.drift)
        lines.append(f"drift: {n} disagreement{'s' if n != 1 else ''}{unread} ({n_notes} notes); "
                     "`torchfit matrix update` proposes the changes as a diff")
    else:
        lines.append(f"incomplete: {len(report.errors)} index errors, no disagreement among the pages read "
                     f"({len(report.pages)} pages)")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The proposed update
# ---------------------------------------------------------------------------


def _block_end(lines: Sequence[str], start: int) -> int:
    """Index of the first line after the table that starts at `start` (0-based)."""
    for i in range(start + 1, len(lines)):
        if re.match(r"^\s*\[", lines[i]):
            return i
    return len(lines)


def _set_value(lines: list[str], start: int, key: str, value: str) -> bool:
    """Set `key = "value"` inside the table at `start`; insert it after `cuda =`/`name =` if absent."""
    end = _block_end(lines, start)
    pat = re.compile(rf'^(\s*{key}\s*=\s*)"[^"]*"(.*)$', re.S)
    for i in range(start + 1, end):
        m = pat.match(lines[i])
        if m:
            lines[i] = f'{m.group(1)}"{value}"{m.group(2)}'
            return True
    for anchor in ("cuda", "name"):
        for i in range(start + 1, end):
            if re.match(rf"^\s*{anchor}\s*=", lines[i]):
                lines.insert(i + 1, f'{key} = "{value}"\n')
                return True
    return False


def _set_source(lines: list[str], start: int, fact: str, key: str) -> None:
    """Point `source.<fact>` of the table at `start` to `key` (inline-table form)."""
    end = _block_end(lines, start)
    for i in range(start + 1, end):
        m = re.match(r"^(\s*source\s*=\s*\{)(.*)(\}\s*(#.*)?\n?)$", lines[i], re.S)
        if not m:
            continue
        body = m.group(2)
        new_body, n = re.subn(rf'(\b{fact}\s*=\s*)"[^"]*"', rf'\g<1>"{key}"', body)
        if not n:
            new_body = body.rstrip() + f', {fact} = "{key}" '
        lines[i] = m.group(1) + new_body + m.group(3)
        return


def _add_source_key(lines: list[str], key: str, text: str) -> None:
    entry = f"{_toml_str(key)} = {_toml_str(text)}\n"
    if any(line.startswith(_toml_str(key) + " =") for line in lines):
        return
    start = next((i for i, line in enumerate(lines) if line.strip() == "[sources]"), None)
    if start is None:
        return
    last = start
    for i in range(start + 1, _block_end(lines, start)):
        if re.match(r'^\s*"[^"]+"\s*=', lines[i]):
            last = i
    lines.insert(last + 1, entry)


def _toml_str(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def propose_update(
    text: str, matrix: Matrix, report: CheckReport, *, today: _dt.date | None = None,
    path: str = "src/torchfit/data/matrix.toml",
) -> str:
    """A unified diff that brings `text` in line with `report`; "" when nothing is proposed."""
    from torchfit.compat.matrix import parse_matrix

    today = today or _dt.date.today()
    stamp = f"matrix update {today.isoformat()}"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    source_key = f"TORCHFIT-CHECK {today.isoformat()}"
    edits: dict[int, dict[str, str]] = defaultdict(dict)  # entry line -> fact -> value
    comments: dict[int, list[str]] = defaultdict(list)  # 1-based line to comment above -> texts
    tail: list[str] = []
    by_line: dict[int, list[Build]] = defaultdict(list)
    for b in matrix.builds:
        by_line[b.line].append(b)
    # Value edits: a pin every release of the entry agrees on.
    for line, group in by_line.items():
        for fact in ("cudnn", "nccl"):
            seen = [report.observed.get((str(b.torch), b.variant), {}).get(fact) for b in group]
            if None in seen or len(set(seen)) != 1:
                continue
            value = seen[0]
            assert value is not None
            current = getattr(group[0], fact)
            if current is None or not _same_version(current, value):
                edits[line][fact] = value
    for f in report.findings:
        if f.level == ERROR or (f.level == NOTE and f.fact not in ("glibc",)):
            continue
        if f.fact in ("cudnn", "nccl") and f.line in edits and f.fact in edits[f.line]:
            continue
        msg = f"# {stamp} (review): {f.subject}: {f.message}"
        if f.line:
            comments[f.line].append(msg)
            continue
        v = Version(f.torch) if f.torch else None
        series = [b for b in matrix.builds if v and (b.torch.major, b.torch.minor) == (v.major, v.minor)]
        if series:
            comments[min(b.series_line for b in series)].append(
                msg + "; add it (docs/matrix-format.md), each fact with its source")
        else:
            tail.append(msg)
    if tail:
        tail.append(f"# {stamp} (review): add a [[series]] per new release line (docs/matrix-format.md), "
                    "each fact with its source")
    out = list(lines)
    # Apply from the bottom up so earlier line numbers stay valid.
    points = sorted(set(edits) | set(comments), reverse=True)
    used_source = False
    for line in points:
        idx = line - 1
        for fact, value in sorted(edits.get(line, {}).items()):
            if _set_value(out, idx, fact, value):
                _set_source(out, idx, fact, source_key)
                used_source = True
        for msg in reversed(list(dict.fromkeys(comments.get(line, [])))):
            out.insert(idx, redact(msg) + "\n")
    if tail:
        out.append("\n")
        out.extend(redact(m) + "\n" for m in dict.fromkeys(tail))
    if used_source:
        _add_source_key(out, source_key, (
            f"torchfit matrix check: Requires-Dist pins in the METADATA (PEP 658) of torch wheels on "
            f"{report.target}, read {today.isoformat()}"
        ))
    if out == lines:
        return ""
    # The proposal must still be a valid matrix: a broken diff helps no reviewer.
    parse_matrix("".join(out), path)
    return "".join(difflib.unified_diff(lines, out, f"a/{path}", f"b/{path}"))
