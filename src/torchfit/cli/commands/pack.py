"""`torchfit pack --lock FILE -o DIR`: a lock's files, checked, in a directory to carry across an
air gap; `torchfit install --offline --pack DIR` installs from it there (export/pack.py). From a
fleet file (`--facts FLEET.json`, several groups) plus the project: each group's stack locked
(as `export --format pylock`), every group's files in one pack."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from torchfit.inputs import seconds

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.plan import Plan
    from torchfit.export.pack import Fetch


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    from torchfit.cli.options import add_resolve_options, add_source_options

    p = subparsers.add_parser(
        "pack",
        help="put a lock's files (checked against its sha256) in a directory to carry to an air-gapped site",
        description="Write DIR with the lock, a PEP 503 tree of the torch family (DIR/simple), the other files "
                    "(DIR/wheels), torchfit's own wheels and its dependencies' (DIR/torchfit-wheels, hash-pinned, "
                    "for the lock's Python and platform), a relocatable Python of the lock's minor (DIR/python, "
                    "from uv's managed Pythons), DIR/install.sh and a README; every file checked against its "
                    "sha256, every path inside relative. Run again to resume. On the other side, with no network "
                    "and no Python: `sh DIR/install.sh PREFIX`; where torchfit is installed: "
                    "`torchfit install --offline --pack DIR --prefix P`. Without --lock: --facts (a fleet file: "
                    "every group) plus the project (REQ, -r, --project) are resolved and locked per group, "
                    "and every group's files go in one pack (DIR/locks/GROUP.toml); `install --pack DIR` "
                    "installs the group that fits the node (or `--group NAME`).",
        epilog=epilog + " See `torchfit docs mirrors` (Air-gapped clusters).",
    )
    p.add_argument("--lock", metavar="FILE", help="the lock (PREFIX/pylock.toml of an env torchfit built)")
    p.add_argument("-o", "--output", metavar="DIR", help="the pack's directory (new, or this lock's pack)")
    p.add_argument("--check", action="store_true",
                   help="with --lock, instead of -o: read every file of the lock from where it says (its mirror), "
                        "keep none, and exit 1 naming each package whose file is gone or not the lock's sha256")
    p.add_argument("--json", action="store_true", help="with --check: print one JSON object")
    p.add_argument("--timeout", type=seconds(), default=60.0, metavar="SECONDS",
                   help="per request (default 60); a download may take an hour in all")
    add_resolve_options(p)
    add_source_options(p)
    p.add_argument("--pypi-url", metavar="URL", help="the index torchfit's own dependencies (and, with a fleet file, "
                                                     "the project's) are locked from (default: --index-url, else PyPI)")
    carry = p.add_mutually_exclusive_group()
    carry.add_argument("--with-python", dest="with_python", action="store_const", const=True, default=None,
                       help="carry a relocatable CPython of the lock's minor from uv's managed Pythons (default: "
                            "where uv has one or can fetch one; a site mirror through UV_PYTHON_INSTALL_MIRROR)")
    carry.add_argument("--no-python", dest="with_python", action="store_const", const=False,
                       help="carry no Python: install.sh then needs python3.X on the node")
    carry.add_argument("--no-torchfit", action="store_true",
                       help="carry neither torchfit nor a Python nor install.sh: the lock's files alone, for nodes "
                            "where torchfit is installed")


def _fleet_locks(args: argparse.Namespace, work: str) -> tuple[list[str], list[str]]:
    """Each group's lock (uv, as `export --format pylock`), written under `work`: their paths, and
    each group's hostlist."""
    from torchfit.cache import load_matrix
    from torchfit.cli.options import check_source_options
    from torchfit.cli.settings import load_hosts, make_request, plan_settings
    from torchfit.compat.matrix import PYPI_SIMPLE
    from torchfit.export import render
    from torchfit.export.stack import stack_from_plan
    from torchfit.export.uvlock import lock_with_uv
    from torchfit.files import write_atomic
    from torchfit.planning import make_plan
    from torchfit.progress import StderrProgress
    from torchfit.runner import Runner

    matrix = load_matrix(args.matrix)
    check_source_options(args)
    request = make_request(args, matrix)
    hosts = load_hosts(args)
    pypi_url = (args.pypi_url or args.index_url or PYPI_SIMPLE).rstrip("/")
    progress = StderrProgress()
    paths = []
    for i, host in enumerate(hosts, 1):
        plan = make_plan([host], request, matrix, plan_settings(args, request.project), progress=progress)
        assert plan.build is not None
        arch = host.arch if host.arch in plan.build.platforms else plan.build.platforms[0]
        glibc = plan.build.glibc_for(arch)
        stack = stack_from_plan(plan, arches=[arch], glibc=str(glibc) if glibc else None)
        progress.info(f"pack: group {i}/{len(hosts)} ({host.name}): torch {plan.torch} {plan.variant}, locking with uv")
        with progress.running("pack"):
            stack = lock_with_uv(stack, Runner(), pypi_url=pypi_url)
        path = os.path.join(work, f"group-{i}.toml")
        write_atomic(path, render("pylock", stack, pypi_url=pypi_url))
        write_atomic(path, _installable(path, plan, host))
        paths.append(path)
    return paths, [h.name for h in hosts]


