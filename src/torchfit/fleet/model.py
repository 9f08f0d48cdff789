"""A fleet: every node's facts, grouped by hardware signature, as one file (pure).

`torchfit detect --slurm` writes it (fleet.gather); `resolve/install/export --facts
FLEET.json` read it. Nodes whose facts agree on what decides a stack (the GPU models,
their compute capabilities and count, the driver, glibc, CPU arch, OS) form one group,
written once with its nodes in Slurm's hostlist notation, so a resolve judges 12
groups, not 2,000 nodes, and its reasons name groups ("gpu[07-09]"). A node that
gave no facts is kept in `missing` with why; it is never dropped. The file:

    {"torchfit_fleet": 1, "source": "...", "gathered_at": "...",
     "groups": [{"nodes": "gpu[01-16]", "count": 16, "signature": "...",
                 "facts": {... torchfit detect --json of the group's first node ...}}],
     "missing": [{"nodes": "gpu20", "why": "Slurm state drained (reason: ...)"}]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.facts import HostFacts, facts_from_json
from torchfit.compat.judgements import describe_gpus
from torchfit.errors import BadInput, FleetNodesUnknown
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist
from torchfit.jsontypes import JsonObject

FORMAT = 1
KEY = "torchfit_fleet"
# "schema": the key every --json object of the CLI carries (docs/schemas/fleet.schema.json)
_TOP_KEYS = frozenset((KEY, "schema", "source", "gathered_at", "groups", "missing"))


@dataclass(**FROZEN)
class Group:
    """Nodes with one hardware signature and the facts of the first of them."""

    nodes: tuple[str, ...]
    signature: str
    facts: Mapping[str, Any]
    # `facts` as read once (fleet_from_json validates them): fleet_hosts need not read them again.
    host: HostFacts | None = field(default=None, compare=False, repr=False)

    @property
    def hostlist(self) -> str:
        return compress_hostlist(self.nodes)


@dataclass(**FROZEN)
class Missing:
    """Nodes that gave no facts, and why (no answer in time, drained, torchfit absent)."""

    nodes: tuple[str, ...]
    why: str

    @property
    def hostlist(self) -> str:
        return compress_hostlist(self.nodes)


@dataclass(**FROZEN)
class Fleet:
    groups: tuple[Group, ...]
    missing: tuple[Missing, ...] = ()
    source: str = ""
    gathered_at: str = ""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(n for g in self.groups for n in g.nodes)


def signature(host: HostFacts) -> str:
    """What decides a stack on a node, in words: "2x NVIDIA H200 (sm_90), driver 580.159.04,
    glibc 2.39, x86_64, ubuntu:24.04". Nodes with the same text form one group."""
    if host.gpus:
        gpus = describe_gpus(host.gpus)
    elif host.nvidia_failure:
        gpus = f"GPUs unknown ({host.nvidia_failure})"
    else:
        gpus = "no GPU"
    parts = [gpus]
    if host.nvidia_gpus or host.nvidia_failure:
        parts.append(f"driver {host.driver_version or 'unknown'}")
    if host.rocm_version:
        parts.append(f"ROCm {host.rocm_version}")
    parts += [f"glibc {host.glibc or 'unknown'}", host.arch or "arch unknown", host.os or "OS unknown"]
    return ", ".join(parts)


def group_nodes(facts: Mapping[str, Mapping[str, Any]], missing: Iterable[Missing] = (),
                *, source: str = "", gathered_at: str = "") -> Fleet:
    """Each node's `detect --json` object -> a Fleet (groups in the order of their first
    node, nodes sorted). A node whose object is not valid facts becomes `missing`."""
    by_sig: dict[str, list[str]] = {}
    first: dict[str, Mapping[str, Any]] = {}
    lost = list(missing)
    for node in sorted(facts, key=_node_key):
        try:
            host = facts_from_json(facts[node], node)
        except BadInput as exc:
            lost.append(Missing((node,), f"its facts are not valid: {exc.message}"))
            continue
        sig = signature(host)
        by_sig.setdefault(sig, []).append(node)
        first.setdefault(sig, facts[node])
    groups = tuple(Group(tuple(nodes), sig, first[sig]) for sig, nodes in by_sig.items())
    return Fleet(groups, _merge_missing(lost), source, gathered_at)


def _node_key(name: str) -> tuple[Any, ...]:
    from torchfit.fleet.hostlist import _key

    return _key(name)


def _merge_missing(items: Iterable[Missing]) -> tuple[Missing, ...]:
    by_why: dict[str, list[str]] = {}
    for m in items:
        by_why.setdefault(m.why, []).extend(m.nodes)
    return tuple(Missing(tuple(sorted(set(n), key=_node_key)), why) for why, n in by_why.items())


