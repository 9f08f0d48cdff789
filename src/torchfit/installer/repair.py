"""`torchfit doctor --fix`: the safe, known repairs of an env torchfit built, each from its lock.

A repair answers one doctor check (by its id, `FIXES`) and touches nothing but the env at
PREFIX, and only when PREFIX/pylock.toml says torchfit built it (`load_built_env`: an env
torchfit did not build is refused, with why). The lock is the truth each repair restores:

- reinstall: the locked distributions whose files differ from their wheel (`torch-files`)
  installed again, each file by the lock's URL and sha256 (`uv pip install --reinstall-package`,
  install's own step, `UvBackend.install_resolved`); nothing else in the env moves;
- rebuild: torch is gone from the env (`torch-import` fails and no RECORD is left to compare):
  the locked distributions missing from the env installed into it as it is, each by the lock's
  URL and sha256. Never `install --force`, which replaces PREFIX whole: the user's files in it
  (notes, `share/jupyter/kernels/...`) and the packages they installed by hand are not the
  lock's, and stay; a locked package found at another version is named and kept, not replaced;
  a rebuild that fails (a stall, an error, an interruption) removes what it had added under bin/
  and site-packages (`remove_added`), so the env is as it was;
- env-script: PREFIX/bin/torchfit-env (the file install wrote) sets a variable a check faults
  (NCCL_P2P_DISABLE=1 added by hand): the line that sets it removed, every other byte of the
  file kept (the user's own HF_HOME, WANDB_MODE); a line that does more than set it (`X=1; Y=2`,
  a quoted value over two lines) is refused, not guessed at. A variable set anywhere else (a
  shell, a job script) is not torchfit's to change: that is said, not fixed.

A repair that replaces installed files (reinstall) first checks the env's users as `add` does
(installer.prefix.check_in_use: refused while a process uses the env, unless --allow-in-use).
`plan_repairs` is pure (check verdicts and the env's files in, repairs out: the dry run shows
exactly what each will install, replace or edit); `apply_reinstall` and `apply_env_script` do
the work, with the uv `fix_uv` finds (none: refused before anything changes).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torchfit._backports import FROZEN
from torchfit.errors import BadInput
from torchfit.inputs import shown
from torchfit.installer.nccl import ENV_SCRIPT
from torchfit.lock.model import Lock
from torchfit.lock.pylock import LOCK_NAME, load_lock
from torchfit.progress import Progress

if TYPE_CHECKING:
    from packaging.version import Version

    from torchfit.index.sources import Sources
    from torchfit.runner import Runner

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
    "rebuild": "install the locked packages missing from the env (torch gone) by the lock's URL and sha256; "
               "nothing installed is replaced or removed",
    "env-script": "remove the line of bin/torchfit-env that sets the variable; the rest of the file stays",
}


@dataclass(**FROZEN)
class Repair:
    """One repair: the check it answers, its kind, and what it will do (one line)."""

    check: str
    kind: str
    what: str
    packages: tuple[str, ...] = ()
    variables: tuple[str, ...] = ()


@dataclass(**FROZEN)
class Installed:
    """What the env at PREFIX holds (`read_installed`): its distributions (canonical name ->
    version), its Python's X.Y, and why nothing may be installed into it (None: it may)."""

    dists: Mapping[str, str]
    python_version: str | None = None
    refused: str | None = None


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
SCRIPT_LIMIT = 1 << 20  # a larger bin/torchfit-env is not the file install wrote


def read_env_script(prefix: str) -> tuple[str, str | None]:
    """PREFIX/bin/torchfit-env's text, and why it may not be edited (None: it may): a
    symlink (an edit would land outside the env), not a regular file, larger than any
    file install writes, or not the file install wrote (its first line). Bytes that are
    not UTF-8 are kept as they are (surrogateescape), so an edit keeps them too."""
    path = os.path.join(prefix, "bin", ENV_SCRIPT)
    not_ours = f"{shown(path)} is not a regular file of the env (a symlink?): not the file torchfit wrote"
    if os.path.islink(path) or not os.path.isfile(path):
        return "", not_ours
    try:  # O_NOFOLLOW: a symlink put there since is not read through
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return "", f"{shown(path)}: cannot read ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", not_ours
        raw = fh.read(SCRIPT_LIMIT + 1)
    if len(raw) > SCRIPT_LIMIT:
        return "", f"{shown(path)} is larger than {SCRIPT_LIMIT >> 20} MiB: not the file torchfit wrote"
    text = raw.decode("utf-8", "surrogateescape")
    if not text.startswith(SCRIPT_HEAD):
        return text, f"{shown(path)} does not start as the file torchfit writes ({SCRIPT_HEAD})"
    return text, None


