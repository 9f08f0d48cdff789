"""GPU marketing names -> CUDA compute capability, from data/gpus.toml.

The only reader of `data/gpus.toml`. Old nvidia-smi builds cannot report
`compute_cap`, and `--assume gpu="NVIDIA GeForce RTX 5090"` names a GPU rather
than an architecture; both need this table. It is read from the installed
package (compat.datafiles), so it works from a wheel and a zip alike. Nothing
is cached: the file is small and tests may want a fresh read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from torchfit.compat.datafiles import read_data_text
from torchfit.compat.versions import Arch
from torchfit.errors import BadInput, MatrixError

GPUS_TOML = "data/gpus.toml"


def _line_of(text: str, key: str) -> int | None:
    needle = f'"{key}"'
    for n, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return n
    return None


def parse_gpu_names(text: str, path: str = GPUS_TOML) -> dict[str, str]:
    """The `[capability]` table of a gpus.toml text; MatrixError names a bad entry."""
    from torchfit._backports import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MatrixError(path, None, f"not valid TOML ({exc})") from exc
    table = data.get("capability")
    if not isinstance(table, dict):
        raise MatrixError(path, None, 'expected a [capability] table of "GPU name" = "9.0"')
    names: dict[str, str] = {}
    for name, cc in table.items():
        if not isinstance(cc, str):
            raise MatrixError(path, _line_of(text, name), f"{name!r}: capability must be a string")
        try:
            Arch.parse(cc)
        except BadInput as exc:
            raise MatrixError(path, _line_of(text, name), f"{name!r}: {exc.message}") from exc
        names[name] = cc
    return names


def load_gpu_names() -> dict[str, str]:
    """Name -> capability ("NVIDIA H200" -> "9.0") from the packaged data/gpus.toml."""
    return parse_gpu_names(read_data_text("gpus.toml"))


# Driver branches name the same part differently ("GeForce GTX 1080 Ti" on old
# drivers, "NVIDIA GeForce GTX 1080 Ti" on newer ones; "Tesla T4" vs "NVIDIA T4"),
# so both words are noise for matching.
_NOISE = re.compile(r"\b(?:nvidia|tesla)\b")


def _norm(name: str) -> str:
    return " ".join(_NOISE.sub(" ", name.lower()).split())


def find_capability(name: str, table: Mapping[str, str]) -> str | None:
    """The capability of the GPU nvidia-smi calls `name`, or None when unknown.

    An exact (normalised) name wins; otherwise the longest table name that starts
    `name` and ends at a word or "-" boundary ("Tesla V100" for
    "Tesla V100-SXM2-32GB", but never "NVIDIA A10" for "NVIDIA A100").
    """
    want = _norm(name)
    if not want:
        return None
    best: tuple[int, str] | None = None
    for known, cc in table.items():
        key = _norm(known)
        if not key:
            continue
        if key == want:
            return cc
        if want.startswith(key) and not want[len(key)].isalnum():
            if best is None or len(key) > best[0]:
                best = (len(key), cc)
    return best[1] if best else None
