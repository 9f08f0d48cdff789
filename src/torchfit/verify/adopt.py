"""`torchfit adopt --env PREFIX`: an env torchfit did not build, its torch taken as the base.

A container's PyTorch (NVIDIA's `2.8.0a0+<commit>.nv25.08`), a conda env or a site module
ships a torch build no index serves. adopt reads it the way verify does (the inspection
worker in the env's own interpreter: version, CUDA, arch list, NCCL), judges it against
this host with verify's own judgements (`verify.inspection.judge_inspection`), reads the
pip constraints file the image carries (`PIP_CONSTRAINT`, else `/etc/pip/constraint.txt`,
as pip reads them) and writes PREFIX/pylock.toml with `[tool.torchfit.base]`: the family
as installed (never to be replaced), every distribution installed beside it, the
constraints. `torchfit add` then fits packages around it (installer/add.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.checks import Check, Status
from torchfit.compat.versions import is_pep440, release_label
from torchfit.errors import AdoptRefused, BadInput
from torchfit.jsontypes import JsonObject

if TYPE_CHECKING:
    from torchfit.compat.judgements import GpuHost
    from torchfit.workers.records import InspectionFacts, TorchRecord

CONSTRAINT_FILE = "/etc/pip/constraint.txt"  # NVIDIA's PyTorch containers since 25.03
FAMILY = ("torch", "torchvision", "torchaudio")


@dataclass
class Adopted:
    """What adopt read, judged and wrote."""

    prefix: str
    lock_path: str
    family: dict[str, str]
    torch: TorchRecord
    checks: list[Check]
    constraint_files: list[str]
    constraints: list[str]
    installed: int
    label: str | None  # the base torch's prerelease/local label, e.g. "a0+5228986.nv25.08"
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {"ok": True, "prefix": self.prefix, "lock": self.lock_path, "family": self.family,
                "torch": self.torch, "label": self.label, "constraint_files": self.constraint_files,
                "constraints": self.constraints, "installed": self.installed,
                "checks": [{"id": c.name, "status": c.status.value, "summary": c.summary} for c in self.checks]}


def inspect_env(python: str, timeout: float) -> tuple[InspectionFacts, list[Check]]:
    """verify's inspection of `python` (the worker run in that interpreter, watched), and its
    judgement against this host (`judge_inspection`): (facts, checks)."""
    from torchfit.owned import owned_temp_dir, remove_owned_dir
    from torchfit.verify.inspection import judge_inspection
    from torchfit.verify.watch import Inspection, child_env

    work = owned_temp_dir("adopt")
    try:
        insp = Inspection(python, work, child_env(), timeout)
        try:
            while not insp.finished:
                insp.poll()
                time.sleep(0.05)
        finally:
            insp.child.stop()
        facts = insp.facts
        checks = insp.checks() + judge_inspection(facts, None, None, None, complete=insp.done,
                                                  gpu_host=_gpu_host(facts, timeout))
    finally:
        remove_owned_dir(work)
    return facts, checks


def _gpu_host(facts: InspectionFacts, timeout: float) -> GpuHost | None:
    torch = facts.get("torch") or {}
    if not torch or torch.get("cuda") or torch.get("hip"):
        return None
    from torchfit.host import probe_gpu_host
    from torchfit.runner import Runner

    return probe_gpu_host(Runner(), timeout=min(timeout, 10.0))


def constraint_files(environ: Mapping[str, str]) -> list[str]:
    """pip's constraints files: `PIP_CONSTRAINT` (whitespace-separated, as pip splits it), else
    the image's /etc/pip/constraint.txt when there is one."""
    named = (environ.get("PIP_CONSTRAINT") or "").split()
    if named:
        return named
    return [CONSTRAINT_FILE] if os.path.isfile(CONSTRAINT_FILE) else []


def read_constraints(paths: Sequence[str]) -> list[str]:
    """The requirement lines of constraints files (comments, blanks and options left out);
    BadInput naming `file:line` for one that does not parse."""
    from torchfit.inputs import read_text_file, shown

    out: list[str] = []
    for path in paths:
        text = read_text_file(path, "constraints file", limit=1 << 20)
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
            if not line or line.startswith("-"):
                continue
            try:
                out.append(str(Requirement(line)))
            except InvalidRequirement:
                raise BadInput(f"{shown(path)}:{n}: not a requirement: {line[:120]!r}") from None
    return list(dict.fromkeys(out))