def drop_assignments(text: str, names: Sequence[str]) -> tuple[str, str | None]:
    """`text` (a POSIX sh file) without the lines that set `names` (`X=1`, `export X=1`),
    every other line as it was; and the first line that sets one of them but does more
    (None: none), which is left to the user rather than cut in half."""
    wanted = set(names)
    kept: list[str] = []
    for line in re.findall(r"[^\n]*\n|[^\n]+$", text):  # sh's lines: "\n" only (not str.splitlines's \f, \x1c...)
        if _assigned(line) not in wanted:
            kept.append(line)
            continue
        # punctuation_chars: `X=1;Y=2`, `X=1&&cmd` are several words, not one
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError:  # a quote that closes on a later line: the value goes on
            words = []
        alone = len(words) == 1 or (len(words) == 2 and words[0] == "export")
        if not alone or line.rstrip("\r\n").endswith("\\"):
            return text, line.strip()
    return "".join(kept), None


_ASSIGNMENT = re.compile(r"[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=")


def _assigned(line: str) -> str | None:
    """The variable a sh line starts by setting (`X=1`, `export X=1`), else None."""
    m = _ASSIGNMENT.match(line)
    return m.group(1) if m else None


def read_installed(prefix: str) -> Installed:
    """The distributions installed in the env at PREFIX, from its `*.dist-info` directories'
    names (`name-version.dist-info`, as installers write them), read without running it."""
    from packaging.utils import canonicalize_name

    python = os.path.join(prefix, "bin", "python")
    if not os.path.exists(python):
        return Installed({}, None, f"{shown(python)} is gone")
    sites = sorted(d for d in (os.path.join(prefix, "lib", n, "site-packages") for n in _listdir(
        os.path.join(prefix, "lib")) if re.fullmatch(r"python3\.\d+", n)) if os.path.isdir(d))
    if len(sites) != 1:
        return Installed({}, None, f"{shown(prefix)} has {len(sites) or 'no'} lib/python3.*/site-packages")
    dists: dict[str, str] = {}
    for entry in _listdir(sites[0]):
        # pip's legacy installs leave `name-version(-py3.11).egg-info`: installed all the same
        m = re.fullmatch(r"([^-]+)-([^-]+?)(?:-py\d[\d.]*)?\.(?:dist|egg)-info", entry)
        if m:
            dists[str(canonicalize_name(m.group(1)))] = m.group(2)
    return Installed(dists, os.path.basename(os.path.dirname(sites[0]))[len("python"):])


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def script_variables(text: str) -> set[str]:
    """The variables a POSIX sh file assigns at the start of a line (`X=1`, `export X=1`)."""
    return set(re.findall(r"^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=", text, re.M))


def plan_repairs(prefix: str, lock: Lock, faults: Mapping[str, str], environ: Mapping[str, str],
                 script_text: str, script_refused: str | None = None,
                 installed: Installed | None = None) -> RepairPlan:
    """The repairs for `faults` (check id -> ok|warn|fail|unknown of every check run) in the env
    at `prefix` locked by `lock`; `script_text` is its bin/torchfit-env as it is now, and
    `script_refused` why it may not be edited (`read_env_script`); `installed` what the env
    holds (`read_installed`), which decides what a rebuild installs."""
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
        _plan_rebuild(plan, lock, installed or Installed({}, None, "what it holds was not read"))
    in_script = script_variables(script_text)
    drop: list[tuple[str, str]] = []
    for cid in sorted(bad & set(VARIABLES)):
        for name in VARIABLES[cid]:
            if name in in_script:
                drop.append((cid, name))
            elif name in environ:
                plan.refused.append(f"{cid}: {name} is set outside the files torchfit wrote (your shell, "
                                    f"a job script, a module): unset it there")
    names = tuple(dict.fromkeys(n for _, n in drop))
    script = shown(os.path.join(prefix, "bin", ENV_SCRIPT))
    edited, line = drop_assignments(script_text, names) if drop and not script_refused else (script_text, None)
    # The lines the edit removes, as they are (the dry run shows exactly what goes)
    gone = [ln.strip() for ln in script_text.split("\n") if _assigned(ln) in names] if edited != script_text else []
    if drop and script_refused:
        plan.refused.append(f"{drop[0][0]}: {', '.join(names)} set in {script_refused}")
    elif line is not None:
        plan.refused.append(f"{drop[0][0]}: {script} sets {', '.join(names)} in a line that does more "
                            f"({shown(line)}): edit it there")
    elif drop:
        plan.repairs.append(Repair(drop[0][0], "env-script",
                                   f"remove the line {' and '.join(f'`{shown(g)}`' for g in gone)} from {script} "
                                   "(the rest of the file is kept as it is)", variables=names))
    return plan


