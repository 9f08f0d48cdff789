"""Measure the PyPI facts of data/companions.toml from the index and the wheels themselves.

For each release of a companion package on an index (PyPI by default) this reads:

- the PEP 691/503 project page: which files exist (Linux x86_64 wheels, the sdist),
  their Python tags and Requires-Python, upload times;
- the METADATA of one Linux x86_64 wheel, through PEP 658 (``FILE.metadata``) or,
  when the index serves none, a few HTTP range requests into the wheel: the torch
  requirement that holds on Linux x86_64;
- for packages whose wheel records its own build: the torch build it was compiled
  against (xformers' ``xformers/cpp_lib.json``: ``"torch": "2.8.0+cu128"``) or its
  CUDA (torch-tensorrt's ``torch_tensorrt/_version.py``: ``__cuda_version__``), which
  gives the variant of the PyPI wheel.

For triton (which names no torch) it reads torch's own METADATA: the
``triton==X`` pin of each torch release.

`scripts/probe_companions.py` prints the results as companions.toml rows, or with
``--check`` compares them with the data file. Pure helpers (``torch_requirement``,
``python_tags``, ``variant_of_build``) take text; ``measure_*`` do the HTTP through
`index.client.IndexClient`.
"""

from __future__ import annotations

import email.parser
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from torchfit.errors import TorchfitError, WheelFormatError
from torchfit.index.client import IndexClient
from torchfit.index.pages import IndexFile
from torchfit.index.wheelmeta import HttpRangeSource, WheelArchive, wheel_metadata
from torchfit.inputs import decode_json
from torchfit.jsontypes import JsonObject
from torchfit.matrixcheck.wheels import linux_requirements

PYPI = "https://pypi.org/simple"

# Wheel members that record the build a wheel was compiled against, per package.
BUILD_INFO = {
    "xformers": r"^xformers/cpp_lib\.json$",
    "torch-tensorrt": r"^torch_tensorrt/_version\.py$",
}


@dataclass
class MeasuredRelease:
    """What one release's files and one wheel's METADATA say."""

    name: str
    version: str
    upload: str  # the earliest upload time of its files (ISO, from the project page)
    python: list[str]  # Python tags of its Linux x86_64 wheels: cp39-abi3, cp312, py3
    requires_python: str | None
    sdist_only: bool
    has_sdist: bool
    wheel: str | None = None  # the wheel whose METADATA was read
    wheel_sha256: str | None = None
    metadata_via: str | None = None  # "pep658" | "range"
    torch: str | None = None  # the torch specifier that holds on Linux x86_64; "" for none
    build: str | None = None  # what a build-info member says ("2.8.0+cu128", "cuda 12.8")
    pypi_variant: str | None = None
    notes: list[str] = field(default_factory=list)


def python_tags(filenames: Iterable[str]) -> list[str]:
    """The Python tags (cp312, cp39-abi3, py3) of the Linux x86_64 wheels among `filenames`."""
    tags: set[str] = set()
    for fn in filenames:
        try:
            _, _, _, parsed = parse_wheel_filename(fn)
        except InvalidWheelFilename:
            continue
        for t in parsed:
            if not (t.platform.endswith("x86_64") and "linux" in t.platform):
                continue
            tags.add(f"{t.interpreter}-abi3" if t.abi == "abi3" else t.interpreter)
    return sorted(tags, key=lambda t: (t[:2], int(re.sub(r"\D", "", t[2:].split("-")[0]) or 0), t))


def torch_requirement(metadata: str, platform: str = "x86_64") -> str:
    """The torch specifier a METADATA requires on Linux/`platform` ("==2.8.0"); "" when none or bare."""
    msg = email.parser.HeaderParser().parsestr(metadata)
    specs = [str(r.specifier) for r in linux_requirements(msg, platform) if r.name.lower() == "torch"]
    return ",".join(s for s in specs if s)


def requires_python(metadata: str) -> str | None:
    msg = email.parser.HeaderParser().parsestr(metadata)
    val = msg.get("Requires-Python")
    return str(val).strip() if val else None


def variant_of_build(name: str, text: str) -> tuple[str | None, str | None]:
    """(what the build-info member says, the torch variant it implies) for `name`."""
    if name == "xformers":
        try:
            info = decode_json(text)
            torch = str(info["version"]["torch"])
        except (ValueError, KeyError, TypeError):
            return None, None
        local = torch.split("+", 1)[1] if "+" in torch else None
        return torch, local
    if name == "torch-tensorrt":
        m = re.search(r"__cuda_version__\s*=\s*[\"'](\d+)\.(\d+)", text)
        if not m:
            return None, None
        return f"cuda {m.group(1)}.{m.group(2)}", f"cu{m.group(1)}{m.group(2)}"
    return None, None


def _linux_x86_wheels(files: Iterable[IndexFile]) -> list[IndexFile]:
    out = []
    for f in files:
        # "linux" then "_x86_64" within one dash-free part of the name (a regex over the
        # whole name backtracked quadratically on a crafted one: linear here).
        if f.filename.endswith(".whl") and any(
                (at := part.find("linux")) >= 0 and part.find("_x86_64", at + 5) >= 0
                for part in f.filename.split("-")):
            out.append(f)
    return out


