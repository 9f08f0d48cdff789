"""Pythons: CPython interpreters on PATH and pyenv (the one `find_pyenv`, its
versions and what it can install).

Both are asked through processes (an interpreter for its version, four pyenv
calls: ~15 ms and ~50 ms of every command's start), so their answers are kept in
the start-up cache (`torchfit.cache`), each keyed by what decides it:

- an interpreter's version, by its real file's device, inode, size, mtime and
  ctime, and only for a native executable (ELF): a script named python3 (a shim,
  a wrapper) may answer differently per directory or environment, so it is asked
  every time;
- a pyenv shim on PATH (seen when pyenv itself did not answer, so its shims are
  not skipped) is resolved once, in the same call that asks its version, to the
  interpreter it runs (`sys.executable`): that path is the one recorded, so uv and
  every later step run the interpreter itself, not bash and `pyenv exec` (tens of
  ms per call, and each uv process asks its interpreter);
- pyenv's answers, by the environment that steers pyenv and the stats of the
  files and directories its answers are read from (its own executable and
  libexec, $PYENV_ROOT/versions, python-build's definition directories, .git),
  and for at most a day. Only a complete, successful set of answers is kept.
"""

import glob
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torchfit import cache
from torchfit.background import map_in_threads
from torchfit.compat.facts import Pyenv, PythonInstall, UvPythons
from torchfit.host._io import DEFAULT_TIMEOUT, _run_tool, _unknown
from torchfit.runner import Runner

# "3.13.2", or "3.13.2t" for a free-threaded build (sysconfig Py_GIL_DISABLED, PEP 703).
_PY_VERSION_CODE = ("import sys,sysconfig;print('%d.%d.%d'%sys.version_info[:3]"
                    "+('t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))")
# A pyenv shim is asked for the interpreter it runs as well.
_PY_SHIM_CODE = _PY_VERSION_CODE + ";print(sys.executable)"
# pyenv's shim template (pyenv-rehash): `exec "…/libexec/pyenv" exec "$program" "$@"`;
# pyenv-virtualenv's shims are the same.
_PYENV_SHIM = re.compile(rb'exec "[^"\n]*pyenv" exec "\$program"')

_PY_FINAL = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")
_PY_FINAL_FT = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)t?")
# The interpreter names looked for on PATH (python3.12, python3.13t, python3; not python3-config).
_PY_NAME = re.compile(r"python3(?:\.[0-9]+t?)?")

def parse_python_version(text: str) -> str | None:
    """Output of `python -c "...sys.version_info[:3]"` ("3.12.1") -> "3.12.1", or None."""
    token = text.strip()
    return token if _PY_FINAL_FT.fullmatch(token) else None


def python_install(version: str, path: str | None, source: str) -> PythonInstall:
    """A PythonInstall from a probed version, "3.13.2t" marking a free-threaded build."""
    ft = version.endswith("t")
    return PythonInstall(version[:-1] if ft else version, path, source, ft)


def parse_pyenv_version(text: str) -> str | None:
    """`pyenv --version` ("pyenv 2.6.30") -> "2.6.30"."""
    m = re.match(r"pyenv\s+([0-9][0-9A-Za-z.+-]*)", text.strip())
    return m.group(1) if m else None


def parse_pyenv_versions(text: str) -> tuple[str, ...]:
    """`pyenv versions --bare` -> the CPython versions pyenv has built ("3.12.1", "3.13.0t").

    Skips "system", virtualenvs ("3.12.1/envs/x", "myenv") and other implementations
    (pypy3.10-7.3.15, miniconda3-latest); keeps free-threaded builds ("3.13.0t": cp313t
    wheels only, marked so in the facts).
    """
    return _final_cpython(text.splitlines(), _PY_FINAL_FT)


def parse_pyenv_install_list(text: str) -> tuple[str, ...]:
    """`pyenv install --list` -> CPython final releases pyenv can build, in its order.

    Only "X.Y.Z" lines and their free-threaded "X.Y.Zt" count: not "3.14-dev",
    "3.14.0rc1", "3.13t-dev", "pypy...", "anaconda3-...", nor the "Available versions:" header.
    """
    return _final_cpython(text.splitlines(), _PY_FINAL_FT)


