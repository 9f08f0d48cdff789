"""`torchfit doctor --fix`: the safe, known repairs of an env torchfit built, each from its lock.

A repair answers one doctor check (by its id, `FIXES`) and touches nothing but the env at
PREFIX, and only when PREFIX/pylock.toml says torchfit built it (`load_built_env`: an env
torchfit did not build is refused, with why). The lock is the truth each repair restores:

- reinstall: the locked distributions whose files differ from their wheel (`torch-files`)
  installed again, each file by the lock's URL and sha256 (`uv pip install --reinstall-package`,
  install's own step, `UvBackend.install_resolved`); nothing else in the env moves;
- rebuild: torch is gone from the env (`torch-import` fails and no RECORD is left to compare):
  the env built again from its lock (`torchfit install --lock PREFIX/pylock.toml --prefix PREFIX
  --force`, which replaces PREFIX only once the new env is complete);
- env-script: PREFIX/bin/torchfit-env (the file install wrote) sets a variable a check faults
  (NCCL_P2P_DISABLE=1 added by hand): the file written again from the lock's NCCL pin, which
  drops the variable. A variable set anywhere else (a shell, a job script) is not torchfit's to
  change: that is said, not fixed.

`plan_repairs` is pure (check verdicts and the env's files in, repairs out); `apply_reinstall`
and `apply_env_script` do the work; the rebuild is the install command's (the CLI runs it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchfit._backports import FROZEN
from torchfit.errors import BadInput
from torchfit.inputs import shown
from torchfit.installer.nccl import ENV_SCRIPT, render_env_script
from torchfit.lock.model import Lock, pin_from_json
from torchfit.lock.pylock import LOCK_NAME, load_lock
from torchfit.progress import Progress

if TYPE_CHECKING:
    from torchfit.index.sources import Sources

# The checks a repair answers, and the kind of repair (docs/doctor.md lists them).
FIXES: dict[str, str] = {
    "torch-files": "reinstall",
    "torch-import": "rebuild",
    "nccl-env-disables": "env-script",
    "nccl-socket-ifname": "env-script",
    "cuda-visible-devices": "env-script",
    "cuda-device-order": "env-script",
}
# The variables each env-script repair may drop from bin/torchfit-env.
VARIABLES: dict[str, tuple[str, ...]] = {
    "nccl-env-disables": ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE"),
    "nccl-socket-ifname": ("NCCL_SOCKET_IFNAME",),
    "cuda-visible-devices": ("CUDA_VISIBLE_DEVICES",),
    "cuda-device-order": ("CUDA_DEVICE_ORDER",),
}
# What each kind does, for `doctor --list` and the dry run.
KIND_TEXT = {
    "reinstall": "reinstall the locked packages whose files differ, by the lock's URL and sha256",
    "rebuild": "rebuild the env from its lock (install --lock --force)",
    "env-script": "write bin/torchfit-env again from the lock, without the variable",
}


@dataclass(**FROZEN)
class Repair:
    """One repair: the check it answers, its kind, and what it will do (one line)."""

    check: str
    kind: str
    what: str
    packages: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()


@dataclass
class RepairPlan:
    """The repairs for one env, and the faults torchfit may not repair (each with why)."""

    prefix: str
    repairs: list[Repair] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def load_built_env(prefix: str) -> Lock:
    """PREFIX's lock when torchfit built the env at PREFIX; BadInput (one line) otherwise."""
    path = os.path.join(prefix, LOCK_NAME)
    if not os.path.isdir(prefix):
        raise BadInput(f"--fix: {shown(prefix)}: no such directory")
    if not os.path.isfile(path) or not os.path.isfile(os.path.join(prefix, "bin", ENV_SCRIPT)):
        raise BadInput(f"--fix repairs only envs torchfit built: {shown(prefix)} has no {LOCK_NAME} and "
                       f"bin/{ENV_SCRIPT} (build one with `torchfit install`); nothing was changed")
    lock = load_lock(path)  # BadInput naming the file: no [tool.torchfit], a file without sha256, ...
    if lock.find("torch") is None:
        raise BadInput(f"--fix: {path} locks no torch: not an env torchfit built; nothing was changed")
    return lock


SCRIPT_HEAD = "# torchfit-env:"  # the first line install writes (installer.nccl.render_env_script)


def read_env_script(prefix: str) -> tuple[str, str | None]:
    """PREFIX/bin/torchfit-env's text, and why it may not be rewritten (None: it may): a
    symlink (a rewrite would land outside the env), not a regular file, or not the file
    install wrote (its first line)."""
    path = os.path.join(prefix, "bin", ENV_SCRIPT)
    if os.path.islink(path) or not os.path.isfile(path):
        return "", f"{shown(path)} is not a regular file of the env (a symlink?): not the file torchfit wrote"
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError as exc:
        return "", f"{shown(path)}: cannot read ({exc.strerror or exc})"
    if not text.startswith(SCRIPT_HEAD):
        return text, f"{shown(path)} does not start as the file torchfit writes ({SCRIPT_HEAD})"
    return text, None


