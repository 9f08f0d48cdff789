"""What a newer Python has built in, written once for Python 3.9 and 3.10.

- `FROZEN`: the kwargs for `dataclass(frozen=True, slots=True)` (no `slots=` before 3.10).
- `tomllib`: the standard TOML reader (3.11+), or its backport `tomli` before it.
"""

from __future__ import annotations

import sys
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10 only
    import tomli as tomllib

__all__ = ["FROZEN", "tomllib"]

FROZEN: dict[str, Any] = {"frozen": True}
if sys.version_info >= (3, 10):
    FROZEN["slots"] = True