def _plan_rebuild(plan: RepairPlan, lock: Lock, env: Installed) -> None:
    """torch is gone: the locked distributions the env lacks, to be installed into it; a locked
    one at another version is the user's choice (kept, said); nothing else is looked at."""
    where = shown(plan.prefix)
    if env.refused is not None:
        plan.refused.append(f"torch-import: torch is gone and {env.refused}: there is no env to install it into; "
                            f"build one elsewhere (`torchfit install --lock {shown(os.path.join(plan.prefix, LOCK_NAME))} "
                            "--prefix NEW`) and move what you keep in it")
        return
    missing = [d for d in lock.packages if d.name not in env.dists and _applies(d.marker, env.python_version)]
    other = [f"{d.name} {env.dists[d.name]} (the lock has {d.version})" for d in lock.packages
             if d.name in env.dists and not _same_version(env.dists[d.name], d.version)]
    if other:
        plan.refused.append(f"torch-import: {', '.join(other)} installed in {where}: kept (not the lock's; "
                            "`torchfit add` or `pip install` put it there)")
    if not missing:
        plan.refused.append(f"torch-import: every package {LOCK_NAME} lists is installed in {where}: "
                            "nothing torchfit may install (see torch-import's fix)")
        return
    kept = len(lock.packages) - len(missing)
    plan.repairs.append(Repair(
        "torch-import", "rebuild",
        f"install {', '.join(f'{d.name} {d.version}' for d in missing)} into {where} from its lock (missing from "
        f"the env; each file by URL and sha256); nothing installed is replaced or removed: the {kept} other "
        "locked package(s), packages you installed and your files stay", packages=tuple(d.name for d in missing)))


def _applies(marker: str | None, python_version: str | None) -> bool:
    """Whether a locked entry's marker holds for the env (its Python's X.Y; this host's rest)."""
    if not marker:
        return True
    from packaging.markers import InvalidMarker, Marker, default_environment

    env = {k: str(v) for k, v in default_environment().items()}
    if python_version:
        env.update(python_version=python_version, python_full_version=python_version + ".0")
    try:
        return Marker(marker).evaluate(env)
    except InvalidMarker:
        return True  # load_lock checked it; uv decides


def _same_version(a: str, b: str | None) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return b is not None and Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def apply_env_script(prefix: str, names: Sequence[str]) -> str:
    """The lines of bin/torchfit-env that set `names` removed, every other byte kept (written
    atomically beside it); its path. BadInput when the file changed since the plan into one
    that may not be edited (a symlink now, a line that does more)."""
    from torchfit.files import open_beneath, write_beside

    path = os.path.join(prefix, "bin", ENV_SCRIPT)
    text, why = read_env_script(prefix)
    edited, line = drop_assignments(text, names) if why is None else (text, None)
    if why is not None or line is not None:
        raise BadInput(f"--fix: {why or shown(path) + ' sets ' + ', '.join(names) + ' in ' + shown(line or '')}; "
                       "it was not changed")
    if edited != text:  # through bin/ opened beneath PREFIX: a link planted since the read is refused
        dfd = open_beneath(prefix, "bin", create=False)
        try:
            write_beside(dfd, ENV_SCRIPT, edited.encode("utf-8", "surrogateescape"), where=path)
        finally:
            os.close(dfd)
    return path


