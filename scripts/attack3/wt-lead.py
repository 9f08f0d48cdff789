"""Repros of the lead: signals at every moment of a short command (class 8)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from _common import Box, Case


def _sweep(box: Box, args: list[str], sig: int, count: int) -> str | None:
    """Send `sig` at moments spread over the whole run (its end included); a death by the
    signal's default action (exit -sig) means torchfit left it unhandled."""
    whole = box.tf(*args)
    seen = []
    # From 0.1 s (before that, the interpreter is starting: no handler can exist yet),
    # denser towards the end, where the command is done and the process is leaving.
    moments = [0.1 + (whole.seconds - 0.1) * f for f in (0.25, 0.5, 0.75)]
    moments += [max(0.1, whole.seconds * (0.8 + 0.4 * i / count)) for i in range(count)]
    for moment in moments:

        def hit(proc: subprocess.Popen[str], moment: float = moment) -> None:
            time.sleep(moment)
            if proc.poll() is None:
                os.kill(proc.pid, sig)

        res = box.tf(*args, during=hit)
        if res.code == -sig or res.traceback or res.left:
            seen.append(f"at {moment:.2f} s: exit {res.code}" + (" traceback" if res.traceback else "")
                        + (f" left {res.left[0]}" if res.left else ""))
    return "; ".join(seen) or None


def sigterm_doctor(box: Box) -> str | None:
    return _sweep(box, ["doctor", "--env", str(box.cpu_env())], signal.SIGTERM, 12)


def sighup_resolve(box: Box) -> str | None:
    return _sweep(box, ["resolve", "torch==2.13.0", "--variant", "cpu", "--python", "3.11"], signal.SIGHUP, 40)


CASES = [
    Case("8-sigterm-doctor-sweep", 8, "SIGTERM at 15 moments of doctor, 12 of them near its end", sigterm_doctor),
    Case("8-sighup-resolve-sweep", 8, "SIGHUP at 43 moments of a resolve, 40 of them near its end", sighup_resolve),
]
