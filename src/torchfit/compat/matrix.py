"""The only reader of data/matrix.toml: TOML in, typed and validated `Matrix` out.

Each `[[series.variant]]` of the file expands to one `Build` per patch release
(torch 2.9.1 cu128 is one build). Anything malformed raises `MatrixError` naming
`matrix.toml:LINE` and what is wrong; a fact written "unknown" becomes `None`,
and the resolver treats `None` conservatively. Every fact may carry an evidence
label (`measured` > `primary` > `secondary` > `cycle`); the weak ones make the
plan warn. `iter_unknowns` lists the facts still unknown and what each blocks.
The format is documented in docs/matrix-format.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.datafiles import read_data_text
from torchfit.compat.versions import Arch, BuildArch, Dotted, python_version
from torchfit.errors import BadInput, MatrixError
from torchfit.jsontypes import JsonObject

UNKNOWN = "unknown"
DEFAULT_INDEX = "https://download.pytorch.org/whl/{variant}"
# The environment variable that replaces DEFAULT_INDEX (install, resolve, add).
TORCH_INDEX_ENV = "TORCHFIT_TORCH_INDEX_URL"
# The default index for everything but the torch family (PEP 503 simple API).
PYPI_SIMPLE = "https://pypi.org/simple"
# An unknown glibc floor is taken as the highest floor any torch wheel has had
# (manylinux_2_28 since 2.7, PyTorch PR #143423), so it never admits a wheel the
# host cannot load.
CONSERVATIVE_GLIBC = Dotted.parse("2.28")
PLATFORMS = ("x86_64", "aarch64")
# The variants torchfit tracks: cu128, rocm6.4, cpu. Other labels on the index (xpu,
# cpu.cxx11.abi, cu118.* debug builds) are out of scope; matrixcheck uses the same rule.
VARIANT_RE = re.compile(r"^(cu\d{3}|rocm\d+\.\d+(\.\d+)?|cpu)$")
# How a fact was established, strongest first (docs/matrix-format.md, "Evidence"):
# read from the artifact itself; read from a primary document at a fixed revision
# (a build script at a commit, an NVIDIA table); reported by a third party; inferred
# (what main held at the release-branch cut, or carried over from a sibling artifact).
EVIDENCE = ("measured", "primary", "secondary", "cycle")
WEAK_EVIDENCE = frozenset({"secondary", "cycle"})
EVIDENCE_WORDS = {
    "measured": "a measurement of the wheel",
    "primary": "a primary source",
    "secondary": "secondary evidence, a third-party report",
    "cycle": "cycle-level evidence, inferred rather than read from the release",
}


@dataclass(**FROZEN)
class CudaInfo:
    """One CUDA minor version: the driver its full toolkit needs and its family's MVC floor."""

    version: str
    toolkit_driver: Dotted | None
    mvc_driver: Dotted | None
    source: str
    line: int


@dataclass(**FROZEN)
class CudnnFloor:
    """The lowest compute capability one cuDNN line supports (NVIDIA cuDNN support matrix)."""

    version: str  # a version prefix: "9" covers 9.x, "8.5" covers 8.5.x
    min_compute: Arch
    source: str
    line: int

    def matches(self, cudnn: str) -> bool:
        want = self.version.split(".")
        return cudnn.split(".")[: len(want)] == want


