"""The interpreter of a plan: found on the host, or built with `pyenv install -s`.

Building CPython takes minutes and fails in a few well-known ways: pyenv is not
there; a development package is missing, so python-build stops ("ERROR: The Python
ssl extension was not compiled. Missing the OpenSSL lib?") or leaves a module out
("WARNING: The Python bz2 extension was not compiled"). `diagnose_build` turns that
output into the causes and the packages that cure them (RHEL/CentOS and Debian
names, per pyenv's wiki "Suggested build environment"); the build log is kept on
failure and named in the error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.errors import PythonBuildFailed, PythonUnavailable, ToolMissing
from torchfit.host.pythons import find_pyenv, interpreter_in
from torchfit.runner import Runner
from torchfit.text import tail

PYENV_TIMEOUT = 3600.0


@dataclass(**FROZEN)
class BuildCause:
    """One reason a CPython build failed, and the packages that provide the fix."""

    what: str
    rhel: str
    debian: str
    fatal: bool = True

    def format(self) -> str:
        return f"{self.what}: install {self.rhel} (CentOS/RHEL/Rocky: yum/dnf) or {self.debian} (Debian/Ubuntu: apt-get)"


# Messages of pyenv's python-build (plugins/python-build/bin/python-build,
# `build_package_verify_py*` and configure), with the packages of pyenv's wiki
# "Suggested build environment" (https://github.com/pyenv/pyenv/wiki#suggested-build-environment).
_CAUSES: tuple[tuple[re.Pattern[str], BuildCause], ...] = (
    (re.compile(r"ssl extension was not compiled|Missing the OpenSSL lib|No module named '?_ssl'?", re.I),
     BuildCause("OpenSSL headers are missing (the ssl module could not be built)", "openssl-devel", "libssl-dev")),
    (re.compile(r"zlib extension was not compiled|Missing the zlib|zipimport.ZipImportError: can't decompress data", re.I),
     BuildCause("zlib headers are missing", "zlib-devel", "zlib1g-dev")),
    (re.compile(r"ctypes extension was not compiled|Missing the libffi|No module named '?_ctypes'?", re.I),
     BuildCause("libffi headers are missing (ctypes could not be built)", "libffi-devel", "libffi-dev")),
    (re.compile(r"bz2 extension was not compiled|Missing the bzip2", re.I),
     BuildCause("bzip2 headers are missing", "bzip2-devel", "libbz2-dev", fatal=False)),
    (re.compile(r"readline extension was not compiled|Missing the GNU readline", re.I),
     BuildCause("readline headers are missing", "readline-devel", "libreadline-dev", fatal=False)),
    (re.compile(r"sqlite3 extension was not compiled|Missing the SQLite3", re.I),
     BuildCause("SQLite headers are missing", "sqlite-devel", "libsqlite3-dev", fatal=False)),
    (re.compile(r"lzma extension was not compiled|Missing the lzma", re.I),
     BuildCause("xz/lzma headers are missing", "xz-devel", "liblzma-dev", fatal=False)),
    (re.compile(r"tkinter extension was not compiled|Missing the Tk toolkit", re.I),
     BuildCause("Tk headers are missing", "tk-devel", "tk-dev", fatal=False)),
    (re.compile(r"uuid extension was not compiled|Missing the uuid", re.I),
     BuildCause("libuuid headers are missing", "libuuid-devel", "uuid-dev", fatal=False)),
    (re.compile(r"no acceptable C compiler found|C compiler cannot create executables", re.I),
     BuildCause("no working C compiler", "gcc make", "build-essential")),
    (re.compile(r"make: (command )?not found|No targets specified and no makefile", re.I),
     BuildCause("make is missing", "make", "make")),
)

_DEFINITION_MISSING = re.compile(r"definition not found: (\S+)")
_LOG_PATH = re.compile(r"Results logged to (\S+)")


@dataclass(**FROZEN)
class BuildDiagnosis:
    causes: tuple[BuildCause, ...]
    log_path: str | None
    unknown_version: str | None = None

    def hint(self, version: str) -> str:
        parts = []
        if self.unknown_version:
            parts.append(
                f"this pyenv does not know Python {self.unknown_version}: update it "
                "(`git -C \"$(pyenv root)\" pull`, or `pyenv update`)"
            )
        fatal = [c for c in self.causes if c.fatal] or list(self.causes)
        parts += [c.format() for c in fatal]
        if any("OpenSSL" in c.what for c in fatal):
            parts.append(
                "CentOS 7 ships OpenSSL 1.0.2 and Python >= 3.10 needs 1.1.1: `yum install epel-release "
                "openssl11-devel`, then run with CPPFLAGS=\"$(pkg-config --cflags openssl11)\" "
                "LDFLAGS=\"$(pkg-config --libs openssl11)\" (`torchfit docs centos7`)"
            )
        if not parts:
            parts.append(f"read the build log; `pyenv install {version}` by hand shows the same failure")
        if self.log_path:
            parts.append(f"python-build's log: {self.log_path}")
        return "; ".join(parts)


def diagnose_build(output: str) -> BuildDiagnosis:
    """Causes of a failed `pyenv install`, from its output (pure)."""
    causes = tuple(cause for pattern, cause in _CAUSES if pattern.search(output))
    log = _LOG_PATH.search(output)
    missing = _DEFINITION_MISSING.search(output)
    return BuildDiagnosis(causes, log.group(1) if log else None, missing.group(1) if missing else None)


def ensure_python(
    runner: Runner,
    version: str,
    *,
    timeout: float = PYENV_TIMEOUT,
    log_path: str | None = None,
) -> tuple[str, str]:
    """`pyenv install -s VERSION`, then the interpreter's path; returns (path, output).

    -s skips the build when the version is already installed (a quick call). On
    failure raises InstallFailed with step "python", the output's tail, and a hint
    naming the cause and the package to install (and `log_path`, the install log);
    PythonUnavailable without pyenv.
    """
    pyenv = find_pyenv(runner)
    if pyenv is None:
        raise PythonUnavailable(
            f"Python {version} is not installed and pyenv is not available to build it",
            hint=f"install pyenv (https://github.com/pyenv/pyenv#installation), or Python {version} "
            "yourself, or pick an installed Python with --python",
        )
    argv = [pyenv, "install", "-s", version]
    try:
        res = runner.run(argv, timeout=timeout)
    except ToolMissing:
        raise PythonUnavailable(f"pyenv at {pyenv} cannot be run") from None
    output = (res.stdout or "") + (res.stderr or "")
    if res.returncode != 0:
        diag = diagnose_build(output)
        raise PythonBuildFailed(version, argv, res.returncode, tail(output), diag, log_path=log_path)
    prefix_res = runner.run([pyenv, "prefix", version], timeout=60)
    prefix = prefix_res.stdout.strip().splitlines()[-1] if prefix_res.ok and prefix_res.stdout.strip() else ""
    path = interpreter_in(prefix, version) if prefix else None
    if path is None:
        raise PythonUnavailable(
            f"pyenv install -s {version} succeeded but `pyenv prefix {version}` names no interpreter "
            f"({prefix_res.stderr.strip()[:200] or prefix or 'no output'})"
        )
    return path, output
