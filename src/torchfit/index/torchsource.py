"""The torch builds a source really serves: read from the source itself (issue 24).

A torch source is one of:

- a PEP 503/691 index (`https://download.pytorch.org/whl/cu128`, a mirror, a `file://`
  tree): its `torch/` page;
- a flat location, pip's find-links: a directory of wheels (`pip download` output) or
  an HTML page linking them. A local directory with no `torch/` page but `torch-*.whl`
  files in it is flat; so is a remote location whose `torch/` page is missing but which
  itself links torch wheels.

Only file names are read (PEP 427 names carry version, Python and platform), through the
same `IndexClient` as every page (timeouts, retries, the conditional cache, redaction), so
a second resolve against a warm cache asks nothing of a remote index that sent max-age.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from torchfit.compat.served import Served, ServedFile, parse_wheel_tags
from torchfit.errors import IndexUnavailable
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


def served_files(filenames: list[str]) -> tuple[ServedFile, ...]:
    """The torch wheels among `filenames` (anything else, or a garbage name, is skipped)."""
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
        for platform in platforms:
            out.append(ServedFile(version, gil, ft, platform, pure))
    return tuple(out)


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
            return Served(shown, variant, served_files(names), kind="flat")
        page = os.path.join(path, "torch", "index.html")
        if not os.path.isfile(page):
            return Served(shown, variant, (), kind="index")
        with open(page, encoding="utf-8", errors="replace") as fh:
            text = fh.read(32 << 20)
        files = parse_project_html(text, "file://" + page)
        return _served(shown, variant, files, "file://" + page)
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


def _served(shown: str, variant: str, files: tuple[IndexFile, ...], location: str, kind: str = "index") -> Served:
    """The torch wheels of a page, and the hosts other than its own they are on."""
    wheels = [f for f in files if not f.yanked]
    torch = {f.filename for f in wheels if served_files([f.filename])}
    off = off_site_hosts([f.url for f in wheels if f.filename in torch], location)
    return Served(shown, variant, served_files([f.filename for f in wheels]), kind=kind, off_site=tuple(off))