@dataclass(eq=False, **FROZEN)
class Build:
    """One installable build: a torch release in one variant, with everything known about it.

    Compared by identity: the matrix holds exactly one `Build` per (release, variant).
    """

    torch: Version
    variant: str
    kind: str  # "cuda" | "rocm" | "cpu"
    cuda: str | None
    rocm: str | None
    cudnn: str | None
    nccl: str | None
    arch: tuple[BuildArch, ...] | None  # x86_64 CUDA arch list; None = unknown
    arch_aarch64: tuple[BuildArch, ...] | None
    gfx: tuple[str, ...] | None  # ROCm targets; None = unknown
    platforms: tuple[str, ...]
    glibc: Dotted | None
    glibc_aarch64: Dotted | None
    pythons: tuple[tuple[int, int], ...]
    pythons_aarch64: tuple[tuple[int, int], ...]
    pythons_companions: tuple[tuple[int, int], ...] | None  # None: same as the torch wheels
    torchvision: str | None
    torchaudio: str | None
    index_url: str
    pypi_default: bool
    sources: Mapping[str, str]
    line: int
    series_line: int
    evidence: Mapping[str, str] = field(default_factory=dict)  # fact -> label, explicit or derived
    unknown_why: Mapping[str, str] = field(default_factory=dict)  # fact -> why it is still unknown
    # Requires-Python of each package's files as the index states it (a specifier, not a
    # range: torchvision 0.26.0-0.29.2 say ">=3.10,!=3.14.1"); absent where none is stated.
    requires_python: Mapping[str, str] = field(default_factory=dict)  # "torch"/"torchvision"/"torchaudio" -> spec
    # CPython minors with free-threaded (cpXYt) wheels, per package; absent: none known.
    pythons_freethreaded: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"torch {self.torch} {self.variant}"

    @property
    def origin(self) -> str:
        """Where this build's facts live, for messages: 'matrix.toml:88'."""
        return f"matrix.toml:{self.line}"

    def arch_for(self, platform: str) -> tuple[BuildArch, ...] | None:
        return self.arch_aarch64 if platform == "aarch64" else self.arch

    def glibc_for(self, platform: str) -> Dotted | None:
        return self.glibc_aarch64 if platform == "aarch64" else self.glibc

    def pythons_for(self, platform: str) -> tuple[tuple[int, int], ...]:
        return self.pythons_aarch64 if platform == "aarch64" else self.pythons

    def python_spec(self, package: str = "torch") -> SpecifierSet:
        """The Requires-Python of `package`'s files for this build (empty: no limit known)."""
        return SpecifierSet(self.requires_python.get(package, ""))

    def evidence_of(self, fact: str) -> str | None:
        """The evidence label of `fact` ("arch", "glibc", ...); None when unlabelled."""
        return self.evidence.get(fact)


@dataclass(**FROZEN)
class Matrix:
    """The whole matrix: builds newest first, CUDA and ROCm tables, the source keys."""

    builds: tuple[Build, ...]
    cuda: Mapping[str, CudaInfo]
    rocm: Mapping[str, str]
    sources: Mapping[str, str]
    path: str
    cudnn_floors: tuple[CudnnFloor, ...] = ()

    def cudnn_floor(self, cudnn: str) -> CudnnFloor | None:
        """The most specific `[[cudnn]]` row for a cuDNN version; None when none matches."""
        rows = [f for f in self.cudnn_floors if f.matches(cudnn)]
        return max(rows, key=lambda f: len(f.version.split(".")), default=None)

    @property
    def highest_cudnn_floor(self) -> CudnnFloor | None:
        """The strictest floor of any cuDNN line: what an unknown cuDNN is held to."""
        return max(self.cudnn_floors, key=lambda f: f.min_compute, default=None)

    @property
    def releases(self) -> tuple[Version, ...]:
        return tuple(sorted({b.torch for b in self.builds}, reverse=True))

    def find_build(self, torch: str, variant: str) -> Build | None:
        """The build of torch `torch` ("2.8.0", local label ignored) for `variant`; None if absent."""
        public = torch.split("+", 1)[0]
        return next((b for b in self.builds if b.variant == variant and str(b.torch) == public), None)

    def cuda_info(self, cuda: str) -> CudaInfo | None:
        """The CUDA table row of `cuda` ("12.8"), else of its family's first listed minor."""
        info = self.cuda.get(cuda)
        if info is None:
            major = cuda.split(".")[0]
            info = next((i for v, i in self.cuda.items() if v.split(".")[0] == major), None)
        return info


class _Lines:
    """Line numbers of `[[table]]` headers, by order of appearance (tomllib has none)."""

    def __init__(self, text: str) -> None:
        self.headers: dict[str, list[int]] = {}
        for no, line in enumerate(text.splitlines(), 1):
            m = re.match(r"^\s*\[\[\s*([A-Za-z0-9_.]+)\s*\]\]", line)
            if m:
                self.headers.setdefault(m.group(1), []).append(no)

        self.text_lines = text.splitlines()

    def of(self, table: str, n: int) -> int:
        lines = self.headers.get(table, [])
        return lines[n] if n < len(lines) else 0

    def key(self, header: int, key: str) -> int:
        """The line of `key = ...` inside the table whose header is on line `header`."""
        for no in range(header, len(self.text_lines)):
            line = self.text_lines[no]
            if no > header and re.match(r"^\s*\[", line):
                break
            if re.match(rf"^\s*{re.escape(key)}\s*=", line):
                return no + 1
        return header


