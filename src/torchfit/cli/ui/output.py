"""Files an option names (`-o FILE`, `--output FILE`): a command's output written there."""

from __future__ import annotations

import errno
import os

from torchfit.errors import BadInput, OutputFailed


def write_output(path: str, text: str, option: str = "-o") -> None:
    """Write a command's output to the file an option names, whole or not at all
    (files.write_atomic: a full disk leaves the file that was there intact).

    A path that cannot be written (no such directory, no permission) is BadInput
    (exit 2, one line); a disk that fails under it is OutputFailed (exit 1).
    """
    from torchfit.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        kept = "unchanged" if os.path.lexists(path) else "not created"
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            raise OutputFailed(f"{option} {path}: cannot write ({exc.strerror}); the file is {kept}",
                               hint=f"free space on the filesystem of {os.path.dirname(os.path.abspath(path))}, "
                                    "or write elsewhere") from None
        raise BadInput(f"{option} {path}: cannot write ({exc.strerror}); the file is {kept}") from None
