"""torchfit's own data files (data/matrix.toml, data/gpus.toml), read as text.

Straight from the package directory when it is on a file system (the usual
install); through importlib.resources otherwise (a zip), which costs ~10 ms of
imports that a plain `open` does not.
"""

from __future__ import annotations

import os


def read_data_text(name: str) -> str:
    """The text of `data/NAME` inside the torchfit package."""
    import torchfit

    here = os.path.join(os.path.dirname(os.path.abspath(torchfit.__file__)), "data", name)
    try:
        with open(here, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        from importlib import resources

        return resources.files("torchfit").joinpath("data").joinpath(name).read_text(encoding="utf-8")
