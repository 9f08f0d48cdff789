"""The CLI builds only the parser of the command it runs; the rest of the CLI cannot tell.

`torchfit --help`, an unknown command and docs/cli.md still see every command
(scripts/gen_cli_docs.py and tests/cli/test_docs.py use the whole parser).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support.cli import run_cli
from torchfit.cli.options import COMMAND_NAMES, build_parser, command_in


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=ROOT)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _help(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):
        parser.parse_args([*argv, "--help"])
    return buf.getvalue()


def test_top_level_help_lists_every_command_with_its_line() -> None:
    out = _cli("--help")
    assert out.returncode == 0, out.stderr
    sub = _subparsers(build_parser())
    assert list(sub.choices) == list(COMMAND_NAMES)
    for action in sub._choices_actions:
        assert action.dest in out.stdout
        assert " ".join(action.help.split()[:4]) in " ".join(out.stdout.split()), action.dest


@pytest.mark.parametrize("argv", [["bogus"], ["bogus", "--json"], ["resolv", "--json"]])
def test_an_unknown_command_is_one_line_and_exit_2(argv: list[str]) -> None:
    out = _cli(*argv)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "invalid choice" in lines[0] and "resolve" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_no_command_prints_the_whole_help_and_exit_2() -> None:
    out = _cli()
    assert out.returncode == 2
    assert all(name in out.stdout for name in COMMAND_NAMES)


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_each_commands_parser_is_the_same_alone(name: str) -> None:
    alone = build_parser([name])
    assert list(_subparsers(alone).choices) == [name]
    assert _help(alone, [name]) == _help(build_parser(), [name])
    for nested in [a for a in _subparsers(alone).choices[name]._actions
                   if isinstance(a, argparse._SubParsersAction)]:
        for child in nested.choices:
            assert _help(alone, [name, child]) == _help(build_parser(), [name, child])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["resolve", "--json"], "resolve"),
        (["-v", "install", "torch"], "install"),
        (["--verbose", "-v", "doctor"], "doctor"),
        ([], None),
        (["--help"], None),
        (["-h", "resolve"], None),
        (["--version"], None),
        (["--verb", "resolve"], None),  # an abbreviation: the whole parser decides
        (["resolv"], None),
        (["bogus", "resolve"], None),
    ],
)
def test_command_in(argv: list[str], expected: str | None) -> None:
    assert command_in(argv) == expected


@pytest.mark.parametrize(("argv", "module"), [(["resolve", "--help"], "resolve"), (["install", "--help"], "install"),
                                              (["matrix", "show", "--help"], "matrix"), (["--version"], None),
                                              (["-v", "--version"], None)])
def test_only_the_chosen_commands_module_is_imported(argv: list[str], module: str | None) -> None:
    code = (
        "import contextlib, io, json, sys\n"
        "from torchfit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('torchfit.cli.commands.'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout)
    assert loaded == ([] if module is None else [f"torchfit.cli.commands.{module}"])


def test_version_alone_and_beside_a_command() -> None:
    for argv in (["--version"], ["-v", "--version"], ["--version", "resolve"]):
        out = _cli(*argv)
        assert (out.returncode, out.stdout.split()[0]) == (0, "torchfit"), out.stderr


def test_a_lazy_command_still_runs() -> None:
    out = _cli("-v", "resolve", "torch==2.13.0", "--variant", "cpu", "--assume", "python=3.11", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["variant"] == "cpu"
