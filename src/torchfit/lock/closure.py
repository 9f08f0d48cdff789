"""Is an environment whole: is every dependency of every installed distribution there?

A lock is installed with `--no-deps` (the lock is the whole list), so a lock that
lost an entry (hand-trimmed, tampered) gives an env where `import torch` works and
`torch.compile` dies on `No module named 'sympy'`. `install --lock` and
`verify --lock` both call `probe_closure` (the same function, so they cannot
disagree): it runs `workers/closure_worker.py` in the env, which lists the env's
distributions and its marker environment (one `closure` record, the workers' record
protocol), and `judge_closure` does with them what `pip check` does, without needing
pip or uv in the env (a uv-made venv has no pip).

Whole also means undamaged: `record_mismatches` hashes a distribution's files against
its wheel's RECORD (PEP 376/427). uv links files from its cache into every env, so one
file damaged there breaks each env built from it; doctor (torch-files) and verify (an
inspection that fails importing torch) name the files that differ and the fix.

Whole also means as locked: `find_family_drift` compares an env's torch family with its
lock (the installed dist-info, its RECORD against the locked wheel's), before `torchfit add`
touches it (`check_env_matches_lock`). The wheel is read through a `WheelReader`
(index.wheelmeta.read_wheel_member, passed by the caller): lock/ and index/ are siblings
that do not import each other (docs/architecture.md, The layering).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.errors import EnvDrifted
from torchfit.lock.model import Lock, LockedDist
from torchfit.lock.pylock import LOCK_NAME
from torchfit.lock.tool import strings
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


# --- RECORD: are the files of a distribution the ones its wheel held? ----------------------

DAMAGED_FIX = ("uv links files from its cache, so a damaged cache file damages every env built from it: "
               "`uv cache clean torch`, then reinstall (torchfit install --lock PREFIX/pylock.toml "
               "--prefix PREFIX --force)")


def parse_record(text: str) -> list[tuple[str, str, str]]:
    """A wheel's RECORD (CSV): (path, algorithm, urlsafe-base64 digest) of every file with a
    hash; rows without one (RECORD itself, .pyc written later) are left out."""
    import csv

    out = []
    for row in csv.reader(text.splitlines()):
        if len(row) >= 2 and "=" in row[1] and row[0]:
            algo, _, digest = row[1].partition("=")
            out.append((row[0], algo.strip().lower(), digest.strip()))
    return out


def find_record(roots: Sequence[str], project: str = "torch") -> str | None:
    """`project`'s `*.dist-info/RECORD` in the first of `roots` (site directories) that has one."""
    import glob
    for root in dict.fromkeys(roots):
        found = sorted(glob.glob(os.path.join(glob.escape(root), f"{project}-*.dist-info", "RECORD")))
        if found:
            return found[0]
    return None


def env_site_dirs(prefix: str) -> list[str]:
    """The site-packages directories of the env at `prefix` (lib/pythonX.Y/site-packages)."""
    import glob
    return sorted(glob.glob(os.path.join(glob.escape(prefix), "lib", "python*", "site-packages")))


def record_mismatches(record: str) -> tuple[int, list[tuple[str, str]]]:
    """(files checked, [(file, what is wrong)]) for the files `record` lists with a hash.

    Scripts outside site-packages (../../../bin/torchrun) get their #! line rewritten by
    the installer and by torchfit's relocation: only the package's own files are judged.
    """
    import base64
    import hashlib
    site = os.path.dirname(os.path.dirname(record))
    try:
        with open(record, encoding="utf-8", errors="replace") as fh:
            text = fh.read(64 << 20)
    except OSError:
        return 0, []
    rows = [r for r in parse_record(text) if not r[0].startswith(("../", "/"))]
    bad: list[tuple[str, str]] = []
    for rel, algo, digest in rows:
        path = os.path.normpath(os.path.join(site, rel))
        try:
            h = hashlib.new(algo)
            with open(path, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):  # type: ignore[misc]
                    h.update(block)
        except ValueError:
            continue  # an algorithm hashlib does not have: not judged
        except OSError as exc:
            bad.append((rel, f"cannot be read ({exc.strerror})"))
            continue
        got = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
        if got != digest.rstrip("="):
            bad.append((rel, f"{algo} {got} where RECORD says {digest}"))
    return len(rows), bad


