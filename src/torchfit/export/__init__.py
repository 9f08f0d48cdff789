"""`torchfit export`: a resolved stack in the formats people use, one module per format.

The one rule every format keeps: the torch family (torch, torchvision, torchaudio)
comes only from the variant's own index. Each format states it its own way
(docs/export.md explains why):

- `requirements`: the variant index as the only index (from a lock: hash-pinned);
- `uv`: an explicit `[[tool.uv.index]]` plus `[tool.uv.sources]` for the family;
- `pylock`: PEP 751, every package with its index, wheels and hashes; without
  `--lock` the closure is computed by `uvlock.lock_with_uv`.

`stack.Stack` is what every format renders: `stack_from_plan` (resolving) or
`stack_from_lock` (a PEP 751 lock, read by `torchfit.lock`). `FORMATS` maps a
format name to its renderer. Index URLs never carry credentials into a file.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.errors import BadInput
from torchfit.export.pylock import render_pylock
from torchfit.export.requirements import render_requirements
from torchfit.export.stack import Stack
from torchfit.export.uv import render_uv

__all__ = ["FORMATS", "render"]

Renderer = Callable[..., str]

# format name -> renderer(stack, *, pypi_url, today); `--format` choices come from here.
FORMATS: dict[str, Renderer] = {
    "requirements": render_requirements,
    "uv": render_uv,
    "pylock": lambda stack, *, pypi_url=PYPI_SIMPLE, today=None: render_pylock(stack, today=today),
}


def render(fmt: str, stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None) -> str:
    renderer = FORMATS.get(fmt)
    if renderer is None:
        raise BadInput(f"--format {fmt}: one of {', '.join(FORMATS)}")
    return str(renderer(stack, pypi_url=pypi_url, today=today))
