"""Compare data/matrix.toml with the package indexes it describes, and propose fixes.

`check_matrix` reads, for every selected build, the torch, torchvision and
torchaudio pages of the build's variant index (or PyPI, for the PyPI-default
rows) and reports each disagreement as a `Finding`:

- the claimed wheels exist, for every claimed CPython and platform;
- the manylinux tag they carry implies a glibc floor no higher than the matrix's
  (the matrix holds the *real* floor, which may be above the tag: 2.0-2.6 wheels
  are tagged manylinux1 but need glibc 2.17, docs/architecture.md, Contracts);
- the nvidia-cudnn-* / nvidia-nccl-* pins in the wheel's METADATA (PEP 658) equal
  the matrix's cuDNN and NCCL;
- and every release or variant the index has that the matrix lacks.

The package is one module a step: `wheels` (file names, METADATA pins), this
module (the check), `report` (findings, text), `update` (`propose_update`, the
diff).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urldefrag, urlsplit

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from torchfit.compat.matrix import DEFAULT_INDEX, PLATFORMS, PYPI_SIMPLE, VARIANT_RE, Build, Matrix
from torchfit.compat.versions import Dotted
from torchfit.errors import BadInput, IndexMalformed, IndexUnavailable
from torchfit.index.client import IndexClient, LocalIndexClient
from torchfit.index.pages import ProjectPage
from torchfit.index.wheelmeta import wheel_metadata
from torchfit.matrixcheck.report import DRIFT, ERROR, NOTE, CheckReport, Finding
from torchfit.matrixcheck.wheels import Wheel, parse_pins, parse_wheel, same_version
from torchfit.progress import Progress
from torchfit.redact import redact

DEFAULT_BASE = DEFAULT_INDEX.rsplit("/{variant}", 1)[0]  # https://download.pytorch.org/whl


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
    """An index URL torchfit can read: http(s), or a `file://` tree (a site's mirror on disk);
    BadInput otherwise."""
    from torchfit.inputs import check_index_url

    check_index_url(url, option)
    parts = urlsplit(url)
    if parts.scheme == "file" and parts.path.startswith("/"):
        return url.rstrip("/")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadInput(f"{option} {redact(url)}: not an http(s) or file:// URL")
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

    def __init__(self, client: IndexClient, progress: Progress) -> None:
        self.client = client
        self.progress = progress
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
        self.progress.info(f"reading {url}")
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
    progress: Progress | None = None,
) -> CheckReport:
    """Check the selected builds against their indexes (or PyPI with `pypi=True`)."""
    builds = select_builds(matrix, torch, variant)
    reader = _Reader(client, progress or Progress())
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
    covered = frozenset({("torch", str(b.torch)) for b in builds}
                        | {(n, v) for b in builds for n, v in (("torchvision", b.torchvision),
                                                                ("torchaudio", b.torchaudio)) if v})
    return CheckReport(target, len(builds), tuple(_dedupe(findings)), tuple(reader.read), observed, covered)


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
            page: str | None = None, package: str = "torch", version: str | None = None) -> None:
        out.append(Finding(level, b.label, fact, message, matrix, index_val, page or read_at["torch"], b.line,
                           b.series_line, str(b.torch), b.variant, package, version or str(b.torch)))

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
        if text is None and urlsplit(wheel.file.url).scheme == "file" and isinstance(client, LocalIndexClient):
            murl = redact(urldefrag(wheel.file.url)[0])
            text = _local_wheel_metadata(murl)
        elif text is None:
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
        elif not same_version(pin, have):
            add(DRIFT, fact, f"METADATA pins {label}=={pin}; the matrix says {have}", have, pin, murl)


def _local_wheel_metadata(url: str) -> str | None:
    """A local mirror's wheel without FILE.metadata: its METADATA read out of the file on disk
    (None for a file that is not there or no readable wheel: the note says the pins went unchecked)."""
    from urllib.parse import unquote

    from torchfit.errors import WheelFormatError
    from torchfit.index.wheelmeta import FileSource, WheelArchive

    try:
        source = FileSource(unquote(urlsplit(url).path))
    except WheelFormatError:
        return None
    try:
        found = WheelArchive(source).metadata()
    except (OSError, WheelFormatError):
        return None
    finally:
        source.close()
    return found[1].decode("utf-8", errors="replace") if found is not None else None


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
        add(DRIFT, name, f"the matrix pairs {name} {ver}; the index has no {name} page", ver, "no page", page_url,
            name, ver)
        return
    page_url = redact(page.url)
    want = Version(ver)
    # Companions may be unlabelled (py3-none-any builds): any file of the version that is
    # not another variant's counts.
    ws = [w for w in wheels if w.public == want and (pypi or w.variant in (b.variant, None))]
    if not ws:
        add(DRIFT, name, f"the matrix pairs {name} {ver}; the index has no such wheel", ver, "none", page_url,
            name, ver)
        return
    for p in platforms:
        missing = [py for py in b.pythons_for(p) if not any(w.covers(py, p) for w in ws)]
        if missing:
            add(DRIFT, name, f"{name} {ver} has no {p} wheel for CPython {_pys(missing)}", ver, "missing", page_url,
                name, ver)


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
                                   redact(pypi_url), torch=str(v), package="torch", version=str(v)))
            continue
        new = sorted(var for var in found[v] if (v, var) not in known)
        if not new:
            continue
        if v not in matrix.releases:
            out.append(Finding(DRIFT, f"torch {v}", "release",
                               f"the index has torch {v} ({', '.join(new)}) that the matrix lacks",
                               None, ", ".join(new), torch=str(v), package="torch", version=str(v)))
        else:
            for var in new:
                out.append(Finding(DRIFT, f"torch {v} {var}", "variant",
                                   f"the index has torch {v} for {var}, a variant the matrix lacks",
                                   None, var, torch=str(v), variant=var, package="torch", version=str(v)))
    return out


__all__ = ["check_base_url", "check_matrix", "combined_index", "select_builds", "variant_index"]
