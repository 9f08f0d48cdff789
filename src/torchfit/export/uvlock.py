"""Locking a plan's full closure with uv, for `--format pylock` without `--lock`.

`uv pip compile` resolves the `--format uv` project: the variant index is explicit
and `[tool.uv.sources]` routes the torch family to it, so uv takes the family from
that index or fails, and everything else from the default index (`--no-config`: no
user configuration adds an index). uv's pylock output names no `index`; the routing
is what makes it known, and `lock_with_uv` records it.

The dependencies come from the sources the plan was made from (`sources`: the one
`index.sources.Sources` of `cli/settings.sources_for`, told to uv as every compile
is told, `Sources.uv_compile`): the configured index, extra indexes and find-links,
so a project that `resolve` finds is found here too (issue 25).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.compat.tags import torch_manylinux_floor, uv_platform
from torchfit.errors import BadInput, ExportFailed
from torchfit.export.stack import Stack
from torchfit.export.uv import constraint_lines, render_uv
from torchfit.redact import redact

if TYPE_CHECKING:
    from torchfit.index.sources import Sources
    from torchfit.runner import Runner

UV_TIMEOUT = 600.0


def lock_with_uv(stack: Stack, runner: Runner, *, pypi_url: str | None = None, on_wait: Callable[[float, int], None] | None = None,
                 sources: Sources | None = None) -> Stack:
    """The stack with `locked` filled by `uv pip compile --format pylock.toml`.

    `sources`: where the dependencies come from (the plan's); `pypi_url`, when given, is
    the default index instead of theirs (`--pypi-url`).
    """
    if len(stack.arches) != 1:
        raise BadInput("a pylock.toml export covers one platform; the hosts are "
                       f"{' and '.join(stack.arches)} (export for one --facts file at a time)")
    if not stack.python:
        raise BadInput("the stack names no Python version to lock for")
    # The uv `install` uses: beside torchfit's own Python, else on PATH.
    from torchfit.lock.uv import compile_project
    from torchfit.lock.uvbin import find_uv

    uv = find_uv(runner)
    if uv is None:
        raise ExportFailed("exporting a pylock.toml without --lock needs uv to lock the dependencies",
                           hint="pip install uv (on PATH or into torchfit's own venv), or export from an "
                                "existing lock with --lock FILE")
    from torchfit.index.sources import one_index
    from torchfit.owned import temp_dir
    from torchfit.runner import stall_timeout, without_index_variables

    with temp_dir("export") as tmp:
        if sources is not None:
            # The plan's sources, as every compile gets them: the index in uv's environment, not
            # its argv (public, in `ps`: it may carry a token); extra indexes, find-links, trusted hosts.
            # `--pypi-url` takes the place of their default index.
            told = replace(sources, index_url=pypi_url, no_index=False) if pypi_url else sources
            options, uv_env = replace(told, http_timeout="30").uv_compile(os.environ, tmp)
        else:
            # No index but this one (as --no-config intends): the user's uv/pip index variables are unset.
            options = ["--no-config"]
            uv_env = one_index(pypi_url or PYPI_SIMPLE, http_timeout="30").uv_env(without_index_variables(),
                                                                                  family=False)
        pypi_url = uv_env["UV_DEFAULT_INDEX"]
        # The index URL keeps its credentials here (uv needs them); the files are private and temporary.
        # [tool.uv] constraint-dependencies is a project setting `uv pip` ignores: -c instead.
        # Bounded and visible: uv's per-request timeout, a stall limit (no bytes moved), and
        # `on_wait` for a progress line naming what is awaited.
        compiled = compile_project(
            runner, uv, work=tmp, name="", env=uv_env, options=options,
            project_text=render_uv(stack, pypi_url=pypi_url, keep_credentials=True),
            constraints=constraint_lines(stack),
            target=(stack.python, uv_platform(stack.arches[0], torch_manylinux_floor(stack.glibc))),
            timeout=UV_TIMEOUT, stall=stall_timeout(), cwd=tmp, on_wait=on_wait, quiet=True, preview=["pylock"])
        if not compiled.ok:
            res = compiled.result
            tail = redact(((res.stderr or res.stdout) if res is not None else compiled.stderr).strip())
            raise ExportFailed(f"uv pip compile could not lock {stack.variant} torch {stack.torch} "
                               f"for Python {stack.python}: {' '.join(tail.split())[-400:] or 'no output'}")
        locked = compiled.locked
    family = {n for n, _ in stack.family}
    missing = family - {d.name for d in locked}
    if missing:
        raise ExportFailed(f"uv's lock has no {', '.join(sorted(missing))}")
    routed = family | set(stack.routed)  # what [tool.uv.sources] sends to the torch index
    packages = tuple(
        replace(d, index=d.index or (stack.index_url if d.name in routed else pypi_url)) for d in locked
    )
    return replace(stack, locked=packages)
