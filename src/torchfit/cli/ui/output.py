"""Where a command's output goes: the file an option names (`-o FILE`, `--output FILE`), or
stdout as it is (`write_data`), and the line on stderr saying what was written where."""

from __future__ import annotations

import errno
import os
import sys
from typing import TYPE_CHECKING

from torchfit.errors import BadInput, OutputFailed

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from torchfit.export.container_context import Context
    from torchfit.export.pack import PackResult
    from torchfit.export.stack import Stack
    from torchfit.lock.served import Served


def write_output(path: str, text: str, option: str = "-o", *, follow: bool = True) -> None:
    """Write a command's output to the file an option names, whole or not at all
    (files.write_atomic: a full disk leaves the file that was there intact). Not `follow`: a file
    in a directory torchfit does not own outright (a modulefile in a site's module tree), written
    by files.write_into: a symlink, FIFO or device at the path is refused naming it (NotOurs, exit 2).

    Missing directories on the way are made. A path that cannot be written (a file where a
    directory must be, no permission) is BadInput
    (exit 2, one line); a full disk or quota is DiskFull (torchfit.space: where, what is
    left), another failure of the device OutputFailed (both exit 1).
    """
    from torchfit.files import write_atomic, write_into

    try:
        # The directories the user named are made where missing (`-o modulefiles/torch/2.13.lua`
        # in a new module tree, issue 35), as `pack -o DIR` makes its directory.
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if follow:
            write_atomic(path, text)
        else:
            write_into(path, text)
    except OSError as exc:
        kept = "unchanged" if os.path.lexists(path) else "not created"
        folder = os.path.dirname(os.path.abspath(path))
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            from torchfit.space import Place, disk_full

            place = Place(f"the directory of {option}", folder, f"free space there, or give {option} a path elsewhere")
            raise disk_full(f"writing {option} (the file there is {kept})", os.path.abspath(path), [place],
                            quota=exc.errno == errno.EDQUOT) from None
        if exc.errno in (errno.EIO, errno.EFBIG):
            raise OutputFailed(f"{option} {path}: cannot write ({exc.strerror}); the file is {kept}",
                               hint=f"check the device behind {folder}, or write elsewhere") from None
        raise BadInput(f"{option} {path}: cannot write ({exc.strerror}); the file is {kept}") from None


def write_data(text: str) -> None:
    """A command's machine output that is not JSON, on stdout exactly as given: a diff, a
    completion script, a doc page, an export, a Slurm script, an srun task's framed record.

    Why a function for one write: cli/commands/ writes nothing itself (every word and every
    byte it shows goes through cli/ui/; tests/test_architecture.py checks that only JSON dumps
    are printed there), and this is the one place such text meets stdout. It bypasses rich on
    purpose: another program (patch, a shell, srun's reader) reads it, so no wrapping, markup
    or colour may touch it.
    """
    sys.stdout.write(text)


def render_export_written(path: str, fmt: str, stack: Stack) -> None:
    """`export -o FILE`: the line saying what went into FILE (on stderr; stdout stays empty)."""
    from torchfit.inputs import shown

    sys.stderr.write(f"torchfit: wrote {shown(path)} ({fmt}: {_family(stack)}, {stack.variant})\n")


def render_context_written(made: Context, stack: Stack, offline: bool) -> None:
    """`export --format containerfile`: the Containerfile written, and the command that builds it."""
    from torchfit.inputs import shown

    sys.stderr.write(f"torchfit: wrote {shown(made.containerfile)} (base {made.base}; "
                     f"{_family(stack)}, {stack.variant}); build it: "
                     f"cd {shown(made.context)} && podman build {'--network none ' if offline else ''}"
                     "-f Containerfile .\n")


def render_pack_written(path: str, result: PackResult) -> None:
    """`torchfit pack`: the pack written, how many files, and that each was checked."""
    from torchfit.inputs import shown

    sys.stderr.write(f"torchfit: wrote the pack {shown(path)}: {result.files} files ({result.fetched} fetched, "
                     f"{result.kept} already there), each checked against the lock's sha256\n")


def render_served(lock_path: str, served: Sequence[Served], locked: Mapping[str, object], *, as_json: bool) -> None:
    """`pack --check`: one object (--json: with `locked`, what the lock holds: its plan's Python,
    torch, variant and CUDA, each package's version), or a line per file the source lost or changed
    and a summary line, on stdout."""
    from torchfit.inputs import shown, terminal_text
    from torchfit.text import format_bytes

    bad = [s for s in served if s.why is not None]
    total = sum(s.size for s in served)
    if as_json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("pack-check", {"ok": not bad, "lock": lock_path, "locked": dict(locked),
                                       "files": len(served), "bytes": total,
                                       "problems": [s.to_json() for s in bad],
                                       "checked": [s.to_json() for s in served]}))
        return
    lines = [terminal_text(f"  NOT SERVED {s.package} {s.version}: {s.file}: {s.why}") for s in bad]
    lines.append(f"ok: the {len(served)} files of {shown(lock_path)} are served with the lock's sha256 "
                 f"({format_bytes(total)} read)" if not bad else
                 f"{len(bad)} of the {len(served)} files of {shown(lock_path)} not served as locked: "
                 f"{', '.join(sorted({s.package for s in bad}))}")
    sys.stdout.write("\n".join(lines) + "\n")


def _family(stack: Stack) -> str:
    return ", ".join(f"{n} {v}" for n, v in stack.family)
