"""The only reader of data/companions.toml: packages whose binaries are built against one torch.

xformers, vllm, torchao, torchcodec, torch-tensorrt, flash-attn, PyG's pyg-lib /
torch-scatter / torch-sparse / torch-cluster, bitsandbytes and triton ship compiled
code that works with one torch build only, and each says so in its own way (its
`binding`):

- ``metadata-pin``: the wheel's METADATA requires it (xformers 0.0.32.post2:
  ``Requires-Dist: torch==2.8.0``; torch-tensorrt 2.8.0: ``torch<2.9.0,>=2.8.0``);
- ``local-version``: the wheel's local version names torch, CUDA and the C++ ABI
  (flash-attn's GitHub release assets ``flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-…``);
- ``find-links``: one page of wheels per torch build (PyG's
  ``https://data.pyg.org/whl/torch-2.8.0+cu128.html``);
- ``none``: nothing in the artifact binds it (torchao, torchcodec, triton: torch
  pins triton, not the reverse). The torch a release needs is then a documented
  fact or unknown.

The API (what the resolver calls; every value is frozen):

- ``load_companions(path=None) -> Companions`` (the packaged file, parsed once per
  process; ``torchfit.cache.load_companions`` keeps it across processes, like
  ``cache.load_matrix``; ``parse_companions(text, path)`` for a text);
- ``Companions.get(name) -> Companion | None`` (PEP 503-normalized name);
- ``Companion``: ``name``, ``binding``, ``published``, ``route``/``route_kind``,
  ``releases`` (newest first; one version may appear once per torch line when
  its binaries are published per torch, as PyG's are), ``source``;
- ``CompanionRelease``: ``version``, ``torch`` (SpecifierSet, None when unknown or
  when only the ``prebuilt`` wheels name it), ``variants`` (None when unknown),
  ``pypi_variant``, ``python`` (wheel tags), ``requires_python``, ``cxx11abi``,
  ``sdist_only``, ``build_needs``, ``build_time``, ``prebuilt``, ``evidence``,
  ``source``;
- ``Companions.releases_for(name, *, torch, variant, python, cxx11abi=None)``: the
  releases with a binary for that torch build, newest first, each with
  ``prebuilt`` narrowed to the wheels that match;
- ``Companions.routing(name, *, torch, variant) -> str | None``: the index or
  find-links page that has the matching binary, None when PyPI's is right (or no
  index is known: a ``prebuilt`` wheel is then named by its URL);
- ``format_sdist_warning(release) -> str``: what building the sdist needs, how
  long it takes, and the prebuilt wheel to use instead.

Anything malformed raises ``CompanionsError`` naming ``companions.toml:LINE``. A
fact written "unknown" is ``None``; each stated fact names its source keys, and
may carry an evidence label like matrix.toml's (``measured`` > ``primary`` >
``secondary`` > ``cycle``). The format is in docs/matrix-format.md.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit._backports import FROZEN
from torchfit.jsontypes import JsonObject

if TYPE_CHECKING:
    from torchfit.compat.matrix import Build

from torchfit.compat.datafiles import read_data_text
from torchfit.compat.matrix import (
    EVIDENCE,
    UNKNOWN,
    VARIANT_RE,
    _Lines,
    _need_source,
    _Reader,
    _version,
)
from torchfit.compat.versions import python_version
from torchfit.errors import BadInput, CompanionsError, MatrixError

Binding = Literal["metadata-pin", "local-version", "find-links", "none"]
BINDINGS: tuple[Binding, ...] = ("metadata-pin", "local-version", "find-links", "none")
RouteKind = Literal["index", "find-links"]
PYPI = "pypi"
EVIDENCE_LABELS = EVIDENCE  # the labels of matrix.toml, strongest first
# A wheel's Python tag as the data file writes it: cp312, cp39-abi3, py3, py39.
_PYTAG = re.compile(r"^(cp|py)3(\d{1,2})?(-abi3)?$")
# Placeholders a route or prebuilt URL template may use.
_ROUTE_FIELDS = frozenset({"torch", "variant"})
_PREBUILT_FIELDS = frozenset({"version", "cuda", "torch", "cxx11abi", "python"})


@dataclass(**FROZEN)
class Prebuilt:
    """One prebuilt wheel published outside PyPI (a GitHub release asset)."""

    url: str
    torch: str  # the torch minor it was built against: "2.8"
    cuda: str  # the CUDA major: "12"
    python: str  # "cp312"
    cxx11abi: bool

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1].replace("%2B", "+")


@dataclass(**FROZEN)
class CompanionRelease:
    """The binaries of one release (for one torch line when they are published per torch)."""

    name: str
    version: Version
    torch: SpecifierSet | None  # None: unknown, or named only by the prebuilt wheels
    variants: tuple[str, ...] | None  # torch variants with a binary ("cu128", "cpu"); None: unknown
    pypi_variant: str | None  # the variant the PyPI wheel was built for; None: no binary on PyPI or unknown
    python: tuple[str, ...] | None  # wheel Python tags ("cp39-abi3", "cp312", "py3"); None: unknown
    requires_python: SpecifierSet | None
    cxx11abi: bool | None
    sdist_only: bool  # PyPI has no Linux wheel of this release, only the sdist
    build_needs: str | None
    build_time: str | None
    prebuilt: tuple[Prebuilt, ...]
    evidence: Mapping[str, str]  # fact -> label (measured, primary, secondary, cycle)
    source: Mapping[str, str]  # fact -> source keys ("META xformers 0.0.32.post2")
    unknown_why: Mapping[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def origin(self) -> str:
        """Where this release's facts live, for messages: 'companions.toml:88'."""
        return f"companions.toml:{self.line}"

    def supports_python(self, python: str) -> bool:
        """Whether a binary of this release installs on CPython `python` ("3.12").

        Unknown tags (None) do not exclude; `requires_python` does when stated.
        """
        major, minor = python_version(python)
        if self.requires_python is not None and not self.requires_python.contains(
                f"{major}.{minor}", prereleases=True):
            return False
        if self.python is None:
            return True
        return any(_tag_fits(tag, minor) for tag in self.python)


