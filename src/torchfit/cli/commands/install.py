"""`torchfit install`: the command line of installer.job (options, checks, output).

`add_parser` is cheap (argparse only); everything else is imported when the
command runs. Bad input is one line and exit 2 before anything is created. The
command is settings, then the plan or the lock, then the job (installer/job.py's
PrefixInstall, which runs under PREFIX.lock with SIGTERM/SIGHUP turned into the
same clean interruption as Ctrl-C, exit 130), then what cli/ui/install.py says.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchfit.background import Background
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.matrix import Matrix
    from torchfit.compat.project import ProjectSpec
    from torchfit.index.sources import Sources
    from torchfit.installer.job import InstallOptions, PrefixInstall, SourcesFor
    from torchfit.progress import Progress


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    from torchfit.cli.options import (
        add_installer_option,
        add_resolve_options,
        add_source_options,
        add_step_options,
        add_wait_option,
    )

    p = subparsers.add_parser(
        "install",
        help="build the resolved stack in a fresh env at PREFIX, check it, lock it, pin NCCL",
        description=(
            "Resolve (or read --lock), then build the env beside PREFIX under a temporary name: "
            "the torch family from the variant's index only, everything else from PyPI or your "
            "pip configuration; check the installed build against the plan; write PREFIX/pylock.toml "
            "(PEP 751, sha256 of every file) and PREFIX/bin/torchfit-env (the NCCL pin); then move it "
            "into PREFIX in one atomic step. Nothing at PREFIX changes unless every step succeeded."
        ),
        epilog=epilog + " See `torchfit docs install`.",
    )
    add_resolve_options(p)
    p.add_argument("--prefix", metavar="DIR",
                   help="where the env goes (default .venv, or ROOT/.venv with the site's prefix-root, "
                        "`torchfit config`); an existing one is replaced only with --force")
    p.add_argument("--lock", metavar="FILE",
                   help="rebuild the env a pylock.toml describes, hashes checked; refused when this host "
                        "contradicts it (unless --force)")
    p.add_argument("--pack", metavar="DIR",
                   help="install a pack `torchfit pack` wrote (its lock, its files: no index needed), wherever "
                        "it was carried; with --offline on an air-gapped node. A fleet's pack (one lock per "
                        "group): the group that fits this host, or --group")
    p.add_argument("--group", metavar="NAME",
                   help="with a fleet's --pack: the group to install (group-N, its hostlist, or one of its nodes); "
                        "default: the one group whose lock fits this host")
    p.add_argument("--force", action="store_true",
                   help="replace an existing env at PREFIX (only once the new one is complete); with --lock, "
                        "install even if this host contradicts the lock")
    nccl = p.add_mutually_exclusive_group()
    nccl.add_argument("--nccl", metavar="VERSION",
                      help="install this nvidia-nccl-cuXX version instead of the one torch pins")
    nccl.add_argument("--nccl-lib", metavar="PATH",
                      help="pin a system or custom libnccl.so.2 with LD_PRELOAD (in PREFIX/bin/torchfit-env)")
    add_source_options(p)
    add_installer_option(p, "auto (default): uv (installed with torchfit; else the one on PATH) when it runs here, "
                            "else pip")
    p.add_argument("--seed", action="store_true",
                   help="put pip in the env, so that `pip install` after activating it lands there "
                        "(envs built with --installer pip always have it); to add packages with the torch "
                        "build kept and the lock grown, use `torchfit add PKG --env PREFIX`")
    p.add_argument("--no-build", action="store_true",
                   help="never build a package from source, to plan or to install (wheels only; uv's --no-build, "
                        "pip's --only-binary :all:); a --lock that holds a source distribution is refused")
    add_wait_option(p, "with --force for the processes using the old env to end")
    add_step_options(p, " (a pyenv build, a CUDA download)")


def _validate(args: argparse.Namespace) -> None:
    """Everything checkable before touching the disk: exit 2, one line."""
    from torchfit.cli.settings import install_prefix
    from torchfit.errors import BadInput
    from torchfit.installer.nccl import check_nccl_lib, parse_nccl_version

    if args.prefix is not None and not args.prefix.strip():
        raise BadInput("--prefix: give a directory")
    args.prefix, _ = install_prefix(args, os.environ)
    if args.pack:
        # A pack is its lock plus its files: the torch family from DIR/simple, the rest from DIR/wheels.
        from torchfit.export.pack import MARKER, find_group, format_groups, load_pack_groups

        pack = os.path.abspath(os.path.expanduser(args.pack))
        if not os.path.isfile(os.path.join(pack, MARKER)):
            raise BadInput(f"--pack {args.pack}: not a pack `torchfit pack` wrote (no {MARKER})")
        if args.lock or args.torch_index_url:
            raise BadInput("--pack gives the lock and the torch index itself: drop --lock/--torch-index-url")
        args.pack = pack
        args.pack_groups = load_pack_groups(pack)
        if not args.pack_groups:
            if args.group:
                raise BadInput(f"--group {args.group}: --pack {args.pack} holds one lock, not a fleet's groups")
            args.lock = os.path.join(pack, "pylock.toml")
        elif args.group:
            name = find_group(args.pack_groups, args.group)
            if name is None:
                raise BadInput(f"--group {args.group}: not a group of the pack (its groups: "
                               f"{format_groups(args.pack_groups)})")
            args.lock = args.pack_groups[name][0]
        # else: the group whose lock fits this host, once its facts are known (_pick_group)
        from pathlib import Path

        # URLs with the path %-encoded (Path.as_uri): a space, `#` or `%` in where the pack was
        # carried is part of a file name, not a URL's end of path, fragment or escape
        args.torch_index_url = Path(pack, "simple").as_uri()
        args.find_links = [*args.find_links, Path(pack, "wheels").as_uri()]
    elif args.group:
        raise BadInput("--group picks a group of a fleet's pack: give --pack DIR")
    if args.lock or args.pack:
        from torchfit.cli.settings import lock_conflicts

        # --facts and --assume name the host the lock is checked against
        given = [*lock_conflicts(args, allowed=("--facts", "--assume")), *(["--nccl"] if args.nccl else [])]
        if given:
            raise BadInput(f"--lock rebuilds what the lock says; {', '.join(given)} cannot change it "
                           "(resolve a new plan without --lock instead)")
    if args.nccl:
        args.nccl = parse_nccl_version(args.nccl)
    if args.nccl_lib:
        args.nccl_lib = check_nccl_lib(args.nccl_lib)
    from torchfit.cli.options import check_source_options

    check_source_options(args)


_JOB: list[PrefixInstall] = []  # the running install, so an interruption can say what happened


def run(args: argparse.Namespace) -> int:
    _JOB.clear()
    try:
        return _run(args)
    except KeyboardInterrupt as err:
        why = str(err) or "interrupted"
        from torchfit.cli.ui.install import render_install_interrupted

        job = _JOB[0] if _JOB else None
        render_install_interrupted(why, args.prefix, job is not None and job.swapped)
        from torchfit.interrupts import Interrupted

        raise Interrupted(why, getattr(err, "signum", None), reported=True) from err


def _run(args: argparse.Namespace) -> int:
    from torchfit.background import Background
    from torchfit.cli.settings import load_hosts

    _validate(args)
    prefix = os.path.abspath(os.path.expanduser(args.prefix))
    from torchfit.inputs import check_prefix_text

    check_prefix_text(prefix, "--prefix")  # what no env could survive: refused before anything is made
    # The host probe waits on subprocesses (nvidia-smi, every Python): run it while
    # this thread imports the installer and reads the matrix.
    probing = Background(load_hosts, args)
    try:
        return _install(args, prefix, probing)
    except BaseException:
        # Whatever failed first is the error to show; the probe's children end before we do.
        with contextlib.suppress(BaseException):
            probing.result()
        raise


def _install(args: argparse.Namespace, prefix: str, probing: Background[list[HostFacts]]) -> int:
    """Settings, then the plan or the lock, then the job (installer.job), then what it did."""
    from torchfit.cache import load_matrix
    from torchfit.cli.ui.install import render_install_result
    from torchfit.cli.ui.progress import install_progress
    from torchfit.installer.flow import check_prefix

    check_prefix(prefix, args.force)
    observer = install_progress()  # a bar on a terminal, plain step lines elsewhere
    matrix = load_matrix(args.matrix)
    job = _job(args, prefix, probing.result(), matrix, observer)
    _JOB.append(job)
    result = job.run()
    render_install_result(result, job.late_signals, as_json=args.json)
    return 0


def _job(args: argparse.Namespace, prefix: str, hosts: list[HostFacts], matrix: Matrix,
         observer: Progress) -> PrefixInstall:
    """The install of --lock (a pack's: its group that fits this host, unless --group named one),
    else of the plan of the request (the one planning step: NoCompatibleSet is exit 1)."""
    from torchfit.cli.settings import make_request, plan_settings
    from torchfit.installer.flow import check_lock_host
    from torchfit.installer.job import PrefixInstall
    from torchfit.lock.pylock import load_lock

    options = _options(args)
    if args.pack and not args.lock:  # a fleet's pack, no --group
        from torchfit.export.pack import pick_group

        args.lock = pick_group(args.pack, args.pack_groups,
                               lambda lock: check_lock_host(lock, hosts, matrix, False, observer), observer.info)
    if args.lock:
        lock = load_lock(args.lock)
        if args.pack:  # every file from where the pack now is
            from torchfit.export.pack import lock_in_pack

            lock = lock_in_pack(lock, args.pack)
        return PrefixInstall.from_lock(prefix, lock, args.lock, hosts, matrix, _sources_for(args, None), options,
                                       observer)
    request = make_request(args, matrix)
    from torchfit.planning import make_plan

    plan = make_plan(hosts, request, matrix, plan_settings(args, request.project), progress=observer)
    return PrefixInstall.from_plan(prefix, plan, hosts, request, _sources_for(args, request.project), options,
                                   observer)


def _options(args: argparse.Namespace) -> InstallOptions:
    from torchfit.cli.settings import installer_choice
    from torchfit.installer.job import InstallOptions

    return InstallOptions(given=args.prefix, installer=installer_choice(args, os.environ), timeout=args.timeout,
                          seed=args.seed, wait=args.wait, force=args.force, offline=args.offline,
                          allow_insecure=args.allow_insecure_index, no_build=args.no_build, nccl=args.nccl,
                          nccl_lib=args.nccl_lib)


def _sources_for(args: argparse.Namespace, project: ProjectSpec | None) -> SourcesFor:
    """The sources of a variant: the index lines of -r files join them; the torch source's
    precedence is settings' (the plan's or the lock's torch index after the flag, the environment
    and the files)."""
    from torchfit.cli.settings import sources_for

    def sources(variant: str, fallback: str) -> Sources:
        return sources_for(args, os.environ, project=project, variant=variant, fallback=fallback)

    return sources
