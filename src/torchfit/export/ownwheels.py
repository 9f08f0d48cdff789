"""torchfit's own wheel and its dependencies' wheels, for an image built without an index.

`export --format containerfile` installs torchfit in the image (so `torchfit install` builds the env
and `torchfit verify` proves it there). With a pack the build has no network, so torchfit comes
from the build context too, as `DIR/torchfit-wheels/`:

- torchfit's wheel, written from the running torchfit (`write_own_wheel`): its installed METADATA
  and entry points, and its package directory as it is (pure Python: one `py3-none-any` wheel),
  so the image runs the very torchfit that wrote the Containerfile, from a wheel install or a
  source checkout alike, with no build backend and no network;
- its dependencies (packaging, requests, rich, uv, ...), locked for the image's Python and
  machine by `uv pip compile` from `--pypi-url` (the one compile step, lock.uv) and fetched with
  their sha256 checked (export.pack.write_checked);
- requirements.txt: each of them pinned with its sha256, for `pip install --require-hashes`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from torchfit.compat.tags import target_tags, uv_platform
from torchfit.errors import ExportFailed
from torchfit.files import open_beneath, write_beside
from torchfit.lock.model import Artifact, LockedDist
from torchfit.lock.pylock import sha256_file

if TYPE_CHECKING:
    from torchfit.runner import Runner

_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest a zip can say: the same wheel from the same files


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_own_wheel(dest_dir: str) -> str:
    """`dest_dir/torchfit-VERSION-py3-none-any.whl` from the running torchfit; its path."""
    from importlib.metadata import PackageNotFoundError, distribution

    import torchfit

    try:
        dist = distribution("torchfit")
    except PackageNotFoundError:
        raise ExportFailed("torchfit's own metadata is not installed (run from a source tree?); "
                           "install torchfit (pip install -e .) to export a Containerfile") from None
    version = dist.version
    info = f"torchfit-{version}.dist-info"
    package = os.path.dirname(os.path.abspath(torchfit.__file__))
    files: list[tuple[str, bytes]] = []
    for top, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith((".pyc", ".pyo")):
                continue
            full = os.path.join(top, name)
            with open(full, "rb") as fh:
                files.append(("torchfit/" + os.path.relpath(full, package).replace(os.sep, "/"), fh.read()))
    # A wheel's METADATA is the core metadata: a dist-info's METADATA, or a source tree's
    # egg-info PKG-INFO (`pip install -e` leaves src/torchfit.egg-info, found first on PYTHONPATH=src).
    metadata = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not metadata or f"\nVersion: {version}" not in metadata:
        raise ExportFailed(f"torchfit {version}'s installed metadata has no METADATA or PKG-INFO naming its "
                           "version; reinstall torchfit")
    files.append((f"{info}/METADATA", metadata.encode()))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        files.append((f"{info}/entry_points.txt", entry_points.encode()))
    files.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: torchfit\nRoot-Is-Purelib: true\n"
                                   b"Tag: py3-none-any\n"))
    record = "".join(f"{arc},{_record_hash(data)},{len(data)}\n" for arc, data in files) + f"{info}/RECORD,,\n"
    files.append((f"{info}/RECORD", record.encode()))
    name = f"torchfit-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in files:
            zf.writestr(zipfile.ZipInfo(arc, _EPOCH), data, zipfile.ZIP_DEFLATED)
    # The context is the user's directory: files.write_beside never writes through what is planted there.
    path = os.path.join(dest_dir, name)
    dfd = open_beneath(dest_dir, create=False)
    try:
        write_beside(dfd, name, buf.getvalue(), where=path)
    finally:
        os.close(dfd)
    return path


def own_requirements() -> list[str]:
    """torchfit's own dependencies as its METADATA states them (no extras: the image runs, not tests)."""
    from importlib.metadata import requires

    out = []
    for text in requires("torchfit") or []:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        out.append(str(req))
    return out


