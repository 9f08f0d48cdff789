"""One verdict type for the commands that prove or diagnose an environment.

`torchfit verify` and `torchfit doctor` both report a list of checks: a name, a
status, one line saying what was found, detail lines, and how to fix it. This is
that `Check`, with one `Status` vocabulary (pass, warn, fail, skip, unknown).

The JSON words stay each command's own (docs/architecture.md, Contracts: keys may be added, never
renamed): verify writes `pass`/`warn`/`fail`/`skip` under name/summary/detail/
hint, doctor writes `ok`/`warn`/`fail`/`unknown` under id/evidence/fix. Each
command maps at its JSON edge (verify.model, doctor.model); nothing in between
needs to know.

(compat.rules.RuleResult is another concept: whether one build fits one host.)
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from torchfit._backports import FROZEN


class Status(str, Enum):
    """How a check came out. A str, so `status == "fail"` reads naturally."""

    PASS = "pass"  # what was checked is right
    WARN = "warn"  # it works, but something deserves attention
    FAIL = "fail"  # it is wrong: the command exits 1
    SKIP = "skip"  # not applicable here (a CPU build has no GPUs to check)
    UNKNOWN = "unknown"  # could not be decided (a tool missing, a file unreadable)

    def __str__(self) -> str:
        return self.value


@dataclass(**FROZEN)
class Check:
    """One verdict: which check, how it came out, what it saw, how to fix it.

    `area` and `title` group and describe doctor's checks (verify leaves them
    None). `status` may be given as its word ("pass"); it is stored as a Status.
    """

    name: str
    status: Status
    summary: str
    detail: tuple[str, ...] = ()
    hint: str | None = None
    area: str | None = None
    title: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))

    @property
    def failed(self) -> bool:
        return self.status is Status.FAIL