def _err(path: str, line: int, what: str) -> MatrixError:
    return MatrixError(path, line or None, what)


class _Reader:
    """Validating accessors over one TOML table, each failure pinned to its line."""

    def __init__(self, table: Any, path: str, line: int, what: str) -> None:
        if not isinstance(table, dict):
            raise _err(path, line, f"{what} must be a table")
        self.t, self.path, self.line, self.what = table, path, line, what

    def fail(self, msg: str) -> MatrixError:
        return _err(self.path, self.line, f"{self.what}: {msg}")

    def text(self, key: str, default: str | None = None, required: bool = True) -> str | None:
        val = self.t.get(key, default)
        if val is None:
            if required:
                raise self.fail(f"missing '{key}'")
            return None
        if not isinstance(val, str):
            raise self.fail(f"'{key}' must be a string")
        return val

    def strlist(self, key: str, required: bool = True) -> list[str] | None:
        val = self.t.get(key)
        if val is None:
            if required:
                raise self.fail(f"missing '{key}'")
            return None
        if not isinstance(val, list) or not all(isinstance(v, str) for v in val):
            raise self.fail(f"'{key}' must be a list of strings")
        return val

    def dotted(self, key: str, required: bool = True) -> Dotted | None:
        val = self.text(key, required=required)
        if val is None or val == UNKNOWN:
            return None
        try:
            return Dotted.parse(val, key)
        except BadInput as exc:
            raise self.fail(exc.message) from None

    def evidence(self, src: Mapping[str, str], known: Mapping[str, str], lines: _Lines) -> dict[str, str]:
        """The `evidence` table (fact -> label), checked; labels derived where absent.

        A fact without a label whose every source key is marked secondary in
        [sources] (its text starts with "2ry") is labelled "secondary".
        """
        raw = self.t.get("evidence", {})
        at = lines.key(self.line, "evidence")
        if isinstance(raw, str):
            raw = {"exists": raw}
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise _err(self.path, at, f"{self.what}: 'evidence' must be a string or a table of strings")
        out: dict[str, str] = {}
        for fact, label in raw.items():
            if label not in EVIDENCE:
                raise _err(self.path, at, f"{self.what}: evidence.{fact} = {label!r} is not one of "
                           + ", ".join(EVIDENCE))
            if fact not in src:
                raise _err(self.path, at, f"{self.what}: evidence.{fact} labels a fact with no source.{fact}")
            out[fact] = label
        for fact, keys in src.items():
            names = [k.strip() for k in keys.split(";")]
            if fact not in out and all(known.get(k, "").startswith("2ry") for k in names):
                out[fact] = "secondary"
        return out

    def sources(self, known: Mapping[str, str]) -> dict[str, str]:
        src = self.t.get("source")
        if src is None:
            raise self.fail("missing 'source'")
        if isinstance(src, str):
            src = {"exists": src}
        if not isinstance(src, dict) or not all(isinstance(v, str) for v in src.values()):
            raise self.fail("'source' must be a string or a table of strings")
        for fact, keys in src.items():
            for key in (k.strip() for k in keys.split(";")):
                if key not in known:
                    raise self.fail(f"source key {key!r} (for {fact}) is not defined in [sources]")
        return dict(src)


def _arch_list(r: _Reader, key: str, kind: str) -> tuple[BuildArch, ...] | None:
    raw = r.text(key, required=False)
    if raw is None or raw == UNKNOWN:
        return None
    if kind != "cuda":
        raise r.fail(f"'{key}' is for cu* variants; ROCm targets go in 'arch' as gfx names")
    try:
        return tuple(BuildArch.parse(a) for a in raw.split(";") if a.strip())
    except BadInput as exc:
        raise r.fail(f"'{key}': {exc.message}") from None


def _pythons(r: _Reader, key: str, values: list[str]) -> tuple[tuple[int, int], ...]:
    try:
        return tuple(python_version(v) for v in values)
    except BadInput as exc:
        raise r.fail(f"'{key}': {exc.message}") from None


FAMILY_PACKAGES = ("torch", "torchvision", "torchaudio")


