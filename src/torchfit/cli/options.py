"""The command line's shape: the parser (built lazily, one command module at a time), the
option groups several commands share, and the argparse types they use.

`_Parser` reports a usage error as one line, exit 2, and remembers which commands take
`--json` (`asked_for_json`), so a usage error of a `--json` command is a JSON object too.
`COMMAND_MODULES` lists the verbs (`cli/commands/<verb>.py`, each `add_parser` and `run`).
What the options mean once parsed is resolved in `cli/settings.py`; `cli/main.py` runs it.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from torchfit import __version__
from torchfit.errors import BadInput

EPILOG = "Exit codes: 0 ok, 1 the answer is no, 2 bad input, 130 interrupted."


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit 2 (no usage dump).

    It remembers its commands and whether it takes `--json`, so that a usage error of a
    command asked for JSON is a JSON object too (`asked_for_json`).
    """

    takes_json = False
    commands: dict[str, Any] = {}  # noqa: RUF012 (replaced per parser by add_subparsers)
    # A command whose positionals are a list (REQ..., PKG...) takes them anywhere among its
    # options, as pip and uv do: `resolve torch --variant cpu numpy` (`intermixed_positionals`).
    intermixed = False
    _mixing = False

    def error(self, message: str) -> NoReturn:
        raise BadInput(f"{message} (see {self.prog} --help)")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if not self.intermixed or self._mixing:
            return super().parse_known_args(args, namespace)
        # argparse's own two-pass parse (options first, then the positionals from what is left),
        # which calls parse_known_args itself: hence the guard.
        self._mixing = True
        try:
            return super().parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.takes_json = self.takes_json or "--json" in action.option_strings
        return action

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.commands = action.choices
        return action


def asked_for_json(parser: argparse.ArgumentParser, argv: Sequence[str]) -> bool:
    """Does `argv` give `--json` to a command that takes it? For the errors argparse raises
    before there are `args` (a bad `--timeout 0`): they are a JSON object too."""
    words = list(argv[:list(argv).index("--")] if "--" in argv else argv)
    if "--json" not in words:
        return False
    p: object = parser
    for word in words:
        p = getattr(p, "commands", {}).get(word, p)
    return bool(getattr(p, "takes_json", False))


def add_verbose(p: argparse.ArgumentParser, help: str = "show tracebacks") -> None:
    """`-v/--verbose` after a command's name too (SUPPRESS: left out, the top-level one stands)."""
    p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=help)


def intermixed_positionals(p: argparse.ArgumentParser) -> None:
    """Let `p`'s list positionals (REQ..., PKG...) come anywhere among its options."""
    if isinstance(p, _Parser):
        p.intermixed = True


def add_resolve_options(p: argparse.ArgumentParser) -> None:
    """The options shared by `resolve` and `install`."""
    intermixed_positionals(p)
    p.add_argument("requirements", nargs="*", metavar="REQ",
                   help="PEP 508 requirements: the torch family ('torch>=2.4,<2.7', torchvision), whose build "
                        "torchfit picks for the host, and any other package of your project ('vllm==0.10.2'), "
                        "resolved with it")
    add_project_options(p)
    p.add_argument("--python", metavar="SPEC", help="Python version or specifier (3.12, '>=3.10,<3.13'); 3.13t: free-threaded")
    p.add_argument("--cuda", metavar="SPEC", help="CUDA version or specifier (12.8, '>=12.6')")
    p.add_argument("--variant", metavar="NAME", help="one variant: cu128, rocm6.4, cpu")
    p.add_argument("--strict-driver", action="store_true",
                   help="demand the CUDA toolkit's own driver floor, not minor-version compatibility")
    p.add_argument("--facts", action="append", default=[], metavar="FILE",
                   help="resolve for the host described by FILE (torchfit detect --json); repeat for several hosts")
    p.add_argument("--assume", action="append", default=[], metavar="KEY=VALUE",
                   help="replace a detected fact: driver=, gpu= (repeatable), glibc=, python= (repeatable), "
                        "os=, wsl=yes|no, arch=")
    p.add_argument("--matrix", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--exclude", action="append", default=[], metavar="LIST",
                   help="with a fleet file: leave these nodes out (Slurm notation, gpu[07-09]); repeatable")


