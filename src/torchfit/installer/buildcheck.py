"""The build check: is what got installed the build the plan chose?

One run of the new env's Python (workers/build_worker.py) reports the installed distributions, the
values torch's own `torch/version.py` holds (`__version__`, `cuda`, `hip`: the same
values `torch.version` gives, read without importing torch, which takes seconds),
and the NCCL the env will load: `ncclGetVersion()` of the pinned library, or of the
nvidia-nccl wheel's libnccl.so.2.

When the user pinned NCCL (`--nccl`, `--nccl-lib`) the worker also imports torch with
the pin applied: an NCCL older than the one torch was built with can lack symbols
libtorch_cuda.so needs (torch 2.14.1 with NCCL 2.28.9: "undefined symbol:
ncclCommResume", measured), and the library actually mapped is the one to report.

`check_closure` runs first, in `install` and in `add`: every dependency of what was installed
is there, by the installed wheels' own METADATA (lock.closure, the check `verify --lock` makes).

`compare_build` (pure) then says what fails the install (a CPU build where the plan
has CUDA, another torch version, another CUDA, an NCCL pin that does not load) and
what only deserves a warning.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.plan import Plan
from torchfit.compat.versions import decode_nccl_code, same_release, version_text
from torchfit.installer.backends import StepContext, StepRunner, env_python
from torchfit.lock.model import LockedDist, NcclPin
from torchfit.redact import redact
from torchfit.runner import without_index_variables
from torchfit.workers import last_record, read_records, worker_argv


@dataclass(**FROZEN)
class BuildReport:
    """What the check found, what fails, what only warns, and what verify should find."""

    failures: tuple[str, ...]
    warnings: tuple[str, ...]
    runtime: Mapping[str, Any] = field(default_factory=dict)
    dists: Mapping[str, str] = field(default_factory=dict)


def parse_probe(stdout: str) -> dict[str, Any]:
    """build_worker's `build` record from its stdout; {} when it wrote none."""
    return last_record(read_records(stdout), "build") or {}


def _public(version: str | None) -> str | None:
    if not version:
        return None
    try:
        return Version(version).public
    except InvalidVersion:
        return version.split("+")[0]


def probe_argv(python: str, library: str | None, import_torch: bool) -> list[str]:
    """argv of the build check: LIBRARY is an --nccl-lib pin ("" for the wheel's);
    with `import_torch`, torch is imported under the pin and the mapped NCCL reported."""
    return worker_argv(python, "build", library or "", *(["import"] if import_torch else []))


def compare_build(plan: Plan, probe: Mapping[str, Any], pin: NcclPin) -> BuildReport:
    """Check the probe's findings against the plan and the NCCL pin (pure)."""
    fails: list[str] = []
    warns: list[str] = []
    dists: dict[str, str] = {canonicalize_name(str(k)): str(v) for k, v in (probe.get("dists") or {}).items()}
    torch = probe.get("torch") or {}
    runtime: dict[str, Any] = {"python": probe.get("python")}
    if probe.get("torch_error") or not torch.get("__version__"):
        fails.append(f"torch: {probe.get('torch_error') or 'no version found in torch/version.py'}")
        return BuildReport(tuple(fails), tuple(warns), runtime, dists)
    full = str(torch["__version__"])
    cuda, hip = torch.get("cuda"), torch.get("hip")
    runtime.update(torch=full, cuda=cuda, hip=hip)
    if _public(full) != plan.torch:
        fails.append(f"torch {full} is installed; the plan is torch {plan.torch}")
    if plan.variant == "cpu":
        if cuda or hip:
            fails.append(f"torch {full} is a {'CUDA ' + str(cuda) if cuda else 'ROCm ' + str(hip)} build; "
                         "the plan is the CPU build")
    elif plan.cuda:
        if not cuda:
            fails.append(f"torch {full} is a {'ROCm' if hip else 'CPU'} build; the plan is CUDA {plan.cuda} "
                         f"({plan.variant}): the torch index served the wrong build")
        elif not same_release(str(cuda), plan.cuda, 2):
            fails.append(f"torch {full} is built for CUDA {cuda}; the plan is CUDA {plan.cuda} ({plan.variant})")
    elif plan.rocm:
        if not hip:
            fails.append(f"torch {full} is a {'CUDA' if cuda else 'CPU'} build; the plan is ROCm {plan.rocm}")
        elif not str(hip).startswith(plan.rocm):
            warns.append(f"torch {full} reports HIP {hip}; the plan is ROCm {plan.rocm}")
    for name in ("torchvision", "torchaudio"):
        want = getattr(plan, name)
        if name in plan.packages and want:
            have = dists.get(name)
            if have is None:
                fails.append(f"{name} is not installed; the plan has {name} {want}")
            elif _public(have) != want:
                fails.append(f"{name} {have} is installed; the plan is {name} {want}")
    if plan.cuda:
        cudnn = next((v for k, v in dists.items() if k.startswith("nvidia-cudnn-cu")), None)
        runtime["cudnn"] = cudnn
        if plan.cudnn and cudnn and not same_release(cudnn, plan.cudnn, 3):
            warns.append(f"cuDNN {cudnn} is installed; the matrix says {plan.cudnn} for {plan.variant}")
    imported = probe.get("import")
    if imported is not None and not imported.get("ok") and pin.mechanism not in ("ld-preload", "wheel-override"):
        fails.append(f"`import torch` fails in the new env: {imported.get('error')}; a file of the install is "
                     "damaged (uv links files from its cache, so one damaged there breaks every env built from "
                     "it): `uv cache clean torch`, then install again")
        return BuildReport(tuple(fails), tuple(warns), runtime, dists)
    _check_nccl(plan, probe, pin, dists, runtime, fails, warns)
    return BuildReport(tuple(fails), tuple(warns), runtime, dists)


