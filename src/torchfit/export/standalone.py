"""What makes a pack stand alone (issue 35, item 1): torchfit itself, a Python, one entry point.

`torchfit pack` adds to the lock's files, unless told otherwise:

    DIR/torchfit-wheels/      torchfit's own wheel and its dependencies' wheels, each pinned by its
                              sha256 in requirements.txt: export.ownwheels.write_own_wheels, the
                              very step `export --format containerfile` runs for an image, locked
                              for the lock's Python minor and platform
    DIR/python/NAME.tar.gz    a relocatable CPython of the lock's minor from uv's managed Pythons
    DIR/python/python.json    (python-build-standalone's install_only builds, under `python/`),
                              its version, sha256 and where it came from (--with-python, default
                              where uv has one at hand or can fetch one; --no-python leaves it out)
    DIR/install.sh            `sh DIR/install.sh PREFIX`: POSIX sh, needs no Python to start

install.sh unpacks the Python (its sha256 checked) into PREFIX.torchfit/python, makes a small
venv PREFIX.torchfit/tool of the pack's wheels (`pip install --no-index --require-hashes`), then
runs `torchfit install --offline --pack DIR --prefix PREFIX`, the pack's own install, with that
Python first on PATH; it prints the next command (`verify --env PREFIX`). Each step is done
once: run again, it resumes where it stopped. It never writes into the pack (a read-only mount
is fine) and refuses a PREFIX.torchfit it did not make.

Every file goes into the pack as the rest of the pack does: through files.write_beside or a new
O_EXCL file renamed (files.new_beside, files.commit) in a directory opened without following a
link (files.open_beneath).
"""

from __future__ import annotations

import json
import os
import stat
import tarfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchfit.errors import ExportFailed
from torchfit.files import commit, new_beside, open_beneath, write_beside
from torchfit.lock.pylock import sha256_file
from torchfit.redact import redact

if TYPE_CHECKING:
    from torchfit.export.pack import Fetch
    from torchfit.runner import Runner

WHEELS = "torchfit-wheels"
PYTHON = "python"
PYTHON_JSON = "python.json"
INSTALL_SH = "install.sh"
# uv's settings that say where its Pythons come from (uv help python install, uv 0.13.10)
_UV_SOURCES = ("UV_PYTHON_INSTALL_MIRROR", "UV_PYTHON_DOWNLOADS_JSON_URL")


@dataclass
class Standalone:
    python: str  # the lock's minor, "3.11"
    arch: str
    wheels: int = 0
    carried: str = ""  # the Python's version carried ("3.11.7"), "" for none
    why_none: str = ""  # why no Python is carried


def lock_target(lock_paths: Sequence[str], warn: Callable[[str], None]) -> tuple[str, str, tuple[int, int]]:
    """The Python minor, machine and glibc floor torchfit's own wheels are locked for: the lock's
    (a fleet's: its first group's, said when the groups differ)."""
    from torchfit.compat.tags import TORCH_MANYLINUX_FLOORS
    from torchfit.export.containerfile import glibc_floor
    from torchfit.export.stack import load_lock

    targets = []
    for path in lock_paths:
        stack = load_lock(path)
        if not stack.python:
            raise ExportFailed(f"{path}: names no Python version; a pack carries torchfit for the lock's Python")
        targets.append((stack.python, stack.arches[0], glibc_floor(stack) or TORCH_MANYLINUX_FLOORS[-1]))
    python, arch, _ = targets[0]
    if any((p, a) != (python, arch) for p, a, _ in targets):
        warn(f"pack: the groups' locks differ in Python or machine; torchfit and its Python are carried for "
             f"Python {python} on {arch} only (the first group's)")
    return python, arch, min(g for p, a, g in targets if (p, a) == (python, arch))


# provide(uv's request) -> (the interpreter's path, or None and why not): uv's managed Pythons,
# found in its store or installed (installer.python.provide_python, given by the CLI).
Provide = Callable[[str], tuple[str | None, str]]


