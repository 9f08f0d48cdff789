"""Locking a plan's full closure with uv, for `--format pylock` without `--lock`.

`uv pip compile` resolves the `--format uv` project: the variant index is explicit
and `[tool.uv.sources]` routes the torch family to it, so uv takes the family from
that index or fails, and everything else from the default index (`--no-config`: no
user configuration adds an index). uv's pylock output names no `index`; the routing
is what makes it known, and `lock_with_uv` records it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.compat.tags import torch_manylinux_floor, uv_platform
from torchfit.errors import BadInput, ExportFailed
from torchfit.export.stack import Stack
from torchfit.export.uv import constraint_lines, render_uv
from torchfit.redact import redact

UV_TIMEOUT = 600.0


def lock_with_uv(stack: Stack, runner: Any, *, pypi_url: str = PYPI_SIMPLE, on_wait: Any = None) -> Stack:
    """The stack with `locked` filled by `uv pip compile --format pylock.toml`."""
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

    with temp_dir("export") as tmp:
        out = os.path.join(tmp, "pylock.toml")  # uv insists on this file name
        # The index URL keeps its credentials here (uv needs them); the files are private and temporary.
        # [tool.uv] constraint-dependencies is a project setting `uv pip` ignores: -c instead.
        inputs = write_compile_inputs(uv, tmp, project_text=render_uv(stack, pypi_url=pypi_url, keep_credentials=True),
                                      constraints=constraint_lines(stack),
                                      target=(stack.python,
                                              uv_platform(stack.arches[0], torch_manylinux_floor(stack.glibc))))
        argv = inputs.argv(["--no-config"], out, quiet=True)
        # Bounded and visible: uv's per-request timeout, a stall limit (no bytes moved), and
        # `on_wait` for a progress line naming what is awaited.
        from torchfit.runner import index_variables, stall_timeout

        # The default index in uv's environment, not its argv (public, in `ps`): it may carry a token.
        uv_env = {"UV_PREVIEW_FEATURES": "pylock", "UV_HTTP_TIMEOUT": os.environ.get("UV_HTTP_TIMEOUT", "30"),
                  "UV_DEFAULT_INDEX": pypi_url}
        # No index but these two (as --no-config intends): the user's uv/pip index variables are unset.
        result = runner.run(argv, timeout=UV_TIMEOUT, cwd=tmp, env=uv_env, stall=stall_timeout(), on_wait=on_wait,
                            unset=[k for k in index_variables() if k != "UV_DEFAULT_INDEX"])
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
