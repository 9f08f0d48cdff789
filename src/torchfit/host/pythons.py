"""Pythons: CPython interpreters on PATH and pyenv (the one `find_pyenv`, its
versions and what it can install)."""

import glob
import os
import re
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from torchfit.compat.facts import Pyenv, PythonInstall
from torchfit.host._io import DEFAULT_TIMEOUT, _run_tool, _unknown
from torchfit.runner import Runner

_PY_VERSION_CODE = "import sys;print('%d.%d.%d'%sys.version_info[:3])"

_PY_FINAL = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)")

def parse_python_version(text: str) -> str | None:
    """Output of `python -c "...sys.version_info[:3]"` ("3.12.1") -> "3.12.1", or None."""
    token = text.strip()
    return token if _PY_FINAL.fullmatch(token) else None


def parse_pyenv_version(text: str) -> str | None:
    """`pyenv --version` ("pyenv 2.6.30") -> "2.6.30"."""
    m = re.match(r"pyenv\s+([0-9][0-9A-Za-z.+-]*)", text.strip())
    return m.group(1) if m else None


def parse_pyenv_versions(text: str) -> tuple[str, ...]:
    """`pyenv versions --bare` -> the CPython versions pyenv has built ("3.12.1").

    Skips "system", virtualenvs ("3.12.1/envs/x", "myenv"), other implementations
    (pypy3.10-7.3.15, miniconda3-latest) and free-threaded builds ("3.13.0t": a
    different ABI, cp313t wheels).
    """
    return _final_cpython(text.splitlines())


def parse_pyenv_install_list(text: str) -> tuple[str, ...]:
    """`pyenv install --list` -> CPython final releases pyenv can build, in its order.

    Only bare "X.Y.Z" lines count: not "3.14-dev", "3.14.0rc1", "3.13.0t", "pypy...",
    "anaconda3-...", nor the "Available versions:" header.
    """
    return _final_cpython(text.splitlines())


def _final_cpython(lines: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for line in lines:
        token = line.strip()
        if _PY_FINAL.fullmatch(token):
            seen.setdefault(token, None)
    return tuple(seen)

def find_pyenv(runner: Runner) -> str | None:
    """pyenv on PATH, else $PYENV_ROOT/bin/pyenv ($PYENV_ROOT defaults to ~/.pyenv, as in pyenv).

    pyenv's installer puts it in $PYENV_ROOT/bin, which non-interactive shells
    (cron, CI, ssh host cmd) often lack on PATH. A set PYENV_ROOT is the only root
    looked at: pyenv itself would use no other.
    """
    found = runner.which("pyenv")
    if found:
        return found
    env = runner.environ()
    root = env.get("PYENV_ROOT") or (os.path.join(env["HOME"], ".pyenv") if env.get("HOME") else "")
    candidate = os.path.join(root, "bin", "pyenv") if root else ""
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def env_python(prefix: str, names: Sequence[str] = ("bin/python3", "bin/python")) -> str | None:
    """The first of `names` under `prefix` that is an executable file (a venv's or conda env's Python)."""
    for name in names:
        exe = os.path.join(prefix, name)
        if os.path.isfile(exe) and os.access(exe, os.X_OK):
            return exe
    return None


def interpreter_in(prefix: str, version: str) -> str | None:
    """bin/pythonX.Y (or bin/python3, bin/python) under an installation prefix."""
    major_minor = ".".join(version.split(".")[:2])
    for name in (f"python{major_minor}", "python3", "python"):
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
    calls = {
        "root": [exe, "root"],
        "version": [exe, "--version"],
        "versions": [exe, "versions", "--bare"],
        "list": [exe, "install", "--list"],
    }
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        futures = {k: pool.submit(_run_tool, runner, argv, timeout) for k, argv in calls.items()}
        results = {k: f.result() for k, f in futures.items()}
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
                pythons.append(PythonInstall(v, path, "pyenv"))
    return Pyenv(root, version, installable), tuple(pythons), reason


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
            names = sorted(os.listdir(d), key=lambda n: (n == "python3", n))
        except OSError:
            continue
        in_venv = _is_venv_bin(d)
        for name in names:
            if not re.fullmatch(r"python3(?:\.[0-9]+)?", name):
                continue
            path = os.path.join(d, name)
            real = os.path.realpath(path)
            if real in seen or not os.path.isfile(real) or not os.access(real, os.X_OK):
                continue
            if real not in chosen or (chosen[real][0] and not in_venv):
                chosen[real] = (in_venv, path)
    seen.update(chosen)
    return [path for _, path in chosen.values()]


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
    fails or hangs is left out.
    """
    seen = {os.path.realpath(p.path) for p in known if p.path}
    candidates = _path_python_candidates(runner, skip_dirs, seen)

    def ask(path: str) -> PythonInstall | None:
        res, cause = _run_tool(runner, [path, "-c", _PY_VERSION_CODE], timeout)
        if res is None or cause is not None:
            return None
        version = parse_python_version(res.stdout)
        return PythonInstall(version, path, "path") if version else None

    found: list[PythonInstall] = []
    if candidates:
        with ThreadPoolExecutor(max_workers=min(8, len(candidates))) as pool:
            found = [p for p in pool.map(ask, candidates) if p is not None]
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