def fix_uv(runner: Runner) -> tuple[str, Version] | str:
    """The uv a reinstall or rebuild runs (lock.uv.find_uv: beside torchfit's interpreter, the
    `uv` wheel's locator, PATH) and its version; else why there is none, in one line naming
    where it was looked for. `doctor --fix` asks before it changes anything (issue 34)."""
    from torchfit.lock.uv import uv_version
    from torchfit.lock.uvbin import find_uv

    uv = find_uv(runner)
    if uv is None:
        return (f"--fix installs with uv, which torchfit cannot find: not beside {shown(sys.executable)}, not "
                f"importable (the uv package), not on PATH ({shown(runner.environ().get('PATH', os.defpath))}); "
                "pip install uv where torchfit is installed")
    version = uv_version(runner, uv)
    if version is None:
        return f"--fix installs with uv, and the uv at {shown(uv)} does not run here (`uv --version` failed)"
    return uv, version


def apply_reinstall(prefix: str, lock: Lock, names: Sequence[str], sources: Sources, observer: Progress,
                    timeout: float, *, replace: bool = True) -> str | None:
    """The locked files of `names` installed (again, `--reinstall-package` each when `replace`)
    into the env at `prefix` (uv, by URL and sha256); nothing else of the env is touched. The
    log's path; InstallFailed when a step fails (exit 1), KeyboardInterrupt goes on (130)."""
    from torchfit.installer.backends import StepContext, UvBackend
    from torchfit.installer.prefix import InstallLog
    from torchfit.owned import temp_dir
    from torchfit.runner import Runner, stall_timeout
    from torchfit.space import prefix_place, tmpdir_place, uv_cache_place

    dists = [d for d in lock.packages if d.name in names]
    log = InstallLog((os.path.basename(prefix.rstrip(os.sep)) or "env") + "-fix", on_error=observer.warn)
    log.write(f"torchfit doctor --fix: {'reinstall' if replace else 'install'} {', '.join(names)} in {prefix} "
              "from its lock")
    ctx = StepContext(Runner(), log, observer, sources, timeout, {}, stall=stall_timeout(),
                      places=[prefix_place(prefix, "--env"), tmpdir_place(), uv_cache_place(os.environ)])
    found = fix_uv(ctx.runner)
    if isinstance(found, str):  # run_fix asked before anything changed; uv went since
        raise BadInput(f"{found}; {', '.join(names)} not installed")
    uv, version = found
    # A rebuild only adds files: one that fails (a stall, an error, an interruption) takes back what
    # it had added, so the env is as it was (issue 34). A reinstall replaces files in place: it
    # cannot be taken back (docs/doctor.md says so).
    before = None if replace else install_paths(prefix)
    try:
        with temp_dir("fix") as work:
            UvBackend(ctx, uv, version).install_resolved(prefix, dists, work,
                                                                reinstall=[d.name for d in dists] if replace else [])
    except BaseException:
        if before is not None:
            _take_back(prefix, before, observer)
        raise
    return log.path


def install_paths(prefix: str) -> set[str]:
    """Every path under the env's bin/ and site-packages (where an install writes), no link followed."""
    areas = [os.path.join(prefix, "bin"), *(os.path.join(prefix, "lib", n, "site-packages")
                                            for n in _listdir(os.path.join(prefix, "lib")))]
    out: set[str] = set()
    for area in areas:
        if os.path.isdir(area) and not os.path.islink(area):
            for root, dirs, files in os.walk(area):
                out.update(os.path.join(root, n) for n in (*dirs, *files))
    return out


def remove_added(prefix: str, before: set[str]) -> tuple[int, list[str]]:
    """What appeared under bin/ and site-packages since `before` (install_paths), removed deepest
    first (a link itself, never what it points to; a directory only once empty): (how many
    removed, those that could not be)."""
    removed, left = 0, []
    for path in sorted(install_paths(prefix) - before, key=lambda p: p.count(os.sep), reverse=True):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
            removed += 1
        except OSError:
            left.append(path)
    return removed, left


def _take_back(prefix: str, before: set[str], observer: Progress) -> None:
    from torchfit.interrupts import signals_deferred

    with signals_deferred():  # a second Ctrl-C does not stop it half way
        removed, left = remove_added(prefix, before)
    if left:
        observer.warn(f"the failed install left {len(left)} path(s) it had added in {shown(prefix)}: "
                      + ", ".join(shown(p) for p in left[:3]))
    elif removed:
        observer.info(f"the failed install's {removed} new path(s) in {shown(prefix)} were removed: the env is as "
                      "it was")
