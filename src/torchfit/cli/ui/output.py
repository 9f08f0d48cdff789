"""Files an option names (`-o FILE`, `--output FILE`): a command's output written there."""

from __future__ import annotations

import errno
import os

from torchfit.errors import BadInput, OutputFailed


def write_output(path: str, text: str, option: str = "-o") -> None:
    """Write a command's output to the file an option names, whole or not at all
    (files.write_atomic: a full disk leaves the file that was there intact).

    A path that cannot be written (no such directory, no permission) is BadInput
    (exit 2, one line); a full disk or quota is DiskFull (torchfit.space: where, what is
    left), another failure of the device OutputFailed (both exit 1).
    """
    from torchfit.files import write_atomic

    try:
        write_atomic(path, text)
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
