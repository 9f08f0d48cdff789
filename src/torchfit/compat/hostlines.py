"""A fleet's per-group lines folded by reason (pure; issue 34, R6).

A fleet resolves for every group of nodes, and much of what a plan or a refusal says is
said per group: "gpu[07-09]: driver 550.127.08 >= 525.60.13 (...)", "gpu[07-09] (TITAN V
(sm_70), driver 580.65.06) rules out cu130 ...". A fleet of 2,000 groups that differ only
in their drivers would print each line 2,000 times, once per group, and the answer would
grow with the fleet instead of with what there is to say. Here the lines about each
group are folded: the group's own name and driver in a line are what may differ, the rest
is the reason, and every reason is said once, with the groups it concerns
("a, b, c and 164 more groups") and their drivers as a range ("535.100.01-535.266.97").
A reason that concerns one group keeps that group's line exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from torchfit.compat.facts import HostFacts
from torchfit.compat.versions import Dotted

# Group names listed before "and N more groups": enough to find them, few enough for a line.
SHOWN_NAMES = 3

_NAME = "\x00name\x00"
_DRIVER = "\x00driver\x00"


def format_host_names(names: Iterable[str], shown: int = SHOWN_NAMES) -> str:
    """Group names for one line: all of them up to `shown` + 1, else the first `shown` and
    how many more ("g01, g02, g03 and 1997 more groups")."""
    unique = list(dict.fromkeys(names))
    if len(unique) <= shown + 1:
        return ", ".join(unique)
    return f"{', '.join(unique[:shown])} and {len(unique) - shown} more groups"


def _template(host: HostFacts, text: str) -> str:
    out = text.replace(host.name, _NAME) if host.name else text
    drv = host.driver_version
    if drv and "." in drv:  # a driver "580.65.06", never a bare number that could be anything
        out = out.replace(drv, _DRIVER)
    return out


def _drivers(hosts: list[HostFacts]) -> str:
    known = sorted({(h.driver or Dotted((), h.driver_version or "")) for h in hosts if h.driver_version})
    if not known:
        return "unknown"
    if len(known) == 1:
        return known[0].text
    return f"{known[0].text}\u2013{known[-1].text}"


def fold_host_lines(items: Iterable[tuple[HostFacts, str]], many: Mapping[str, str] | None = None) -> list[str]:
    """Lines about hosts (`(host, line)`), one per distinct reason, in first-seen order.

    Lines that differ only in their host's name and driver are one reason: said once,
    the name's first mention replaced by the hosts' names (`format_host_names`), a later
    mention by "each" ("a, b has" said "a, b have"), the driver by the hosts' drivers (one, or the lowest-highest).
    `many` rewords a line that speaks of several hosts ("this group" -> "each of these
    groups"). A reason of one host keeps its line as it was; equal lines are said once."""
    order: dict[str, list[tuple[HostFacts, str]]] = {}
    for host, text in items:
        order.setdefault(_template(host, text), []).append((host, text))
    out = []
    for template, pairs in order.items():
        hosts = list({id(h): h for h, _ in pairs}.values())
        if len(hosts) == 1:
            out.append(pairs[0][1])
            continue
        first, sep, rest = template.partition(_NAME)
        if rest.startswith(" has "):  # "needs driver >= 580 (...), a, b and 9 more groups have 535.x-550.y"
            rest = " have " + rest[len(" has "):]
        line = first + (format_host_names(h.name for h in hosts) if sep else "") + rest.replace(_NAME, "each")
        line = line.replace(_DRIVER, _drivers(hosts))
        for one, several in (many or {}).items():
            line = line.replace(one, several)
        out.append(line)
    return out