@dataclass(**FROZEN)
class Companion:
    """One ABI-bound package: how it binds to torch, where its binaries live, its releases."""

    name: str
    binding: Binding
    published: tuple[str, ...]  # "pypi", "https://download.pytorch.org/whl/{variant}", ...
    route: str | None  # template of the index/find-links page for variants PyPI lacks
    route_kind: RouteKind | None
    releases: tuple[CompanionRelease, ...]  # newest first
    source: Mapping[str, str]
    line: int = 0


@dataclass(**FROZEN)
class Companions:
    """Every companion package of the data file, by normalized name."""

    packages: Mapping[str, Companion]
    sources: Mapping[str, str]
    path: str
    cxx11abi_since: Version | None = None  # torch wheels use the C++11 ABI from this release on

    def get(self, name: str) -> Companion | None:
        return self.packages.get(canonicalize_name(name))

    def torch_cxx11abi(self, torch: Version) -> bool | None:
        """Whether the PyPI/download.pytorch.org build of `torch` uses the C++11 ABI; None if unknown."""
        if self.cxx11abi_since is None:
            return None
        return Version(torch.public) >= self.cxx11abi_since

    def torch_of(self, rel: CompanionRelease) -> SpecifierSet | None:
        """The torch `rel`'s binary needs: its stated fact, else (binding ``none`` only: the
        METADATA is silent) the floor of the newest older release whose torch is known.

        A companion built against one torch per release never goes back to an older torch in a
        later release (torchcodec's and torchao's tables: each row's torch at or above the row
        below it), so torchcodec 0.17.0, unread, still needs torch >= 2.11 as 0.12.0 does.
        Only a floor is inferred, never a pairing: this only narrows (issue 33).
        """
        if rel.torch is not None:
            return rel.torch
        comp = self.get(rel.name)
        if comp is None or comp.binding != "none":
            return None
        older = next((r for r in comp.releases if r.version < rel.version and r.torch is not None), None)
        floor = _floor(older.torch) if older is not None and older.torch is not None else None
        return SpecifierSet(f">={floor}") if floor is not None else None

    def torch_exclusions(self, torch: Sequence[Version]) -> list[str]:
        """uv constraints keeping out the releases of METADATA-silent companions (binding ``none``:
        torchao, torchcodec, ...) whose binary needs a torch none of `torch` is: entered before
        uv solves, so a pinned torch holds the companion (torch==2.9.1 keeps torchcodec at 0.9.x)."""
        publics = [Version(v.public) for v in torch]
        out = []
        for comp in self.packages.values():
            if comp.binding != "none":
                continue
            fits: dict[Version, bool] = {}
            for rel in comp.releases:
                spec = self.torch_of(rel)
                ok = spec is None or any(spec.contains(v, prereleases=True) for v in publics)
                fits[rel.version] = fits.get(rel.version, False) or ok
            bad = [v for v, ok in fits.items() if not ok]
            if bad:
                out.append(comp.name + ",".join(f"!={v}" for v in bad))
        return out

    def newer_for_other_torch(self, name: str, version: Version, torch: Version) -> list[CompanionRelease]:
        """Releases of a METADATA-silent companion newer than `version` whose binary needs
        another torch than `torch`: why the plan's release is not the newest (said in the plan)."""
        comp = self.get(name)
        if comp is None or comp.binding != "none":
            return []
        public = Version(torch.public)
        out = []
        for rel in comp.releases:
            spec = self.torch_of(rel)
            if rel.version > version and spec is not None and not spec.contains(public, prereleases=True):
                out.append(rel)
        return out

    def torch_needed(self, name: str, spec: SpecifierSet) -> list[CompanionRelease] | None:
        """The releases of a METADATA-silent companion that the user's `spec` admits, when each
        names the torch its binary needs (so the pin holds torch); None when any is unknown."""
        comp = self.get(name)
        if comp is None or comp.binding != "none" or not spec:
            return None
        rels = [r for r in comp.releases if spec.contains(r.version, prereleases=True)]
        if not rels or any(self.torch_of(r) is None for r in rels):
            return None
        return rels

    def releases_for(self, name: str, *, torch: Version, variant: str, python: str,
                     cxx11abi: bool | None = None) -> tuple[CompanionRelease, ...]:
        """Releases of `name` with a binary for torch `torch` in `variant`, on CPython `python`.

        Newest first. A release whose binaries are per variant needs `variant` listed
        (unknown variants do not exclude); one with only an sdist on PyPI is kept
        when a prebuilt wheel matches, and comes back with `prebuilt` narrowed to
        the matching wheels (`cxx11abi` defaults to the torch build's own ABI).
        Unknown package: empty.
        """
        comp = self.get(name)
        if comp is None:
            return ()
        abi = self.torch_cxx11abi(torch) if cxx11abi is None else cxx11abi
        public = Version(torch.public)
        out: list[CompanionRelease] = []
        for rel in comp.releases:
            if not rel.supports_python(python):
                continue
            needs = self.torch_of(rel)
            if needs is not None and not needs.contains(public, prereleases=True):
                continue
            wheels = tuple(p for p in rel.prebuilt if _prebuilt_fits(p, public, variant, python, abi))
            if rel.prebuilt and rel.torch is None and not wheels:
                continue
            if rel.torch is None and not rel.prebuilt and comp.binding != "none":
                continue  # nothing says which torch its binary needs
            has_binary = bool(wheels) or (not rel.sdist_only and (rel.variants is None or variant in rel.variants))
            if not has_binary:
                continue
            out.append(dataclasses.replace(rel, prebuilt=wheels) if rel.prebuilt else rel)
        return tuple(out)

    def routing(self, name: str, *, torch: Version, variant: str) -> str | None:
        """The index or find-links URL that has `name`'s binary for this torch build.

        None when PyPI's wheel is the one (its `pypi_variant` is `variant`, or the
        package has no route), or when no release has a binary for the build.
        """
        comp = self.get(name)
        if comp is None or comp.route is None:
            return None
        public = Version(torch.public)
        for rel in comp.releases:
            if rel.torch is None or not rel.torch.contains(public, prereleases=True):
                continue
            if rel.pypi_variant == variant and not rel.sdist_only:
                return None
            if rel.variants is not None and variant in rel.variants:
                return comp.route.format(torch=public, variant=variant)
        return None


