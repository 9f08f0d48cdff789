"""`dataclass(frozen=True, slots=True)` that still runs on Python 3.9 (no `slots=`)."""

from __future__ import annotations

import sys
from typing import Any

FROZEN: dict[str, Any] = {"frozen": True}
if sys.version_info >= (3, 10):
    FROZEN["slots"] = True
