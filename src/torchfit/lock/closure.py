"""Is an environment whole: is every dependency of every installed distribution there?

A lock is installed with `--no-deps` (the lock is the whole list), so a lock that
lost an entry (hand-trimmed, tampered) gives an env where `import torch` works and
`torch.compile` dies on `No module named 'sympy'`. `install --lock` and
`verify --lock` both run `PROBE` in the env and judge its answer with `judge_closure`
(the same function, so they cannot disagree); it does what `pip check` does, without
needing pip or uv in the env (a uv-made venv has no pip): the target interpreter lists
its distributions and its marker environment, and `find_closure_problems` judges them
with `packaging`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

# Run by the target interpreter: its distributions with their Requires-Dist, and the
# values PEP 508 markers are evaluated against (packaging.markers.default_environment).
PROBE = r"""
import json, os, platform, sys
from importlib import metadata
def fmt(info):
    v = "{0.major}.{0.minor}.{0.micro}".format(info)
    return v + (info.releaselevel[0] + str(info.serial) if info.releaselevel != "final" else "")
env = {
    "implementation_name": sys.implementation.name,
    "implementation_version": fmt(sys.implementation.version),
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(), "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}
dists = []
prefix = os.path.realpath(sys.prefix) + os.sep
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name:
        where = os.path.realpath(str(d.locate_file("")))
        dists.append([name, d.version, list(d.requires or []), (where + os.sep).startswith(prefix)])
print("TORCHFIT-CLOSURE " + json.dumps({"env": env, "dists": dists}))
"""
MARKER = "TORCHFIT-CLOSURE "


def parse_closure_output(stdout: str) -> dict[str, Any] | None:
    """The probe's JSON line, or None when it printed none."""
    for line in stdout.splitlines():
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def judge_closure(data: Mapping[str, Any], *, nccl_override: bool) -> list[str]:
    """The problems of a `PROBE` answer. With `nccl_override` (the env's NCCL pin is an
    nvidia-nccl wheel installed over torch's own: install --nccl) the NCCL wheels may
    differ from torch's pin on purpose and are not judged; otherwise they are, as
    every other distribution."""
    dists = data.get("dists") or []
    nccl = [str(d[0]) for d in dists if nccl_override
            and canonicalize_name(str(d[0])).startswith("nvidia-nccl")]
    return find_closure_problems(dists, data.get("env") or {}, nccl)


def find_closure_problems(
    dists: Sequence[Sequence[Any]], env: Mapping[str, str], ignore: Sequence[str] = ()
) -> list[str]:
    """What `pip check` would report: "torch 2.13.0 requires sympy>=1.13.3, which is not
    installed", "... requires X<2, but X 2.1 is installed", for the distributions
    installed in the env (a 4th item False: found elsewhere on sys.path, skipped as a
    requirer, still counted as installed). `ignore`: distributions
    whose version may differ on purpose (an NCCL wheel pinned over torch's own)."""
    installed: dict[str, str] = {}
    for item in dists:
        installed.setdefault(canonicalize_name(str(item[0])), str(item[1]))
    skip = {canonicalize_name(n) for n in ignore}
    problems: list[str] = []
    seen: set[str] = set()
    for item in dists:
        name, version, requires = item[0], item[1], item[2]
        key = canonicalize_name(str(name))
        if key in seen:
            continue
        seen.add(key)
        if len(item) > 3 and not item[3]:
            continue  # not installed in the env (PYTHONPATH, user site): not the env's to answer for
        for text in requires or []:
            try:
                req = Requirement(str(text))
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
                continue
            dep = canonicalize_name(req.name)
            have = installed.get(dep)
            if have is None:
                problems.append(f"{name} {version} requires {req}, which is not installed")
                continue
            if dep in skip or not req.specifier:
                continue
            try:
                ok = req.specifier.contains(Version(have), prereleases=True)
            except InvalidVersion:
                continue
            if not ok:
                problems.append(f"{name} {version} requires {req}, but {req.name} {have} is installed")
    return problems
