"""Fault injection into torchfit's verify workers: a test hook, never shipped.

`sitecustomize.py` beside this file loads it in every Python started with this
directory on PYTHONPATH (tests/verify/test_processes.py and scripts/gpu-check.sh
put it there); torchfit, torchrun and the workers inherit that environment. It
acts only when TORCHFIT_VERIFY_FAULT is set, and only on the workers: when a
process imports `torchfit_runtime` by its bare name (what every verify worker
does), the runtime's stage heartbeat `Reporter.stage` is wrapped, and with it the
worker's behaviour at the named stage.

TORCHFIT_VERIFY_FAULT="KIND:WHO[:STAGE],..."; WHO is a global rank or "inspect";
STAGE defaults to "allreduce" for a rank and "kernels" for the inspection. KIND:
  crash     raise RuntimeError at the stage (a Python error with a traceback)
  abort     SIGABRT at the stage (no traceback: a native crash)
  hang      never return from the stage (a stall: the orchestrator must kill it)
  exit      exit 3 at the stage without reporting
  wrong     add 1000 to the first all-reduce input after the "allreduce" stage
            starts (torch.distributed.all_reduce is wrapped once): a failed check
  teardown  abort at exit after a complete report (the gloo teardown crash of
            docs/architecture.md, Contracts): must neither fail the run nor hide a failure
Runs in the workers' Pythons: standard library only, Python 3.8 syntax.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import time

KINDS = ("crash", "abort", "hang", "teardown", "exit", "wrong")
_real_exit = os._exit


def parse_faults(text):
    """"KIND:WHO[:STAGE],..." -> [(kind, who, stage or None)]; unknown kinds are dropped."""
    faults = []
    for part in (text or "").split(","):
        bits = part.strip().split(":")
        if len(bits) >= 2 and bits[0] in KINDS:
            faults.append((bits[0], bits[1], bits[2] if len(bits) > 2 and bits[2] else None))
    return faults


def _who(reporter):
    fixed = getattr(reporter, "fixed", {}) or {}
    if "who" in fixed:
        return str(fixed["who"])
    if "rank" in fixed:
        return str(fixed["rank"])
    return None


def _fire(kind, stage, spec):
    what = f"injected fault TORCHFIT_VERIFY_FAULT={spec} ({kind} at {stage})"
    if kind == "crash":
        raise RuntimeError(what)
    if kind == "abort":
        sys.stderr.write(what + "\n")
        sys.stderr.flush()
        os.abort()
    if kind == "exit":
        _real_exit(3)
    if kind == "hang":
        while True:
            time.sleep(3600)


def _wrong_next_all_reduce():
    """The next torch.distributed.all_reduce gets 1000 added to its input, once."""
    import torch.distributed as dist

    real = dist.all_reduce

    def once(tensor, *args, **kwargs):
        dist.all_reduce = real
        tensor.add_(1000)
        return real(tensor, *args, **kwargs)

    dist.all_reduce = once


def _abort_on_clean_exit():
    def _exit(code):
        if code == 0:
            sys.stdout.flush()
            sys.stderr.flush()
            os.abort()
        _real_exit(code)

    os._exit = _exit


def wrap(runtime, spec):
    """Wrap `runtime.Reporter` so that the faults in `spec` fire in this process."""
    faults = parse_faults(spec)
    reporter = runtime.Reporter
    real_init, real_stage = reporter.__init__, reporter.stage

    def mine(rep):
        who = _who(rep)
        return [(k, where) for k, w, where in faults if w == who]

    def __init__(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if any(k == "teardown" for k, _ in mine(self)):
            _abort_on_clean_exit()

    def stage(self, name, step=None):
        real_stage(self, name, step)
        if step is not None:  # a step inside a stage: the stage itself already fired
            return
        default = "kernels" if _who(self) == "inspect" else "allreduce"
        for kind, where in mine(self):
            if kind == "wrong" and name == "allreduce":
                _wrong_next_all_reduce()
            elif kind not in ("teardown", "wrong") and (where or default) == name:
                _fire(kind, name, spec)

    reporter.__init__ = __init__
    reporter.stage = stage


class _Finder(importlib.abc.MetaPathFinder):
    """Finds `torchfit_runtime` the normal way, and wraps it once it has run."""

    def __init__(self, spec):
        self.spec = spec

    def find_spec(self, name, path=None, target=None):
        if name != "torchfit_runtime":
            return None
        found = importlib.machinery.PathFinder.find_spec(name, path)
        if found is None or found.loader is None:
            return None
        loader = found.loader
        real_exec = loader.exec_module
        spec = self.spec

        def exec_module(module):
            real_exec(module)
            wrap(module, spec)

        loader.exec_module = exec_module
        return found


def install(environ=os.environ):
    spec = environ.get("TORCHFIT_VERIFY_FAULT", "")
    if spec and parse_faults(spec):
        sys.meta_path.insert(0, _Finder(spec))