def format_mismatches(record: str, checked: int, bad: Sequence[tuple[str, str]]) -> str:
    shown = "; ".join(f"{f}: {why}" for f, why in bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
    verb = "differs" if len(bad) == 1 else "differ"
    return f"{len(bad)} of torch's {checked} files {verb} from its wheel's RECORD ({record}): {shown}"


def explain_damaged_torch(prefix: str) -> str | None:
    """One line naming torch's files that differ from its RECORD in the env at `prefix`, or None."""
    record = find_record(env_site_dirs(prefix))
    if record is None:
        return None
    checked, bad = record_mismatches(record)
    return format_mismatches(record, checked, bad) if bad else None


# --- dist-info: what an env has installed, read from its files ------------------------------


def find_dist_infos(roots: Sequence[str], project: str) -> list[str]:
    """Every `*.dist-info` directory of `project` (any spelling: Torch, torch_foo) in `roots`.

    Two of one project in one site directory is an install another installer left half
    done (a bare `pip install` over uv's files); the caller says so."""
    want = canonicalize_name(project)
    out = []
    for root in dict.fromkeys(roots):
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        for entry in entries:
            if entry.endswith(".dist-info") and canonicalize_name(entry[: -len(".dist-info")].split("-")[0]) == want:
                out.append(os.path.join(root, entry))
    return out


def dist_info_version(dist_info: str) -> str | None:
    """The `Version:` of a dist-info's METADATA (its header only, bounded), None if unreadable."""
    try:
        with open(os.path.join(dist_info, "METADATA"), encoding="utf-8", errors="replace") as fh:
            for _ in range(200):
                line = fh.readline(4096)
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                if key.strip().lower() == "version":
                    return value.strip() or None
    except OSError:
        return None
    return None


def record_rows(text: str) -> set[tuple[str, str]]:
    """A RECORD's (path, hash) pairs of the package's own files: what the installer copied
    as the wheel had it. Left out: rows without a hash, scripts outside site-packages
    (their #! line is rewritten), and the dist-info's files but METADATA and WHEEL
    (installers add their own there: INSTALLER, REQUESTED, direct_url.json, uv's
    uv_cache.json)."""
    def own(path: str) -> bool:
        head, _, tail = path.rpartition("/")
        return not head.endswith(".dist-info") or tail in ("METADATA", "WHEEL")

    return {(path, f"{algo}={digest.rstrip('=')}") for path, algo, digest in parse_record(text)
            if not path.startswith(("../", "/")) and own(path)}


# --- the env against its lock -------------------------------------------------------------------


class WheelReader(Protocol):
    """Reads `*.dist-info/MEMBER` of the wheel at a location: index.wheelmeta.read_wheel_member."""

    def __call__(self, location: str, member: str, *, filename: str | None = None, sha256: str | None = None,
                 remote: bool = False) -> str | None: ...


def read_locked_member(d: LockedDist, member: str, read: WheelReader, *, remote: bool) -> str | None:
    """`*.dist-info/MEMBER` of `d`'s locked wheel: a local file read directly; a remote one's
    METADATA with range requests (`remote`). None where unreadable or not asked."""
    wheel = next((a for a in d.artifacts if a.kind == "wheel"), None)
    if wheel is None:
        return None
    return read(wheel.url or wheel.path or "", member, filename=wheel.filename, sha256=wheel.sha256, remote=remote)


def read_metadata(d: LockedDist, read: WheelReader) -> str | None:
    """A resolved package's METADATA, from its wheel: a local file read directly, a remote one
    with range requests (index.wheelmeta; nothing downloaded whole). None where unreadable."""
    return read_locked_member(d, "METADATA", read, remote=True)


def find_family_drift(prefix: str, lock: Lock, read: WheelReader) -> list[str]:
    """How the env's installed torch family differs from its lock, one phrase each ([] when it
    matches), read from the env's files as verify and doctor read them: each family package's
    dist-info (one copy, the locked version) and, where the locked wheel is a local file, its
    installed RECORD against the wheel's own (a same-version build from another index has other
    hashes). The files themselves are not hashed here (a second or more per GB on every add):
    `verify --lock` and doctor's torch-files do that."""
    sites = env_site_dirs(prefix) + strings(lock.base().get("site"))
    family = {d.name: d for d in lock.family()}
    drift: list[str] = []
    for name in FAMILY_PACKAGES:
        infos = find_dist_infos(sites, name)
        locked = family.get(name)
        versions = [dist_info_version(i) or "?" for i in infos]
        if locked is None:
            if infos:
                drift.append(f"{name} {versions[0]} is installed and the lock has none")
            continue
        if not infos:
            drift.append(f"{name} is not installed (the lock has {locked.version})")
            continue
        if len(infos) > 1:
            drift.append(f"{len(infos)} copies of {name} are installed ({', '.join(versions)}; another installer "
                         f"left one half-replaced), the lock has {locked.version}")
            continue
        if not same_version(versions[0], locked.version):
            drift.append(f"{name} {versions[0]} is installed where the lock has {locked.version}")
            continue
        wheel_record = read_locked_member(locked, "RECORD", read, remote=False)
        if wheel_record is None:
            continue  # the locked wheel is not a local file: the version is what can be compared
        try:
            with open(os.path.join(infos[0], "RECORD"), encoding="utf-8", errors="replace") as fh:
                installed = record_rows(fh.read(64 << 20))
        except OSError:
            drift.append(f"{name} {versions[0]} has no readable RECORD")
            continue
        want = record_rows(wheel_record)
        if installed != want:
            n = len(installed ^ want)
            drift.append(f"{name} {versions[0]} is installed from another file than the locked wheel "
                         f"({n} RECORD entries differ from {locked.artifacts[0].filename or 'its RECORD'}'s)")
    return drift


def check_env_matches_lock(prefix: str, lock: Lock, read: WheelReader) -> None:
    """EnvDrifted (exit 1) when the env's torch family is not what its lock records."""
    drift = find_family_drift(prefix, lock, read)
    if drift:
        raise EnvDrifted(prefix, drift, os.path.join(prefix, LOCK_NAME))


def same_version(a: str | None, b: str | None) -> bool:
    """Equal as PEP 440 versions (`2.8.0` and `2.8`), else as text."""
    try:
        return Version(a or "") == Version(b or "")
    except InvalidVersion:
        return a == b
