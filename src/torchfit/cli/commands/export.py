"""`torchfit export --format requirements|uv|pylock|lmod|containerfile`: a resolved stack in another tool's format.

The stack comes from resolving (the same options as `torchfit resolve`) or from an
existing PEP 751 lock (`--lock FILE`, hashes included). Rendering lives in
installer.export; docs/export.md explains each format's design.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from torchfit.errors import BadInput

if TYPE_CHECKING:
    from torchfit.export.stack import Stack
    from torchfit.index.sources import Sources


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], epilog: str) -> None:
    from torchfit.cli.options import add_resolve_options, add_source_options

    p = subparsers.add_parser(
        "export", help="write the resolved stack as requirements.txt, uv project config, pylock.toml, an Lmod module "
                       "or a Containerfile",
        epilog=epilog,
    )
    p.add_argument("--format", required=True, choices=("requirements", "uv", "pylock", "lmod", "containerfile"),
                   help="requirements: pip requirements file; uv: pyproject.toml with an explicit index; "
                        "pylock: PEP 751 lock; lmod: an Lmod modulefile of the env whose lock --lock names "
                        "(PREFIX/pylock.toml), to go under a module directory as torch/VERSION-VARIANT.lua; "
                        "containerfile: an OCI image of the lock's env built by torchfit install (build check "
                        "included), with torchfit in it (CMD torchfit verify); -o DIR/Containerfile, and DIR, "
                        "the build context, gets torchfit's wheels and the lock")
    add_resolve_options(p)
    p.add_argument("--lock", metavar="FILE",
                   help="export this PEP 751 lock (pylock.toml) instead of resolving: exact files and hashes")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: stdout)")
    p.add_argument("--pack", metavar="DIR",
                   help="containerfile: build from this pack (torchfit pack), inside the build context: "
                        "no network at build time; its lock is the one exported")
    p.add_argument("--base", metavar="IMAGE",
                   help="containerfile: the base image (default: a Python image of the lock's Python whose "
                        "glibc meets the wheels' floor, of the hosts' OS family); its python3 must be "
                        "the lock's Python, with venv; IMAGE@sha256:<64 hex> pins it by digest, kept verbatim")
    # install's: where the family comes from in the file, and (a project) where the
    # resolution reads the project's packages
    add_source_options(p)
    p.add_argument("--pypi-url", metavar="URL", default=None,
                   help="the index for everything but the torch family: uv's default index, pylock's "
                        "dependencies, a --lock's packages that name none, the project's index in a "
                        "requirements file (default --index-url, else https://pypi.org/simple)")


def run(args: argparse.Namespace) -> int:
    from torchfit.compat.matrix import PYPI_SIMPLE

    pypi_url = (args.pypi_url or args.index_url or PYPI_SIMPLE).rstrip("/")
    _check_sources(args)
    _check_format(args)
    stack = _stack(args, pypi_url)
    if args.format == "containerfile":
        return _containerfile(args, stack, pypi_url)
    _write(args, stack, pypi_url)
    return 0


def _check_format(args: argparse.Namespace) -> None:
    """--pack and --base are the containerfile's, which builds the env of a lock (a pack's)."""
    if args.format != "containerfile":
        extra = [o for o, v in (("--pack", args.pack), ("--base", args.base)) if v]
        if extra:
            raise BadInput(f"{', '.join(extra)}: only for --format containerfile")
        return
    if args.pack:
        from torchfit.export.container_context import pack_lock

        args.lock = pack_lock(args.pack, args.lock, args.output)
    if not args.lock:
        raise BadInput("--format containerfile builds the env of a lock: give --lock FILE (an env's "
                       "PREFIX/pylock.toml) or --pack DIR (a pack of torchfit pack)")


def _stack(args: argparse.Namespace, pypi_url: str) -> Stack:
    """The stack to write: --lock's as it is, else the plan's; its torch index the one install
    would use; locked with uv for a pylock of a plan."""
    from torchfit.cli.settings import lock_conflicts, torch_template
    from torchfit.export.stack import load_lock, with_index

    sources: Sources | None = None  # the plan's: where uv finds the dependencies
    if args.lock:
        lock_conflicts(args, verb="exports")
        stack = load_lock(args.lock)
    else:
        stack, sources = _resolve_stack(args)
    # The same mirror `torchfit install` would use (docs/mirrors.md), unless given here.
    template, _, given = torch_template(args, os.environ)
    stack = with_index(stack, template if given else None)
    if stack.index_url:  # a --lock's own index obeys the same rule
        from torchfit.index.sources import refuse_insecure

        refuse_insecure(stack.index_url, "the lock's torch index", args.allow_insecure_index)
    if args.format == "pylock" and not stack.locked:
        from torchfit.export.uvlock import lock_with_uv
        from torchfit.progress import StderrProgress
        from torchfit.runner import Runner

        progress = StderrProgress()
        deps = pypi_url if sources is None or args.pypi_url else "the plan's sources"
        what = f"uv pip compile (the torch index {stack.index_url}, dependencies from {deps})"
        progress.info(f"export: locking with {what}")
        with progress.running("export"):
            stack = lock_with_uv(stack, Runner(), pypi_url=pypi_url if sources is None or args.pypi_url else None,
                                 sources=sources, on_wait=progress.waiting("export", what))
    return stack


def _write(args: argparse.Namespace, stack: Stack, pypi_url: str) -> None:
    """The file of --format (lmod: the module of --lock's env), to -o or stdout."""
    if args.format == "lmod":
        if not args.lock:
            raise BadInput("--format lmod writes the module of an env: give its lock, --lock PREFIX/pylock.toml")
        from torchfit.export.lmod import render_lmod
        from torchfit.lock.pylock import load_lock as load_pylock

        lock = load_pylock(args.lock)
        text = render_lmod(stack, lock_path=args.lock, pin=lock.pin(), plan=lock.plan())
    else:
        from torchfit.export import render

        text = render(args.format, stack, pypi_url=pypi_url)
    if args.output:
        from torchfit.cli.ui.output import render_export_written, write_output

        write_output(args.output, text, "-o", follow=args.format != "lmod")  # a module tree is not ours
        render_export_written(args.output, args.format, stack)
    else:
        from torchfit.cli.ui.output import write_data

        write_data(text)


def _check_sources(args: argparse.Namespace) -> None:
    """export's sources, before anything runs, by the settings' one precedence rule (flag,
    environment, configuration files: cli/settings.py): the torch source in force is written into
    the file, so it is an http(s):// or file:// URL whoever gave it; then every source is checked
    as install checks it (options.check_source_options), and --pypi-url as a flag."""
    from torchfit.cli.options import check_source_options
    from torchfit.cli.settings import source_settings
    from torchfit.index.sources import refuse_insecure
    from torchfit.inputs import check_index_url
    from torchfit.redact import redact

    torch, _ = source_settings(args, os.environ)
    for what, url in ((torch[1], torch[0]) if torch else ("", None), ("--pypi-url", args.pypi_url)):
        if url and url.split("://", 1)[0] not in ("http", "https", "file"):
            raise BadInput(f"{what} {redact(url)}: not an http(s):// or file:// URL")
        if url:
            check_index_url(url, what, placeholders=what != "--pypi-url")
    check_source_options(args)
    if args.pypi_url:
        refuse_insecure(args.pypi_url, "--pypi-url", args.allow_insecure_index)


def _containerfile(args: argparse.Namespace, stack: Stack, pypi_url: str) -> int:
    from torchfit import __version__
    from torchfit.export.container_context import write_context
    from torchfit.index.client import IndexClient
    from torchfit.progress import StderrProgress
    from torchfit.runner import Runner

    progress = StderrProgress()
    client = IndexClient(timeout=60.0, retries=3, deadline=3600.0, progress=progress,
                         allow_insecure=args.allow_insecure_index, use_cache=False)
    made = write_context(stack, args.lock, args.output, pack=args.pack, base=args.base, pypi_url=pypi_url,
                         runner=Runner(), fetch=client.download, say=progress.info, version=__version__)
    from torchfit.cli.ui.output import render_context_written

    render_context_written(made, stack, offline=bool(args.pack))
    return 0


def _resolve_stack(args: argparse.Namespace) -> tuple[Stack, Sources]:
    """The plan's stack, and the sources it was planned from (the plan's variant)."""
    from torchfit.cache import load_matrix
    from torchfit.cli.settings import load_hosts, make_request, plan_settings
    from torchfit.export.stack import stack_from_plan
    from torchfit.planning import make_plan
    from torchfit.progress import StderrProgress

    matrix = load_matrix(args.matrix)
    request = make_request(args, matrix)
    hosts = load_hosts(args)
    # The one planning step (NoCompatibleSet: exit 1 with the conflicts): what export writes is
    # what resolve shows and install installs.
    settings = plan_settings(args, request.project)
    plan = make_plan(hosts, request, matrix, settings, progress=StderrProgress())
    build = plan.build  # the resolver's plan keeps its matrix row
    assert build is not None
    arches = [h.arch for h in hosts if h.arch in build.platforms] or [build.platforms[0]]
    glibc = build.glibc_for(arches[0])
    return stack_from_plan(plan, arches=arches, glibc=str(glibc) if glibc else None), settings.sources(plan.variant)
