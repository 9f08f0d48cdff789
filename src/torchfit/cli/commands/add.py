"""`torchfit add PKG... [-r FILE] [--project DIR] --env PREFIX`: the command line of installer.add.

PKG, the requirements files and the pyproject are read as resolve and install read them
(cli.load_project_files): their requirements are the list add resolves, their `-c`
constraints hold beside the env's, their index lines join the sources.

`add_parser` is cheap (argparse only); the work is installer.add's, run under
PREFIX.lock with SIGTERM/SIGHUP turned into the clean interruption of Ctrl-C.
Bad input (PREFIX not an env torchfit built, a requirement that does not parse)
is one line and exit 2 before anything is touched; a package that needs another
torch is refused with exit 1 and the command that rebuilds the env for it.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from torchfit.errors import BadInput

if TYPE_CHECKING:
    from torchfit.compat.project import ProjectSpec
    from torchfit.index.sources import Sources



def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    from torchfit.cli.options import (
        add_installer_option,
        add_project_options,
        add_source_options,
        add_step_options,
        add_wait_option,
        intermixed_positionals,
    )

    p = subparsers.add_parser(
        "add",
        help="add packages or a project to an env torchfit built or adopted, its torch family pinned to the env's lock",
        description=(
            "Resolve the env's locked set plus PKG (and the requirements of -r FILE and --project DIR) with uv, the torch family pinned to the locked builds and "
            "routed to the lock's torch index, the other locked versions kept where possible; install the new "
            "and changed packages (each file by URL and sha256) and rewrite PREFIX/pylock.toml atomically. "
            "A package that needs another torch is refused (exit 1) with the command that rebuilds the env "
            "for it; nothing in the env or its lock changes then."
        ),
        epilog=epilog + " See `torchfit docs projects`.",
    )
    intermixed_positionals(p)
    p.add_argument("packages", nargs="*", metavar="PKG",
                   help="a PEP 508 requirement: name, 'name>=1.2', 'name[extra]==1.0' (PKG, -r or --project: "
                        "at least one)")
    add_project_options(p)  # a whole project fitted around the env's torch, as resolve/install read it
    p.add_argument("--env", required=True, metavar="PREFIX", help="the env `torchfit install` built")
    add_source_options(p)  # --torch-index-url: default here, the torch index the env's lock records
    add_installer_option(p, "who installs the new files: auto (default) uv, else pip (which needs pip in the "
                            "env: install --seed); uv always resolves")
    add_wait_option(p, "for processes using the env to end when an installed package would be replaced")
    p.add_argument("--accept-base-label", action="store_true",
                   help="an env taken by `torchfit adopt`: accept a package whose torch pin differs from the "
                        "base's torch only by its prerelease/local label (torch==2.8.0 and the base's "
                        "2.8.0a0+...nv25.08); the base stays, the package gets it")
    p.add_argument("--allow-in-use", action="store_true",
                   help="replace installed packages even while processes use the env (a python running from "
                        "it); without it that is refused (exit 1). Adding new packages only warns")
    p.add_argument("--no-build", action="store_true",
                   help="never build a package from source, to resolve or to install (wheels only; uv's --no-build)")
    add_step_options(p)


def run(args: argparse.Namespace) -> int:
    from torchfit.cli import settings
    from torchfit.cli.options import check_source_options
    from torchfit.cli.settings import load_project_files
    from torchfit.installer.add import (
        AddJob,
        load_env_lock,
        parse_new_requirements,
    )
    from torchfit.installer.flow import locked_torch_index
    from torchfit.installer.prefix import PrefixLock
    from torchfit.interrupts import interrupts_raise
    from torchfit.progress import StderrProgress

    if not args.env or not args.env.strip():
        raise BadInput("--env: give the env's directory")
    project = load_project_files(args)  # -r FILE, --project DIR: one line and exit 2 for a bad file
    requirements = parse_new_requirements(args.packages, project=[r.requirement for r in project.requirements])
    check_source_options(args)
    if any(r.url for r in requirements):  # `name @ http://...`: the one http rule (index.sources)
        from torchfit.compat.project import ProjectReq
        from torchfit.index.sources import check_direct_urls

        check_direct_urls([ProjectReq(r, "PKG") for r in requirements], args.allow_insecure_index)
    prefix = os.path.abspath(os.path.expanduser(args.env))
    lock = load_env_lock(prefix)
    sources = _sources(args, locked_torch_index(lock), str(lock.plan().get("variant") or ""), project)
    observer = StderrProgress()
    job = AddJob(prefix=prefix, lock=lock, requirements=requirements, sources=sources,
                 installer=settings.installer_choice(args, os.environ),
                 observer=observer, timeout=args.timeout, source_args=settings.describe_sources(args),
                 no_build=args.no_build, wait=args.wait,
                 allow_in_use=args.allow_in_use, accept_base_label=args.accept_base_label,
                 constraints=[r.text for r in project.constraints])
    with interrupts_raise(), PrefixLock(prefix, args.wait, observer.info):
        job.lock = load_env_lock(prefix)  # again, under the lock: another run may have grown it
        result = job.run()
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("add", result.to_json()))
    else:
        from torchfit.cli.ui.install import render_add_summary

        render_add_summary(result)
    return 0


def _sources(args: argparse.Namespace, locked_index: str, variant: str, project: ProjectSpec) -> Sources:
    """install's sources: the torch index the lock records unless the flag or the environment
    names another (cli/settings.py's one precedence), the dependency sources from the flags, the
    project files' index lines and pip's configuration."""
    from torchfit.cli.settings import sources_for

    return sources_for(args, os.environ, project=project, variant=variant, fallback=locked_index)

