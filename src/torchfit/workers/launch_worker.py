"""torchfit verify's launcher: torchrun itself, its ranks started from a fork server that has
imported torch while torchrun did.

Usage (by the orchestrator): PYTHON launch_worker.py --start-method forkserver TORCHRUN-ARGS... ddp_worker.py CONFIG.json

`python -m torch.distributed.run` imports torch (3-4 s on a GPU host), then starts each rank as
a new interpreter that imports torch again. Here torchrun's own `main` runs unchanged (its
parser, rendezvous, elastic agent, failure summary and exit code), with one difference: its
`config_from_args` hands the agent ddp_worker's `entry` function instead of the script, so the
agent starts the ranks with torchrun's own `--start-method forkserver`
(torch/distributed/elastic/multiprocessing/api.py, MultiprocessContext). The fork server is
started first, told to import torch (multiprocessing.set_forkserver_preload), so it imports
torch at the same time as torchrun does, and every rank is a fork of it with torch imported.
Not `fork` from the agent: torchrun's LaunchConfig asks torch.cuda.is_available(), and a CUDA
device count taken before a fork makes CUDA unusable in the child ("Cannot re-initialize CUDA
in forked subprocess", measured on an H100 with torch 2.11); the fork server never touches CUDA.
Where this torch's torchrun lacks `config_from_args`, torchrun runs the script as
`python -m torch.distributed.run` would.
Standard library and torch only (never torchfit); Python 3.8+.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from multiprocessing import forkserver

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


AGENT = "TORCHFIT_VERIFY_AGENT_PID"


def _die_with_the_agent() -> None:
    """In the fork server, which imports this module first (its preload list): end with
    torchrun's agent at once (PR_SET_PDEATHSIG), not when it next looks at its pipe, which it
    does only after importing torch, or after its own teardown. Its ranks end themselves when
    their parent dies (torchfit_runtime.start_watchdog)."""
    agent = os.environ.get(AGENT)
    if not agent or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != agent:  # the agent died before the line above
        os._exit(0)


def _preload() -> None:
    """In the fork server: torch, and what DDP's constructor imports (torch._dynamo: 1-4 s, its
    compiler stack), once for every rank instead of in each; an import that fails here is the
    rank's own to meet and report."""
    import importlib

    try:
        for name in ("torch", "torch._dynamo", "torch.distributed"):
            importlib.import_module(name)
    except Exception:
        pass


GIVEN_PATH = "TORCHFIT_VERIFY_GIVEN_PYTHONPATH"


def _give_back_pythonpath() -> None:
    """In the fork server: PYTHONPATH as the user gave it, so the ranks forked from it see
    their own environment (main put the workers' directory in front to start this server)."""
    marked = os.environ.pop(GIVEN_PATH, None)
    if marked is None:
        return
    given = json.loads(marked)
    if given is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = given


if __name__ == "launch_worker":  # the fork server's first preload (main), found by PYTHONPATH
    _give_back_pythonpath()
    _die_with_the_agent()
    _preload()


SOCKET_DIR = "TORCHFIT_VERIFY_SOCKET_DIR"


def _temp_dir() -> str:
    """multiprocessing's temp dir for this process, made now: the fork server listens on a Unix
    socket there. AF_UNIX paths end at 108 bytes: under a long TMPDIR (verify gives its children
    one inside its work directory) the bind fails, "AF_UNIX path too long", so there verify
    names a short directory of its own (SOCKET_DIR), which it removes however this process
    ends; run by hand, /tmp, as Python 3.12 does itself (multiprocessing.util._get_base_temp_dir).
    `run` removes it: this process leaves with os._exit, before multiprocessing's own clean-up."""
    import tempfile
    from multiprocessing import util

    if len(tempfile.gettempdir()) <= 64:  # + "/pymp-XXXXXXXX/listener-XXXXXXXX" fits
        return util.get_temp_dir()
    for short in (os.environ.get(SOCKET_DIR, ""), "/tmp", "/var/tmp", "/usr/tmp"):
        if short and os.path.isdir(short) and os.access(short, os.W_OK | os.X_OK):
            given, tempfile.tempdir = tempfile.tempdir, short
            try:
                return util.get_temp_dir()
            finally:
                tempfile.tempdir = given
    return util.get_temp_dir()


def main(argv: list, made: list) -> None:
    os.environ[AGENT] = str(os.getpid())
    # launch_worker first: the fork server then ends with this process and imports torch and
    # torch._dynamo (_preload); ddp_worker for the ranks' function. The fork server takes no
    # sys.path from here (CPython's forkserver.main ignores the sys_path and main_path it is
    # handed, 3.8 to 3.13), so a preload found only through sys.path is skipped in silence:
    # it finds this directory through PYTHONPATH, which it then gives back for its ranks.
    multiprocessing.set_forkserver_preload(["launch_worker", "torch", "torch.distributed", "ddp_worker"])
    made.append(_temp_dir())
    given = os.environ.get("PYTHONPATH")
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ[GIVEN_PATH] = json.dumps(given)  # "null": none was set
    os.environ["PYTHONPATH"] = here if not given else here + os.pathsep + given
    try:
        forkserver.ensure_running()  # imports torch while this process does
        serving = True
    except OSError as exc:  # no fork server: torchrun starts the script, as it would alone
        sys.stderr.write(f"torchfit: no fork server ({exc}); torchrun starts the ranks as scripts\n")
        serving = False
    finally:
        del os.environ[GIVEN_PATH]
        if given is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = given
    import ddp_worker
    import torch.distributed.run as torchrun

    given = getattr(torchrun, "config_from_args", None)
    if serving and given is not None:

        def config_from_args(args):
            config, _cmd, _cmd_args = given(args)
            return config, ddp_worker.entry, [args.training_script_args[-1]]

        torchrun.config_from_args = config_from_args
    torchrun.main(argv)


def run(argv: list) -> None:
    """main, then os._exit: an interpreter exit would first wait for the fork server to finish
    its own (multiprocessing's finalizer waits for it); os._exit ends it at once through its
    parent-death signal; multiprocessing's temp dir (the fork server's socket) removed first."""
    code = 0
    made: list = []
    try:
        main(argv, made)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # torchrun's ChildFailedError: its summary, as Python would print it
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    if made:
        import shutil

        shutil.rmtree(made[0], ignore_errors=True)
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
