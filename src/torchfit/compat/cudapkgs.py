"""CUDA's own packages the driver cannot run, as constraints for the project's solver.

data/cuda-packages.toml names CUDA's PyPI packages by how they carry their CUDA major
(in the version: `nvidia-cuda-runtime 13.0.96`, `cuda-bindings 13.x`; or in the name:
`nvidia-nccl-cu13`, `cupy-cuda13x`). A host whose driver is below a major's
minor-version-compatibility floor (data/matrix.toml's [[cuda]] rows: 13.x needs >= 580)
cannot load them, so the project is resolved without them: `cuda-bindings<13`, and
`nvidia-nccl-cu13<0` (no release is below 0: the name is kept out). A release of the
project that needs them (vllm >= 0.22.1 on a driver-570 host) then loses to an older
one, or uv's refusal names them (issue 24, class 4). This module is its only reader.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchfit.compat.datafiles import read_data_text
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import Matrix
from torchfit.compat.versions import Dotted
from torchfit.errors import BadInput

_CACHE: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}


def load_cuda_packages(text: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(versioned names, suffixed name templates) of data/cuda-packages.toml."""
    from torchfit._backports import tomllib

    if text is None and "data" in _CACHE:
        return _CACHE["data"]
    raw = text if text is not None else read_data_text("cuda-packages.toml")
    try:
        doc = tomllib.loads(raw)
        versioned = tuple(str(n) for n in doc["versioned"]["names"])
        suffixed = tuple(str(n) for n in doc["suffixed"]["names"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise BadInput(f"cuda-packages.toml: unreadable ({exc})") from None
    if any("{major}" not in n for n in suffixed):
        raise BadInput("cuda-packages.toml: every [suffixed] name needs {major}")
    if text is None:
        _CACHE["data"] = (versioned, suffixed)
    return versioned, suffixed


def major_floors(matrix: Matrix) -> dict[int, Dotted]:
    """The lowest driver that runs each CUDA major (its minor-version-compatibility floor,
    else the lowest toolkit floor of its minors)."""
    out: dict[int, Dotted] = {}
    for version, info in matrix.cuda.items():
        floor = info.mvc_driver or info.toolkit_driver
        if floor is None:
            continue
        major = int(version.split(".")[0])
        if major not in out or floor < out[major]:
            out[major] = floor
    return out


def blocked_majors(matrix: Matrix, hosts: Sequence[HostFacts]) -> list[tuple[int, Dotted]]:
    """(CUDA major, its driver floor) for every major some host's NVIDIA driver is below,
    lowest first; none for hosts without an NVIDIA driver (a CPU or ROCm plan)."""
    drivers = [h.driver for h in hosts if h.nvidia_gpus and h.driver is not None]
    if not drivers:
        return []
    lowest = min(drivers)
    return sorted((m, floor) for m, floor in major_floors(matrix).items() if lowest < floor)


def cuda_exclusions(matrix: Matrix, hosts: Sequence[HostFacts]) -> list[str]:
    """Constraint lines keeping out the CUDA packages of every major some host's driver
    cannot run."""
    blocked = [m for m, _ in blocked_majors(matrix, hosts)]
    if not blocked:
        return []
    versioned, suffixed = load_cuda_packages()
    out = [f"{name}<{blocked[0]}" for name in versioned]
    out += [template.format(major=m) + "<0" for m in blocked for template in suffixed]
    return out