def _final_cpython(lines: Iterable[str], pattern: re.Pattern[str] = _PY_FINAL) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for line in lines:
        token = line.strip()
        if pattern.fullmatch(token):
            seen.setdefault(token, None)
    return tuple(seen)

def pyenv_root(env: Mapping[str, str]) -> str:
    """pyenv's own rule for its root: $PYENV_ROOT, else $HOME/.pyenv ("" with neither)."""
    return env.get("PYENV_ROOT") or (os.path.join(env["HOME"], ".pyenv") if env.get("HOME") else "")


def find_pyenv(runner: Runner) -> str | None:
    """pyenv on PATH, else $PYENV_ROOT/bin/pyenv ($PYENV_ROOT defaults to ~/.pyenv, as in pyenv).

    pyenv's installer puts it in $PYENV_ROOT/bin, which non-interactive shells
    (cron, CI, ssh host cmd) often lack on PATH. A set PYENV_ROOT is the only root
    looked at: pyenv itself would use no other.
    """
    found = runner.which("pyenv")
    if found:
        return found
    root = pyenv_root(runner.environ())
    candidate = os.path.join(root, "bin", "pyenv") if root else ""
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def env_python(prefix: str, names: Sequence[str] = ("bin/python3", "bin/python")) -> str | None:
    """The first of `names` under `prefix` that is an executable file (a venv's or conda env's Python)."""
    for name in names:
        exe = os.path.join(prefix, name)
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return None


def is_env_dir(prefix: str) -> bool:
    """Does `prefix` look like an environment (a venv's pyvenv.cfg, a conda env's conda-meta/,
    or the env script `torchfit install` writes), whatever state its interpreter is in?"""
    return any(os.path.lexists(os.path.join(prefix, marker))
               for marker in ("pyvenv.cfg", "conda-meta", "bin/torchfit-env"))


def explain_env_python(prefix: str, names: Sequence[str] = ("bin/python3", "bin/python")) -> str:
    """What is wrong with each of `names` under `prefix` (none of them runs): missing, a
    dangling symlink, a symlink loop, not executable. One line, for a BrokenEnv."""
    import errno

    parts = []
    for name in names:
        exe = os.path.join(prefix, name)
        if not os.path.lexists(exe):
            parts.append(f"{name} is missing")
            continue
        try:
            os.stat(exe)
        except OSError as exc:
            target = os.readlink(exe) if os.path.islink(exe) else "?"
            if exc.errno == errno.ELOOP:
                parts.append(f"{name} is a symlink loop ({name} -> {target})")
            elif exc.errno == errno.ENOENT:
                parts.append(f"{name} is a dangling symlink to {target}")
            else:
                parts.append(f"{name} cannot be read ({exc.strerror})")
            continue
        if not os.path.isfile(exe):
            parts.append(f"{name} is not a file")
        elif not os.access(exe, os.X_OK):
            parts.append(f"{name} is not executable")
    return "; ".join(parts) or "no interpreter runs"


def rebuild_hint(prefix: str) -> str:
    """How to rebuild the env at `prefix`: from its own lock when it has one."""
    lock = os.path.join(prefix, "pylock.toml")
    if os.path.isfile(lock):
        return (f"rebuild it from its lock: torchfit install --lock {lock} --prefix {prefix} --force "
                "(copy the lock elsewhere first: --force replaces the env and its lock)")
    return (f"rebuild it: torchfit install ... --prefix {prefix} --force (or python -m venv --clear {prefix} "
            "and reinstall its packages)")


def interpreter_in(prefix: str, version: str) -> str | None:
    """bin/pythonX.Y (or bin/python3, bin/python) under an installation prefix."""
    major_minor = ".".join(version.split(".")[:2])
    ft = (f"python{major_minor}t",) if version.endswith("t") else ()  # a free-threaded build's own name
    for name in (*ft, f"python{major_minor}", "python3", "python"):
        exe = os.path.join(prefix, "bin", name)
        if os.access(exe, os.X_OK):
            return exe
    return None


