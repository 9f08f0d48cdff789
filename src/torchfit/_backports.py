"""What a newer Python has built in, written once for Python 3.9 and 3.10.

- `FROZEN`: the kwargs for `dataclass(frozen=True, slots=True)` (no `slots=` before 3.10).
- `tomllib`: the standard TOML reader (3.11+), or its backport `tomli` before it,
  imported on first use (`from torchfit._backports import tomllib` inside the
  function that parses): it costs ~6 ms of start-up that FROZEN's users never need.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["FROZEN"]  # and `tomllib`, through __getattr__ below

FROZEN: dict[str, Any] = {"frozen": True}
if sys.version_info >= (3, 10):
    FROZEN["slots"] = True


def __getattr__(name: str) -> Any:
    # PEP 562: `tomllib` is resolved here on first access, then kept as a global.
    if name == "tomllib":
        if sys.version_info >= (3, 11):
            import tomllib as module
        else:  # pragma: no cover - exercised on 3.9/3.10 only
            import tomli as module
        globals()["tomllib"] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
