"""Is an environment whole: is every dependency of every installed distribution there?

A lock is installed with `--no-deps` (the lock is the whole list), so a lock that
lost an entry (hand-trimmed, tampered) gives an env where `import torch` works and
`torch.compile` dies on `No module named 'sympy'`. `install --lock` and
`verify --lock` both call `probe_closure` (the same function, so they cannot
disagree): it runs `workers/closure_worker.py` in the env, which lists the env's
distributions and its marker environment (one `closure` record, the workers' record
protocol), and `judge_closure` does with them what `pip check` does, without needing
pip or uv in the env (a uv-made venv has no pip).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.runner import RunResult
from torchfit.workers import last_record, read_records, worker_argv


class CommandRunner(Protocol):
    """What runs the worker: `runner.Runner`, or an installer step that logs and times it."""

    def run(self, argv: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None) -> RunResult: ...


@dataclass(**FROZEN)
class Closure:
    """`probe_closure`'s answer. `problems` is None when the worker gave no `closure`
    record (the interpreter does not run, importlib.metadata is missing): `result` says why."""

    problems: tuple[str, ...] | None
    count: int  # distributions listed
    result: RunResult

    @property
    def failure(self) -> str:
        """Why there is no answer: the worker's `error` record, else the end of its output."""
        error = last_record(read_records(self.result.stdout), "error")
        if error is not None:
            return f"{error.get('type')}: {error.get('message')}"
        return (self.result.stderr or self.result.stdout)[-3000:]


def probe_closure(python: str, runner: CommandRunner, *, nccl_override: bool, timeout: float = 60.0,
                  env: Mapping[str, str] | None = None) -> Closure:
    """Run the closure worker with `python` and judge its answer (`judge_closure`).

    `nccl_override`: the env's NCCL pin is an nvidia-nccl wheel over torch's own
    (install --nccl; a lock's `[tool.torchfit.nccl] mechanism = "wheel-override"`).
    The runner's errors (ToolMissing, ToolTimeout) pass through.
    """
    res = runner.run(worker_argv(python, "closure"), timeout=timeout, env=env)
    data = last_record(read_records(res.stdout), "closure")
    if data is None:
        return Closure(None, 0, res)
    return Closure(tuple(judge_closure(data, nccl_override=nccl_override)), len(data.get("dists") or []), res)


def judge_closure(data: Mapping[str, Any], *, nccl_override: bool) -> list[str]:
    """The problems of a `closure` record. With `nccl_override` (the env's NCCL pin is an
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
