"""The command line: argument parsing, the one error boundary, exit codes.

Exit codes (DESIGN.md): 0 success; 1 the job ran and the answer is no; 2 bad
input or usage (one line, `-v` adds the traceback); 130 interrupted.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from torchfit import __version__
from torchfit.errors import BadInput, TorchfitError

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.matrix import Matrix
    from torchfit.compat.project import ProjectSpec
    from torchfit.compat.request import AnyRequirement, Request

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
    p: Any = parser
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
    and `add` (read by `load_project_files`)."""
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


def check_source_options(args: argparse.Namespace) -> None:
    """The source options' URLs, before anything runs: exit 2, one line."""
    from torchfit.compat.matrix import TORCH_INDEX_ENV

    template = args.torch_index_url or os.environ.get(TORCH_INDEX_ENV)
    if not (template or args.index_url or args.extra_index_url or args.find_links):
        return  # nothing to check (and the installer's modules stay unloaded)
    from torchfit.index.sources import check_url
    from torchfit.inputs import check_index_url

    template = args.torch_index_url or os.environ.get(TORCH_INDEX_ENV)
    if template:
        flag = "--torch-index-url" if args.torch_index_url else TORCH_INDEX_ENV
        check_index_url(template, flag, allow_path=True)  # a directory of wheels, or a PEP 503 tree
        from torchfit.index.torchsource import local_path

        local = local_path(template) if "{variant}" not in template else None
        if local is not None and not os.path.isdir(local):
            raise BadInput(f"{flag} {template}: no such directory (give a PEP 503 tree, DIR/torch/index.html, "
                           "or a directory of torch wheels)")
        check_url(template.replace("{variant}", "cpu"), flag, args.allow_insecure_index)
    for flag, urls in (("--index-url", [args.index_url] if args.index_url else []),
                       ("--extra-index-url", args.extra_index_url), ("--find-links", args.find_links)):
        for url in urls:
            check_index_url(url, flag, allow_path=flag == "--find-links", placeholders=False)
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
# The commands whose steps the configuration files' environment-borne settings reach (the stall limit).
_SITE_COMMANDS = frozenset(("resolve", "install", "add", "export", "verify"))
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


def load_hosts(args: argparse.Namespace) -> list[HostFacts]:
    """Host facts: from --facts files, else probed here; then --assume applied to each."""
    from torchfit.cli.commands._fleet import load_facts_file
    from torchfit.compat.facts import apply_assumptions, facts_from_json
    from torchfit.compat.gpunames import load_gpu_names
    from torchfit.inputs import MAX_FACTS_BYTES, loads_json, read_text_file, shown

    hosts: list[HostFacts] = []
    exclude = getattr(args, "exclude", None) or []
    fleets = 0
    if args.facts:
        for path in args.facts:
            # The one reader of facts files: bounded in size and depth (inputs.py).
            text = read_text_file(path, "--facts", limit=MAX_FACTS_BYTES)
            name = "stdin" if path == "-" else shown(path)
            data = loads_json(text, name)
            group_hosts = load_facts_file(data, name, exclude)  # a fleet file: one host per group
            fleets += group_hosts is not None
            hosts += group_hosts if group_hosts is not None else [facts_from_json(data, name)]
    else:
        from torchfit.host import probe_host
        from torchfit.runner import Runner

        hosts.append(probe_host(Runner()))
    if exclude and not fleets:
        raise BadInput("--exclude needs a fleet file (--facts FLEET.json from `torchfit detect --slurm`)")
    names = load_gpu_names() if any(a.lower().startswith("gpu=") for a in args.assume) else {}
    return [apply_assumptions(h, args.assume, names) for h in hosts]


def load_project(args: argparse.Namespace) -> tuple[tuple[AnyRequirement, ...], ProjectSpec]:
    """The project of REQ, -r FILE and --project DIR [--extra NAME] (`compat.project.ProjectSpec`)."""
    from torchfit.compat.project import ProjectSpec
    from torchfit.compat.request import split_requirements

    family, others = split_requirements(args.requirements)
    return family, load_project_files(args, ProjectSpec(others))


def load_project_files(args: argparse.Namespace, spec: ProjectSpec | None = None) -> ProjectSpec:
    """`spec` (default: empty) with the requirements, constraints and index lines of -r FILE and
    --project DIR [--extra NAME] added, each kept once; BadInput (one line) for a bad file."""
    from dataclasses import replace

    from torchfit.compat.project import (
        ProjectSpec,
        SourceFile,
        dedupe,
        parse_pyproject,
        parse_requirements_file,
    )
    from torchfit.inputs import MAX_REQUIREMENTS_BYTES, loads_toml, read_text_file, shown

    spec = ProjectSpec() if spec is None else spec

    def read(path: str) -> SourceFile:
        # A file reached through a link may be any file (a checkout's requirements.txt -> ~/.netrc):
        # its lines are never quoted in an error (compat.project.SourceFile).
        return SourceFile(read_text_file(path, "-r", limit=MAX_REQUIREMENTS_BYTES), quotable=not os.path.islink(path))

    for path in args.requirement:
        spec = spec + parse_requirements_file(read(path), path, read, os.environ)
    if args.extra and not args.project:
        raise BadInput("--extra names an optional-dependencies group of --project DIR; give --project")
    if args.project:
        path = os.path.join(os.path.expanduser(args.project), "pyproject.toml")
        if not os.path.exists(path):
            raise BadInput(f"--project {shown(args.project)}: no pyproject.toml in it")
        text = read_text_file(path, "--project", limit=MAX_REQUIREMENTS_BYTES)
        spec = spec + parse_pyproject(loads_toml(text, shown(path)), shown(path), args.extra)
    spec = replace(spec, requirements=dedupe(spec.requirements), constraints=dedupe(spec.constraints))
    if any(r.requirement.url for r in (*spec.requirements, *spec.constraints)):
        from torchfit.index.sources import check_direct_urls

        check_direct_urls((*spec.requirements, *spec.constraints), bool(getattr(args, "allow_insecure_index", False)))
    for r in spec.family:
        if r.requirement.marker is not None:
            raise BadInput(f"{r.origin}: {r.text!r}: environment markers on the torch family are not evaluated; "
                           "give the requirement without one, and --python/--assume for the target")
    return spec


def make_request(args: argparse.Namespace, matrix: Matrix) -> Request:
    """The resolver's `Request` from the shared resolve options, checked against `matrix`."""
    from dataclasses import replace

    from torchfit.compat.request import Request, parse_python_spec, parse_spec

    if args.variant and args.variant not in {b.variant for b in matrix.builds}:
        raise BadInput(f"--variant {args.variant}: no such variant in the matrix (e.g. cu128, rocm6.4, cpu)")
    family, project = load_project(args)
    python, free_threaded = parse_python_spec(args.python) if args.python else (None, None)
    return Request(
        requirements=(*family, *(r.requirement for r in project.family)),
        project=replace(project, requirements=project.others),
        python=python,
        cuda=parse_spec(args.cuda, "--cuda") if args.cuda else None,
        variant=args.variant,
        strict_driver=args.strict_driver,
        free_threaded=free_threaded,
    )


def print_json_error(wanted: bool, data: dict[str, Any]) -> None:
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
    from torchfit.runner import interrupts_raise, kill_all

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
    from torchfit.space import from_oserror, is_no_space, tmpdir_place

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
        from torchfit.runner import Interrupted, kill_all

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
    print_json_error(as_json, {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}",
                               "reference": "internal-error", "hint": "run with -v, please report"})
    _say(f"torchfit: internal error: {type(exc).__name__}: {exc} (run with -v, please report)\n")
    return 1