def _floor(spec: SpecifierSet) -> Version | None:
    """The lowest torch `spec` admits, where a specifier states it (>=, ==, ~=, ==X.*)."""
    lows = [Version(s.version.removesuffix(".*")) for s in spec if s.operator in (">=", "==", "~=", "===")]
    lows += [Version(s.version) for s in spec if s.operator == ">"]
    return max(lows) if lows else None


# The base of PyG's wheel pages as companions.toml's routes name it (PYG-INDEX, TORCH-SCATTER-README):
# a mirror of it (`TORCHFIT_PYG_URL`, read at the edge) stands in for this prefix.
PYG_PAGES = "https://data.pyg.org/whl"


def find_links_pages(companions: Companions, names: Sequence[str], *, torch: Version, variant: str,
                     base: str | None = None) -> dict[str, str] | None:
    """name -> the project's own wheel page for this torch build, for each of `names` whose
    binaries are published one page per torch build (a `find-links` route: PyG's
    `torch-2.8.0+cu128.html`); `base` replaces `PYG_PAGES` (a mirror). {} when none of
    `names` is published so; None when one is but has no page for this build (companions.toml
    lists no binary of it for that torch and variant).
    """
    out: dict[str, str] = {}
    for name in names:
        comp = companions.get(name)
        if comp is None or comp.route_kind != "find-links":
            continue
        page = companions.routing(name, torch=torch, variant=variant)
        if page is None:
            return None
        if base and page.startswith(PYG_PAGES + "/"):
            page = base.rstrip("/") + page[len(PYG_PAGES):]
        out[comp.name] = page
    return out


