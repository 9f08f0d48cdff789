"""The build context of `export --format containerfile`: the directory of `-o DIR/Containerfile`.

`pack_lock` checks a `--pack` (a pack of `torchfit pack`, inside the context, of the lock given);
`write_context` writes the context: torchfit's wheels (export.ownwheels), the lock (without a
pack) and the Containerfile (export.containerfile), which is written last, so a context with a
Containerfile is complete.

The context is the user's directory, not torchfit's: every file goes in through files.write_beside
(a new O_EXCL file beside it, renamed), nothing planted there is followed, and a symlink or FIFO
where a file goes is refused naming it. The lock is copied only where no lock is, or the same one
(kept): a different pylock.toml already in the context is refused, never replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from torchfit.errors import BadInput
from torchfit.export.containerfile import (
    WHEELS,
    Source,
    base_digest,
    check_base,
    choose_base,
    glibc_floor,
    os_family,
    render_containerfile,
)
from torchfit.export.stack import Stack
from torchfit.files import existing_file, open_beneath, write_beside, write_into
from torchfit.lock.pylock import load_lock, sha256_file

if TYPE_CHECKING:
    from torchfit.lock.model import Lock
    from torchfit.runner import Runner


@dataclass
class Context:
    context: str
    containerfile: str
    base: str


def _context_dir(output: str | None) -> str:
    if not output:
        raise BadInput("--format containerfile writes a build context: give -o DIR/Containerfile "
                       "(DIR gets torchfit's wheels and the lock beside it)")
    if os.path.isdir(output):
        raise BadInput(f"-o {output}: a directory; give the Containerfile's path, -o {output.rstrip('/')}/Containerfile")
    return os.path.dirname(os.path.abspath(output))


def pack_lock(pack: str, lock: str | None, output: str | None) -> str:
    """The lock of `--pack DIR` (DIR/pylock.toml); BadInput unless DIR is a pack inside the build
    context and, with `--lock FILE` too, a pack of that very lock."""
    from torchfit.export.pack import MARKER

    context = _context_dir(output)
    full = os.path.abspath(pack)
    if not os.path.isfile(os.path.join(full, MARKER)) or not os.path.isfile(os.path.join(full, "pylock.toml")):
        raise BadInput(f"--pack {pack}: not a pack (make one with torchfit pack --lock FILE -o DIR)")
    if os.path.commonpath([context, full]) != context or full == context:
        raise BadInput(f"--pack {pack}: must be inside the build context {context} (the directory of -o), "
                       "where the build can reach it")
    inside = os.path.join(full, "pylock.toml")
    if lock and sha256_file(lock) != sha256_file(inside):
        raise BadInput(f"--pack {pack}: a pack of another lock than --lock {lock}")
    return inside


def _refuse_local_files(lock: Lock, lock_path: str, context: str) -> None:
    """A lock whose files lie on this machine (file:// URLs or paths: what a site's file://
    mirror gives) builds no image from the lock alone: the build cannot reach them. Refused in
    one line naming a pack, before anything is written (issue 35)."""
    local = [(d, a) for d in lock.packages for a in d.artifacts
             if a.path or (a.url or "").lower().startswith("file:")]
    if not local:
        return
    d, a = local[0]
    name = a.filename or os.path.basename(a.path or a.url or "") or f"{d.name} {d.version}"
    more = f" and {len(local) - 1} more" if len(local) > 1 else ""
    pack = os.path.join(context, "pack")
    raise BadInput(f"--lock {lock_path}: its files lie on this machine ({name}{more}), out of an image build's "
                   f"reach: pack them into the build context and build from the pack (torchfit pack --lock "
                   f"{lock_path} -o {pack}, then export with --pack {pack}); nothing was written")


def write_context(stack: Stack, lock_path: str, output: str | None, *, pack: str | None, base: str | None,
                  pypi_url: str, runner: Runner, fetch: Callable[[str, Any], tuple[int, str]],
                  say: Callable[[str], None], version: str) -> Context:
    """Write the context of the lock's image; the Containerfile last."""
    context = _context_dir(output)
    containerfile = os.path.abspath(str(output))
    lock = load_lock(lock_path)
    if not stack.python:
        raise BadInput(f"--lock {lock_path}: names no Python version; an image needs the one its wheels are for")
    floor = glibc_floor(stack)
    if base is not None:
        base = check_base(base)
        why = "--base, pinned by its digest" if base_digest(base) else "--base"
    else:
        chosen, why = choose_base(stack.python, floor, [os_family(str(h.get("os") or "")) for h in lock.hosts()])
        base = chosen.image
    if pack:
        source = Source(pack=os.path.relpath(os.path.abspath(pack), context), lock="")
    else:
        _refuse_local_files(lock, lock_path, context)
        source = Source(pack=None, lock="pylock.toml")

    def render(wheels_sha256: str) -> str:
        return render_containerfile(stack, source=source, pin=lock.pin(), plan=lock.plan(),
                                    lock_sha256=sha256_file(lock_path), base=base, base_why=why, version=version,
                                    wheels_sha256=wheels_sha256)

    render("0" * 64)  # first: a lock no image can be built from is refused before anything is written
    if os.path.isdir(context):  # a Containerfile that is not a file: refused before anything is written
        dfd = open_beneath(context, create=False)
        try:
            existing_file(dfd, os.path.basename(containerfile), str(output))
        finally:
            os.close(dfd)
    os.makedirs(context, exist_ok=True)
    if not pack and os.path.abspath(lock_path) != os.path.join(context, "pylock.toml"):
        with open(lock_path, "rb") as fh:
            data = fh.read()
        dfd = open_beneath(context, create=False)
        try:
            write_beside(dfd, "pylock.toml", data, where=os.path.join(context, "pylock.toml"), differing="refuse")
        finally:
            os.close(dfd)
    from torchfit.compat.tags import TORCH_MANYLINUX_FLOORS
    from torchfit.export.ownwheels import write_own_wheels

    wheels = os.path.join(context, WHEELS)
    write_own_wheels(wheels, python=stack.python, arch=stack.arches[0], glibc=floor or TORCH_MANYLINUX_FLOORS[-1], pypi_url=pypi_url,
                     runner=runner, fetch=fetch, say=say)
    text = render(sha256_file(os.path.join(wheels, "requirements.txt")))
    write_into(containerfile, text)
    return Context(context, containerfile, base)
