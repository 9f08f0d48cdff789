"""What every probe shares: reading a file under `root`, running a tool through the
Runner with a timeout, and the "unknown, because ..." reason a missing fact carries."""

import os
from collections.abc import Sequence

from torchfit.errors import ProbeFailed, ToolMissing, ToolTimeout
from torchfit.runner import Runner, RunResult
from torchfit.text import first_line

# nvidia-smi hangs for minutes on a wedged driver (GPU fallen off the bus, Xid 79);
# 10 s is far above a healthy query (~0.1-0.5 s on the H200 host) and the CLI's
# --timeout changes it.
DEFAULT_TIMEOUT = 10.0

def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


# /proc and /sys files are a few KB; a link to /dev/zero must not fill the memory.
READ_LIMIT = 1 << 20


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(READ_LIMIT)
    except (OSError, ValueError):
        return None


def _run_tool(
    runner: Runner, argv: Sequence[str], timeout: float
) -> tuple[RunResult | None, str | None]:
    """Run argv; return (result, None) on success, else (result-or-None, cause)."""
    tool = os.path.basename(argv[0])
    try:
        res = runner.run(argv, timeout=timeout)
    except ToolTimeout:
        return None, f"{tool} timed out after {timeout:g} s"
    except ToolMissing as exc:
        return None, exc.message
    except ProbeFailed as exc:
        return None, f"{tool} could not run: {exc.message}"
    if res.returncode != 0:
        # Errors usually go to stderr; nvidia-smi prints its own on stdout
        # (tests/data/h200-x2/query-gpu-bad-field.txt: stdout, stderr empty).
        said = first_line(res.stderr) or first_line(res.stdout)
        if said:
            return res, f"{tool} failed: {said}"
        return res, f"{tool} failed with exit status {res.returncode}"
    return res, None


def _unknown(cause: str) -> str:
    return f"unknown, because {cause}"