def _tag_fits(tag: str, minor: int) -> bool:
    """cp312 fits 3.12 only; cp39-abi3 fits 3.9 and later; py3 fits all; py39 fits 3.9 and later."""
    m = _PYTAG.match(tag)
    if m is None:
        return False
    kind, num, abi3 = m.group(1), m.group(2), m.group(3)
    if num is None:
        return True
    if kind == "cp" and not abi3:
        return int(num) == minor
    return int(num) <= minor


def _cuda_major(variant: str) -> str | None:
    """cu128 -> "12", cu130 -> "13"; None for cpu and ROCm."""
    m = re.match(r"^cu(\d+)(\d)$", variant)
    return m.group(1) if m else None


def _prebuilt_fits(p: Prebuilt, torch: Version, variant: str, python: str, abi: bool | None) -> bool:
    major, minor = python_version(python)
    if p.torch != f"{torch.major}.{torch.minor}" or p.cuda != _cuda_major(variant):
        return False
    if p.python != f"cp{major}{minor}":
        return False
    return abi is None or p.cxx11abi == abi


def companion_notes(companions: Companions, build: Build, python: str,
                    packages: Sequence[tuple[str, Version]], *, off_torch_index: Collection[str] = (),
                    torch_index: str = "the torch index",
                    pages: Mapping[str, str] | None = None) -> tuple[list[str], list[str], list[str]]:
    """What companions.toml says of a plan's ABI-bound packages for its torch `build`.

    (reasons, warnings, routed): a binary the torch index serves for this variant (PyPI's
    is another CUDA: xformers 0.0.32.post2 on PyPI is cu128) is taken from the torch index,
    the family's own source (`routed`), unless that source lacks it (`off_torch_index`: a
    mirror of the family only), when it comes from the user's other sources, said; a binary
    on the project's own page (PyG's) is said where it came from there (`pages`: name -> page),
    named where it did not; a release with only an sdist
    gets the warning of what its build needs; no binary for the build at all is said.
    """
    from torchfit.compat.matrix import DEFAULT_INDEX

    reasons: list[str] = []
    warnings: list[str] = []
    routed: list[str] = []
    for name, version in packages:
        comp = companions.get(name)
        if comp is None:
            continue
        label = f"{comp.name} {version}"
        fits = companions.releases_for(name, torch=build.torch, variant=build.variant, python=python)
        mine = [r for r in fits if r.version == version]
        if any(r.sdist_only for r in mine) or (not mine and any(r.version == version and r.sdist_only
                                                               for r in comp.releases)):
            rel = mine[0] if mine else next(r for r in comp.releases if r.version == version)
            warnings.append(format_sdist_warning(rel))
        elif not mine and comp.releases and any(r.version == version for r in comp.releases):
            warnings.append(f"{label}: companions.toml knows no binary of it for {build.label} on Python "
                            f"{python}; newest that has one: {fits[0].label if fits else 'none'}")
        route = companions.routing(name, torch=build.torch, variant=build.variant)
        if route and comp.route == DEFAULT_INDEX and comp.name in off_torch_index:
            pypi = next((r.pypi_variant for r in comp.releases if r.version == version and r.pypi_variant), None)
            warnings.append(f"{label}: not on the torch index ({torch_index}; download.pytorch.org has its "
                            f"{build.variant} binary): taken from your other sources as uv found it"
                            + (f" (PyPI's wheel of it is a {pypi} build)" if pypi else ""))
        elif route and comp.route == DEFAULT_INDEX:
            routed.append(comp.name)
            reasons.append(f"{label}: its {build.variant} binary comes from the torch index, like torch "
                           f"(PyPI's wheel is another build; {comp.source.get('route', 'companions.toml')})")
        elif comp.name in (pages or {}):
            reasons.append(f"{label}: from {(pages or {})[comp.name]}, its own wheel page for torch {build.torch} "
                           f"{build.variant} (uv was given it for {comp.name} alone; "
                           f"{comp.source.get('route', 'companions.toml')})")
        elif route:
            warnings.append(f"{label}: its {build.variant} binary for torch {build.torch} is on {route} "
                            "(not PyPI): give it to install with --find-links/--extra-index-url")
    return reasons, warnings, routed


