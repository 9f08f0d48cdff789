"""What the resolver answers: a `Plan`, and its JSON form both ways.

`plan_to_json` is the `torchfit resolve --json` contract (docs/architecture.md, "Contracts":
keys may be added, never renamed); `plan_from_json` reads it back (a lock's
`[tool.torchfit.plan]`), re-attaching the matrix row when given the matrix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.matrix import Build, Matrix
from torchfit.errors import BadInput
from torchfit.jsontypes import JsonObject


@dataclass(**FROZEN)
class Plan:
    """One consistent stack, and why each part of it was chosen."""

    python: str
    python_version: str
    python_source: str  # "installed" | "uv" (uv python install) | "pyenv" (a build)
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
    # Project packages whose binary for this build is on the project's own wheel page for it
    # (companions.toml's find-links route: PyG's torch-2.8.0+cu128.html): name -> that page,
    # given to uv as a flat index for that package alone, by resolve and by install.
    pages: dict[str, str] = field(default_factory=dict)
    # The interpreter is free-threaded (Py_GIL_DISABLED, "3.14t"): cpXYt wheels only.
    free_threaded: bool = False
    # The matrix row the plan was made from (not part of the JSON contract): later
    # steps (export's platform and glibc, install's lock check) read it instead of
    # looking the build up again by string. None for a plan read back from JSON
    # without a matrix, or whose build this matrix no longer lists.
    build: Build | None = field(default=None, compare=False, repr=False)
    # The URLs of the resolved set's files, uv's answer at planning (not part of the JSON
    # contract): what pip downloads when it installs the plan, whose redirects install's
    # fetch step checks before pip is asked. Empty for a plan of the family alone.
    files: tuple[str, ...] = field(default=(), compare=False, repr=False)


def plan_to_json(plan: Plan) -> JsonObject:
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
        "pages": dict(plan.pages),
    }


def check_plan_table(data: Any, where: str = "the lock's [tool.torchfit.plan]") -> None:
    """BadInput (naming `where` and the key) for a plan table whose keys have the wrong shape.

    A lock is input like any file a user names (issue 25: a torch field holding shell text was
    an internal error when install built a requirement from it): each key present is checked
    for its type, the versions are versions, the variant is one, the Pythons are Python
    versions and the project's lines are PEP 508. Whether the keys a use needs are there is
    that use's to say (`plan_from_json`).
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    from torchfit.compat.matrix import VARIANT_RE
    from torchfit.inputs import has_control

    if not isinstance(data, dict):
        raise BadInput(f"{where}: not a table")

    def one_line(key: str, value: object) -> str:
        if not isinstance(value, str) or has_control(value) or any(ch in value for ch in "\n\t"):
            raise BadInput(f"{where}: {key} must be one line of text, not {value!r:.80}")
        return value

    for key, value in data.items():
        if value is None:
            continue
        if key in _TEXT_KEYS:
            value = one_line(key, value)
            if key in _VERSION_KEYS:
                try:
                    Version(value)
                except InvalidVersion:
                    raise BadInput(f"{where}: {key} {value!r:.80} is not a version") from None
                if value != value.strip():
                    raise BadInput(f"{where}: {key} {value!r:.80} is not a version")
            elif key == "variant" and not VARIANT_RE.match(value):
                raise BadInput(f"{where}: variant {value!r:.80} is not a torch variant (cu128, rocm6.4, cpu)")
            elif key in ("python", "python_version") and not re.fullmatch(r"3\.\d+(\.\d+)?t?", value):
                raise BadInput(f"{where}: {key} {value!r:.80} is not a Python version (3.12)")
        elif key in _LIST_KEYS:
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise BadInput(f"{where}: {key} must be a list of strings")
            for item in value if key in ("project", "constraints") else ():
                try:
                    Requirement(item)
                except InvalidRequirement:
                    raise BadInput(f"{where}: {key} holds {item!r:.80}, not a PEP 508 requirement") from None
        elif key in ("why", "resolved", "pages"):
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise BadInput(f"{where}: {key} must be a table of strings")
        elif key == "ruled_out_relevant" and (not isinstance(value, int) or isinstance(value, bool)):
            raise BadInput(f"{where}: ruled_out_relevant must be an integer")


_VERSION_KEYS = frozenset(("torch", "torchvision", "torchaudio"))
_TEXT_KEYS = _VERSION_KEYS | {"python", "python_version", "python_source", "python_path", "variant", "cuda", "rocm",
                              "cudnn", "nccl", "index_url"}
_LIST_KEYS = frozenset(("packages", "reasons", "warnings", "ruled_out", "hosts", "project", "constraints", "routed"))


def plan_from_json(data: Any, matrix: Matrix | None = None, where: str = "the lock's [tool.torchfit.plan]") -> Plan:
    """The Plan of `plan_to_json`'s output (a lock's [tool.torchfit.plan]); BadInput if incomplete
    or of the wrong shape (`check_plan_table`).

    Keys TOML could not hold (None) may be missing. With `matrix`, the plan gets
    its Build back (`Matrix.find_build`).
    """
    check_plan_table(data, where)

    def tup(key: str) -> tuple[str, ...]:
        return tuple(data.get(key) or ())

    missing = next((k for k in ("torch", "variant", "python", "python_version") if data.get(k) is None), None)
    if missing is not None:
        raise BadInput(f"{where} lacks {missing!r}")
    torch, variant = data["torch"], data["variant"]
    return Plan(
        python=data["python"], python_version=data["python_version"],
        python_source=data.get("python_source") or "installed", python_path=data.get("python_path"),
        free_threaded=bool(data.get("free_threaded")),
        torch=torch, variant=variant, cuda=data.get("cuda"), rocm=data.get("rocm"),
        cudnn=data.get("cudnn"), nccl=data.get("nccl"), torchvision=data.get("torchvision"),
        torchaudio=data.get("torchaudio"), index_url=data.get("index_url") or "",
        packages=tup("packages") or ("torch",), reasons=tup("reasons"), warnings=tup("warnings"),
        ruled_out=tup("ruled_out"), ruled_out_relevant=data.get("ruled_out_relevant") or 0,
        why=dict(data.get("why") or {}), hosts=tup("hosts"), project=tup("project"),
        constraints=tup("constraints"), routed=tup("routed"),
        resolved={str(k): v for k, v in dict(data.get("resolved") or {}).items()},
        pages={str(k): v for k, v in dict(data.get("pages") or {}).items()},
        build=matrix.find_build(torch, variant) if matrix is not None else None,
    )
