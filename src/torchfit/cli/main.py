"""The boundary: `main` runs one command and turns every outcome into an exit code.

Exit codes (docs/architecture.md, Contracts): 0 success; 1 the job ran and the answer is no; 2 bad
input or usage (one line, `-v` adds the traceback); 130 interrupted. A `TorchfitError` is rendered
by `cli/ui/errors.render_error` (with `--json`, its `to_json()` on stdout); anything else is an
internal error, one line. Signals are interruptions (interrupts.py); children die with the command.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence

from torchfit.cli.options import asked_for_json, build_parser
from torchfit.errors import TorchfitError
from torchfit.jsontypes import JsonObject

# The commands whose steps the configuration files' environment-borne settings reach (the stall limit).
_SITE_COMMANDS = frozenset(("resolve", "install", "add", "export", "pack", "verify"))


def print_json_error(wanted: bool, data: JsonObject) -> None:
    """The `--json` error object on stdout, when the command was asked for JSON.

    One shape for every command (`TorchfitError.to_json`): ok, error, reference,
    hint, plus the error's own keys. Nothing more to do when stdout itself fails.
    """
    if wanted:
        try:
            from torchfit.cli.ui.jsonout import json_text

            print(json_text("error", data))
            sys.stdout.flush()
        except (OSError, ValueError):
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run torchfit; the single place where exceptions become messages and exit codes.

    Every command runs with SIGINT, SIGTERM and SIGHUP turned into the same clean
    interruption (exit 130), and whatever child is still registered with the runner
    when the command ends, by any path, is killed (runner.kill_all).
    """
    from torchfit.cli.ui.streams import standard_streams
    from torchfit.interrupts import interrupts_raise
    from torchfit.runner import kill_all

    # As the program (argv from sys.argv), a signal after the command is ignored: the
    # command's exit code stands. Called as a library, the caller's handlers come back.
    with standard_streams() as closed:
        try:
            with interrupts_raise(then_ignore=argv is None):
                return _main(argv, closed)
        except KeyboardInterrupt as err:  # a signal landing outside _main's own handler
            kill_all()
            _say(f"torchfit: {err or 'interrupted'}\n")
            return 130
        finally:
            kill_all(strays=False)  # registered children only: main may run inside another program


def _say(text: str) -> None:
    """A line on stderr, from the boundary itself: nothing more to do if stderr fails too."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _main(argv: Sequence[str] | None = None, closed: frozenset[int] = frozenset()) -> int:
    from torchfit.cli.ui.streams import failed_stream, refuse_closed_stdout
    from torchfit.errors import interrupted_json

    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in argv or "--verbose" in argv
    args: argparse.Namespace | None = None
    parser: argparse.ArgumentParser | None = None

    def wants_json() -> bool:
        if args is not None:
            return bool(getattr(args, "json", False))
        return parser is not None and asked_for_json(parser, argv)

    try:
        refuse_closed_stdout(closed)
        parser = build_parser(argv)
        args = parser.parse_args(argv)
        verbose = verbose or getattr(args, "verbose", False)
        if not args.command:
            parser.print_help()
            return 2
        import importlib

        if args.command in _SITE_COMMANDS:  # the site's configuration files (cli/settings.py)
            from torchfit.cli.settings import apply_site_config

            apply_site_config(os.environ)
        code = int(importlib.import_module(f"torchfit.cli.commands.{args.command}").run(args))
        # Flush here, inside the boundary: at interpreter exit a failed flush
        # (stdout on a full disk) would be a traceback and exit 120.
        sys.stdout.flush()
        return code
    except TorchfitError as err:
        return _report(err, verbose, wants_json())
    except KeyboardInterrupt as err:
        from torchfit.interrupts import Interrupted
        from torchfit.runner import kill_all

        kill_all()
        print_json_error(wants_json(), interrupted_json())
        if not (isinstance(err, Interrupted) and err.reported):
            _say(f"torchfit: {err or 'interrupted'}\n")
        return 130
    except BrokenPipeError:
        # The reader went away (`| head -1`): what it wanted, it has. Point stdout at
        # /dev/null so the exit-time flush cannot complain.
        _drop_stdout()
        return 0
    except OSError as exc:
        # torchfit.space (tempfile) only when it is needed: not on every command's path (issue 37)
        from torchfit.space import from_oserror, is_no_space, tmpdir_place

        if failed_stream(exc) != "stdout" and is_no_space(exc):
            # Out of space anywhere but stdout: where, and what is left there (exit 1).
            words = (getattr(args, "command", None), getattr(args, "matrix_command", None))
            step = "torchfit " + " ".join(w for w in words if w)
            return _report(from_oserror(exc, step.strip(), [tmpdir_place()]), verbose, wants_json())
        if failed_stream(exc) != "stdout" or exc.errno not in _OUTPUT_ERRNOS:
            return _internal_error(exc, verbose, wants_json())
        _drop_stdout()
        _say(f"torchfit: error: cannot write the output: {exc.strerror or exc}"
             " (a full disk or a broken device behind stdout?)  [output-error]\n")
        return 2
    except Exception as exc:  # a bug: say so in one line, the traceback with -v
        return _internal_error(exc, verbose, wants_json())


# Writing stdout failed for a reason outside torchfit: no space, quota, I/O error.
_OUTPUT_ERRNOS = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EPIPE))


def _drop_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _report(err: TorchfitError, verbose: bool, as_json: bool) -> int:
    """A TorchfitError as the user sees it: the JSON object when asked for, the lines on stderr."""
    if verbose:
        import traceback

        traceback.print_exc()
    from torchfit.cli.ui.errors import render_error

    print_json_error(as_json, err.to_json())
    render_error(err, verbose)
    return err.exit_code


def _internal_error(exc: BaseException, verbose: bool, as_json: bool = False) -> int:
    if verbose:
        import traceback

        traceback.print_exc()
    where = _raised_at(exc)
    print_json_error(as_json, {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}{where}",
                               "reference": "internal-error", "hint": "run with -v, please report"})
    _say(f"torchfit: internal error: {type(exc).__name__}: {exc}{where} (run with -v, please report)\n")
    return 1


def _raised_at(exc: BaseException) -> str:
    """" (raised in FILE:LINE FUNCTION)": the innermost frame, so that a report of a rare failure
    says where it happened without -v (issue 36: a CI run showed only the exception's words)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return ""
    code = tb.tb_frame.f_code
    return f" (raised in {code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno} {code.co_name})"