def format_sdist_warning(release: CompanionRelease) -> str:
    """The line to show before building `release` from its sdist.

    Names what the build needs and how long it takes, and the prebuilt wheel to use
    instead when `release.prebuilt` holds one (as `releases_for` narrows it).
    """
    parts = [f"{release.label} has only a source distribution on PyPI: installing it compiles it"]
    needs = release.build_needs or "a compiler toolchain whose needs were not recorded"
    parts.append(f"; the build needs {needs}")
    if release.build_time:
        parts.append(f"; it takes {release.build_time}")
    if release.prebuilt:
        p = release.prebuilt[0]
        parts.append(f". A prebuilt wheel matches this torch: {p.url}")
    else:
        parts.append(". No prebuilt wheel for this torch build is recorded")
    return "".join(parts)


# ---------------------------------------------------------------------------
# Reading the file
# ---------------------------------------------------------------------------


def _spec(r: _Reader, key: str) -> SpecifierSet | None:
    raw = r.text(key, required=False)
    if raw is None or raw == UNKNOWN:
        return None
    try:
        return SpecifierSet(raw)
    except InvalidSpecifier:
        raise r.fail(f"'{key}': {raw!r} is not a version specifier like ==2.8.0 or >=2.8,<2.9") from None


def _optional_list(r: _Reader, key: str) -> list[str] | None:
    if r.t.get(key) == UNKNOWN:
        return None
    return r.strlist(key, required=False)


def _template(r: _Reader, key: str, text: str, allowed: frozenset[str]) -> str:
    names = set(re.findall(r"{(\w*)}", text))
    if not names <= allowed or "{}" in text:
        raise r.fail(f"'{key}' may only use the placeholders {', '.join('{' + n + '}' for n in sorted(allowed))}")
    return text


def _prebuilt(r: _Reader, version: Version) -> tuple[Prebuilt, ...]:
    raw = r.t.get("prebuilt")
    if raw is None or raw == UNKNOWN:
        return ()
    p = _Reader(raw, r.path, r.line, r.what + " prebuilt")
    url = _template(p, "url", p.text("url") or "", _PREBUILT_FIELDS)
    torches = p.strlist("torch") or []
    cudas = p.strlist("cuda") or []
    pys = p.strlist("python") or []
    abis = p.t.get("cxx11abi")
    if not isinstance(abis, list) or not abis or not all(isinstance(a, bool) for a in abis):
        raise p.fail("'cxx11abi' must be a list of true/false")
    for t in torches:
        if not re.match(r"^\d+\.\d+$", t):
            raise p.fail(f"'torch' entries are torch minors like \"2.8\", not {t!r}")
    for c in cudas:
        if not c.isdigit():
            raise p.fail(f"'cuda' entries are CUDA majors like \"12\", not {c!r}")
    for py in pys:
        if not re.match(r"^cp3\d{1,2}$", py):
            raise p.fail(f"'python' entries are CPython tags like cp312, not {py!r}")
    excludes = p.t.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        raise p.fail("'exclude' must be a list of tables like { torch = \"2.4\", python = \"cp313\" }")
    out: list[Prebuilt] = []
    for t in torches:
        for c in cudas:
            for py in pys:
                for abi in abis:
                    combo = {"torch": t, "cuda": c, "python": py, "cxx11abi": abi}
                    if any(all(combo.get(k) == v for k, v in e.items()) for e in excludes):
                        continue
                    out.append(Prebuilt(
                        url.format(version=version, cuda=c, torch=t, python=py,
                                   cxx11abi="TRUE" if abi else "FALSE").replace("+", "%2B"),
                        t, c, py, abi))
    if not out:
        raise p.fail("names no wheel (every combination is excluded)")
    return tuple(out)