def _requires_python(r: _Reader, src: Mapping[str, str]) -> dict[str, str]:
    """`requires_python = { torch = ">=3.10", torchvision = ">=3.10,!=3.14.1" }`, checked."""
    raw = r.t.get("requires_python", {})
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise r.fail("'requires_python' must be a table of package = \"specifier\"")
    out = {}
    for name, spec in raw.items():
        if name not in FAMILY_PACKAGES:
            raise r.fail(f"requires_python.{name}: one of {', '.join(FAMILY_PACKAGES)}")
        try:
            out[name] = str(SpecifierSet(spec))
        except InvalidSpecifier:
            raise r.fail(f"requires_python.{name}: {spec!r} is not a specifier like >=3.10,!=3.14.1") from None
    if out:
        _need_source(r, src, "requires_python")
    return out


def _freethreaded(r: _Reader, src: Mapping[str, str]) -> dict[str, tuple[tuple[int, int], ...]]:
    """`python_freethreaded = { torch = ["3.13", "3.14"], ... }`: minors with cpXYt wheels."""
    raw = r.t.get("python_freethreaded", {})
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise r.fail("'python_freethreaded' must be a table of package = [\"3.13\", ...]")
    out = {}
    for name, values in raw.items():
        if name not in FAMILY_PACKAGES:
            raise r.fail(f"python_freethreaded.{name}: one of {', '.join(FAMILY_PACKAGES)}")
        if values == ["any"]:  # a py3-none wheel: pure Python, installs on any interpreter
            out[name] = ANY_PYTHON
            continue
        if not all(isinstance(v, str) for v in values):
            raise r.fail(f"python_freethreaded.{name} must list versions like \"3.14\"")
        out[name] = _pythons(r, f"python_freethreaded.{name}", values)
    if out:
        _need_source(r, src, "python_freethreaded")
    return out


def _freethreaded_by_release(r: _Reader, src: Mapping[str, str],
                             torches: list[Version]) -> dict[Version, dict[str, tuple[tuple[int, int], ...]]]:
    """`python_freethreaded_release = { "2.12.0" = { torch = ["3.13", "3.14"], ... } }`: one
    release's own cpXYt minors where the series' releases differ (2.12.0 has cp313t, 2.12.1 has
    none): kept per release, not folded into their common set (issue 24)."""
    raw = r.t.get("python_freethreaded_release", {})
    if not isinstance(raw, dict):
        raise r.fail("'python_freethreaded_release' must be a table of \"X.Y.Z\" = { torch = [...] }")
    out: dict[Version, dict[str, tuple[tuple[int, int], ...]]] = {}
    for release, table in raw.items():
        version = _version(r, release, "python_freethreaded_release")
        if version not in torches:
            raise r.fail(f"python_freethreaded_release.\"{release}\": not a release of this series")
        sub = _Reader({"python_freethreaded": table}, r.path, r.line, r.what)
        out[version] = _freethreaded(sub, src)
    return out


# A package whose wheel is pure Python (py3-none-any): every interpreter, free-threaded too.
ANY_PYTHON: tuple[tuple[int, int], ...] = ((0, 0),)


def _need_source(r: _Reader, src: Mapping[str, str], *facts: str) -> None:
    for fact in facts:
        if fact not in src:
            raise r.fail(f"'{fact}' is stated without a source (add source.{fact})")