def best_wheel(d: LockedDist, tags: Sequence[Tag]) -> Artifact:
    """The wheel of `d` an installer would take on the target (its best-ranked tag)."""
    rank = {t: i for i, t in enumerate(tags)}
    best: tuple[int, Artifact] | None = None
    for a in d.artifacts:
        try:
            _, _, _, wheel_tags = parse_wheel_filename(a.filename or "")
        except InvalidWheelFilename:
            continue
        score = min((rank[t] for t in wheel_tags if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, a)
    if best is None:
        raise ExportFailed(f"{d.name} {d.version}: no wheel for the image's Python and machine "
                           f"({', '.join(a.filename or '?' for a in d.artifacts)})")
    return best[1]


def lock_own_dependencies(runner: Runner, *, python: str, arch: str, glibc: tuple[int, int],
                          pypi_url: str) -> list[LockedDist]:
    """torchfit's dependency closure for the image, locked by uv from `pypi_url` alone."""
    from torchfit.index.sources import one_index
    from torchfit.lock.toml import dumps_toml
    from torchfit.lock.uv import compile_project
    from torchfit.lock.uvbin import find_uv
    from torchfit.owned import temp_dir
    from torchfit.redact import redact
    from torchfit.runner import without_index_variables

    uv = find_uv(runner)
    if uv is None:
        raise ExportFailed("locking torchfit's own dependencies for the image needs uv",
                           hint="pip install uv (on PATH or into torchfit's own venv)")
    project = dumps_toml({"project": {"name": "torchfit-image", "version": "0", "dependencies": own_requirements()}})
    with temp_dir("export") as tmp:
        # `pypi_url` alone: the user's uv/pip index variables stay out of uv's environment
        env = one_index(pypi_url, http_timeout="30").uv_env(without_index_variables(), family=False)
        compiled = compile_project(runner, uv, work=tmp, name="", env=env, options=["--no-config"],
                                   project_text=project, target=(python, uv_platform(arch, glibc)),
                                   timeout=600.0, cwd=tmp, quiet=True, preview=["pylock"])
        if not compiled.ok:
            res = compiled.result
            text = (res.stderr or res.stdout) if res is not None else compiled.stderr
            tail = " ".join(redact(text.strip()).split())[-400:]
            raise ExportFailed(f"uv pip compile could not lock torchfit's own dependencies for Python {python}: "
                               f"{tail or 'no output'}")
        return list(compiled.locked)


def write_own_wheels(dest_dir: str, *, python: str, arch: str, glibc: tuple[int, int], pypi_url: str,
                     runner: Runner, fetch: Callable[[str, Any], tuple[int, str]],
                     say: Callable[[str], None], step: str = "export") -> list[str]:
    """Fill `dest_dir` (made if absent) with torchfit's wheel, its dependencies' and requirements.txt;
    the wheels' file names. `step` names the command in progress lines (export, pack)."""
    from torchfit.export.pack import has_file, write_checked

    parent, leaf = os.path.split(os.path.abspath(dest_dir))
    os.close(open_beneath(parent, leaf))  # made when missing; a symlink planted there refused
    tags = target_tags(python, arch, glibc)
    own = write_own_wheel(dest_dir)
    lines = [f"torchfit=={_version_of(own)} --hash=sha256:{sha256_file(own)}"]
    names = [os.path.basename(own)]
    for d in lock_own_dependencies(runner, python=python, arch=arch, glibc=glibc, pypi_url=pypi_url):
        if canonicalize_name(d.name) == "torchfit":
            continue
        a = best_wheel(d, tags)
        if not a.sha256 or not a.filename:
            raise ExportFailed(f"uv's lock gives {d.name} {d.version} no sha256 or file name")
        dest = os.path.join(dest_dir, a.filename)
        dfd = open_beneath(parent, leaf)
        try:
            if has_file(dfd, a.filename, a.sha256, dest) is None:
                say(f"{step}: fetching {a.filename}")
                write_checked(a, dfd, a.filename, dest, fetch)
        finally:
            os.close(dfd)
        names.append(a.filename)
        lines.append(f"{d.name}=={d.version} --hash=sha256:{a.sha256}")
    dfd = open_beneath(parent, leaf)
    try:
        write_beside(dfd, "requirements.txt", ("# torchfit and its dependencies for the image, each pinned by its "
                     "sha256 (pip install --no-index --require-hashes).\n" + "".join(f"{line}\n" for line in lines)
                     ).encode(), where=os.path.join(dest_dir, "requirements.txt"))
    finally:
        os.close(dfd)
    for stale in set(os.listdir(dest_dir)) - {*names, "requirements.txt"}:
        os.unlink(os.path.join(dest_dir, stale))  # a wheel of an earlier export: not in this build
    return names


def _version_of(wheel: str) -> str:
    return str(parse_wheel_filename(os.path.basename(wheel))[1])