def _release(raw: Any, comp: str, path: str, line: int, known: Mapping[str, str],
             lines: _Lines) -> CompanionRelease:
    r = _Reader(raw, path, line, f"{comp} [[package.release]]")
    version = _version(r, r.text("version") or "", "version")
    r.what = f"{comp} {version}"
    src = r.sources(known)
    ev = r.evidence(src, known, lines)
    torch = _spec(r, "torch")
    variants = _optional_list(r, "variants")
    for v in variants or []:
        if not VARIANT_RE.match(v):
            raise r.fail(f"variant {v!r} is not cuXYZ, rocmX.Y or cpu")
    pypi = r.text("pypi", required=False)
    if pypi not in (None, "", UNKNOWN) and not VARIANT_RE.match(pypi or ""):
        raise r.fail(f"'pypi' {pypi!r} is not a variant name (or \"\" for no binary on PyPI)")
    python = _optional_list(r, "python")
    for tag in python or []:
        if not _PYTAG.match(tag):
            raise r.fail(f"Python tag {tag!r} is not like cp312, cp39-abi3, py3 or py39")
    requires_python = _spec(r, "requires_python")
    abi = r.t.get("cxx11abi")
    if abi is not None and not isinstance(abi, bool):
        raise r.fail("'cxx11abi' must be true or false (leave it out when it does not matter)")
    sdist_only = r.t.get("sdist_only", False)
    if not isinstance(sdist_only, bool):
        raise r.fail("'sdist_only' must be true or false")
    build_needs = r.text("build_needs", required=False)
    build_time = r.text("build_time", required=False)
    if (build_needs or build_time) and not sdist_only:
        raise r.fail("'build_needs'/'build_time' are for sdist_only releases")
    prebuilt = _prebuilt(r, version)
    stated = {"torch": torch, "variants": variants, "pypi": pypi if pypi != UNKNOWN else None,
              "python": python, "requires_python": requires_python, "cxx11abi": abi,
              "build_needs": build_needs, "build_time": build_time, "prebuilt": prebuilt or None}
    _need_source(r, src, "exists")
    for fact, val in stated.items():
        if val is not None:
            _need_source(r, src, fact)
    why = r.t.get("unknown", {})
    if not isinstance(why, dict) or not all(isinstance(x, str) for x in why.values()):
        raise r.fail("'unknown' must be a table of fact = \"why it is unknown\"")
    for fact in why:
        if r.t.get(fact) != UNKNOWN:
            raise r.fail(f"unknown.{fact} explains a fact that is not \"unknown\"")
    for fact in ev:
        if r.t.get(fact) == UNKNOWN:
            raise r.fail(f"evidence.{fact} labels a fact written \"unknown\"")
    if variants is not None and pypi and pypi != UNKNOWN and pypi not in variants:
        raise r.fail(f"'pypi' {pypi!r} is not among 'variants'")
    if sdist_only and pypi:
        raise r.fail("an sdist_only release has no PyPI binary: write pypi = \"\" or leave it out")
    return CompanionRelease(
        name=comp, version=version, torch=torch,
        variants=tuple(variants) if variants is not None else None,
        pypi_variant=pypi or None if pypi != UNKNOWN else None,
        python=tuple(python) if python is not None else None,
        requires_python=requires_python, cxx11abi=abi, sdist_only=sdist_only,
        build_needs=build_needs, build_time=build_time, prebuilt=prebuilt,
        evidence=ev, source=src, unknown_why=dict(why), line=line,
    )


def parse_companions(text: str, path: str = "companions.toml") -> Companions:
    """Parse and validate companions TOML text; `CompanionsError` on the first problem found."""
    from torchfit._backports import tomllib

    try:
        doc = tomllib.loads(text)
    except RecursionError:
        raise CompanionsError(path, None, "nested too deeply to be a companions file") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise CompanionsError(path, int(m.group(1)) if m else None, f"not valid TOML: {exc}") from None
    lines = _Lines(text)
    try:
        return _parse(doc, path, lines)
    except CompanionsError:
        raise
    except MatrixError as exc:  # the shared readers of compat.matrix raise MatrixError
        raise CompanionsError(exc.path, exc.line, exc.what) from None