def _installable(path: str, plan: Plan, host: HostFacts) -> str:
    """The group's lock (uv's, as exported) with what `install --lock` rebuilds from and checks the
    host against ([tool.torchfit] schema, plan, NCCL pin, the group's facts): `install --pack`
    installs a group of the pack as it installs the pack of one env's lock."""
    from dataclasses import replace

    from torchfit.installer.flow import nccl_pin_for
    from torchfit.lock.pylock import load_pylock, render_lock

    lock = load_pylock(path)
    pin, _ = nccl_pin_for(plan, None, None)
    return render_lock(replace(lock, tool=lock.tool.installable(plan, pin, lock.tool.torch_index_url, [host])))


def _standalone(args: argparse.Namespace, out: str, lock_paths: list[str], fetch: Fetch) -> Callable[[], str]:
    """make_pack's step that writes torchfit's wheels, the Python and install.sh (export.standalone)."""
    def write() -> str:
        from torchfit.compat.matrix import PYPI_SIMPLE
        from torchfit.export.standalone import format_readme, write_standalone
        from torchfit.installer.python import provide_python
        from torchfit.progress import StderrProgress
        from torchfit.runner import Runner

        progress, runner = StderrProgress(), Runner()

        def provide(request: str) -> tuple[str | None, str]:
            got = provide_python(runner, request)
            return got.path, got.why_not

        done = write_standalone(out, lock_paths, with_python=args.with_python,
                                pypi_url=(args.pypi_url or args.index_url or PYPI_SIMPLE).rstrip("/"),
                                runner=runner, fetch=fetch, provide=provide, say=progress.info, warn=progress.warn)
        return format_readme(done)

    return write


def run(args: argparse.Namespace) -> int:
    from torchfit import __version__
    from torchfit.errors import BadInput
    from torchfit.export.pack import make_pack, merged
    from torchfit.index.client import IndexClient
    from torchfit.lock.pylock import load_lock, load_pylock
    from torchfit.owned import temp_dir
    from torchfit.progress import StderrProgress

    progress = StderrProgress()
    client = IndexClient(timeout=args.timeout, retries=3, deadline=3600.0, progress=progress,
                         allow_insecure=args.allow_insecure_index, use_cache=False)
    if args.check or args.json:
        return _check(args, client.download)
    if not args.output:
        raise BadInput("give -o DIR (the pack's directory), or --check to read the lock's files without keeping them")
    out = os.path.abspath(args.output)
    if args.lock:
        from torchfit.cli.settings import lock_conflicts

        lock_conflicts(args, verb="packs")
        lock = load_lock(args.lock)
        result = make_pack(lock, args.lock, out, fetch=client.download, say=progress.info, warn=progress.warn,
                           version=__version__, allow_insecure=args.allow_insecure_index,
                           standalone=None if args.no_torchfit else _standalone(args, out, [args.lock], client.download))
    else:
        if not args.facts:
            raise BadInput("give --lock FILE, or --facts (a fleet file) and the project to resolve and lock")
        with temp_dir("pack") as work:
            paths, hostlists = _fleet_locks(args, work)
            lock = merged([load_pylock(p) for p in paths])
            result = make_pack(lock, paths, out, fetch=client.download, say=progress.info, warn=progress.warn,
                               version=__version__, hostlists=hostlists, allow_insecure=args.allow_insecure_index,
                               standalone=None if args.no_torchfit else _standalone(args, out, paths, client.download))
    from torchfit.cli.ui.output import render_pack_written

    render_pack_written(args.output, result)
    return 0


def _check(args: argparse.Namespace, fetch: Callable[..., tuple[int, str]]) -> int:
    """`pack --lock FILE --check`: every file of the lock read from its source, none kept (lock/served.py)."""
    from torchfit.cli.settings import lock_conflicts
    from torchfit.errors import BadInput
    from torchfit.index.sources import refuse_insecure
    from torchfit.lock.pylock import load_lock
    from torchfit.lock.served import check_served, wanted
    from torchfit.progress import StderrProgress

    if not args.check:
        raise BadInput("--json is for --check (the pack itself is a directory)")
    if not args.lock or args.output:
        raise BadInput("--check reads the files of --lock FILE and writes nothing: give --lock, not -o")
    lock_conflicts(args, verb="checks")
    lock = load_lock(args.lock)
    for d in lock.packages:  # before any request: a credential in the URL never travels in clear
        for a in wanted(d):
            if a.url:
                refuse_insecure(a.url, f"{args.lock}: {d.name} {d.version}:", args.allow_insecure_index)
    verbose = bool(getattr(args, "verbose", False))
    served = check_served(lock, args.lock, fetch=fetch, say=StderrProgress().info if verbose else None)
    from torchfit.cli.ui.output import render_served

    plan = lock.plan()
    locked = {**{k: plan.get(k) for k in ("python", "torch", "variant", "cuda")},
              "packages": {d.name: d.version for d in lock.packages}}
    render_served(args.lock, served, locked, as_json=args.json)
    return 0 if all(s.why is None for s in served) else 1