def fleet_to_json(fleet: Fleet) -> JsonObject:
    return {
        KEY: FORMAT,
        "source": fleet.source,
        "gathered_at": fleet.gathered_at,
        "groups": [
            {"nodes": g.hostlist, "count": len(g.nodes), "signature": g.signature, "facts": dict(g.facts)}
            for g in fleet.groups
        ],
        "missing": [{"nodes": m.hostlist, "why": m.why} for m in fleet.missing],
    }


def is_fleet_json(data: object) -> bool:
    return isinstance(data, dict) and KEY in data


def fleet_from_json(data: Any, source: str) -> Fleet:
    """A fleet file's object -> Fleet; BadInput (one line, the file named) when malformed."""
    if not isinstance(data, dict) or data.get(KEY) != FORMAT:
        raise BadInput(f"{source}: not a torchfit fleet file (format {FORMAT})")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise BadInput(f"{source}: unknown key {unknown[0][:40]!r} in a fleet file")
    groups_raw, missing_raw = data.get("groups"), data.get("missing") or []
    if not isinstance(groups_raw, list) or not isinstance(missing_raw, list):
        raise BadInput(f"{source}: 'groups' and 'missing' must be lists")
    seen: set[str] = set()
    groups = []
    for i, g in enumerate(groups_raw):
        where = f"{source}: groups[{i}]"
        if not isinstance(g, dict) or not isinstance(g.get("nodes"), str) or not isinstance(g.get("facts"), dict):
            raise BadInput(f"{where}: needs 'nodes' (a hostlist) and 'facts' (a detect --json object)")
        nodes = _take(_named(g["nodes"], where), seen, where)
        host = facts_from_json(g["facts"], where)  # validated once per group
        groups.append(Group(tuple(nodes), signature(host), g["facts"], host))
    missing = []
    for i, m in enumerate(missing_raw):
        where = f"{source}: missing[{i}]"
        if not isinstance(m, dict) or not isinstance(m.get("nodes"), str) or not isinstance(m.get("why"), str):
            raise BadInput(f"{where}: needs 'nodes' (a hostlist) and 'why'")
        missing.append(Missing(tuple(_take(_named(m["nodes"], where), seen, where)), m["why"]))
    if not groups and not missing:
        raise BadInput(f"{source}: a fleet file with no nodes")
    return Fleet(tuple(groups), tuple(missing), str(data.get("source") or ""), str(data.get("gathered_at") or ""))


def _named(hostlist: str, where: str) -> list[str]:
    """The nodes of an entry's 'nodes'; BadInput when it names none (a group of no node
    would be resolved for and written to a plan as if it were a host)."""
    nodes = expand_hostlist(hostlist)
    if not nodes:
        raise BadInput(f"{where}: 'nodes' names no node; give the group's hostlist")
    return nodes


def _take(nodes: list[str], seen: set[str], where: str) -> list[str]:
    twice = [n for n in nodes if n in seen]
    if twice:
        raise BadInput(f"{where}: node {twice[0]} is listed twice in the fleet file")
    seen.update(nodes)
    return nodes


def exclude_nodes(fleet: Fleet, exclude: Sequence[str]) -> Fleet:
    """The fleet without the nodes of the hostlists in `exclude`; BadInput for a node the
    fleet does not have (a typo must not silently exclude nothing)."""
    drop: set[str] = set()
    for text in exclude:
        drop.update(expand_hostlist(text))
    known = set(fleet.nodes) | {n for m in fleet.missing for n in m.nodes}
    stray = sorted(drop - known, key=_node_key)
    if stray:
        raise BadInput(f"--exclude {compress_hostlist(stray)}: not in the fleet")
    groups = tuple(
        replace(g, nodes=kept) for g in fleet.groups if (kept := tuple(n for n in g.nodes if n not in drop))
    )
    missing = tuple(
        replace(m, nodes=kept) for m in fleet.missing if (kept := tuple(n for n in m.nodes if n not in drop))
    )
    if not groups:
        raise BadInput("--exclude leaves no node of the fleet with facts to resolve for")
    return replace(fleet, groups=groups, missing=missing)


def fleet_hosts(fleet: Fleet, source: str) -> list[HostFacts]:
    """One HostFacts per group, named by its hostlist ("gpu[07-09]"), for the resolver.

    A node without facts is refused by name (the rule of single hosts: its GPUs are
    unknown, and a stack is never picked as if it had none); `--exclude` leaves it out.
    """
    if fleet.missing:
        m = fleet.missing[0]
        raise FleetNodesUnknown(
            m.hostlist,
            m.why,
            f"gather it again (`torchfit detect --slurm --nodelist {m.hostlist}`) once it answers, "
            f"or leave it out: `--exclude {m.hostlist}`",
        )
    hosts = []
    for g in fleet.groups:
        host = g.host if g.host is not None else facts_from_json(g.facts, g.hostlist)
        hosts.append(replace(host, name=g.hostlist, source=f"fleet: {source}, {len(g.nodes)} node(s)"))
    return hosts
