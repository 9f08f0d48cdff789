"""Is an environment whole: what it has installed, run by the env's own Python.

Usage: PYTHON closure_worker.py

Writes one `closure` record on stdout (torchfit_runtime's protocol), then `done`:

- `env`: the values PEP 508 markers are evaluated against, with the names of
  `packaging.markers.default_environment()` (the env's interpreter, not torchfit's);
- `dists`: `[name, version, Requires-Dist, installed]` for every distribution on
  sys.path, `installed` False for one found outside the env's prefix (PYTHONPATH, the
  user site), which the env does not answer for.

lock/closure.py judges the record (`judge_closure`: what `pip check` reports), the one
check `install --lock` and `verify --lock` both make, without needing pip or uv in the
env (a uv-made venv has no pip).

Standard library only, never torchfit; Python 3.8+ (importlib.metadata).
"""

import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torchfit_runtime as rt  # found beside this file (workers/__init__.py says why)

# This script's directory is torchfit's package directory: not part of the env.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]


def fmt(info):
    """`3.11.7`, `3.14.0a1`: how packaging formats sys.implementation.version."""
    version = f"{info.major}.{info.minor}.{info.micro}"
    if info.releaselevel != "final":
        version += info.releaselevel[0] + str(info.serial)
    return version


def marker_env():
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": fmt(sys.implementation.version),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def distributions():
    from importlib import metadata

    prefix = os.path.realpath(sys.prefix) + os.sep
    out = []
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name:
            where = os.path.realpath(str(d.locate_file("")))
            out.append([name, d.version, list(d.requires or []), (where + os.sep).startswith(prefix)])
    return out


def main(rep):
    rep.line("closure", env=marker_env(), dists=distributions())
    rep.line("done")


if __name__ == "__main__":
    reporter = rt.Reporter(None)
    try:
        main(reporter)
    except BaseException as exc:  # report, then leave without running teardown
        reporter.error(exc)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