def find_python(provide: Provide, minor: str, arch: str) -> tuple[str | None, str]:
    """The root of a uv-managed CPython `minor` for `arch` (found in uv's store, else installed by
    uv from its downloads, a site's mirror honoured), or None and why not."""
    path, why = provide(f"cpython-{minor}-linux-{arch}-gnu")
    if path is None:
        return None, why
    root = os.path.dirname(os.path.dirname(os.path.realpath(path)))
    if not os.path.isdir(os.path.join(root, "lib")) or not os.path.isdir(os.path.join(root, "bin")):
        return None, f"uv's Python {path} is not an install_only tree (no bin/ and lib/ at {root})"
    return root, ""


def _check_links(root: str) -> None:
    """Refuse a tree with a symbolic link that leaves it (the tarball would carry a dangling link)."""
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(top, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                if os.path.commonpath([root, target]) != root:
                    raise ExportFailed(f"{path}: a link out of the Python's tree ({target}); not carried")


def write_python(out: str, root: str, say: Callable[[str], None]) -> dict[str, str]:
    """DIR/python/NAME.tar.gz of the Python at `root` (its top directory `python/`, as
    python-build-standalone's install_only tarballs), and python.json; kept when already there
    with the sha256 python.json records. The record."""
    name = os.path.basename(root.rstrip("/"))
    tarball = f"{name}.tar.gz"
    version = name.split("-")[1] if name.count("-") >= 2 else ""
    dfd = open_beneath(out, PYTHON)
    try:
        record = _kept(out, dfd, tarball)
        if record is not None:
            return record
        _check_links(root)
        say(f"pack: carrying uv's Python {version or name} ({root})")
        fd, tmp = new_beside(dfd, tarball)
        try:
            with os.fdopen(fd, "wb") as fh, tarfile.open(fileobj=fh, mode="w:gz", compresslevel=6) as tar:
                tar.add(root, arcname="python", filter=lambda t: None if "__pycache__" in t.name.split("/") else t)
        except BaseException:
            os.unlink(tmp, dir_fd=dfd)
            raise
        commit(dfd, tmp, tarball, os.path.join(out, PYTHON, tarball))
        where = os.path.join(out, PYTHON, tarball)
        record = {"tarball": f"{PYTHON}/{tarball}", "sha256": sha256_file(where), "version": version,
                  "from": root, "how": "uv python find --managed-python / uv python install (uv's managed Pythons: "
                                       "python-build-standalone install_only builds)"}
        for key in _UV_SOURCES:
            if os.environ.get(key):
                record[key] = redact(os.environ[key])
        write_beside(dfd, PYTHON_JSON, json.dumps(record, indent=1).encode(),
                     where=os.path.join(out, PYTHON, PYTHON_JSON))
        return record
    finally:
        os.close(dfd)


def _kept(out: str, dfd: int, tarball: str) -> dict[str, str] | None:
    """python.json's record when its tarball is there with its sha256 (a resumed pack)."""
    from torchfit.export.pack import has_file
    from torchfit.files import existing_file, open_existing
    from torchfit.inputs import decode_json

    if existing_file(dfd, PYTHON_JSON, os.path.join(out, PYTHON, PYTHON_JSON)) is None:
        return None
    with os.fdopen(open_existing(dfd, PYTHON_JSON, os.path.join(out, PYTHON, PYTHON_JSON)), "rb") as fh:
        try:
            record = decode_json(fh.read(1 << 16))
        except ValueError:
            return None
    if not isinstance(record, dict) or record.get("tarball") != f"{PYTHON}/{tarball}":
        return None
    if has_file(dfd, tarball, str(record.get("sha256")), os.path.join(out, PYTHON, tarball)) is None:
        return None
    return {str(k): str(v) for k, v in record.items()}


def drop_stale_python(out: str, record: dict[str, str] | None) -> None:
    """A Python an earlier run of this pack carried and this one does not (another patch release,
    or --no-python now): removed from DIR/python, which holds only what pack wrote."""
    if not os.path.isdir(os.path.join(out, PYTHON)):
        return
    keep = {PYTHON_JSON, record["tarball"].removeprefix(f"{PYTHON}/")} if record else set()
    dfd = open_beneath(out, PYTHON, create=False)
    try:
        for name in os.listdir(dfd):
            if name not in keep and not stat.S_ISDIR(os.lstat(name, dir_fd=dfd).st_mode):
                os.unlink(name, dir_fd=dfd)  # never follows a link: a link planted there goes, its target stays
    finally:
        os.close(dfd)


def render_install_sh(minor: str, python: dict[str, str] | None) -> str:
    """install.sh, its Python's tarball and sha256 written in (empty: the node's python3.X)."""
    tarball = python["tarball"] if python else ""
    sha = python["sha256"] if python else ""
    return INSTALL_TEMPLATE.replace("@MINOR@", minor).replace("@TARBALL@", tarball).replace("@SHA256@", sha)


def write_standalone(out: str, lock_paths: Sequence[str], *, with_python: bool | None, pypi_url: str,
                     runner: Runner, fetch: Fetch, provide: Provide,
                     say: Callable[[str], None], warn: Callable[[str], None]) -> Standalone:
    """torchfit's wheels, the Python (unless `with_python` is False; None: where one is at hand)
    and install.sh, into the pack `out`."""
    from torchfit.export.ownwheels import write_own_wheels

    minor, arch, glibc = lock_target(lock_paths, warn)
    result = Standalone(minor, arch)
    root = None
    if with_python is False:
        result.why_none = "--no-python"
    else:  # first: a Python demanded and not to be had is refused before any wheel is fetched
        root, why = find_python(provide, minor, arch)
        if root is None:
            if with_python:
                raise ExportFailed(f"--with-python: no uv-managed Python {minor} for {arch}: {why}",
                                   hint="serve uv's Pythons from a mirror (UV_PYTHON_INSTALL_MIRROR, "
                                        "UV_PYTHON_DOWNLOADS_JSON_URL: docs/mirrors.md), or pack --no-python")
            result.why_none = why
            warn(f"pack: no Python carried ({why}); install.sh will need python{minor} on the node")
    say(f"pack: torchfit and its dependencies for Python {minor} on {arch} (glibc {glibc[0]}.{glibc[1]})")
    result.wheels = len(write_own_wheels(os.path.join(out, WHEELS), python=minor, arch=arch, glibc=glibc,
                                         pypi_url=pypi_url, runner=runner, fetch=fetch, say=say, step="pack"))
    record = write_python(out, root, say) if root is not None else None
    result.carried = record.get("version", "") if record else ""
    drop_stale_python(out, record)
    dfd = open_beneath(out, "")
    try:
        write_beside(dfd, INSTALL_SH, render_install_sh(minor, record).encode(), where=os.path.join(out, INSTALL_SH))
    finally:
        os.close(dfd)
    return result


def format_readme(s: Standalone) -> str:
    """The README's part on install.sh."""
    if s.carried:
        python = (f"It unpacks the Python this pack carries ({s.carried}, from uv's managed Pythons;\n"
                  "python/python.json says where it came from) into PREFIX.torchfit/python, installs\n")
    else:
        python = (f"It takes python{s.python} from the node's PATH (this pack carries no Python: {s.why_none}),\n"
                  "installs ")
    return (f"\nOn a node with no network and nothing else (no torchfit, no Python {s.python}):\n\n"
            "    sh DIR/install.sh PREFIX\n\n"
            f"{python}torchfit into PREFIX.torchfit/tool from DIR/{WHEELS} (each wheel checked\n"
            "against its sha256), runs torchfit install --offline --pack DIR --prefix PREFIX, and prints\n"
            "the next command (PREFIX.torchfit/tool/bin/torchfit verify --env PREFIX). Options after\n"
            "PREFIX go to torchfit install. Run it again to resume.\n")


INSTALL_TEMPLATE = r"""#!/bin/sh
# A torchfit pack's entry point (POSIX sh; no Python needed to start):
#
#     sh PACK/install.sh PREFIX [torchfit install options]
#
# PREFIX.torchfit/python  the Python the pack carries, unpacked (its sha256 checked first)
# PREFIX.torchfit/tool    a venv of torchfit and its dependencies, from PACK/torchfit-wheels
#                         (pip install --no-index --require-hashes)
# PREFIX                  the env: torchfit install --offline --pack PACK --prefix PREFIX
#
# Run it again to resume: a step already done is not done again. Nothing is written into PACK.
set -eu

PY_MINOR='@MINOR@'
PY_TARBALL='@TARBALL@'
PY_SHA256='@SHA256@'

say() { printf 'install.sh: %s\n' "$*" >&2; }
fail() { code=$1; shift; printf 'install.sh: error: %s\n' "$*" >&2; exit "$code"; }

case $0 in */*) pack=${0%/*} ;; *) pack=. ;; esac
pack=$(cd -- "$pack" && pwd -P) || fail 2 "cannot find the pack's directory from $0"
usage="usage: sh $pack/install.sh PREFIX [torchfit install options]"
[ $# -ge 1 ] || fail 2 "$usage"
case $1 in ''|-*) fail 2 "$usage" ;; esac
prefix=$1
shift
case $prefix in /*) ;; *) prefix=$(pwd -P)/$prefix ;; esac
while :; do case $prefix in */) prefix=${prefix%/} ;; *) break ;; esac; done
[ -n "$prefix" ] || fail 2 "PREFIX: give the env's directory, not /"
[ -f "$pack/pylock.toml" ] || [ -f "$pack/locks/groups.json" ] || fail 2 "$pack: not a torchfit pack (no pylock.toml)"

base=$prefix.torchfit
mark=$base/.made-by-torchfit-install.sh
if [ -e "$base" ] || [ -L "$base" ]; then
    if [ -L "$base" ] || [ ! -d "$base" ] || [ -L "$mark" ] || [ ! -f "$mark" ]; then
        fail 2 "$base: already there and not made by install.sh; move it away (nothing was written)"
    fi
else
    parent=${base%/*}
    [ -z "$parent" ] || mkdir -p -- "$parent"
    mkdir -- "$base"
    : > "$mark"
fi

if [ -n "$PY_TARBALL" ]; then
    py=$base/python/bin/python$PY_MINOR
    if [ ! -x "$py" ]; then
        [ -f "$pack/$PY_TARBALL" ] || fail 1 "$pack/$PY_TARBALL: not in the pack"
        say "checking $PY_TARBALL"
        got=$(sha256sum < "$pack/$PY_TARBALL") || fail 1 "sha256sum could not read $pack/$PY_TARBALL"
        [ "${got%% *}" = "$PY_SHA256" ] || fail 1 "$pack/$PY_TARBALL: sha256 ${got%% *} is not the pack's $PY_SHA256"
        rm -rf -- "$base/python.part"
        mkdir -- "$base/python.part"
        say "unpacking Python into $base/python"
        tar -xzf "$pack/$PY_TARBALL" -C "$base/python.part" || fail 1 "could not unpack $pack/$PY_TARBALL"
        mv -- "$base/python.part/python" "$base/python"
        rmdir -- "$base/python.part"
    fi
    PATH=$base/python/bin:$PATH
    export PATH
else
    py=$(command -v "python$PY_MINOR" || true)
    [ -n "$py" ] || fail 1 "no python$PY_MINOR on PATH, and this pack carries no Python (made with --no-python or where uv had none): pack again with --with-python, or install Python $PY_MINOR"
fi
"$py" -c 'import sys' || fail 1 "$py does not run here (a shared library it needs may be missing: ldd $py)"

tool=$base/tool
if [ ! -f "$tool/.complete" ]; then
    rm -rf -- "$tool"
    say "installing torchfit into $tool (from $pack/torchfit-wheels)"
    "$py" -m venv "$tool" || fail 1 "$py -m venv $tool failed"
    PIP_CONFIG_FILE=/dev/null "$tool/bin/python" -m pip install --quiet --no-index --no-cache-dir \
        --disable-pip-version-check --require-hashes --find-links "$pack/torchfit-wheels" \
        -r "$pack/torchfit-wheels/requirements.txt" || fail 1 "pip could not install torchfit from $pack/torchfit-wheels"
    : > "$tool/.complete"
fi

"$tool/bin/torchfit" install --offline --pack "$pack" --prefix "$prefix" "$@" || exit $?
say "next: $tool/bin/torchfit verify --env $prefix"
"""