def _check_nccl(plan: Plan, probe: Mapping[str, Any], pin: NcclPin, dists: Mapping[str, str],
                runtime: dict[str, Any], fails: list[str], warns: list[str]) -> None:
    nccl = probe.get("nccl") or {}
    loaded = None
    if nccl.get("code"):
        loaded = version_text(decode_nccl_code(int(nccl["code"])))
        runtime["nccl"] = loaded
        runtime["nccl_library"] = nccl.get("library")
    elif nccl.get("error"):
        runtime["nccl_library"] = nccl.get("library")
    imported = probe.get("import")
    if imported is not None and not imported.get("ok"):
        built = f"; torch {plan.torch} {plan.variant} was built with NCCL {plan.nccl}" if plan.nccl else ""
        fails.append(f"with NCCL {loaded or '?'} ({pin.describe()}) `import torch` fails: "
                     f"{imported.get('error')}{built}: pin that NCCL or a newer one")
        return
    if pin.mechanism == "ld-preload":
        if not loaded:
            fails.append(f"--nccl-lib {pin.library}: ncclGetVersion could not be called "
                         f"({nccl.get('error') or 'no version'})")
        bound = (probe.get("bound") or {}).get("library")
        if imported is not None and os.path.realpath(bound or "") != os.path.realpath(pin.library or ""):
            fails.append(f"torch calls the NCCL in {bound or 'no library'}, not the pinned {pin.library} "
                         f"(mapped: {', '.join(probe.get('mapped') or []) or 'none'})")
        return
    if pin.mechanism in ("wheel", "wheel-override") and pin.package:
        have = dists.get(pin.package)
        if have is None:
            msg = f"{pin.package} is not installed: this torch build does not use the NCCL wheel"
            (fails if pin.mechanism == "wheel-override" else warns).append(msg)
            return
        runtime.setdefault("nccl", _public(have))
        if pin.version and not same_release(have, pin.version, 3):
            msg = f"{pin.package} {have} is installed; expected {pin.version}"
            if pin.mechanism == "wheel-override":
                fails.append(msg)
            else:
                warns.append(msg + " (the matrix and torch's own pin disagree)")
        if loaded and not same_release(loaded, have, 3):
            warns.append(f"the env's libnccl reports {loaded}, its wheel says {have}")


def check_closure(ctx: StepContext, env_dir: str, *, nccl_override: bool, planned: Sequence[LockedDist] | None,
                  lock_name: str, judged: Callable[[str], bool] | None = None) -> None:
    """Every dependency of what the env holds is there, or the step fails (`check-deps`).

    `planned`: the files a resolution just installed (install from a plan, add). The resolver
    read each release's metadata from the index (its PEP 658 file where served) and the set was
    whole by it; a problem of one of them now is a wheel whose own METADATA says otherwise:
    named, and refused (the wheel is the truth: it is what is installed and hashed into the
    lock). Any other problem: `lock_name` (the lock installed from) is not whole. `judged`: which
    problems are this step's to answer for (add: those of what it installed, not the base's)."""
    from torchfit.lock.closure import probe_closure

    step = StepRunner(ctx, "check-deps", "every dependency of the locked packages is installed (like pip check)")
    closure = probe_closure(env_python(env_dir), step, nccl_override=nccl_override, env=without_index_variables())
    argv = [env_python(env_dir), "<closure worker>"]
    res = closure.result
    if closure.problems is None:
        raise ctx.failed("check-deps", argv, res.returncode, redact(closure.failure))
    problems = [p for p in closure.problems if judged is None or judged(p)]
    if not problems:
        return
    name = canonicalize_name(problems[0].split(" ", 1)[0])
    dist = next((d for d in planned or () if d.name == name), None)
    if dist is not None:
        files = [a.filename for a in dist.artifacts if a.filename]
        raise ctx.failed(
            "check-deps", argv, 1, "\n".join(problems),
            what=(f"{files[0] if files else name}: its own METADATA disagrees with the metadata the index "
                  f"served for it, which the plan was resolved from: {problems[0]}"),
            hint=("the index's metadata file (PEP 658 .metadata) is not the wheel's; torchfit believes the "
                  "wheel: ask the index's owner to fix it, or use a source that serves the wheel's own"))
    raise ctx.failed(
        "check-deps", argv, 1, "\n".join(problems),
        what=(f"{lock_name} is not whole: {problems[0]}"
              + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")),
        hint=("the lock lost an entry (edited by hand?): re-create it with `torchfit install` "
              "from a plan, or restore the original file"))
