"""A project's resolution at the edge: its sources, its packages' metadata, uv's whole set.

`resolve_project` is `torchfit resolve` (and `install`) for a request with packages
outside the torch family (issue 18), in two steps:

1. the joint choice (`compat.resolver.resolve` with a `SourcePackages`): the torch
   build from the host rules and the project's torch pins together, each pin read
   from the METADATA of the project's packages on the user's own sources;
2. the whole set (`uv pip compile`, the installer's own resolution): the family
   pinned to the chosen build and routed to the torch index, everything else from
   the user's sources. Its versions become `Plan.resolved`. uv is called once: the
   project's torch requirement is read first, never tried build by build.

The sources are install's: pip's configuration, the flags, and the index options
the project's requirements files carry (`--extra-index-url` lines...).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import DEFAULT_INDEX, PYPI_SIMPLE, TORCH_INDEX_ENV, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.request import Request
from torchfit.compat.tags import uv_platform
from torchfit.errors import InstallFailed, NoCompatibleSet
from torchfit.installer.sources import Sources, load_pip_config, make_sources, torch_index_for
from torchfit.progress import Progress


def project_sources(args: argparse.Namespace, request: Request, variant: str) -> Sources:
    """install's sources for `variant`, with the index options of the project's files added."""
    project = request.project
    template = args.torch_index_url or os.environ.get(TORCH_INDEX_ENV) or DEFAULT_INDEX
    flag = "--torch-index-url" if args.torch_index_url else (
        TORCH_INDEX_ENV if os.environ.get(TORCH_INDEX_ENV) else "the torch index")
    return make_sources(
        torch_index=torch_index_for(template, variant), index_url=args.index_url or project.index_url,
        extra_index_urls=[*args.extra_index_url, *project.extra_index_urls],
        find_links=[*args.find_links, *project.find_links], offline=args.offline,
        allow_insecure=args.allow_insecure_index, pip=load_pip_config(), torch_index_flag=flag,
    )


def package_reader(args: argparse.Namespace, request: Request, arch: str | None = None,
                   progress: Progress | None = None) -> Any:
    """The project's packages as the resolver reads them (the dependency sources, never the
    torch index), each direct requirement's pages and newest METADATA already read, in parallel."""
    from torchfit.index.client import IndexClient
    from torchfit.index.project import SourcePackages

    sources = project_sources(args, request, "cpu")
    indexes = [] if sources.no_index else [sources.index_url or PYPI_SIMPLE, *sources.extra_index_urls]
    client = IndexClient(progress=progress, honor_max_age=True,
                         allow_insecure=bool(getattr(args, "allow_insecure_index", False)))
    reader = SourcePackages(client, indexes, list(sources.find_links),
                            arch or os.uname().machine)
    reader.prefetch([(r.name, r.requirement.specifier) for r in request.project.others if r.requirement.url is None])
    return reader


def resolve_project(hosts: Sequence[HostFacts], request: Request, matrix: Matrix, args: argparse.Namespace,
                    *, whole_set: bool = True, progress: Progress | None = None, reader: Any = None) -> Plan:
    """The plan for a project: the joint choice, then (with `whole_set`) uv's versions of everything.

    `reader`: a `package_reader` made already (while the host was probed).
    """
    from torchfit.cache import load_companions
    from torchfit.compat.resolver import resolve

    arch = hosts[0].arch or os.uname().machine
    if reader is None:
        reader = package_reader(args, request, arch, progress)
    plan = resolve(hosts, request, matrix, reader, load_companions())
    if not whole_set:
        return plan
    sources = project_sources(args, request, plan.variant)
    glibcs = [g.major_minor() for g in (h.glibc_v for h in hosts) if g is not None]
    locked = compile_set(plan, sources, arch, min(glibcs) if glibcs else None,
                         timeout=getattr(args, "timeout", 600.0) or 600.0, progress=progress)
    return replace(plan, resolved={d.name: d.version for d in locked})


def compile_set(plan: Plan, sources: Sources, arch: str, glibc: tuple[int, int] | None, *, timeout: float,
                progress: Progress | None) -> list[Any]:
    """uv's resolution of the plan's whole set (the install's own step), without an env."""
    from torchfit.installer.backends import StepContext, UvBackend, install_specs
    from torchfit.lock.uv import find_uv, uv_version
    from torchfit.owned import temp_dir
    from torchfit.runner import Runner, stall_timeout

    runner = Runner()
    uv = find_uv(runner)
    version = uv_version(runner, uv) if uv else None
    if uv is None or version is None:
        raise NoCompatibleSet([f"resolving the project's packages needs uv (found: {uv or 'none'})"],
                              ["pip install uv beside torchfit (it is a dependency of torchfit)"])
    ctx = StepContext(runner, _NoLog(), progress or Progress(), sources, timeout, {}, stall=stall_timeout())  # type: ignore[arg-type]
    backend = UvBackend(ctx, uv, version)
    backend.constraints = tuple(plan.constraints)
    backend.routed = tuple(plan.routed)
    # The target as values, so the set is right for another host too (resolve --facts):
    # its Python version and its platform (arch, glibc), whatever interpreter runs uv.
    target = (plan.python_version, uv_platform(arch, glibc))
    with temp_dir("resolve") as work:
        try:
            return backend.resolve(sys.executable, install_specs(plan), None, work, target=target)
        except InstallFailed as exc:
            raise NoCompatibleSet(
                [f"uv cannot resolve the project with torch {plan.torch} ({plan.variant}) pinned: "
                 + " ".join((exc.tail or str(exc)).split())[-600:]],
                ["a package further down the project's dependencies may pin another torch: "
                 "pin it (or torch) in your requirements, then resolve again"],
            ) from None


class _NoLog:
    """`StepContext.log` for a resolve: nothing is written (an install keeps its log)."""

    path = None

    def write(self, text: str) -> None:
        pass

    def step(self, *args: Any) -> None:
        pass