def _version(r: _Reader, text: str, key: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise r.fail(f"'{key}': {text!r} is not a version") from None


def parse_matrix(text: str, path: str = "matrix.toml") -> Matrix:
    """Parse and validate matrix TOML text; `MatrixError` on the first problem found."""
    from torchfit._backports import tomllib

    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise _err(path, 0, "nested too deeply to be a matrix") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise _err(path, int(m.group(1)) if m else 0, f"not valid TOML: {exc}") from None
    lines = _Lines(text)
    if doc.get("schema") != 1:
        raise _err(path, 1, "expected 'schema = 1' at the top")
    known = doc.get("sources")
    if not isinstance(known, dict) or not all(isinstance(v, str) for v in known.values()):
        raise _err(path, 0, "missing [sources] table of key = \"where the fact was read\"")

    cuda: dict[str, CudaInfo] = {}
    for i, raw in enumerate(doc.get("cuda", [])):
        r = _Reader(raw, path, lines.of("cuda", i), "[[cuda]]")
        ver = r.text("version") or ""
        src = r.sources(known)
        if ver in cuda:
            raise r.fail(f"CUDA {ver} is listed twice")
        cuda[ver] = CudaInfo(ver, r.dotted("toolkit_driver"), r.dotted("mvc_driver"), "; ".join(src.values()), r.line)
    rocm: dict[str, str] = {}
    for i, raw in enumerate(doc.get("rocm", [])):
        r = _Reader(raw, path, lines.of("rocm", i), "[[rocm]]")
        rocm[r.text("version") or ""] = "; ".join(r.sources(known).values())

    floors: list[CudnnFloor] = []
    for i, raw in enumerate(doc.get("cudnn", [])):
        r = _Reader(raw, path, lines.of("cudnn", i), "[[cudnn]]")
        ver = r.text("version") or ""
        if not re.match(r"^\d+(\.\d+)*$", ver):
            raise r.fail(f"'version' {ver!r} is not a cuDNN version prefix like 9 or 8.5")
        try:
            floor = Arch.parse(r.text("min_compute") or "")
        except BadInput as exc:
            raise r.fail(f"'min_compute': {exc.message}") from None
        src = r.sources(known)
        if any(f.version == ver for f in floors):
            raise r.fail(f"cuDNN {ver} is listed twice")
        floors.append(CudnnFloor(ver, floor, "; ".join(src.values()), r.line))

    builds: list[Build] = []
    variant_no = 0
    for si, sraw in enumerate(doc.get("series", [])):
        s = _Reader(sraw, path, lines.of("series", si), "[[series]]")
        ssrc = s.sources(known)
        sev = s.evidence(ssrc, known, lines)
        torches = [_version(s, v, "torch") for v in s.strlist("torch") or []]
        if not torches:
            raise s.fail("'torch' lists no release")
        s.what = f"[[series]] torch {torches[0]}"
        tvs = s.strlist("torchvision") or []
        tas = s.strlist("torchaudio") or []
        if len(tvs) != len(torches) or len(tas) != len(torches):
            raise s.fail("'torchvision' and 'torchaudio' need one entry per torch release")
        pys = _pythons(s, "python", s.strlist("python") or [])
        pys_arm = _pythons(s, "python_aarch64", s.strlist("python_aarch64", required=False) or [])
        pys_comp_raw = s.strlist("python_companions", required=False)
        pys_comp = _pythons(s, "python_companions", pys_comp_raw) if pys_comp_raw is not None else None
        if pys_comp is not None:
            _need_source(s, ssrc, "python_companions")
        requires_python = _requires_python(s, ssrc)
        freethreaded = _freethreaded(s, ssrc)
        by_release = _freethreaded_by_release(s, ssrc, torches)
        glibc = s.dotted("glibc")
        glibc_arm = s.dotted("glibc_aarch64", required=False) if "glibc_aarch64" in s.t else glibc
        pypi = s.text("pypi", required=False)
        _need_source(s, ssrc, "python", "glibc", "companions")
        if pypi:
            _need_source(s, ssrc, "pypi")
        variants = sraw.get("variant", [])
        if not isinstance(variants, list) or not variants:
            raise s.fail("no [[series.variant]] entries")
        for vraw in variants:
            v = _Reader(vraw, path, lines.of("series.variant", variant_no), "[[series.variant]]")
            variant_no += 1
            name = v.text("name") or ""
            v.what = f"torch {torches[0].major}.{torches[0].minor} {name}"
            if not VARIANT_RE.match(name):
                raise v.fail(f"variant name {name!r} is not cuXYZ, rocmX.Y or cpu")
            kind = "cuda" if name.startswith("cu") else "rocm" if name.startswith("rocm") else "cpu"
            vsrc = v.sources(known)
            vev = v.evidence(vsrc, known, lines)
            _need_source(v, vsrc, "exists")
            cu = v.text("cuda", required=kind == "cuda") if kind == "cuda" else None
            if kind != "cuda" and "cuda" in v.t:
                raise v.fail("'cuda' is only for cu* variants")
            if cu is not None and cu not in cuda:
                raise v.fail(f"CUDA {cu} has no [[cuda]] entry (driver floors)")
            ro = v.text("rocm", required=True) if kind == "rocm" else None
            if ro is not None and ro not in rocm:
                raise v.fail(f"ROCm {ro} has no [[rocm]] entry")
            cudnn = v.text("cudnn", required=False) if kind != "cpu" else None
            nccl = v.text("nccl", required=False) if kind != "cpu" else None
            for fact, val in (("cudnn", cudnn), ("nccl", nccl)):
                if val not in (None, UNKNOWN):
                    _need_source(v, vsrc, fact)
            platforms = tuple(v.strlist("platforms") or [])
            bad = [p for p in platforms if p not in PLATFORMS]
            if bad or not platforms:
                raise v.fail(f"'platforms' must list some of {', '.join(PLATFORMS)}")
            arch = _arch_list(v, "arch", kind) if kind == "cuda" else None
            arch_arm = _arch_list(v, "arch_aarch64", kind) if kind == "cuda" else None
            gfx: tuple[str, ...] | None = None
            if kind == "rocm":
                raw_gfx = v.text("arch", required=False)
                if raw_gfx not in (None, UNKNOWN):
                    gfx = tuple(g.strip() for g in (raw_gfx or "").split(";") if g.strip())
                    if not all(re.match(r"^gfx[0-9a-f]+$", g) for g in gfx):
                        raise v.fail("'arch' of a ROCm variant must be gfx targets like gfx942")
            if kind == "cpu" and "arch" in v.t:
                raise v.fail("a cpu variant has no 'arch'")
            if kind == "cuda" and "aarch64" in platforms and "arch_aarch64" not in v.t:
                raise v.fail("lists aarch64 but has no 'arch_aarch64'")
            if v.t.get("arch", UNKNOWN) != UNKNOWN:
                _need_source(v, vsrc, "arch")
            vglibc = v.dotted("glibc", required=False) if "glibc" in v.t else glibc
            if "glibc" in v.t:
                _need_source(v, vsrc, "glibc")
            vglibc_arm = v.dotted("glibc_aarch64", required=False) if "glibc_aarch64" in v.t else glibc_arm
            only = v.strlist("only", required=False)
            only_v = {_version(v, o, "only") for o in only} if only else None
            if only_v and not only_v <= set(torches):
                raise v.fail("'only' names a release the series does not list")
            why = v.t.get("unknown", {})
            if not isinstance(why, dict) or not all(isinstance(x, str) for x in why.values()):
                raise _err(path, lines.key(v.line, "unknown"), f"{v.what}: 'unknown' must be a table of "
                           "fact = \"why it is unknown\"")
            for fact in why:
                if v.t.get(fact) != UNKNOWN:
                    raise _err(path, lines.key(v.line, "unknown"),
                               f"{v.what}: unknown.{fact} explains a fact that is not \"unknown\"")
            has_audio = v.t.get("torchaudio", True)
            if not isinstance(has_audio, bool):
                raise v.fail("'torchaudio' must be true or false")
            if "torchaudio" in v.t:
                _need_source(v, vsrc, "torchaudio")
            index_url = v.text("index_url", DEFAULT_INDEX) or DEFAULT_INDEX
            for t, tv, ta in zip(torches, tvs, tas):
                if only_v is not None and t not in only_v:
                    continue
                builds.append(
                    Build(
                        torch=t,
                        variant=name,
                        kind=kind,
                        cuda=cu,
                        rocm=ro,
                        cudnn=None if cudnn in (None, UNKNOWN) else cudnn,
                        nccl=None if nccl in (None, UNKNOWN) else nccl,
                        arch=arch,
                        arch_aarch64=arch_arm,
                        gfx=gfx,
                        platforms=platforms,
                        glibc=vglibc,
                        glibc_aarch64=vglibc_arm,
                        pythons=pys,
                        pythons_aarch64=pys_arm or pys,
                        pythons_companions=pys_comp,
                        requires_python=requires_python,
                        pythons_freethreaded={**freethreaded, **by_release.get(t, {})},
                        torchvision=tv or None,
                        torchaudio=(ta or None) if has_audio else None,
                        index_url=index_url.replace("{variant}", name),
                        pypi_default=name == pypi,
                        sources={**ssrc, **vsrc},
                        line=v.line,
                        series_line=s.line,
                        evidence={**sev, **vev},
                        unknown_why=dict(why),
                    )
                )
    if not builds:
        raise _err(path, 0, "no [[series]] with builds")
    seen: dict[tuple[Version, str], Build] = {}
    for b in builds:
        if (b.torch, b.variant) in seen:
            raise _err(path, b.line, f"{b.label} is listed twice (also line {seen[(b.torch, b.variant)].line})")
        seen[(b.torch, b.variant)] = b
    builds.sort(key=lambda b: b.torch, reverse=True)
    return Matrix(tuple(builds), cuda, rocm, dict(known), path, tuple(floors))


def read_matrix_text(path: str | None = None) -> tuple[str, str]:
    """(text, name) of the embedded matrix (name "matrix.toml") or of the file `path`."""
    if path is None:
        return read_data_text("matrix.toml"), "matrix.toml"
    from torchfit.inputs import MAX_MATRIX_BYTES, read_text_file

    try:
        return read_text_file(path, "--matrix", limit=MAX_MATRIX_BYTES), path
    except MatrixError:
        raise
    except BadInput as exc:
        raise MatrixError(path, None, exc.message.split(": ", 1)[-1]) from None


def load_matrix(path: str | None = None) -> Matrix:
    """Read the embedded matrix (or `path`); `MatrixError` with file:line on a bad entry."""
    return parse_matrix(*read_matrix_text(path))


# --- the validated matrix as plain JSON data (for a cache of the parse) -------------------
#
# parse_matrix costs ~40 ms (tomllib, then validation); rebuilding the same values
# from JSON costs a few. The codec below is exact: matrix_from_data(matrix_to_data(m))
# equals m field by field (a test holds it), and it is strict: data of another shape
# (a Build field added or renamed since the data was written) raises ValueError.

_DOTTED_FIELDS = ("glibc", "glibc_aarch64")
_ARCH_FIELDS = ("arch", "arch_aarch64")
_PAIRS_FIELDS = ("pythons", "pythons_aarch64", "pythons_companions")
_TUPLE_FIELDS = ("gfx", "platforms")
_MAP_FIELDS = ("sources", "evidence", "unknown_why", "requires_python")
_BUILD_FIELDS = tuple(f.name for f in fields(Build))


def _dotted_data(d: Dotted | None) -> list[Any] | None:
    return None if d is None else [list(d.parts), d.text]


def _dotted_value(x: Any) -> Dotted | None:
    return None if x is None else Dotted(tuple(int(p) for p in x[0]), str(x[1]))


def _arch_value(x: Any) -> Arch:
    return Arch(int(x[0]), int(x[1]), str(x[2]))


def _build_data(b: Build) -> JsonObject:
    out: JsonObject = {}
    for name in _BUILD_FIELDS:
        val = getattr(b, name)
        if name == "torch":
            val = str(val)
        elif name in _DOTTED_FIELDS:
            val = _dotted_data(val)
        elif name in _ARCH_FIELDS:
            val = None if val is None else [[*a.arch, a.ptx] for a in val]
        elif name in _PAIRS_FIELDS:
            val = None if val is None else [list(p) for p in val]
        elif name in _TUPLE_FIELDS:
            val = None if val is None else list(val)
        elif name in _MAP_FIELDS:
            val = dict(val)
        elif name == "pythons_freethreaded":
            val = {k: [list(p) for p in v] for k, v in val.items()}
        elif not (val is None or isinstance(val, (str, int, bool))):
            raise ValueError(f"Build.{name}: no JSON codec for {type(val).__name__}")
        out[name] = val
    return out


def _build_value(d: Any, versions: dict[str, Version]) -> Build:
    if not isinstance(d, dict) or set(d) != set(_BUILD_FIELDS):
        raise ValueError("a build of another shape")
    kw: dict[str, Any] = {}
    for name, val in d.items():
        if name == "torch":
            val = versions.get(val) or versions.setdefault(val, Version(val))
        elif name in _DOTTED_FIELDS:
            val = _dotted_value(val)
        elif name in _ARCH_FIELDS:
            val = None if val is None else tuple(BuildArch(_arch_value(a[:3]), bool(a[3])) for a in val)
        elif name in _PAIRS_FIELDS:
            val = None if val is None else tuple((int(p[0]), int(p[1])) for p in val)
        elif name in _TUPLE_FIELDS:
            val = None if val is None else tuple(val)
        elif name in _MAP_FIELDS:
            val = dict(val)
        elif name == "pythons_freethreaded":
            val = {str(k): tuple((int(p[0]), int(p[1])) for p in v) for k, v in val.items()}
        kw[name] = val
    return Build(**kw)


def matrix_to_data(m: Matrix) -> JsonObject:
    """The validated matrix as JSON-ready data (lists, dicts, str, int, bool, None)."""
    return {
        "builds": [_build_data(b) for b in m.builds],
        "cuda": {k: [c.version, _dotted_data(c.toolkit_driver), _dotted_data(c.mvc_driver), c.source, c.line]
                 for k, c in m.cuda.items()},
        "rocm": dict(m.rocm),
        "sources": dict(m.sources),
        "path": m.path,
        "cudnn_floors": [[f.version, list(f.min_compute), f.source, f.line] for f in m.cudnn_floors],
    }


def matrix_from_data(data: Any) -> Matrix:
    """The `Matrix` that `matrix_to_data` wrote; ValueError (or TypeError/KeyError) on other data."""
    if not isinstance(data, dict) or set(data) != {"builds", "cuda", "rocm", "sources", "path", "cudnn_floors"}:
        raise ValueError("matrix data of another shape")
    versions: dict[str, Version] = {}
    builds = tuple(_build_value(b, versions) for b in data["builds"])
    cuda = {str(k): CudaInfo(str(v[0]), _dotted_value(v[1]), _dotted_value(v[2]), str(v[3]), int(v[4]))
            for k, v in data["cuda"].items()}
    floors = tuple(CudnnFloor(str(f[0]), _arch_value(f[1]), str(f[2]), int(f[3])) for f in data["cudnn_floors"])
    return Matrix(builds, cuda, dict(data["rocm"]), dict(data["sources"]), str(data["path"]), floors)


@dataclass(**FROZEN)
class Unknown:
    """One fact still "unknown" in one matrix entry, the builds it covers and what that blocks."""

    fact: str  # "arch" | "arch_aarch64" | "glibc" | "glibc_aarch64" | "cudnn" | "nccl" | "toolkit_driver" | ...
    builds: tuple[Build, ...]  # empty for a [[cuda]] row
    line: int
    blocks: str
    reason: str

    @property
    def label(self) -> str:
        if not self.builds:
            return f"[[cuda]] line {self.line}"
        first = self.builds[0]
        versions = ", ".join(sorted({str(b.torch) for b in self.builds}, key=Version))
        return f"torch {versions} {first.variant}"


_NO_REASON = "no source has been read for it"


def iter_unknowns(matrix: Matrix) -> Iterator[Unknown]:
    """Every fact the matrix still calls "unknown", newest build first, with what it blocks.

    RCCL (the `nccl` of a ROCm variant) is not tracked, so it is not listed.
    """
    groups: dict[tuple[int, str], list[Build]] = {}
    for b in matrix.builds:
        facts: list[str] = []
        if b.kind == "cuda":
            facts += ["arch"] if b.arch is None else []
            facts += ["arch_aarch64"] if "aarch64" in b.platforms and b.arch_aarch64 is None else []
            facts += ["cudnn"] if b.cudnn is None else []
            facts += ["nccl"] if b.nccl is None else []
        if b.kind == "rocm" and b.gfx is None:
            facts.append("arch")
        if "x86_64" in b.platforms and b.glibc is None:
            facts.append("glibc")
        if "aarch64" in b.platforms and b.glibc_aarch64 is None:
            facts.append("glibc_aarch64")
        for fact in facts:
            groups.setdefault((b.line, fact), []).append(b)
    floor = matrix.highest_cudnn_floor
    for (line, fact), builds in groups.items():
        b = builds[0]
        yield Unknown(fact, tuple(builds), line, _blocks(b, fact, floor), b.unknown_why.get(fact, _NO_REASON))
    for info in matrix.cuda.values():
        for fact, val in (("toolkit_driver", info.toolkit_driver), ("mvc_driver", info.mvc_driver)):
            if val is None:
                what = ("every host: no driver is known to run it" if fact == "mvc_driver"
                        else "--strict-driver and PTX JIT: no driver counts as fully supporting it")
                yield Unknown(fact, (), info.line, f"CUDA {info.version}: {what}", _NO_REASON)


def _blocks(b: Build, fact: str, floor: CudnnFloor | None) -> str:
    """What an unknown `fact` of build `b` does to resolution (the conservative reading)."""
    if fact == "arch":
        vendor = "AMD" if b.kind == "rocm" else "NVIDIA"
        where = "" if b.kind == "rocm" else " on x86_64"
        return f"refused for every {vendor} GPU{where} (an unknown arch list covers no GPU)"
    if fact == "arch_aarch64":
        return "refused for every NVIDIA GPU on aarch64 (an unknown arch list covers no GPU)"
    if fact in ("glibc", "glibc_aarch64"):
        return f"taken as glibc {CONSERVATIVE_GLIBC}: refused on hosts with an older glibc"
    if fact == "cudnn":
        held = f" (compute capability >= {floor.min_compute})" if floor else ""
        return f"held to the strictest cuDNN GPU floor{held}: refused for older GPUs; plans warn"
    return "blocks nothing: plans warn, and verify reads the real version"