def script_variables(text: str) -> set[str]:
    """The variables a POSIX sh file assigns at the start of a line (`X=1`, `export X=1`)."""
    return set(re.findall(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=", text, re.M))


def plan_repairs(prefix: str, lock: Lock, faults: Mapping[str, str], environ: Mapping[str, str],
                 script_text: str, script_refused: str | None = None) -> RepairPlan:
    """The repairs for `faults` (check id -> ok|warn|fail|unknown of every check run) in the env
    at `prefix` locked by `lock`; `script_text` is its bin/torchfit-env as it is now, and
    `script_refused` why it may not be rewritten (`read_env_script`)."""
    plan = RepairPlan(prefix)
    bad = {cid for cid, status in faults.items() if status in ("fail", "warn")}
    if faults.get("torch-files") == "fail":
        torch = lock.find("torch")
        version = torch.version if torch is not None else "?"
        plan.repairs.append(Repair("torch-files", "reinstall",
                                   f"reinstall torch {version} in {shown(prefix)} from its lock (the locked file "
                                   "by URL and sha256; nothing else changes)", packages=("torch",)))
    elif faults.get("torch-import") == "fail" and faults.get("torch-files") == "unknown":
        # No RECORD of torch left to compare: torch itself is gone, not one of its files.
        plan.repairs.append(Repair("torch-import", "rebuild",
                                   f"rebuild {shown(prefix)} from {LOCK_NAME} (torchfit install --lock "
                                   f"{shown(os.path.join(prefix, LOCK_NAME))} --prefix {shown(prefix)} --force)"))
    in_script = script_variables(script_text)
    drop: list[tuple[str, str]] = []
    for cid in sorted(bad & set(VARIABLES)):
        for name in VARIABLES[cid]:
            if name in in_script:
                drop.append((cid, name))
            elif name in environ:
                plan.refused.append(f"{cid}: {name} is set outside the files torchfit wrote (your shell, "
                                    f"a job script, a module): unset it there")
    if drop and script_refused:
        plan.refused.append(f"{drop[0][0]}: {', '.join(dict.fromkeys(n for _, n in drop))} set in {script_refused}")
    elif drop:
        names = tuple(dict.fromkeys(n for _, n in drop))
        plan.repairs.append(Repair(drop[0][0], "env-script",
                                   f"write {shown(os.path.join(prefix, 'bin', ENV_SCRIPT))} again from the lock, "
                                   f"without {', '.join(names)}", variables=names))
    return plan


def apply_env_script(prefix: str, lock: Lock) -> str:
    """bin/torchfit-env written again from the lock's pin (atomically); its path."""
    from torchfit.files import write_atomic

    path = os.path.join(prefix, "bin", ENV_SCRIPT)
    write_atomic(path, render_env_script(prefix, pin_from_json(lock.pin())))
    return path


def apply_reinstall(prefix: str, lock: Lock, names: Sequence[str], sources: Sources, observer: Progress,
                    timeout: float) -> str | None:
    """The locked files of `names` installed again into the env at `prefix` (uv, by URL and
    sha256, `--reinstall-package` each); the log's path. InstallFailed when a step fails."""
    from torchfit.installer.backends import StepContext, UvBackend
    from torchfit.installer.prefix import InstallLog
    from torchfit.lock.uv import find_uv, uv_version
    from torchfit.owned import temp_dir
    from torchfit.runner import Runner, stall_timeout
    from torchfit.space import prefix_place, tmpdir_place, uv_cache_place

    dists = [d for d in lock.packages if d.name in names]
    log = InstallLog((os.path.basename(prefix.rstrip(os.sep)) or "env") + "-fix", on_error=observer.warn)
    log.write(f"torchfit doctor --fix: reinstall {', '.join(names)} in {prefix} from its lock")
    ctx = StepContext(Runner(), log, observer, sources, timeout, {}, stall=stall_timeout(),
                      places=[prefix_place(prefix, "--env"), tmpdir_place(), uv_cache_place(os.environ)])
    uv = find_uv(ctx.runner)
    version = uv_version(ctx.runner, uv) if uv else None
    if not uv or version is None:
        raise BadInput("--fix reinstalls with uv, which is not installed here (pip install uv)")
    with temp_dir("fix") as work:
        UvBackend(ctx, uv, version).install_resolved(prefix, dists, work, reinstall=[d.name for d in dists])
    return log.path
