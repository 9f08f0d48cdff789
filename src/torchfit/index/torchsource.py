"""The torch builds a source really serves: read from the source itself (issue 24).

A torch source is one of:

- a PEP 503/691 index (`https://download.pytorch.org/whl/cu128`, a mirror, a `file://`
  tree): its `torch/` page;
- a flat location, pip's find-links: a directory of wheels (`pip download` output) or
  an HTML page linking them. A local directory with no `torch/` page but `torch-*.whl`
  files in it is flat; so is a remote location whose `torch/` page is missing but which
  itself links torch wheels.

File names are read (PEP 427 names carry version, Python and platform), through the
same `IndexClient` as every page (timeouts, retries, the conditional cache, redaction), so
a second resolve against a warm cache asks nothing of a remote index that sent max-age.
A local torch wheel without a local label (`pip download torch` output: PyPI's build) is
also read for its METADATA, which says the variant it is (its CUDA runtime pin: issue 33);
a remote one is not read (one request per file), and counts as any variant.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from torchfit.compat.served import Served, ServedFile, parse_wheel_tags, variant_from_metadata
from torchfit.errors import IndexUnavailable, WheelFormatError
from torchfit.index.client import IndexClient
from torchfit.index.pages import IndexFile, off_site_hosts, parse_project_html, project_url
from torchfit.redact import redact

# A torch page lists a few thousand files; a directory of wheels is read by name only.
MAX_LISTING = 100_000


def local_path(location: str) -> str | None:
    """The directory of a `file://` URL or a plain path; None for a remote URL."""
    scheme = urlsplit(location).scheme.lower()
    if scheme == "file":
        return unquote(urlsplit(location).path)
    if scheme in ("http", "https"):
        return None
    return os.path.abspath(location)


def is_flat(location: str) -> bool:
    """A local location with no `torch/` page but torch wheels in the directory itself."""
    path = local_path(location)
    if path is None or not os.path.isdir(path):
        return False
    if os.path.isdir(os.path.join(path, "torch")):
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return any(n.startswith("torch-") and n.endswith(".whl") for n in names)


def served_files(filenames: list[str], metadata: Mapping[str, str] | None = None) -> tuple[ServedFile, ...]:
    """The torch wheels among `filenames` (anything else, or a garbage name, is skipped);
    `metadata`: file name -> METADATA of the unlabelled ones read, for the variant each says."""
    out = []
    for name in filenames:
        if not name.endswith(".whl"):
            continue
        try:
            project, version, _, tags = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if canonicalize_name(project) != "torch" or version.is_prerelease:
            continue
        gil, ft, platforms, pure = parse_wheel_tags((t.interpreter, t.abi, t.platform) for t in tags)
        text = (metadata or {}).get(name) if version.local is None else None
        for platform in platforms:
            said = variant_from_metadata(text, platform) if text is not None else None
            out.append(ServedFile(version, gil, ft, platform, pure, said))
    return tuple(out)


def local_metadata(paths: Mapping[str, str]) -> dict[str, str]:
    """file name -> METADATA of the unlabelled torch wheels among `paths` (file name -> local
    path): what a wheel without a local label is, it says itself (`variant_from_metadata`).
    A PEP 658 `.metadata` file beside the wheel is read first; a wheel that is no readable
    zip is skipped (then any variant, as before it was read)."""
    from torchfit.index.wheelmeta import MAX_METADATA_BYTES, FileSource, WheelArchive

    out: dict[str, str] = {}
    for name, path in paths.items():
        try:
            _, version, _, _ = parse_wheel_filename(name)
        except InvalidWheelFilename:
            continue
        if version.local is not None or canonicalize_name(name.split("-", 1)[0]) != "torch":
            continue
        try:
            if os.path.isfile(path + ".metadata"):
                with open(path + ".metadata", "rb") as fh:
                    out[name] = fh.read(MAX_METADATA_BYTES).decode("utf-8", errors="replace")
                continue
            source = FileSource(path)
            try:
                found = WheelArchive(source).metadata()
            finally:
                source.close()
        except (OSError, WheelFormatError):
            continue
        if found is not None:
            out[name] = found[1].decode("utf-8", errors="replace")
    return out


def read_torch_source(client: IndexClient, location: str, variant: str) -> Served:
    """The torch builds `location` serves (IndexUnavailable when it cannot be read at all;
    a source with no torch at all is a `Served` with no files, which the plan says)."""
    path = local_path(location)
    shown = redact(location)
    if path is not None:
        if not os.path.isdir(path):  # a mirror of some variants only: this one is not there
            return Served(shown, variant, (), kind="index", notes=("no such directory",))
        if is_flat(location):
            names = sorted(os.listdir(path))[:MAX_LISTING]
            meta = local_metadata({n: os.path.join(path, n) for n in names})
            return Served(shown, variant, served_files(names, meta), kind="flat")
        page = os.path.join(path, "torch", "index.html")
        if not os.path.isfile(page):
            return Served(shown, variant, (), kind="index")
        with open(page, encoding="utf-8", errors="replace") as fh:
            text = fh.read(32 << 20)
        files = parse_project_html(text, "file://" + page)
        local = {f.filename: unquote(urlsplit(f.url).path) for f in files if urlsplit(f.url).scheme == "file"}
        return _served(shown, variant, files, "file://" + page, metadata=local_metadata(local))
    got = client.project_page(location, "torch")
    if got is not None:
        return _served(shown, variant, got.files, location)
    # No torch/ page: a find-links page listing the wheels itself?
    flat = client.get(location, "text/html")
    if flat.status == 404:  # a mirror of some variants only: this one is not there
        return Served(shown, variant, (), kind="index", notes=(f"HTTP 404 for {project_url(shown, 'torch')}",))
    if flat.status != 200:
        raise IndexUnavailable(location, f"HTTP {flat.status} for {project_url(location, 'torch')} and the page itself")
    files = parse_project_html(flat.body.decode("utf-8", errors="replace"), flat.url)
    return _served(shown, variant, files, location, kind="flat")


def _served(shown: str, variant: str, files: tuple[IndexFile, ...], location: str, kind: str = "index",
            metadata: Mapping[str, str] | None = None) -> Served:
    """The torch wheels of a page, and the hosts other than its own they are on."""
    wheels = [f for f in files if not f.yanked]
    torch = {f.filename for f in wheels if served_files([f.filename])}
    off = off_site_hosts([f.url for f in wheels if f.filename in torch], location)
    return Served(shown, variant, served_files([f.filename for f in wheels], metadata), kind=kind,
                  off_site=tuple(off))
