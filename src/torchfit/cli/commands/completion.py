"""`torchfit completion bash|zsh`: the shell completion script, generated from the parser (shtab).

Nothing is written by hand: every command, option and choice the parser has is in the script,
so it cannot fall behind `--help`. Options that take a directory (`--env`, `--prefix`, ...) or
a file (`--lock`, `-r`, ...) complete paths; the rest complete their choices or nothing.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh")
# The options whose value is a directory or a file, by the option strings argparse holds.
_DIRS = frozenset(("--env", "--prefix", "--project", "--pack", "--root", "-o", "--output-dir"))
_FILES = frozenset(("--lock", "-r", "--requirement", "--facts", "--log", "--plan", "--matrix", "--python"))


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
        if names & _DIRS and action.nargs != 0:
            action.complete = shtab.DIRECTORY  # type: ignore[attr-defined]
        elif names & _FILES and action.nargs != 0:
            action.complete = shtab.FILE  # type: ignore[attr-defined]
