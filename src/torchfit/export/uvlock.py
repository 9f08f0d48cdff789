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
    from torchfit.lock.uv import find_uv, read_uv_lock, write_compile_inputs

    uv = find_uv(runner)
    if uv is None:
        raise ExportFailed("exporting a pylock.toml without --lock needs uv to lock the dependencies",
                           hint="pip install uv (on PATH or into torchfit's own venv), or export from an "
                                "existing lock with --lock FILE")
    from torchfit.owned import temp_dir
    from torchfit.runner import index_variables, stall_timeout

    with temp_dir("export") as tmp:
        out = os.path.join(tmp, "pylock.toml")  # uv insists on this file name
        if sources is not None:
            # The plan's sources, as every compile gets them: the index in uv's environment, not
            # its argv (public, in `ps`: it may carry a token); extra indexes, find-links, trusted hosts.
            options, uv_env = sources.uv_compile(os.environ, tmp)
            pypi_url = pypi_url or uv_env["UV_DEFAULT_INDEX"]
            unset = [k for k in os.environ if k not in uv_env]
        else:
            # No index but these two (as --no-config intends): the user's uv/pip index variables are unset.
            pypi_url = pypi_url or PYPI_SIMPLE
            options, uv_env = ["--no-config"], {}
            unset = [k for k in index_variables() if k != "UV_DEFAULT_INDEX"]
        uv_env.update({"UV_PREVIEW_FEATURES": "pylock", "UV_DEFAULT_INDEX": pypi_url,
                       "UV_HTTP_TIMEOUT": os.environ.get("UV_HTTP_TIMEOUT", "30")})
        # The index URL keeps its credentials here (uv needs them); the files are private and temporary.
        # [tool.uv] constraint-dependencies is a project setting `uv pip` ignores: -c instead.
        inputs = write_compile_inputs(uv, tmp, project_text=render_uv(stack, pypi_url=pypi_url, keep_credentials=True),
                                      constraints=constraint_lines(stack),
                                      target=(stack.python,
                                              uv_platform(stack.arches[0], torch_manylinux_floor(stack.glibc))))
        argv = inputs.argv(options, out, quiet=True)
        # Bounded and visible: uv's per-request timeout, a stall limit (no bytes moved), and
        # `on_wait` for a progress line naming what is awaited.
        result = runner.run(argv, timeout=UV_TIMEOUT, cwd=tmp, env=uv_env, stall=stall_timeout(), on_wait=on_wait,
                            unset=unset)
        if not result.ok:
            tail = redact((result.stderr or result.stdout).strip())
            raise ExportFailed(f"uv pip compile could not lock {stack.variant} torch {stack.torch} "
                               f"for Python {stack.python}: {' '.join(tail.split())[-400:] or 'no output'}")
        locked = read_uv_lock(out)
    family = {n for n, _ in stack.family}
    missing = family - {d.name for d in locked}
    if missing:
        raise ExportFailed(f"uv's lock has no {', '.join(sorted(missing))}")
    routed = family | set(stack.routed)  # what [tool.uv.sources] sends to the torch index
    packages = tuple(
        replace(d, index=d.index or (stack.index_url if d.name in routed else pypi_url)) for d in locked
    )
    return replace(stack, locked=packages)
