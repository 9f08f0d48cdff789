"""`torchfit run --env PREFIX -- CMD ...`: run a command under an env's NCCL pin.

The command runs in `sh -c '. PREFIX/bin/torchfit-env && exec "$@"'` with
PREFIX/bin first on PATH and VIRTUAL_ENV set, exactly what `source
PREFIX/bin/activate` gives a shell. torchfit replaces itself with that shell
(exec), so the command's exit status, signals and terminal are its own.
"""

from __future__ import annotations

import argparse
import os
import shutil

# "$1" is the env script; after shift, "$@" is the command and its arguments
# (passed as arguments, never spliced into the script text).
_SCRIPT = '. "$1" || exit 126; shift; exec "$@"'


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a command under an env's NCCL pin (PREFIX/bin/torchfit-env)",
        description="Run CMD with PREFIX/bin first on PATH and PREFIX/bin/torchfit-env sourced "
                    "(the NCCL pin: LD_PRELOAD of --nccl-lib, or the env's own NCCL wheel). "
                    "The exit status is CMD's.",
        epilog=epilog + " Example: torchfit run --env ./env -- python train.py",
    )
    p.add_argument("--env", required=True, metavar="PREFIX", help="an env made by torchfit install")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")


def run(args: argparse.Namespace) -> int:
    from torchfit.errors import BadInput
    from torchfit.installer.nccl import ENV_SCRIPT

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise BadInput("torchfit run: give a command after --, e.g. torchfit run --env ./env -- python train.py")
    from torchfit.inputs import shown

    prefix = os.path.abspath(os.path.expanduser(args.env))
    script = os.path.join(prefix, "bin", ENV_SCRIPT)
    from torchfit.cli.target import refuse_denied

    refuse_denied(f"--env {shown(args.env)}", prefix, also=(f"bin/{ENV_SCRIPT}",))
    if not os.path.isdir(prefix):
        raise BadInput(f"--env {shown(args.env)}: no such directory")
    if os.pathsep in prefix:  # PATH has no quoting: PREFIX/bin could not come first
        raise BadInput(f"--env {shown(prefix)}: contains a '{os.pathsep}', where PATH is split, so its bin/ "
                       "cannot be put first on PATH; move or rebuild the env under another name")
    if not os.path.isfile(script):
        raise BadInput(f"--env {shown(args.env)}: not an env made by torchfit install (no bin/{ENV_SCRIPT})")
    from torchfit.cli.target import check_env_intact

    # An env whose python is gone would run `python` from further down PATH (the system's),
    # silently: refused, saying what is broken and how to rebuild it (exit 1).
    check_env_intact(prefix)
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["VIRTUAL_ENV"] = prefix
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", os.defpath)
    exe = shutil.which(cmd[0], path=env["PATH"]) if os.sep not in cmd[0] else cmd[0]
    if exe is None or not os.access(exe, os.X_OK):
        raise BadInput(f"torchfit run: {shown(cmd[0])}: command not found (PATH starts with {shown(prefix)}/bin)")
    from torchfit.runner import exec_replace

    sh = shutil.which("sh") or "/bin/sh"
    exec_replace(sh, ["sh", "-c", _SCRIPT, "torchfit-run", script, exe, *cmd[1:]], env)
    return 127  # pragma: no cover - execve does not return