def _parse(doc: dict[str, Any], path: str, lines: _Lines) -> Companions:
    if doc.get("schema") != 1:
        raise CompanionsError(path, 1, "expected 'schema = 1' at the top")
    known = doc.get("sources")
    if not isinstance(known, dict) or not all(isinstance(v, str) for v in known.values()):
        raise CompanionsError(path, None, "expected a [sources] table of KEY = \"where the fact was read\"")
    since: Version | None = None
    abi_raw = doc.get("torch_cxx11abi")
    if abi_raw is not None:
        head = next((n for n, t in enumerate(lines.text_lines, 1) if t.strip() == "[torch_cxx11abi]"), 0)
        a = _Reader(abi_raw, path, head, "[torch_cxx11abi]")
        a.sources(known)
        since = _version(a, a.text("since") or "", "since")
    packages: dict[str, Companion] = {}
    release_no = 0
    for i, raw in enumerate(doc.get("package", [])):
        r = _Reader(raw, path, lines.of("package", i), "[[package]]")
        name = canonicalize_name(r.text("name") or "")
        if not name:
            raise r.fail("'name' is empty")
        r.what = f"[[package]] {name}"
        if name in packages:
            raise r.fail(f"{name} is listed twice (also line {packages[name].line})")
        binding = r.text("binding") or ""
        if binding not in BINDINGS:
            raise r.fail(f"'binding' {binding!r} is not one of {', '.join(BINDINGS)}")
        published = tuple(r.strlist("published") or [])
        if not published:
            raise r.fail("'published' names no place")
        route = r.text("route", required=False)
        kind = r.text("route_kind", required=False)
        if (route is None) != (kind is None):
            raise r.fail("'route' and 'route_kind' go together")
        if kind is not None and kind not in ("index", "find-links"):
            raise r.fail(f"'route_kind' {kind!r} is not index or find-links")
        if route is not None:
            _template(r, "route", route, _ROUTE_FIELDS)
        src = r.sources(known)
        r.evidence(src, known, lines)
        _need_source(r, src, "binding", "published")
        if route is not None:
            _need_source(r, src, "route")
        rels_raw = raw.get("release", [])
        if not isinstance(rels_raw, list) or not rels_raw:
            raise r.fail("no [[package.release]] entries")
        rels: list[CompanionRelease] = []
        for rel_raw in rels_raw:
            rels.append(_release(rel_raw, name, path, lines.of("package.release", release_no), known, lines))
            release_no += 1
        order = sorted(rels, key=lambda x: x.version, reverse=True)
        if [x.version for x in order] != [x.version for x in rels]:
            bad = next(x for x, y in zip(rels, order) if x.version != y.version)
            raise CompanionsError(path, bad.line, f"{bad.label}: releases must be listed newest first")
        packages[name] = Companion(
            name=name, binding=binding, published=published, route=route,
            route_kind=cast("RouteKind | None", kind), releases=tuple(rels), source=src, line=r.line)
    if not packages:
        raise CompanionsError(path, None, "no [[package]] entries")
    return Companions(packages, dict(known), path, since)


# Keyed by name and text: an edited file (a test's tmp copy) is parsed again, the
# packaged one once. The file is small; parsing it costs a few ms.
_LOADED: dict[str, Companions] = {}


def read_companions_text(path: str | None = None) -> tuple[str, str]:
    """(text, name) of the packaged file (name "companions.toml") or of the file `path`."""
    if path is None:
        return read_data_text("companions.toml"), "companions.toml"
    from torchfit.inputs import MAX_MATRIX_BYTES, read_text_file

    try:
        return read_text_file(path, "companions file", limit=MAX_MATRIX_BYTES), path
    except BadInput as exc:
        raise CompanionsError(path, None, exc.message.split(": ", 1)[-1]) from None


def load_companions(path: str | None = None) -> Companions:
    """The packaged data/companions.toml (or the file `path`), validated; parsed once per process.

    Commands that start often load it through `torchfit.cache.load_companions`, which
    keeps the validated values across processes (as `cache.load_matrix` does).
    """
    text, name = read_companions_text(path)
    key = f"{name}\0{text}"
    if key not in _LOADED:
        _LOADED[key] = parse_companions(text, name)
    return _LOADED[key]