def group_releases(files: Iterable[IndexFile]) -> dict[Version, list[IndexFile]]:
    """A project page's files by release (pre-, dev- and yanked-only releases left out)."""
    rel: dict[Version, list[IndexFile]] = defaultdict(list)
    for f in files:
        try:
            if f.filename.endswith(".whl"):
                _, v, _, _ = parse_wheel_filename(f.filename)
            else:
                _, v = parse_sdist_filename(f.filename)
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        if v.is_prerelease or v.is_devrelease or v.local:
            continue
        rel[v].append(f)
    return {v: fs for v, fs in rel.items() if not all(f.yanked for f in fs)}


def _read_metadata(client: IndexClient, wheel: IndexFile) -> tuple[str | None, str]:
    text = client.core_metadata(wheel)
    if text is not None:
        return text, "pep658"
    return wheel_metadata(client, wheel), "range"


def _read_member(client: IndexClient, wheel: IndexFile, pattern: str) -> str | None:
    """One member of a remote wheel, through range requests; None when it cannot be read."""
    src = HttpRangeSource(client, wheel.url)
    try:
        tail = src.open()
        archive = WheelArchive(src, tail)
        found = archive.find(pattern)
        return archive.read(found[0]).decode("utf-8", "replace") if found else None
    except (WheelFormatError, TorchfitError):
        return None  # the build record is a bonus: the release's other facts stand
    finally:
        src.close()


def measure_package(client: IndexClient, name: str, *, since: str = "", index: str = PYPI,
                    say: Callable[[str], None] | None = None) -> list[MeasuredRelease]:
    """Every final release of `name` uploaded on or after `since` (ISO date), newest first."""
    page = client.project_page(index, name)
    if page is None:
        return []
    uploads = _upload_times(client, index, name)
    out: list[MeasuredRelease] = []
    for version, files in sorted(group_releases(page.files).items(), reverse=True):
        first = min((uploads.get(f.filename, "") for f in files), default="")
        if since and first and first < since:
            continue
        wheels = _linux_x86_wheels(files)
        has_sdist = any(not f.filename.endswith(".whl") for f in files)
        rp = next((f.requires_python for f in files if f.requires_python), None)
        m = MeasuredRelease(name, str(version), first, python_tags(f.filename for f in wheels), rp,
                            sdist_only=not wheels, has_sdist=has_sdist)
        if wheels:
            wheel = sorted(wheels, key=lambda f: f.filename)[0]
            if say:
                say(f"{name} {version}: METADATA of {wheel.filename}")
            text, via = _read_metadata(client, wheel)
            m.wheel, m.wheel_sha256, m.metadata_via = wheel.filename, wheel.hashes.get("sha256"), via
            if text is None:
                m.notes.append("METADATA not readable (no PEP 658 file, no range requests)")
            else:
                m.torch = torch_requirement(text)
                m.requires_python = requires_python(text) or m.requires_python
            pattern = BUILD_INFO.get(name)
            if pattern:
                info = _read_member(client, wheel, pattern)
                if info is None:
                    m.notes.append(f"build record {pattern} not read")
                else:
                    m.build, m.pypi_variant = variant_of_build(name, info)
        out.append(m)
    return out


def _upload_times(client: IndexClient, index: str, name: str) -> dict[str, str]:
    """filename -> upload-time from the PEP 691 JSON page (PEP 700); empty when not served."""
    from torchfit.index.pages import JSON_TYPE, project_url

    got = client.get(project_url(index, name), JSON_TYPE)
    if got.status != 200 or "json" not in got.content_type:
        return {}
    try:
        data = decode_json(got.body)
        return {str(f["filename"]): str(f.get("upload-time") or "") for f in data.get("files", [])}
    except (ValueError, TypeError, KeyError, AttributeError):
        return {}


def measure_triton_pins(client: IndexClient, torches: Iterable[str], *, index: str = PYPI,
                        say: Callable[[str], None] | None = None) -> dict[str, tuple[str, str, str]]:
    """torch version -> (triton specifier, wheel read, sha256), from torch's METADATA on Linux x86_64."""
    page = client.project_page(index, "torch")
    if page is None:
        return {}
    by_version = group_releases(page.files)
    out: dict[str, tuple[str, str, str]] = {}
    for t in torches:
        files = by_version.get(Version(t), [])
        wheels = sorted((f for f in _linux_x86_wheels(files) if "cp311" in f.filename), key=lambda f: f.filename)
        if not wheels:
            continue
        if say:
            say(f"torch {t}: METADATA of {wheels[0].filename}")
        text, _ = _read_metadata(client, wheels[0])
        if text is None:
            continue
        msg = email.parser.HeaderParser().parsestr(text)
        pins = [str(r.specifier) for r in linux_requirements(msg, "x86_64") if r.name.lower() == "triton"]
        out[t] = (",".join(pins), wheels[0].filename, wheels[0].hashes.get("sha256", ""))
    return out


def to_json(releases: list[MeasuredRelease]) -> list[JsonObject]:
    return [vars(r) for r in releases]
