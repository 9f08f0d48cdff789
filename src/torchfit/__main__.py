"""`python -m torchfit` runs the CLI.

SIGTERM and SIGHUP are turned into an interruption before anything else is imported:
their default action would kill torchfit during its start-up imports (tens of ms, far
more on a loaded host), before `cli.main` installs its own handlers. A signal in that
window ends torchfit with exit 130 and one line, like a signal at any later moment.
"""

import signal
import sys


def _early(signum, _frame):  # type: ignore[no-untyped-def]
    raise KeyboardInterrupt(f"interrupted by {signal.Signals(signum).name}")


for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _early)

try:
    from torchfit.cli.main import main

    code = main()
except KeyboardInterrupt as err:  # only before main's own boundary is in place
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_sig, signal.SIG_IGN)
    sys.stderr.write(f"torchfit: {err or 'interrupted'}\n")
    code = 130
raise SystemExit(code)
