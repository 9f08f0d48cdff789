"""`torchfit completion bash|zsh`: the shell completion script, generated from the parser (shtab).

Nothing is written by hand: every command, option and choice the parser has is in the script,
so it cannot fall behind `--help`. Options that take a directory (`--env`, `--prefix`, ...) or
a file (`--lock`, `-r`, ...) complete paths; the rest complete their choices or nothing.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh")
# The kind of value an option takes is its metavar (`-o FILE` of export, `-o DIR` of pack,
# `--python SPEC` of resolve, `--python PATH` of doctor); these names decide only for an option
# declared without one.
_DIRS = frozenset(("--env", "--prefix", "--project", "--pack", "--root", "--output-dir"))
_FILES = frozenset(("--lock", "-r", "--requirement", "--facts", "--log", "--plan", "--matrix"))
_DIR_METAVARS = frozenset(("DIR", "PREFIX", "ENV"))
_FILE_METAVARS = frozenset(("FILE", "PATH", "LOG"))


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    p = subparsers.add_parser(
        "completion",
        help="print the shell completion script (bash or zsh)",
        description="Print the completion script of SHELL, generated from torchfit's own parser. "
                    "bash: `torchfit completion bash > ~/.local/share/bash-completion/completions/torchfit` "
                    "(or `eval \"$(torchfit completion bash)\"` in ~/.bashrc); zsh: `torchfit completion zsh > "
                    "~/.zfunc/_torchfit` with ~/.zfunc on $fpath before compinit.",
        epilog=epilog,
    )
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash or zsh")


def run(args: argparse.Namespace) -> int:
    import shtab

    from torchfit.cli.options import build_parser

    parser = build_parser()  # every command, not just this one
    _mark_paths(parser)
    from torchfit.cli.ui.output import write_data

    write_data(shtab.complete(parser, shell=args.shell))
    return 0


def _mark_paths(parser: argparse.ArgumentParser) -> None:
    """shtab's path completion on the options that take a directory or a file."""
    import shtab

    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                _mark_paths(sub)
            continue
        names = set(action.option_strings)
        if not names or action.nargs == 0:
            continue
        meta = action.metavar if isinstance(action.metavar, str) else None
        if meta in _DIR_METAVARS or (meta is None and names & _DIRS):
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif meta in _FILE_METAVARS or (meta is None and names & _FILES):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