def add_project_options(p: argparse.ArgumentParser) -> None:
    """A project's files, -r FILE and --project DIR [--extra NAME]: shared by `resolve`, `install`
    and `add` (read by settings.load_project_files)."""
    p.add_argument("-r", "--requirement", action="append", default=[], metavar="FILE",
                   help="a pip requirements file (requirements, -c constraints, -r, --extra-index-url, -f, "
                        "markers); repeatable")
    p.add_argument("--project", metavar="DIR",
                   help="a project directory: its pyproject.toml's [project].dependencies")
    p.add_argument("--extra", action="append", default=[], metavar="NAME",
                   help="with --project: also this [project.optional-dependencies] group; repeatable")


def add_source_options(p: argparse.ArgumentParser) -> None:
    """Where packages come from: shared by `resolve`, `install` and `add`."""
    from torchfit.compat.matrix import DEFAULT_INDEX, TORCH_INDEX_ENV

    p.add_argument("--torch-index-url", metavar="URL",
                   help=f"the index of torch/torchvision/torchaudio, {{variant}} substituted (default "
                        f"{DEFAULT_INDEX}; env {TORCH_INDEX_ENV})")
    p.add_argument("--index-url", metavar="URL", help="the index for everything else (replaces pip's index-url)")
    p.add_argument("--extra-index-url", action="append", default=[], metavar="URL",
                   help="another index for everything else (added to pip's configuration)")
    p.add_argument("--find-links", action="append", default=[], metavar="PATH",
                   help="a directory or page of wheels for everything else (added to pip's configuration)")
    p.add_argument("--offline", action="store_true",
                   help="use only local sources (file:// indexes, find-links directories, uv's cache)")
    p.add_argument("--allow-insecure-index", action="store_true",
                   help="accept plain http:// indexes (packages and credentials travel unencrypted)")


def add_installer_option(p: argparse.ArgumentParser, help: str) -> None:
    """`--installer` (alias `--backend`) auto|uv|pip: who installs the files, shared by `install`
    and `add` (settings.installer_choice reads it); `help` says what it means for the command."""
    p.add_argument("--installer", "--backend", dest="installer", choices=("auto", "uv", "pip"), default=None,
                   help=help)


def add_wait_option(p: argparse.ArgumentParser, also: str) -> None:
    """`--wait SECONDS` of `install` and `add`: how long to wait for PREFIX's lock (another
    install into it), and for what `also` names (the env's users), before failing."""
    from torchfit.inputs import seconds

    p.add_argument("--wait", type=seconds(allow_zero=True), default=0.0, metavar="SECONDS",
                   help=f"wait this long for another install into PREFIX to finish, and {also} "
                        "(default: fail at once)")


def add_step_options(p: argparse.ArgumentParser, steps: str = "") -> None:
    """`--timeout SECONDS` (one step's bound; `steps` names the long ones) and `--json` of the
    commands that build an env, `install` and `add`: progress on stderr, the answer on stdout."""
    from torchfit.inputs import seconds

    p.add_argument("--timeout", type=seconds(), default=3600.0, metavar="SECONDS",
                   help=f"the longest one step{steps} may take (default 3600)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (progress stays on stderr)")


