"""The plan's interpreter where the host lacks it: uv's managed Pythons first (issue 35).

`uv python install` unpacks a prebuilt, relocatable CPython (python-build-standalone's
`install_only` builds) in seconds, with no compiler and no source download; a site
behind an air gap serves them from its own mirror through uv's own settings
(`uv help python install`, uv 0.13.10: `--mirror` [env: UV_PYTHON_INSTALL_MIRROR]
replaces `https://github.com/astral-sh/python-build-standalone/releases/download`,
`file://` included; `--python-downloads-json-url` [env: UV_PYTHON_DOWNLOADS_JSON_URL]
names a downloads list of the site's own). Nothing here passes those settings: uv reads
them from the environment or its uv.toml, as the user's own `uv` would.

`provide_python` answers a path, or why uv could not (no uv, downloads turned off, no
download of that version, offline or the mirror unreachable): the caller then builds with
pyenv as before, and says that reason. A plan whose source is "pyenv" does not come here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from torchfit._backports import FROZEN
from torchfit.errors import PythonUnavailable, ToolMissing, ToolTimeout
from torchfit.lock.uvbin import find_uv
from torchfit.runner import Runner, index_variables

UV_PYTHON_TIMEOUT = 900.0  # a 30-100 MB download from a slow mirror
_FIND_TIMEOUT = 60.0


@dataclass(**FROZEN)
class UvPython:
    """What uv's step answered: the interpreter (or None and why not) and uv's output."""

    path: str | None
    why_not: str = ""
    output: str = ""
    fetched: bool = False  # downloaded now (False: already in uv's store)
    argv: tuple[str, ...] = ()


def uv_request(version: str, free_threaded: bool) -> str:
    """uv's request for the plan's interpreter: "3.11.7", "3.13.2t" (uv's free-threaded spelling)."""
    return version + ("t" if free_threaded else "")


def explain_uv_failure(output: str, request: str) -> str:
    """Why `uv python install REQUEST` failed, in one clause, from its output (pure).

    uv 0.13.10 prints `error: ...` then `cause: ...` lines, the deepest cause last:
    "No download found for request", "Network connectivity is disabled" (--offline),
    "failed to query metadata of file `/mirror/...`" (a file:// mirror without the file),
    "dns error" / "Request failed after 3 retries" (no network).
    """
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if any("No download found for request" in ln for ln in lines):
        return f"uv's downloads list has no Python {request} for this platform"
    if any("Network connectivity is disabled" in ln for ln in lines):
        return f"uv is offline (--offline or UV_OFFLINE) and its store has no Python {request}"
    causes = [ln.removeprefix("cause:").strip() for ln in lines if ln.startswith("cause:")]
    errors = [ln.removeprefix("error:").strip() for ln in lines if ln.startswith("error:")]
    said = causes[-1] if causes else errors[-1] if errors else (lines[-1] if lines else "no output")
    download = next((c for c in causes if c.startswith("Failed to download")), "")
    where = re.search(r"`([^`]+)`", download)
    return f"uv could not fetch Python {request}" + (f" from {where.group(1)}" if where else "") + f": {said[:240]}"


def find_uv_python(runner: Runner, uv: str, request: str) -> str | None:
    """The interpreter of `request` in uv's store (`uv python find --managed-python`), or None.

    --no-project: a .python-version or pyproject.toml in the working directory is not the plan's
    business; --no-python-downloads: finding never fetches.
    """
    argv = [uv, "python", "find", "--managed-python", "--no-project", "--no-python-downloads", request]
    try:
        res = runner.run(argv, timeout=_FIND_TIMEOUT, unset=index_variables())
    except (ToolMissing, ToolTimeout):
        return None
    path = res.stdout.strip().splitlines()[-1].strip() if res.ok and res.stdout.strip() else ""
    return path if path and os.access(path, os.X_OK) else None


def provide_python(runner: Runner, version: str, free_threaded: bool = False, *,
                   timeout: float = UV_PYTHON_TIMEOUT, offline: bool = False) -> UvPython:
    """The plan's Python from uv's managed Pythons: found in uv's store, else `uv python install`.

    --no-bin: the interpreter is not linked into ~/.local/bin (the env is torchfit's business,
    the user's PATH is not). `offline` (torchfit's --offline, or the site's `offline`): uv is told
    --offline too, so it reads a file:// mirror and nothing else (uv 0.13.10, measured: a file://
    UV_PYTHON_INSTALL_MIRROR installs under --offline; an http one is never asked). Never raises
    for uv's own failures: the answer says why not.
    """
    uv = find_uv(runner)
    request = uv_request(version, free_threaded)
    if uv is None:
        return UvPython(None, "uv is not found")
    found = find_uv_python(runner, uv, request)
    if found:
        return UvPython(found)
    if runner.environ().get("UV_PYTHON_DOWNLOADS", "").lower() == "never":
        return UvPython(None, f"UV_PYTHON_DOWNLOADS=never and uv's store has no Python {request}")
    argv = (uv, "python", "install", "--no-bin", "--no-progress", *(("--offline",) if offline else ()), request)
    try:
        res = runner.run(list(argv), timeout=timeout, unset=index_variables())
    except ToolTimeout:
        return UvPython(None, f"`uv python install {request}` took over {timeout:g} s", argv=argv)
    except ToolMissing as exc:
        return UvPython(None, f"uv cannot be run ({exc.message})", argv=argv)
    output = (res.stdout or "") + (res.stderr or "")
    if res.returncode != 0:
        return UvPython(None, explain_uv_failure(output, request), output, argv=argv)
    found = find_uv_python(runner, uv, request)
    if found is None:
        return UvPython(None, f"`uv python install {request}` succeeded but `uv python find` names no "
                        "interpreter", output, argv=argv)
    return UvPython(found, "", output, fetched=True, argv=argv)


def no_python(version: str, why_not_uv: str) -> PythonUnavailable:
    """The refusal where neither uv nor pyenv can provide the plan's Python: both ways out named."""
    return PythonUnavailable(
        f"Python {version} is not on this host; {why_not_uv}; and there is no pyenv to build it",
        hint="serve uv's Pythons from a site mirror (UV_PYTHON_INSTALL_MIRROR=file:///... and/or "
        "UV_PYTHON_DOWNLOADS_JSON_URL: docs/mirrors.md, 'Pythons'), or install pyenv "
        f"(https://github.com/pyenv/pyenv#installation) to build Python {version}, or pick an "
        "installed Python with --python",
    )
