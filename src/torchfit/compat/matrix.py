"""The only reader of data/matrix.toml: TOML in, typed and validated `Matrix` out.

Each `[[series.variant]]` of the file expands to one `Build` per patch release
(torch 2.9.1 cu128 is one build). Anything malformed raises `MatrixError` naming
`matrix.toml:LINE` and what is wrong; a fact written "unknown" becomes `None`,
and the resolver treats `None` conservatively. The format is documented in
docs/matrix-format.md.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.versions import BuildArch, Dotted, python_version
from torchfit.errors import BadInput, MatrixError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 only
    import tomli as tomllib

UNKNOWN = "unknown"
DEFAULT_INDEX = "https://download.pytorch.org/whl/{variant}"
# An unknown glibc floor is taken as the highest floor any torch wheel has had
# (manylinux_2_28 since 2.7, PyTorch PR #143423), so it never admits a wheel the
# host cannot load.
CONSERVATIVE_GLIBC = Dotted.parse("2.28")
PLATFORMS = ("x86_64", "aarch64")
_VARIANT = re.compile(r"^(cu\d{3}|rocm\d+\.\d+(\.\d+)?|cpu)$")


@dataclass(**FROZEN)
class CudaInfo:
    """One CUDA minor version: the driver its full toolkit needs and its family's MVC floor."""

    version: str
    toolkit_driver: Dotted | None
    mvc_driver: Dotted | None
    source: str
    line: int


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


@dataclass(**FROZEN)
class Matrix:
    """The whole matrix: builds newest first, CUDA and ROCm tables, the source keys."""

    builds: tuple[Build, ...]
    cuda: Mapping[str, CudaInfo]
    rocm: Mapping[str, str]
    sources: Mapping[str, str]
    path: str

    @property
    def releases(self) -> tuple[Version, ...]:
        return tuple(sorted({b.torch for b in self.builds}, reverse=True))


class _Lines:
    """Line numbers of `[[table]]` headers, by order of appearance (tomllib has none)."""

    def __init__(self, text: str) -> None:
        self.headers: dict[str, list[int]] = {}
        for no, line in enumerate(text.splitlines(), 1):
            m = re.match(r"^\s*\[\[\s*([A-Za-z0-9_.]+)\s*\]\]", line)
            if m:
                self.headers.setdefault(m.group(1), []).append(no)

    def of(self, table: str, n: int) -> int:
        lines = self.headers.get(table, [])
        return lines[n] if n < len(lines) else 0


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
    try:
        doc = tomllib.loads(text)
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

    builds: list[Build] = []
    variant_no = 0
    for si, sraw in enumerate(doc.get("series", [])):
        s = _Reader(sraw, path, lines.of("series", si), "[[series]]")
        ssrc = s.sources(known)
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
            if not _VARIANT.match(name):
                raise v.fail(f"variant name {name!r} is not cuXYZ, rocmX.Y or cpu")
            kind = "cuda" if name.startswith("cu") else "rocm" if name.startswith("rocm") else "cpu"
            vsrc = v.sources(known)
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
            has_audio = v.t.get("torchaudio", True)
            if not isinstance(has_audio, bool):
                raise v.fail("'torchaudio' must be true or false")
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
                        torchvision=tv or None,
                        torchaudio=(ta or None) if has_audio else None,
                        index_url=index_url.replace("{variant}", name),
                        pypi_default=name == pypi,
                        sources={**ssrc, **vsrc},
                        line=v.line,
                        series_line=s.line,
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
    return Matrix(tuple(builds), cuda, rocm, dict(known), path)


def load_matrix(path: str | None = None) -> Matrix:
    """Read the embedded matrix (or `path`); `MatrixError` with file:line on a bad entry."""
    if path is None:
        text = resources.files("torchfit").joinpath("data/matrix.toml").read_text("utf-8")
        return parse_matrix(text, "matrix.toml")
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise MatrixError(path, None, f"cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise MatrixError(path, None, "not UTF-8 text") from None
    return parse_matrix(text, path)
