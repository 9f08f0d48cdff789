"""`Stack`: what `torchfit export` writes, built from a plan or from a PEP 751 lock.

A Stack is the torch family's pins, the variant index they come from, the target
(Python, platforms, glibc floor) and, from a lock, every locked distribution. The
format modules (`requirements`, `uv`, `pylock`) render it; the helpers here are
what every format's text shares (the header, public index URLs, the `+variant` pin).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.compat.plan import Plan
from torchfit.errors import BadInput
from torchfit.lock.model import Lock, LockedDist
from torchfit.lock.pylock import load_pylock
from torchfit.redact import strip_credentials


@dataclass(**FROZEN)
class Stack:
    """What gets exported: the torch family pins, the index, the target, and any locked files."""

    torch: str  # public version, "2.13.0"
    variant: str  # "cpu", "cu128"
    python: str  # "3.11"
    index_url: str  # the variant index (may hold credentials: never written out)
    family: tuple[tuple[str, str], ...]  # (name, version) of torch and the companions asked for
    arches: tuple[str, ...] = ("x86_64",)
    glibc: str | None = None  # the build's floor ("2.28"), for the manylinux target
    hosts: tuple[str, ...] = ()
    locked: tuple[LockedDist, ...] = ()
    origin: str = "plan"  # "plan" | "lock FILE"
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The project around the family (issue 18): its PEP 508 requirements as asked, the
    # constraints of its -c files, and (from a plan whose whole set was resolved) the
    # version of every other package of that set, (name, version), sorted.
    project: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    resolved: tuple[tuple[str, str], ...] = ()
    # Project packages whose binary comes from the torch index like the family's
    # (companions.toml: xformers' cuXXX wheels; `Plan.routed`).
    routed: tuple[str, ...] = ()

    @property
    def index_name(self) -> str:
        """The uv index name: `pytorch-cu128`."""
        return "pytorch-" + re.sub(r"[^a-z0-9-]+", "-", self.variant.lower())


def stack_from_plan(plan: Plan, *, arches: Sequence[str] = (), glibc: str | None = None) -> Stack:
    family = [("torch", plan.torch)]
    for name in ("torchvision", "torchaudio"):
        ver = getattr(plan, name)
        if name in plan.packages and ver:
            family.append((name, ver))
    return Stack(
        torch=plan.torch, variant=plan.variant, python=plan.python, index_url=plan.index_url,
        family=tuple(family), arches=tuple(dict.fromkeys(arches)) or ("x86_64",), glibc=glibc,
        hosts=plan.hosts, project=tuple(plan.project), constraints=tuple(plan.constraints),
        resolved=tuple(sorted((n, v) for n, v in plan.resolved.items() if n not in FAMILY_PACKAGES)),
        routed=tuple(getattr(plan, "routed", ())),
    )


def stack_from_lock(lock: Lock, path: str) -> Stack:
    """A `Stack` whose pins and files are the lock's (variant from torch's local label)."""
    where = f"--lock {path}"
    torch = lock.find("torch")
    if torch is None or not torch.version:
        raise BadInput(f"{where}: locks no torch version")
    try:
        tv = Version(torch.version)
    except InvalidVersion:
        raise BadInput(f"{where}: torch version {torch.version!r} is not a version") from None
    # [tool.torchfit]: the plan `torchfit install` records ([tool.torchfit.plan] = `resolve
    # --json`) or an export's (lock.tool reads an older export's own keys into it too).
    plan = lock.plan()
    variant = str(plan.get("variant") or tv.local or "")
    if not variant:
        raise BadInput(f"{where}: torch {torch.version} has no local label (+cu128) and the lock names no "
                       "[tool.torchfit] variant")
    index = torch.index or lock.torch_index_url() or str(plan.get("index_url") or "")
    if not index:
        raise BadInput(f"{where}: says nowhere which index torch came from (packages.index)")
    python = str(plan.get("python") or "")
    m = re.match(r"^\s*==\s*(\d+\.\d+)(\.\*)?\s*$", lock.requires_python or "")
    if not python and m:
        python = m.group(1)
    arches = tuple(a for a in ("x86_64", "aarch64")
                   if any(a in (f.filename or f.url or "") for f in torch.artifacts)) or ("x86_64",)
    family = tuple((d.name, d.version or "") for n in FAMILY_PACKAGES if (d := lock.find(n)) is not None)
    # The family came from the lock's torch index, whether or not each entry says so.
    packages = tuple(replace(d, index=d.index or index) if d.name in FAMILY_PACKAGES else d for d in lock.packages)
    return Stack(
        torch=str(tv.public), variant=variant, python=python or "", index_url=index, family=family,
        arches=arches, locked=packages, origin=f"lock {path}",
        # What the env was asked for beyond the family (install's project, `torchfit add`'s).
        project=_strings(plan.get("project")), constraints=_strings(plan.get("constraints")),
        routed=_strings(plan.get("routed")),
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, (list, tuple)) else ()


def load_lock(path: str) -> Stack:
    """`export --lock PATH`: any PEP 751 lock, read by `lock.pylock`, as a Stack."""
    from torchfit.inputs import shown

    return stack_from_lock(load_pylock(path), shown(path))


def with_index(stack: Stack, url: str | None) -> Stack:
    """Replace the variant index (`--torch-index-url`, `{variant}` substituted)."""
    if not url:
        return stack
    return replace(stack, index_url=url.replace("{variant}", stack.variant).rstrip("/"))


# --- what every format's text shares --------------------------------------------------


def public_url(url: str) -> str:
    """An index URL safe to write into a file: no credentials."""
    return strip_credentials(url).rstrip("/")


def header(stack: Stack, fmt: str, today: _dt.date | None) -> list[str]:
    from torchfit import __version__

    day = (today or _dt.date.today()).isoformat()
    what = ", ".join(f"{n} {v}" for n, v in stack.family)
    lines = [
        f"Generated by torchfit {__version__} (torchfit export --format {fmt}) on {day}.",
        f"Stack: {what} ({stack.variant}), Python {stack.python or 'as locked'}"
        + (f", for {', '.join(stack.hosts)}" if stack.hosts else "")
        + (f"; from {stack.origin}" if stack.origin != "plan" else "") + ".",
    ]
    if public_url(stack.index_url) != stack.index_url.rstrip("/"):
        lines.append("Credentials were removed from the index URL: supply them through ~/.netrc, "
                     "keyring or the tool's environment variables.")
    lines.extend(stack.notes)
    return lines


def comment(lines: Sequence[str]) -> str:
    """`lines` as a block of `# ` comments."""
    return "".join(f"# {h}".rstrip() + "\n" for h in lines)


def pin(name: str, version: str, variant: str, *, local: bool) -> str:
    """`torch==2.8.0+cu128`: the local label ties the pin to the variant index's build."""
    if local and "+" not in version:
        return f"{name}=={version}+{variant}"
    return f"{name}=={version}"


def environments(stack: Stack) -> list[str]:
    """PEP 508 markers of the stack's platforms (PEP 751 / uv `environments`)."""
    return [f"sys_platform == 'linux' and platform_machine == '{a}'" for a in stack.arches]
