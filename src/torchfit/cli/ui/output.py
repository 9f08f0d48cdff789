"""Files an option names (`-o FILE`, `--output FILE`): a command's output written there."""

from __future__ import annotations

from torchfit.errors import BadInput


def write_output(path: str, text: str, option: str = "-o") -> None:
    """Write a command's output to the file an option names; BadInput (one line) if it cannot."""
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot write ({exc.strerror})") from None