def check_source_options(args: argparse.Namespace) -> None:
    """The sources' settings in force, before anything runs: exit 2, one line naming where the
    value came from. Each setting has one check, whichever of a flag, the environment or a
    configuration file gave it (settings.source_settings says which is in force)."""
    from torchfit.cli.settings import source_settings

    torch, others = source_settings(args, os.environ)
    if torch is None and not others:
        return  # nothing to check (and the installer's modules stay unloaded)
    from torchfit.index.sources import check_url
    from torchfit.inputs import check_index_url

    if torch is not None:
        template, flag = torch
        check_index_url(template, flag, allow_path=True)  # a directory of wheels, or a PEP 503 tree
        from torchfit.index.torchsource import local_path

        local = local_path(template) if "{variant}" not in template else None
        if local is not None and not os.path.isdir(local):
            raise BadInput(f"{flag} {template}: no such directory (give a PEP 503 tree, DIR/torch/index.html, "
                           "or a directory of torch wheels)")
        check_url(template.replace("{variant}", "cpu"), flag, args.allow_insecure_index)
    for key, url, flag in others:
        check_index_url(url, flag, allow_path=key == "find-links", placeholders=False)
        check_url(url, flag, args.allow_insecure_index)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given `argv`, only the sub-parser of the command it names.

    Start-up cost: each command module (and what it imports) loads only when its
    verb is the one being run. Without a recognised command (`--help`, no command,
    an unknown one, anything unusual) every command is built, so `torchfit --help`
    lists them all and argparse reports an unknown command in its one line;
    `--version` alone (with -v at most) builds none.
    """
    only = command_in(argv) if argv is not None else None
    if argv is not None and "--version" in argv and set(argv) <= {"--version", *_TOP_FLAGS}:
        only = ""  # `torchfit --version` prints and exits before any command is looked at
    parser = _Parser(prog="torchfit", description="Pick, build and prove a working PyTorch GPU stack.",
                     epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"torchfit {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks and probe details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    for module in _command_modules(None if only is None else (only,)):
        module.add_parser(sub, EPILOG)
    for p in sub.choices.values():  # no verb declares its own -v: this is the one place
        add_verbose(p)
    return parser


# Commands that live in their own module (torchfit.cli.commands.NAME): each has
# `add_parser(subparsers, epilog)` (cheap: no heavy imports at module level) and
# `run(args) -> int`. Listed here so start-up imports only what exists.
# In workflow order, as `torchfit --help` lists them: look, choose, build, grow, prove, explain, use.
COMMAND_MODULES: tuple[str, ...] = ("detect", "resolve", "install", "add", "adopt", "verify", "doctor", "run", "export",
                                     "pack", "matrix", "config", "docs", "completion")
COMMAND_NAMES: tuple[str, ...] = COMMAND_MODULES
# The top-level options before the command; none of them takes a value.
_TOP_FLAGS = frozenset(("-v", "--verbose"))


def command_in(argv: Sequence[str]) -> str | None:
    """The command `argv` runs when that is certain from its first word, else None.

    Only the plain form counts: top-level flags (-v/--verbose, which take no value)
    and then a known command name. Anything else (-h, --version, an abbreviated
    or unknown flag, an unknown command, none at all) gets the whole parser.
    """
    for word in argv:
        if word in _TOP_FLAGS:
            continue
        return word if word in COMMAND_NAMES else None
    return None


def _command_modules(names: Sequence[str] | None = None) -> list[Any]:
    import importlib

    wanted = COMMAND_MODULES if names is None else [n for n in COMMAND_MODULES if n in names]
    return [importlib.import_module(f"torchfit.cli.commands.{name}") for name in wanted]


# --- argparse types -------------------------------------------------------------------------

# Slurm partition and account names (slurm.conf PartitionName): letters, digits, _ . - + ,
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.+,-]{1,128}$")
# sbatch --time: "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
# "days-hours:minutes" and "days-hours:minutes:seconds" (sbatch(1)).
_SLURM_TIME = re.compile(r"^(?:[0-9]{1,6}(?::[0-9]{1,2}){0,2}|[0-9]{1,4}-[0-9]{1,2}(?::[0-9]{1,2}){0,2})$")


def slurm_name(text: str) -> str:
    """argparse type: a Slurm partition/account name; never a newline into the script."""
    if not _SLURM_NAME.match(text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a Slurm name (letters, digits, _ . - + ,)")
    return text


def slurm_time(text: str) -> str:
    """argparse type: an sbatch --time value."""
    if not _SLURM_TIME.match(text):
        raise argparse.ArgumentTypeError(f"{text[:60]!r} is not a Slurm time like 00:15:00, 90 or 1-12:00:00")
    return text
