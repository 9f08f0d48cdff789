"""How NCCL itself reads its on/off environment variables (pure).

verify (a cause of low bandwidth) and doctor (a transport switched off) both ask
"is NCCL_P2P_DISABLE set?", and the answer must be NCCL's own, not a guess at
what a user meant: NCCL_P2P_DISABLE=y or =true disables nothing.

NCCL reads these variables as C integers, `strtol`/`strtoll(str, NULL, 0)`:
leading blanks, an optional sign, a `0x` (hex) or `0` (octal) prefix, the digits
up to the first other character; no digits reads as 0. NCCL_P2P_DISABLE
(src/graph/paths.cc, ncclGetLevel: `strtol(str, NULL, 0)`, then `disable == 1`)
and NCCL_SHM_DISABLE (NCCL_PARAM(ShmDisable, "SHM_DISABLE", 0), loaded by
src/misc/param.cc ncclLoadParam with strtoll; src/transport/shm.cc tests
`ncclParamShmDisable() == 1`) act only at exactly 1; NCCL_IB_DISABLE
(NCCL_PARAM(IbDisable, ...); `if (ncclParamIbDisable())` in the IB transport)
at any non-zero value. An empty value, or one out of range (ERANGE), leaves
NCCL's default: unset.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Variables that act only when their integer is exactly 1; others: non-zero.
_EXACTLY_ONE = frozenset({"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"})

_C_INT = re.compile(r"[ \t\n\r\f\v]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?")


def parse_nccl_int(value: str | None) -> int | None:
    """The integer NCCL reads from a variable's text (C strtol, base 0); None when
    unset or empty. "1" -> 1, " 1abc" -> 1, "0x10" -> 16, "010" -> 8, "y" -> 0."""
    if value is None or value == "":
        return None
    m = _C_INT.match(value)
    digits = m.group(2) if m else None
    if not digits:
        return 0
    if digits[:2] in ("0x", "0X"):
        number = int(digits[2:], 16)
    elif digits.startswith("0"):
        number = int(digits, 8)
    else:
        number = int(digits)
    number = -number if m and m.group(1) == "-" else number
    # Out of a C long's range strtol sets ERANGE, and NCCL keeps its default.
    return number if -(2**63) <= number < 2**63 else None


def is_nccl_switch_on(name: str, value: str | None) -> bool:
    """Does NCCL act on this on/off variable (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE,
    NCCL_IB_DISABLE, ...) with this value? NCCL_P2P_DISABLE=1 yes; =y, =true, =0,
    =2 or unset no (see the module docstring for NCCL's own code)."""
    number = parse_nccl_int(value)
    if number is None:
        return False
    return number == 1 if name in _EXACTLY_ONE else number != 0


class IfnameSpec(NamedTuple):
    """NCCL_SOCKET_IFNAME: a list of prefixes; '^' excludes them, '=' matches exactly
    (NCCL docs, "Environment Variables", NCCL_SOCKET_IFNAME)."""

    exclude: bool
    exact: bool
    names: tuple[str, ...]


def parse_nccl_ifname(value: str) -> IfnameSpec:
    text = value.strip()
    exclude = text.startswith("^")
    if exclude:
        text = text[1:]
    exact = text.startswith("=")
    if exact:
        text = text[1:]
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    return IfnameSpec(exclude, exact, names)


def match_interfaces(spec: IfnameSpec, interfaces: tuple[str, ...]) -> tuple[str, ...]:
    """The interfaces NCCL would consider for `spec`."""

    def hit(iface: str) -> bool:
        return any(iface == n if spec.exact else iface.startswith(n) for n in spec.names)

    return tuple(i for i in interfaces if hit(i) != spec.exclude)


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines of /etc/nccl.conf (NCCL reads it like environment variables)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            out[key] = value.strip().strip('"').strip("'")
    return out