def adopt(prefix: str, *, force: bool, timeout: float, environ: Mapping[str, str]) -> Adopted:
    """Read, judge and record the env at `prefix` (see the module docstring)."""
    from torchfit.access import find_unwritable
    from torchfit.files import write_atomic
    from torchfit.lock.model import Lock
    from torchfit.lock.pylock import LOCK_NAME, render_lock
    from torchfit.lock.tool import ToolTable, utc_now

    python = os.path.join(prefix, "bin", "python")
    if not os.path.isdir(prefix):
        raise BadInput(f"--env {prefix}: no such directory")
    if not os.access(python, os.X_OK):
        raise BadInput(f"--env {prefix}: no bin/python in it (give a venv or conda env's directory)")
    lock_path = os.path.join(prefix, LOCK_NAME)
    if os.path.lexists(lock_path) and not force:
        raise BadInput(f"{lock_path} exists: the env has a lock already (--force replaces it with the base's)")
    # The lock is written into PREFIX: said before the inspection (seconds to minutes), not
    # after it as a PermissionError at the write.
    denied = find_unwritable(prefix)
    if denied is not None:
        raise BadInput(f"--env {prefix}: adopt writes its lock there, and {denied.sentence()}; "
                       f"ask {denied.owner} to adopt it, or adopt a copy of your own")
    files = constraint_files(environ)
    constraints = read_constraints(files)
    facts, checks = inspect_env(python, timeout)
    torch = facts.get("torch") or {}
    if not torch.get("version"):
        # An inspection that stalled (an import hung past --timeout) or died says so: its torch
        # was not read, which is not an env without torch.
        broken = next((c for c in checks if c.name == "inspect" and c.status is Status.FAIL), None)
        if broken is not None:
            raise AdoptRefused(f"{prefix}: its torch could not be read: {broken.summary}", checks)
        why = facts.get("torch_error") or "torch did not report"
        raise AdoptRefused(f"{prefix}: no torch to adopt ({why})", checks)
    failed = [c for c in checks if c.status is Status.FAIL]
    if failed:
        raise AdoptRefused(f"{prefix}'s torch {torch['version']} fails on this host: "
                           + "; ".join(f"{c.name}: {c.summary}" for c in failed), checks)
    sites = _sites(prefix, str(torch.get("file") or ""))
    installed = _installed(sites)
    family = {n: installed[n] for n in FAMILY if n in installed}
    if family.get("torch") != torch["version"]:
        raise AdoptRefused(f"{prefix}: torch {torch['version']} imports, but its dist-info says "
                           f"{family.get('torch') or 'nothing'}: a half-replaced install", checks)
    # The base's family is pinned by version in every later `add` (uv's `torch==V`, the lock's
    # PEP 751 `version`): one that is not PEP 440 (`unknown`, `2.8.0-custom build`, `2.8.0+`)
    # cannot be pinned or compared by packaging, pip or uv, so there is no base to fit around.
    for member, version in family.items():
        if not is_pep440(version):
            raise AdoptRefused(f"{prefix}: {member}'s version {version!r} is not a PEP 440 version, so pip and "
                               f"uv cannot pin it or fit packages around it", checks)
    for text in constraints:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        have = family.get(name) or installed.get(name)
        if have and not is_pep440(have):
            raise AdoptRefused(f"the constraints ({', '.join(files)}) say {text}, and {prefix}'s {name} "
                               f"{have!r} is not a PEP 440 version to hold to it", checks)
        if have and not req.specifier.contains(Version(have), prereleases=True):
            raise AdoptRefused(f"the constraints ({', '.join(files)}) say {text}, and {prefix} has {name} {have}",
                               checks)
    py = facts.get("python") or {}
    cuda = torch.get("cuda")
    variant = f"cu{str(cuda).replace('.', '')}" if cuda else ("rocm" + str(torch.get("hip"))[:3] if torch.get("hip")
                                                              else "cpu")
    libs = facts.get("libs") or {}
    nccl = (libs.get("nccl") or {}).get("code")
    from torchfit.verify.inspection import code_text

    version = str(torch["version"])
    now = utc_now()
    label = release_label(version)
    base: dict[str, Any] = {"family": family, "installed": installed, "cuda": cuda, "hip": torch.get("hip"),
            "arch_list": list(facts.get("arch_list") or []), "nccl": code_text(nccl) if nccl else None,
            "label": label, "site": sites, "constraint_files": files,
            "constraints": constraints, "adopted": now, "python": python}
    expected = {k: v for k, v in {"torch": version, "cuda": cuda, "nccl": base["nccl"],
                                  "python": py.get("version")}.items() if v}
    tool = ToolTable.for_adopt(python=py.get("version"), torch=Version(version).public, variant=variant,
                               family=family, installed=installed, base=base, expected=expected, created=now)
    write_atomic(lock_path, render_lock(Lock(packages=(), tool=tool)))
    return Adopted(prefix=prefix, lock_path=lock_path, family=family, torch=torch, checks=checks,
                   constraint_files=files, constraints=constraints, installed=len(installed),
                   label=label)


def _sites(prefix: str, torch_file: str) -> list[str]:
    """The env's site directories, and the one torch was imported from (a base Python's, under
    `--system-site-packages`)."""
    from torchfit.lock.closure import env_site_dirs

    sites = env_site_dirs(prefix)
    if torch_file:
        sites.append(os.path.dirname(os.path.dirname(torch_file)))
    return list(dict.fromkeys(os.path.realpath(s) for s in sites))


def _installed(sites: Sequence[str]) -> dict[str, str]:
    """name -> version of every distribution in `sites` (the first site that has it wins, as
    on sys.path)."""
    from torchfit.lock.closure import dist_info_version

    out: dict[str, str] = {}
    for site in sites:
        try:
            entries = sorted(os.listdir(site))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            version = dist_info_version(os.path.join(site, entry))
            name = canonicalize_name(entry[: -len(".dist-info")].split("-")[0])
            if version:
                out.setdefault(name, version)
    return out