def pyenv_python(pyenv_root: str, version: str) -> str | None:
    """The interpreter of pyenv's `version` ($PYENV_ROOT/versions/VERSION/bin/pythonX.Y)."""
    return interpreter_in(os.path.join(pyenv_root, "versions", version), version)


def probe_pyenv(
    runner: Runner, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[Pyenv | None, tuple[PythonInstall, ...], str | None]:
    """pyenv, its CPython builds and what it can install; (None, (), reason) without it.

    Four quick pyenv calls (root, --version, versions --bare, install --list),
    run concurrently; `install --list` reads python-build's definition files and
    runs once.
    """
    exe = find_pyenv(runner)
    if exe is None:
        return None, (), _unknown("pyenv not found on PATH, in $PYENV_ROOT/bin or ~/.pyenv/bin")
    results = _pyenv_answers(runner, exe, timeout)
    res, cause = results["root"]
    root = res.stdout.strip() if res is not None and cause is None else ""
    if not root or not os.path.isdir(root):
        return None, (), _unknown(cause or f"`pyenv root` named no directory ({root!r})")
    res, cause = results["version"]
    version = parse_pyenv_version(res.stdout) if res is not None and cause is None else None
    res, cause = results["list"]
    installable = parse_pyenv_install_list(res.stdout) if res is not None and cause is None else ()
    reason = None
    if not installable:
        reason = (
            f"pyenv found at {root}, but `pyenv install --list` gave no CPython release"
            f" ({cause or 'empty list'}), so none is known to be installable"
        )
    pythons = []
    res, cause = results["versions"]
    if res is not None and cause is None:
        for v in parse_pyenv_versions(res.stdout):
            path = pyenv_python(root, v)
            if path:
                pythons.append(python_install(v, path, "pyenv"))
    return Pyenv(root, version, installable), tuple(pythons), reason


_PYENV_CALLS = {
    "root": ["root"],
    "version": ["--version"],
    "versions": ["versions", "--bare"],
    "list": ["install", "--list"],
}
# The environment pyenv's four answers depend on (pyenv's own libexec/pyenv,
# pyenv-install, python-build --definitions).
_PYENV_ENV = ("PYENV_ROOT", "HOME", "PYTHON_BUILD_DEFINITIONS", "PYENV_HOOK_PATH")
_PYENV_MAX_AGE = 24 * 3600.0
# What decides uv's downloads list besides its binary (uv help python install, uv 0.13.10).
_UV_PYTHON_ENV = ("UV_PYTHON_DOWNLOADS_JSON_URL", "UV_PYTHON_INSTALL_MIRROR", "UV_PYPY_INSTALL_MIRROR")
_UV_LIST_MAX_AGE = 3600.0


class _Answer:
    """A finished pyenv call, as _run_tool's result (only stdout is read)."""

    def __init__(self, stdout: str) -> None:
        self.stdout = stdout


def _pyenv_answers(runner: Runner, exe: str, timeout: float) -> dict[str, tuple[Any, str | None]]:
    """(result, cause) of each pyenv call: from the cache when nothing it depends on changed."""
    env = runner.environ()
    real = os.path.realpath(exe)
    key = cache.sha256_hex(json.dumps([real, [env.get(k) for k in _PYENV_ENV]]).encode())
    name = "pyenv-" + key[:16]
    data = cache.read_record(name, key)
    if isinstance(data, dict) and isinstance(data.get("answers"), dict) and isinstance(data.get("time"), float):
        answers = data["answers"]
        fresh = 0 <= time.time() - data["time"] < _PYENV_MAX_AGE
        if (fresh and set(answers) == set(_PYENV_CALLS) and all(isinstance(v, str) for v in answers.values())
                and data.get("stats") == _pyenv_stats(real, answers["root"].strip(), env)):
            return {k: (_Answer(v), None) for k, v in answers.items()}
    # pyenv's root (pyenv_root): what is stat'ed before the calls; answers are kept only
    # when they name that root and nothing changed meanwhile.
    guess = pyenv_root(env).rstrip("/")
    before = _pyenv_stats(real, guess, env)
    # torchfit's own threads (background.py), not a thread pool: the pool's joins of its workers
    # raced ("RuntimeError: release unlocked lock" from this probe's thread, once in a CI run)
    calls = list(_PYENV_CALLS.items())
    answered = map_in_threads(lambda call: _run_tool(runner, [exe, *call[1]], timeout), calls, len(calls))
    results = {k: answer for (k, _), answer in zip(calls, answered)}
    if all(res is not None and cause is None for res, cause in results.values()):
        answers = {k: res.stdout for k, (res, _) in results.items() if res is not None}
        if answers["root"].strip() == guess and os.path.isdir(guess) and _pyenv_stats(real, guess, env) == before:
            cache.write_record(name, key, {"time": time.time(), "answers": answers, "stats": before})
    return results


def _pyenv_stats(real_exe: str, root: str, env: dict[str, str]) -> dict[str, Any]:
    """The fingerprints of everything pyenv's answers are read from.

    A git checkout or a package upgrade replaces files (libexec, python-build's
    definitions, .git's refs), an install or uninstall adds or removes an entry of
    versions/: each changes a stat below.
    """
    libexec = os.path.dirname(real_exe)
    home = os.path.dirname(libexec)
    paths = [real_exe, libexec, home, os.path.join(home, ".git")]
    for base in dict.fromkeys((home, root)):
        paths += [os.path.join(base, "plugins"), *sorted(glob.glob(os.path.join(base, "plugins", "*", "share", "python-build")))]
    paths += [root, os.path.join(root, "versions"), os.path.join(root, ".git")]
    paths += [d for d in env.get("PYTHON_BUILD_DEFINITIONS", "").split(":") if d]
    return {p: cache.fingerprint(p) for p in dict.fromkeys(paths)}


# uv's own settings for where its managed Pythons come from (uv 0.13.10, `uv help python install`:
# --mirror [env: UV_PYTHON_INSTALL_MIRROR] replaces python-build-standalone's GitHub releases
# URL, file:// included; --python-downloads-json-url [env: UV_PYTHON_DOWNLOADS_JSON_URL] is a
# downloads list of the site's own). UV_PYTHON_DOWNLOADS=never turns uv's downloads off.
UV_PYTHON_SETTINGS = ("UV_PYTHON_INSTALL_MIRROR", "UV_PYTHON_DOWNLOADS_JSON_URL")


def describe_uv_python_source(env: Mapping[str, str]) -> str:
    """Where `uv python install` fetches from, in words: the site's settings, else uv's default."""
    from torchfit.redact import redact

    named = [f"{k}={redact(env[k])}" for k in UV_PYTHON_SETTINGS if env.get(k)]
    return ", ".join(named) or "python-build-standalone's releases (uv's default downloads)"


def parse_uv_downloads(text: str, arch: str | None) -> tuple[str, ...]:
    """`uv python list --only-downloads --all-versions --output-format json` -> the CPython
    versions uv can fetch for a Linux glibc host of `arch` ("3.13.2", "3.13.2t"), in uv's order.

    Pre-releases, PyPy/GraalPy, musl and debug builds are left out. Garbage gives ().
    """
    try:
        rows = json.loads(text)
    except ValueError:
        return ()
    out: dict[str, None] = {}
    for row in rows if isinstance(rows, list) else ():
        if not isinstance(row, dict) or row.get("implementation") != "cpython":
            continue
        if row.get("os") != "linux" or row.get("libc") != "gnu" or (arch and row.get("arch") != arch):
            continue
        version, variant = row.get("version"), row.get("variant")
        if not isinstance(version, str) or not _PY_FINAL.fullmatch(version):
            continue
        if variant == "default":
            out.setdefault(version, None)
        elif variant == "freethreaded":
            out.setdefault(version + "t", None)
    return tuple(out)


def probe_uv_pythons(runner: Runner, uv: str | None, arch: str | None, *,
                     timeout: float = DEFAULT_TIMEOUT) -> tuple[UvPythons | None, str | None]:
    """What uv's managed Pythons offer here: one `uv python list --only-downloads` (~0.1 s: it reads
    uv's downloads list, or the site's UV_PYTHON_DOWNLOADS_JSON_URL; it inspects no interpreter)."""
    env = runner.environ()
    if uv is None:
        return None, _unknown("uv not found")
    if env.get("UV_PYTHON_DOWNLOADS", "").lower() == "never":
        return None, "UV_PYTHON_DOWNLOADS=never: uv's managed Pythons are turned off"
    machine = arch or os.uname().machine
    # Kept in the start-up cache (issue 37: ~0.1 s of every command, a plan's Python assumed or
    # not): keyed by uv's binary (its built-in list) and the settings that replace the list; a
    # list read from a URL is asked again after _UV_LIST_MAX_AGE, a local one when it changes.
    listing = env.get("UV_PYTHON_DOWNLOADS_JSON_URL", "")
    local = listing[len("file://"):] if listing.startswith("file://") else listing if listing.startswith("/") else ""
    key = cache.sha256_hex(json.dumps([os.path.realpath(uv), cache.fingerprint(os.path.realpath(uv)), machine,
                                       [env.get(k) for k in _UV_PYTHON_ENV],
                                       cache.fingerprint(local) if local else None]).encode())
    record = cache.read_record("uv-pythons-" + key[:16], key)
    if (isinstance(record, dict) and isinstance(record.get("installable"), list)
            and isinstance(record.get("time"), float)
            and (local or not listing or 0 <= time.time() - record["time"] < _UV_LIST_MAX_AGE)
            and all(isinstance(v, str) for v in record["installable"])):
        installable = tuple(record["installable"])
    else:
        argv = [uv, "python", "list", "--only-downloads", "--all-versions", "--output-format", "json"]
        res, cause = _run_tool(runner, argv, timeout)
        if res is None or cause is not None:
            return None, _unknown(f"`uv python list` failed: {cause}")
        installable = tuple(parse_uv_downloads(res.stdout, machine))
        cache.write_record("uv-pythons-" + key[:16], key, {"time": time.time(), "installable": list(installable)})
    why = None if installable else "uv's downloads list names no CPython for this platform"
    return UvPythons(uv, installable, describe_uv_python_source(env)), why


def _is_venv_bin(directory: str) -> bool:
    # PEP 405: a virtual environment has pyvenv.cfg one level above its bin/.
    return os.path.isfile(os.path.join(os.path.dirname(directory), "pyvenv.cfg"))


def _path_python_candidates(runner: Runner, skip_dirs: Iterable[str], seen: set[str]) -> list[str]:
    """One path per distinct interpreter file on PATH, in PATH order.

    When several names lead to one file, prefer a name outside a virtual
    environment (an activated venv's python3.12 links to /usr/bin/python3.12, and
    the host's interpreter is the fact), then PATH order.
    """
    skip = {os.path.realpath(d) for d in skip_dirs}
    chosen: dict[str, tuple[bool, str]] = {}  # realpath -> (in a venv, path)
    for d in runner.environ().get("PATH", "").split(os.pathsep):
        if not d or os.path.realpath(d) in skip:
            continue
        try:
            # python3.X before a bare python3 that links to it: the versioned name
            # is the one a user would type to get that interpreter again.
            names = sorted((n for n in os.listdir(d) if _PY_NAME.fullmatch(n)), key=lambda n: (n == "python3", n))
        except OSError:
            continue
        in_venv = _is_venv_bin(d)
        for name in names:
            path = os.path.join(d, name)
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(real) or not os.access(real, os.X_OK):
                continue
            if real not in chosen or (chosen[real][0] and not in_venv):
                chosen[real] = (in_venv, path)
    seen.update(chosen)
    return [path for _, path in chosen.values()]


_INTERPRETERS_KEY = "realpath -> [fingerprint, version]"


def _native_fingerprint(real: str) -> list[int] | None:
    """The cache fingerprint of an ELF executable; None for anything else (a script asks every time)."""
    try:
        with open(real, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                return None
    except OSError:
        return None
    return cache.fingerprint(real)


def is_pyenv_shim(real: str) -> bool:
    """Is this file one of pyenv's shims (a bash script that runs `pyenv exec NAME`)?"""
    try:
        with open(real, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and _PYENV_SHIM.search(head) is not None


def probe_pythons(
    runner: Runner,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    skip_dirs: Iterable[str] = (),
    known: Iterable[PythonInstall] = (),
) -> tuple[tuple[PythonInstall, ...], str | None]:
    """Every `python3` / `python3.X` on PATH, one per real file, with its version.

    `skip_dirs` (pyenv's shims) are left out; `known` interpreters (pyenv's) are not
    run again. Each interpreter is asked for its version, concurrently; one that
    fails or hangs is left out. A pyenv shim that is not skipped is replaced by the
    interpreter it runs (once: the shim is run once, for both answers), and left out
    when that interpreter is already listed.
    """
    seen = {os.path.realpath(p.path) for p in known if p.path}
    candidates = _path_python_candidates(runner, skip_dirs, seen)
    record = cache.read_record("interpreters", _INTERPRETERS_KEY) if candidates else None
    known_versions: dict[str, Any] = record if isinstance(record, dict) else {}
    learned: dict[str, Any] = {}

    def cached(path: str) -> PythonInstall | None:
        real = os.path.realpath(path)
        hit = known_versions.get(real)
        if isinstance(hit, list) and len(hit) == 2 and hit[0] == _native_fingerprint(real):
            version = parse_python_version(str(hit[1]))
            if version:
                return python_install(version, path, "path")
        return None

    def ask(path: str) -> PythonInstall | None:
        real = os.path.realpath(path)
        stamp = _native_fingerprint(real)
        shim = stamp is None and is_pyenv_shim(real)
        res, cause = _run_tool(runner, [path, "-c", _PY_SHIM_CODE if shim else _PY_VERSION_CODE], timeout)
        if res is None or cause is not None:
            return None
        lines = res.stdout.splitlines() or [""]
        version = parse_python_version(lines[0])
        if version and stamp is not None and stamp == _native_fingerprint(real):
            learned[real] = [stamp, version]
        if version and shim:
            target = lines[1].strip() if len(lines) > 1 else ""
            if os.path.isabs(target) and os.path.isfile(target) and os.access(target, os.X_OK):
                path = target
        return python_install(version, path, "path") if version else None

    answers = {path: cached(path) for path in candidates}
    missing = [path for path, hit in answers.items() if hit is None]
    if len(missing) == 1:
        answers[missing[0]] = ask(missing[0])
    elif missing:
        answers.update(zip(missing, map_in_threads(ask, missing, 8)))
    found: list[PythonInstall] = []
    for candidate, p in answers.items():
        if p is None:
            continue
        if p.path and p.path != candidate:  # a shim, resolved: left out when its interpreter is listed already
            real = os.path.realpath(p.path)
            if real in seen:
                continue
            seen.add(real)
        found.append(p)
    if learned:
        # Newest last; the record stays small on hosts whose interpreters come and go.
        merged = {**{k: v for k, v in known_versions.items() if k not in learned}, **learned}
        cache.write_record("interpreters", _INTERPRETERS_KEY, dict(list(merged.items())[-64:]))
    if not found:
        return (), _unknown("no working python3 or python3.X on PATH")
    return tuple(found), None


def _probe_all_pythons(
    runner: Runner, timeout: float
) -> tuple[Pyenv | None, tuple[PythonInstall, ...], str | None, str | None]:
    pyenv, pyenv_pythons, pyenv_reason = probe_pyenv(runner, timeout=timeout)
    skip: list[str] = []
    if pyenv is not None:
        # pyenv's shims are bash wrappers around the builds listed above; running
        # each costs ~50 ms and says nothing new.
        skip = [os.path.join(pyenv.path, "shims")]
        skip += glob.glob(os.path.join(pyenv.path, "plugins", "*", "shims"))
    path_pythons, _ = probe_pythons(runner, timeout=timeout, skip_dirs=skip, known=pyenv_pythons)
    pythons = path_pythons + pyenv_pythons
    reason = None
    if not pythons:
        reason = _unknown("no python3.X on PATH and no CPython built by pyenv")
    return pyenv, pythons, reason, pyenv_reason
