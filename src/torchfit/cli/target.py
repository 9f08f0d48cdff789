"""Which interpreter `verify` and `doctor` look at: one rule for both commands.

`--python PATH` (a path, `~` expanded, or a name looked up on PATH); `--env PREFIX`
(`~` expanded; its bin/python, else bin/python3: what a venv, a conda env and the env
`torchfit install` builds all have); else the active env ($VIRTUAL_ENV, then
$CONDA_PREFIX); else `python3` on PATH: the interpreter a user would type, not the one
running torchfit (torchfit may live in its own pipx environment without torch).

The path is absolute (the workers run in a temporary directory, where `--env env` or
`VIRTUAL_ENV=.` would name nothing) and not resolved through symlinks (a venv's
bin/python links to the base interpreter; resolving it would leave the venv).
"""

from __future__ import annotations

import argparse
import os
import shutil
from collections.abc import Mapping
from typing import NamedTuple

from torchfit.errors import BadInput

ENV_NAMES = ("bin/python", "bin/python3")


class Target(NamedTuple):
    """The interpreter (None: none found), the env prefix it belongs to (None: not an env's),
    and why that one (`--env`, `the active env ($VIRTUAL_ENV)`, `python3 on PATH`...)."""

    python: str | None
    prefix: str | None
    source: str


def target_python(args: argparse.Namespace, environ: Mapping[str, str]) -> Target:
    """The interpreter `args.env`/`args.python` name, else the active env's, else python3 on PATH.

    BadInput (exit 2) for an --env or --python that names no interpreter; when neither
    is given and nothing is found, `python` is None (the caller says what that means).
    """
    from torchfit.inputs import shown

    path_var = environ.get("PATH", os.defpath)
    if getattr(args, "python", None):
        name = os.path.expanduser(args.python)
        if os.sep in name:
            path = os.path.abspath(name)
            if not os.path.isfile(path):
                raise BadInput(f"--python {shown(args.python)}: not found")
            if not os.access(path, os.X_OK):
                raise BadInput(f"--python {shown(args.python)}: not executable")
            return Target(path, None, "--python")
        found = shutil.which(name, path=path_var)
        if found is None:
            raise BadInput(f"--python {shown(args.python)}: not found on PATH")
        return Target(os.path.abspath(found), None, "--python")
    if getattr(args, "env", None):
        prefix = os.path.abspath(os.path.expanduser(args.env))
        refuse_denied(f"--env {shown(args.env)}", prefix)  # another user's env: said as such, before "not a venv"
        found = _env_python(prefix) if os.path.isdir(prefix) else None
        if not os.path.isdir(prefix):
            raise BadInput(f"--env {shown(args.env)}: not a directory")
        if found is None:
            check_env_intact(prefix)
            raise BadInput(f"--env {shown(args.env)}: no bin/python or bin/python3 in it (not a venv or conda env)")
        return Target(found, prefix, "--env")
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if environ.get(var):
            prefix = os.path.abspath(environ[var])
            found = _env_python(prefix)
            if found is not None:
                return Target(found, prefix, f"the active env (${var})")
    found = shutil.which("python3", path=path_var)
    if found is not None:
        return Target(os.path.abspath(found), None, "python3 on PATH")
    return Target(None, None, "none found")


def check_env_intact(prefix: str) -> None:
    """BrokenEnv (exit 1) when `prefix` is an env whose interpreter does not run: a damaged
    env is a state to repair, not bad input; the error says what is broken and how to rebuild."""
    from torchfit.errors import BrokenEnv
    from torchfit.host.pythons import env_python, explain_env_python, is_env_dir, rebuild_hint

    if is_env_dir(prefix) and env_python(prefix, ENV_NAMES) is None:
        raise BrokenEnv(prefix, explain_env_python(prefix, ENV_NAMES), rebuild_hint(prefix))


def refuse_denied(what: str, prefix: str, also: tuple[str, ...] = ()) -> None:
    """PermissionDenied (exit 1: who owns what, which mode) when this user may not use the env
    at `prefix`: enter it, run its bin/python (and the interpreter it links to), read its
    pyvenv.cfg and lib/ (and `also`, under the prefix): an env of another user's, not a broken one."""
    from torchfit.access import find_denied
    from torchfit.errors import PermissionDenied

    denied = find_denied(prefix)
    wanted = [(n, os.X_OK) for n in ENV_NAMES] + [("pyvenv.cfg", os.R_OK), ("lib", os.R_OK)]
    wanted += [(n, os.R_OK) for n in also]
    for name, need in wanted:
        if denied is not None:
            break
        path = os.path.join(prefix, name)
        parent = os.path.dirname(path)
        if os.path.lexists(path) or (os.path.isdir(parent) and not os.access(parent, os.X_OK)):
            denied = find_denied(path, need)
    if denied is not None:
        raise PermissionDenied(what, denied, within=prefix)


def _env_python(prefix: str) -> str | None:
    from torchfit.host.pythons import env_python

    return env_python(prefix, ENV_NAMES)
