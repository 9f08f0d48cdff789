"""`--format pylock`: PEP 751 pylock.toml, every package with its index, files and hashes.

From `--lock` the lock's packages are re-rendered; without one `export.uvlock`
computes the closure first. Written by the one TOML writer, in the same shape as
the lock `torchfit install` writes (`lock.pylock`), with `[tool.torchfit]` in the same
schema (lock.tool.ToolTable.for_export: the torch index and the stack as a plan, no hosts).
"""

from __future__ import annotations

import datetime as _dt

from torchfit.errors import ExportFailed
from torchfit.export.stack import Stack, comment, environments, header, public_url
from torchfit.lock.pylock import LOCK_VERSION, package_table
from torchfit.lock.toml import drop_none, dumps_toml
from torchfit.lock.tool import ToolTable
from torchfit.redact import redact


def render_pylock(stack: Stack, *, today: _dt.date | None = None) -> str:
    """PEP 751 pylock.toml from the stack's locked packages (their files, hashes and indexes)."""
    if not stack.locked:
        raise ExportFailed("a pylock.toml needs locked files: give --lock FILE, or let torchfit lock "
                           "with uv (export --format pylock without --lock)")
    family = {n for n, _ in stack.family}
    index = public_url(stack.index_url)
    for d in stack.locked:
        if d.name in family and d.index and public_url(d.index) != index:
            raise ExportFailed(f"{d.name} is locked from {redact(d.index)}, not the {stack.variant} index "
                               f"{redact(index)}: refusing to export a stack whose torch family comes "
                               "from another index")
    head = [*header(stack, "pylock", today),
            "Install: uv pip install -r pylock.toml, or with pip >= 26: pip install -r pylock.toml."]
    packages = [package_table(d) for d in sorted(stack.locked, key=lambda d: (d.name not in family, d.name))]
    doc: dict[str, object] = {
        "lock-version": LOCK_VERSION,
        "environments": environments(stack),
        "requires-python": f"=={stack.python}.*" if stack.python else None,
        "created-by": "torchfit",
        "packages": packages,
        # the stack as a plan (what it was resolved, or the env grown, for), the torch index
        "tool": {"torchfit": drop_none(ToolTable.for_export(
            torch=stack.torch, variant=stack.variant, python=stack.python, torch_index=index,
            project=stack.project, constraints=stack.constraints).to_toml())},
    }
    return comment(head) + dumps_toml(doc)