# --- the validated file as plain JSON data (for torchfit.cache.load_companions) -----------
#
# tomllib over the ~230 kB file and the validation cost a few hundred ms on a loaded
# machine; rebuilding the values from JSON costs a few. Exact (a test holds
# companions_from_data(companions_to_data(c)) == c) and strict: data of another shape
# raises ValueError, TypeError or KeyError, and the caller parses again.

_RELEASE_FIELDS = tuple(f.name for f in dataclasses.fields(CompanionRelease))
_PACKAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Companion))


def _release_data(r: CompanionRelease) -> JsonObject:
    return {
        "name": r.name, "version": str(r.version),
        "torch": None if r.torch is None else str(r.torch),
        "variants": None if r.variants is None else list(r.variants),
        "pypi_variant": r.pypi_variant,
        "python": None if r.python is None else list(r.python),
        "requires_python": None if r.requires_python is None else str(r.requires_python),
        "cxx11abi": r.cxx11abi, "sdist_only": r.sdist_only, "build_needs": r.build_needs,
        "build_time": r.build_time,
        "prebuilt": [[p.url, p.torch, p.cuda, p.python, p.cxx11abi] for p in r.prebuilt],
        "evidence": dict(r.evidence), "source": dict(r.source), "unknown_why": dict(r.unknown_why),
        "line": r.line,
    }


def _release_value(d: Any) -> CompanionRelease:
    if not isinstance(d, dict) or set(d) != set(_RELEASE_FIELDS):
        raise ValueError("a release of another shape")
    return CompanionRelease(
        name=str(d["name"]), version=Version(d["version"]),
        torch=None if d["torch"] is None else SpecifierSet(d["torch"]),
        variants=None if d["variants"] is None else tuple(d["variants"]),
        pypi_variant=d["pypi_variant"],
        python=None if d["python"] is None else tuple(d["python"]),
        requires_python=None if d["requires_python"] is None else SpecifierSet(d["requires_python"]),
        cxx11abi=d["cxx11abi"], sdist_only=bool(d["sdist_only"]), build_needs=d["build_needs"],
        build_time=d["build_time"],
        prebuilt=tuple(Prebuilt(str(p[0]), str(p[1]), str(p[2]), str(p[3]), bool(p[4])) for p in d["prebuilt"]),
        evidence=dict(d["evidence"]), source=dict(d["source"]), unknown_why=dict(d["unknown_why"]),
        line=int(d["line"]),
    )


def companions_to_data(c: Companions) -> JsonObject:
    """The validated file as JSON-ready data (lists, dicts, str, int, bool, None)."""
    return {
        "path": c.path, "sources": dict(c.sources),
        "cxx11abi_since": None if c.cxx11abi_since is None else str(c.cxx11abi_since),
        "packages": [{
            "name": p.name, "binding": p.binding, "published": list(p.published), "route": p.route,
            "route_kind": p.route_kind, "releases": [_release_data(r) for r in p.releases],
            "source": dict(p.source), "line": p.line,
        } for p in c.packages.values()],
    }


def companions_from_data(data: Any) -> Companions:
    """The `Companions` that `companions_to_data` wrote; ValueError (or TypeError/KeyError) on other data."""
    if not isinstance(data, dict) or set(data) != {"path", "sources", "cxx11abi_since", "packages"}:
        raise ValueError("companions data of another shape")
    packages: dict[str, Companion] = {}
    for p in data["packages"]:
        if not isinstance(p, dict) or set(p) != set(_PACKAGE_FIELDS):
            raise ValueError("a package of another shape")
        if p["binding"] not in BINDINGS or p["route_kind"] not in (None, "index", "find-links"):
            raise ValueError("a binding or route kind of another version")
        packages[str(p["name"])] = Companion(
            name=str(p["name"]), binding=p["binding"], published=tuple(p["published"]), route=p["route"],
            route_kind=p["route_kind"], releases=tuple(_release_value(r) for r in p["releases"]),
            source=dict(p["source"]), line=int(p["line"]))
    since = data["cxx11abi_since"]
    return Companions(packages, dict(data["sources"]), str(data["path"]), None if since is None else Version(since))
