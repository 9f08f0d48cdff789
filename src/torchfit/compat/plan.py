"""What the resolver answers: a `Plan`, and its JSON form both ways.

`plan_to_json` is the `torchfit resolve --json` contract (DESIGN.md, "Contracts":
keys may be added, never renamed); `plan_from_json` reads it back (a lock's
`[tool.torchfit.plan]`), re-attaching the matrix row when given the matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.matrix import Build, Matrix
from torchfit.errors import BadInput


@dataclass(**FROZEN)
class Plan:
    """One consistent stack, and why each part of it was chosen."""

    python: str
    python_version: str
    python_source: str  # "installed" | "pyenv"
    python_path: str | None
    torch: str
    variant: str
    cuda: str | None
    rocm: str | None
    cudnn: str | None
    nccl: str | None
    torchvision: str | None
    torchaudio: str | None
    index_url: str
    packages: tuple[str, ...]
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    ruled_out: tuple[str, ...] = ()
    # The first `ruled_out_relevant` entries are builds for this host's kind of
    # hardware; the rest (CPU and ROCm builds on an NVIDIA host...) are only counted.
    ruled_out_relevant: int = 0
    why: dict[str, str] = field(default_factory=dict)
    hosts: tuple[str, ...] = ()
    # The user's own project (issue 18): the PEP 508 requirements outside the torch
    # family, as given (REQ, -r FILE, --project DIR), the `-c` constraints, and, once
    # uv has resolved the whole set, every package's version (normalized name ->
    # version, the family included). Empty for a plan of the torch family alone.
    project: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    resolved: dict[str, str] = field(default_factory=dict)
    # Project packages whose binary for this build comes from the torch index, as the
    # family's does (companions.toml: xformers' cuXXX builds); routed there by install.
    routed: tuple[str, ...] = ()
    # The interpreter is free-threaded (Py_GIL_DISABLED, "3.14t"): cpXYt wheels only.
    free_threaded: bool = False
    # The matrix row the plan was made from (not part of the JSON contract): later
    # steps (export's platform and glibc, install's lock check) read it instead of
    # looking the build up again by string. None for a plan read back from JSON
    # without a matrix, or whose build this matrix no longer lists.
    build: Build | None = field(default=None, compare=False, repr=False)


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The success object of `torchfit resolve --json`."""
    return {
        "ok": True,
        "python": plan.python,
        "python_version": plan.python_version,
        "python_source": plan.python_source,
        "python_path": plan.python_path,
        "free_threaded": plan.free_threaded,
        "torch": plan.torch,
        "variant": plan.variant,
        "cuda": plan.cuda,
        "rocm": plan.rocm,
        "cudnn": plan.cudnn,
        "nccl": plan.nccl,
        "torchvision": plan.torchvision,
        "torchaudio": plan.torchaudio,
        "index_url": plan.index_url,
        "packages": list(plan.packages),
        "reasons": list(plan.reasons),
        "warnings": list(plan.warnings),
        "ruled_out": list(plan.ruled_out),
        "ruled_out_relevant": plan.ruled_out_relevant,
        "why": dict(plan.why),
        "hosts": list(plan.hosts),
        "project": list(plan.project),
        "constraints": list(plan.constraints),
        "resolved": dict(plan.resolved),
        "routed": list(plan.routed),
    }


def plan_from_json(data: dict[str, Any], matrix: Matrix | None = None) -> Plan:
    """The Plan of `plan_to_json`'s output (a lock's [tool.torchfit.plan]); BadInput if incomplete.

    Keys TOML could not hold (None) may be missing. With `matrix`, the plan gets
    its Build back (`Matrix.find_build`).
    """
    def tup(key: str) -> tuple[str, ...]:
        return tuple(str(x) for x in data.get(key) or ())

    try:
        torch, variant = str(data["torch"]), str(data["variant"])
        return Plan(
            python=str(data["python"]), python_version=str(data["python_version"]),
            python_source=str(data.get("python_source") or "installed"), python_path=data.get("python_path"),
            free_threaded=bool(data.get("free_threaded")),
            torch=torch, variant=variant, cuda=data.get("cuda"), rocm=data.get("rocm"),
            cudnn=data.get("cudnn"), nccl=data.get("nccl"), torchvision=data.get("torchvision"),
            torchaudio=data.get("torchaudio"), index_url=str(data.get("index_url") or ""),
            packages=tup("packages") or ("torch",), reasons=tup("reasons"), warnings=tup("warnings"),
            ruled_out=tup("ruled_out"), ruled_out_relevant=int(data.get("ruled_out_relevant") or 0), why=dict(data.get("why") or {}), hosts=tup("hosts"),
            project=tup("project"), constraints=tup("constraints"), routed=tup("routed"),
            resolved={str(k): str(v) for k, v in dict(data.get("resolved") or {}).items()},
            build=matrix.find_build(torch, variant) if matrix is not None else None,
        )
    except KeyError as exc:
        raise BadInput(f"the lock's [tool.torchfit.plan] lacks {exc.args[0]!r}") from None
