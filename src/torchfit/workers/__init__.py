"""Programs run by the TARGET interpreter, and the host side that runs them.

The workers (`*_worker.py`) and the module they share (`torchfit_runtime.py`) run
in the Python being installed, verified or diagnosed, which need not have
torchfit (or anything but the standard library and torch):

- build_worker.py    `torchfit install`'s build check (installer/buildcheck.py judges it)
- inspect_worker.py  `torchfit verify`'s inspection of one process
- ddp_worker.py      `torchfit verify`'s torchrun worker: DDP smoke test, bandwidth sweep
- doctor_worker.py   `torchfit doctor`'s view from inside the environment (Python 3.6+)
- closure_worker.py  is the env whole: its distributions and marker values (lock/closure.py judges)

They speak one protocol, torchfit_runtime's records: one JSON object per line with
`kind` and `t`, written to a file (the verify workers, watched while they run) or
to stdout behind MARKER (the others, read when they exit). See torchfit_runtime's
docstring.

This module is host side only: no worker imports it (it is torchfit's code, and
torchfit is not importable in the target interpreter). A worker imports
`torchfit_runtime` by its bare name after putting its own directory first on
sys.path; for that reason every worker's file name ends in `_worker.py`, so no
worker shadows a standard-library module (an `inspect.py` here would replace the
stdlib `inspect` for the worker and for torch).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

WORKERS_DIR = os.path.dirname(os.path.abspath(__file__))
# torchfit_runtime.MARKER: the prefix of a record on a worker's stdout (a test
# checks the two agree; the runtime cannot import this module).
MARKER = "TORCHFIT-RECORD "


def script(name: str) -> str:
    """The path of a worker: script("inspect") -> .../workers/inspect_worker.py."""
    return os.path.join(WORKERS_DIR, f"{name}_worker.py")


def worker_argv(python: str, name: str, *args: str) -> list[str]:
    """argv that runs worker `name` in the interpreter `python`."""
    return [python, script(name), *args]


def parse_record(line: str, marked: bool = True) -> dict[str, Any] | None:
    """One record from one line; None for anything else. `marked`: the line comes
    from stdout, where only lines that start with MARKER are records."""
    if marked:
        if not line.startswith(MARKER):
            return None
        line = line[len(MARKER) :]
    try:
        record = json.loads(line)
    # The target interpreter's output is not ours; inputs.decode_json would be the reader, but
    # this package imports nothing of torchfit that imports torchfit.errors (pyproject's contract).
    except (ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def read_records(text: str | None) -> list[dict[str, Any]]:
    """The records in a worker's stdout, in order; noise and broken lines skipped."""
    out = []
    for line in (text or "").splitlines():
        record = parse_record(line)
        if record is not None:
            out.append(record)
    return out


def last_record(records: Iterable[Mapping[str, Any]], kind: str) -> dict[str, Any] | None:
    """The last record of one kind, without its `kind` and `t`."""
    found = None
    for r in records:
        if r.get("kind") == kind:
            found = r
    if found is None:
        return None
    return {k: v for k, v in found.items() if k not in ("kind", "t")}


class JsonlTail:
    """Reads a worker's record file as it grows; a partial last line waits for its newline."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.buf = ""
        self.records: list[dict[str, Any]] = []
        self.last_seen = 0.0

    def poll(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
                self.offset = fh.tell()
        except OSError:
            return []
        if not chunk:
            return []
        self.buf += chunk
        lines = self.buf.split("\n")
        self.buf = lines.pop()
        new = []
        for line in lines:
            rec = parse_record(line, marked=False)
            if rec is not None:
                new.append(rec)
        if new:
            self.records.extend(new)
            self.last_seen = time.monotonic()
        return new
