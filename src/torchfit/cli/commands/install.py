"""`torchfit install`: the command line of install_flow (options, checks, output).

`add_parser` is cheap (argparse only); everything else is imported when the
command runs. Bad input is one line and exit 2 before anything is created; the
install itself runs under PREFIX.lock with SIGTERM/SIGHUP turned into the same
clean interruption as Ctrl-C (exit 130).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from typing import TYPE_CHECKING

from torchfit.compat.matrix import DEFAULT_INDEX as DEFAULT_TORCH_INDEX

if TYPE_CHECKING:
    from collections.abc import Sequence

    from torchfit.background import Background
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.matrix import Matrix
    from torchfit.installer.flow import InstallJob
    from torchfit.lock.model import Lock
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


_JOB: list[InstallJob] = []  # the running InstallJob, so an interruption can say what happened


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
    from torchfit.cache import load_matrix
    from torchfit.cli.settings import make_request
    from torchfit.errors import BadInput
    from torchfit.installer.flow import (
        InstallJob,
        check_ld_preload_lib,
        check_lock_host,
        check_prefix,
        locked_torch_index,
        nccl_pin_for,
    )
    from torchfit.installer.prefix import PrefixLock, scan_temps, wait_unused
    from torchfit.interrupts import interrupts_raise
    from torchfit.lock.model import NcclPin, pin_from_json
    from torchfit.lock.pylock import load_lock
    from torchfit.owned import TreeNotRemoved, remove_marked

    check_prefix(prefix, args.force)
    from torchfit.cli.ui.progress import install_progress

    observer = install_progress()  # a bar on a terminal, plain step lines elsewhere
    matrix = load_matrix(args.matrix)
    hosts = probing.result()
    lock = None
    request = None
    if args.pack and not args.lock:  # a fleet's pack, no --group
        args.lock = _pick_group(args.pack, args.pack_groups, hosts, matrix, observer)
    if args.lock:
        lock = load_lock(args.lock)
        if args.pack:  # every file from where the pack now is
            from torchfit.export.pack import lock_in_pack

            lock = lock_in_pack(lock, args.pack)
        if args.no_build:
            _refuse_builds(lock, args.lock)
        plan = check_lock_host(lock, hosts, matrix, args.force, observer)
        pin = pin_from_json(lock.pin())
        if args.nccl_lib:
            pin = NcclPin("ld-preload", None, None, args.nccl_lib)
        pin = check_ld_preload_lib(pin, lock)
        nccl_override = None
        fallback = locked_torch_index(lock)
    else:
        request = make_request(args, matrix)
        from torchfit.cli.settings import plan_settings
        from torchfit.planning import make_plan

        # The one planning step: uv's whole set is the plan, installed exactly (NoCompatibleSet: exit 1)
        # check_downloads: the plan's files are fetched next; where they redirect is checked first
        plan = make_plan(hosts, request, matrix, plan_settings(args, request.project, check_downloads=True),
                         progress=observer)
        pin, nccl_override = nccl_pin_for(plan, args.nccl, args.nccl_lib)
        fallback = plan.index_url or DEFAULT_TORCH_INDEX
    from torchfit.cli.settings import installer_choice, sources_for

    # the index lines of -r files join the sources; the torch source's precedence is settings'
    sources = sources_for(args, os.environ, project=request.project if request is not None else None,
                          variant=plan.variant, fallback=fallback)
    if not args.offline and not args.allow_insecure_index and sources.torch_index.lower().startswith("https://"):
        # uv and pip follow an https -> http redirect silently (uv 0.13.9, measured): the torch
        # index is read once here, each hop checked, before either is asked.
        from torchfit.index.client import IndexClient, check_no_downgrade

        check_no_downgrade(IndexClient(retries=1, honor_max_age=True), sources.torch_index)
    if lock is not None and not args.offline:
        # the lock's files are fetched by URL next: an https one that redirects to plain http is
        # refused first, as a plan's are (planning) and add's (uv and pip follow it silently)
        from torchfit.index.client import IndexClient, check_file_redirects

        check_file_redirects(IndexClient(retries=1, timeout=min(30.0, args.timeout), progress=observer,
                                         allow_insecure=args.allow_insecure_index),
                             [a.url for d in lock.packages for a in d.artifacts if a.url])
    for w in plan.warnings:
        observer.warn(w)
    observer.info(f"plan: torch {plan.torch} {plan.variant}, Python {plan.python_version}"
                  f"{' (pyenv)' if plan.python_source == 'pyenv' else ''}, NCCL {pin.describe()}")
    job = InstallJob(prefix=prefix, plan=plan, hosts=hosts, request=request, sources=sources, pin=pin,
                     installer=installer_choice(args, os.environ), observer=observer, timeout=args.timeout, lock=lock,
                     nccl_override=nccl_override, seed=args.seed, wait=args.wait)
    parent = os.path.dirname(prefix)
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--prefix {args.prefix}: cannot create {parent} ({exc.strerror})") from None
    _warn_unshared(prefix, observer)
    _JOB.append(job)
    with interrupts_raise(), PrefixLock(prefix, args.wait, observer.info):
        check_prefix(prefix, args.force)  # again, now that no other install can race us
        scan = scan_temps(prefix)
        if args.force:
            wait_unused(prefix, args.wait, observer.info)
        for stale in scan.stale:
            # Its marker proves a torchfit run made it, and that run is gone.
            observer.info(f"removing {stale}, left by a torchfit install that was killed")
            try:
                remove_marked(stale)
            except TreeNotRemoved as exc:
                observer.warn(f"leaving {stale}: {exc.strerror}")
        for other in scan.unproven:
            observer.warn(f"leaving {other} alone: its name looks like a torchfit temporary env, "
                          "but nothing proves torchfit made it")
        result = job.run()
    if args.json:
        out = result.to_json()
        if job.late_signals:
            out["late_signals"] = job.late_signals
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("install", out))
    else:
        from torchfit.cli.ui.install import render_install_summary

        render_install_summary(result)
    if job.late_signals:
        from torchfit.cli.ui.install import render_late_signals

        render_late_signals(job.late_signals, prefix)
    return 0


def _refuse_builds(lock: Lock, path: str) -> None:
    """--no-build with a lock: BadInput naming the first package the lock installs from a
    source distribution only (installing it runs its build)."""
    from torchfit.errors import BadInput

    for d in lock.packages:
        if d.needs_build:
            name = next((a.filename for a in d.artifacts if a.filename), d.name)
            raise BadInput(f"--no-build: {path} installs {d.name} {d.version} from a source distribution "
                           f"({name}), which would be built; lock a wheel of it, or drop --no-build")


def _pick_group(pack: str, groups: dict[str, tuple[str, str]], hosts: Sequence[HostFacts], matrix: Matrix,
                observer: Progress) -> str:
    """The lock of the one group of a fleet's pack that fits this host (install's own rule,
    check_lock_host), said; BadInput listing the groups when none or several fit."""
    from torchfit.errors import BadInput, LockMismatch
    from torchfit.export.pack import format_groups
    from torchfit.inputs import shown
    from torchfit.installer.flow import check_lock_host
    from torchfit.lock.pylock import load_lock

    fits, why = [], []
    for name, (path, _) in groups.items():
        try:
            check_lock_host(load_lock(path), hosts, matrix, False, observer)
            fits.append(name)
        except LockMismatch as exc:
            why.append(f"{name}: {exc.conflicts[0] if exc.conflicts else exc}")
    if len(fits) == 1:
        name = fits[0]
        observer.info(f"pack: installing group {name}{f' ({groups[name][1]})' if groups[name][1] else ''}, "
                      f"the one whose lock fits this host ({shown(groups[name][0])})")
        return groups[name][0]
    if fits:
        raise BadInput(f"--pack {shown(pack)}: {len(fits)} of its groups fit this host ({', '.join(fits)}); "
                       f"give --group NAME (its groups: {format_groups(groups)})")
    raise BadInput(f"--pack {shown(pack)}: none of its groups fits this host ({'; '.join(why)}); give --group NAME "
                   f"with --force to install one anyway (its groups: {format_groups(groups)})")


def _warn_unshared(prefix: str, observer: Progress) -> None:
    """A shared machine: the env is built with this process's umask; say so when the group
    that shares PREFIX's parent directory could then not use it (umask 077 in a team's directory)."""
    import stat

    from torchfit.access import shared_group, umask
    from torchfit.inputs import shown

    parent = os.path.dirname(prefix)
    group = shared_group(parent)
    mask = umask()
    if group is None or not mask & 0o050:  # the group keeps r-x: nothing lost
        return
    mode = stat.filemode(os.stat(parent).st_mode)
    observer.warn(f"umask {mask:04o}: the env will be usable by you only, though {shown(parent)} ({mode}) is shared "
                  f"with group {group}: its members could not run it; install under `umask 002` (or 022), or "
                  f"run `chmod -R g+rX {shown(prefix)}` afterwards")

