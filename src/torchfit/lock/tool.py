"""A lock's `[tool.torchfit]` table: its one reader, its one writer and its builders.

Every lock torchfit writes carries this table: the one `torchfit install` writes beside an
env (`for_install`), a pack's group lock (`installable`), an adopted env's (`for_adopt`), the
lock `torchfit add` rewrites (`with_added`) and the one `torchfit export --format pylock`
writes (`for_export`: the same schema, a plan without hosts). `ToolTable.from_toml` reads
every shape torchfit has written, because locks on disk outlive the code that wrote them:

- schema 1 as install writes it (`torch-index-url`, `plan`, `[[hosts]]`, `nccl`, `expected`);
- a single `[tool.torchfit.host]` table (the accessor's older name; kept as it was);
- `export --format pylock` before this module: no schema, the stack's `torch`, `variant`,
  `python`, `project`, `constraints` as top-level keys, and the torch index as `index-url`
  (the top-level keys are read into `plan`, `index-url` into `torch_index_url`);
- a pack's group lock before this module: that export's keys and schema 1's side by side.

The torch index had two key names (`torch-index-url`, export's `index-url`); it is written
as `torch-index-url` only, and read from either. Keys this torchfit does not know (a newer
torchfit's) are kept in `extra` and written back as they were.

The sub-tables (`plan`, `nccl`, `request`, `expected`, `hosts`, `base`, `added`) are
`Mapping[str, object]`: a lock on disk may hold anything under a key, so each reader checks
what it takes (`strings` for a list of text, `table` for a sub-table, `str()` for a value).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from torchfit._backports import FROZEN
from torchfit.errors import BadInput
from torchfit.redact import redact

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.plan import Plan

TOOL_SCHEMA = 1

# The key the torch index is written under, and the one `export --format pylock` wrote before.
INDEX_KEY = "torch-index-url"
OLD_INDEX_KEY = "index-url"
# An exported lock's own keys before it had a plan: read into the plan.
_OLD_EXPORT_KEYS = ("torch", "variant", "python", "project", "constraints")

# field name -> TOML key, in the order a lock writes them (TOML puts a table's own keys
# before its sub-tables either way).
_KEYS = {
    "schema": "schema", "torchfit_version": "torchfit-version", "created": "created", "installer": "installer",
    "python_version": "python-version", "torch_index_url": INDEX_KEY, "family": "family", "request": "request",
    "rebuilt_from": "rebuilt-from", "sources": "sources", "nccl": "nccl", "expected": "expected", "plan": "plan",
    "host": "host", "hosts": "hosts", "base": "base", "added": "added",
}


class Pin(Protocol):
    """The NCCL pin an env is built with: lock.model.NcclPin (model imports this module)."""

    def to_json(self) -> Mapping[str, object]: ...


def utc_now() -> str:
    """The time a lock records (`created`, an adopted base's `adopted`, an add's `at`): UTC, to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def find_table(doc: object) -> Mapping[str, object]:
    """The `[tool.torchfit]` table of a parsed TOML document as written ({} when it has none)."""
    tool = doc.get("tool") if isinstance(doc, Mapping) else None
    table = tool.get("torchfit") if isinstance(tool, Mapping) else None
    return table if isinstance(table, Mapping) else {}


def strings(value: object) -> list[str]:
    """A list read from the table, each item as text ([] for a key that is missing or not a list)."""
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def table(value: object) -> Mapping[str, object]:
    """A sub-table read from the table ({} for a key that is missing or not a table)."""
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _table(value: object) -> Mapping[str, object] | None:
    return dict(value) if isinstance(value, Mapping) else None


def _tables(value: object) -> tuple[Mapping[str, object], ...] | None:
    return tuple(dict(v) for v in value if isinstance(v, Mapping)) if isinstance(value, list) else None


def _strings(value: object) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, list) else None


@dataclass(**FROZEN)
class ToolTable:
    """`[tool.torchfit]`, key by key. None: the lock does not have the key (nothing is written)."""

    schema: object = None
    """The table's format: TOOL_SCHEMA (1) in every lock install, add, adopt, pack and export write;
    `install --lock` refuses another. None in a lock exported before export wrote the schema."""
    torchfit_version: str | None = None
    """The torchfit that wrote the lock (`torchfit-version`)."""
    created: str | None = None
    """When the lock was written, UTC (`2026-12-02T10:00:00Z`)."""
    installer: str | None = None
    """What installed the env: `uv`, `pip`, or `adopted` (an env torchfit adopted, not built)."""
    python_version: str | None = None
    """The env's Python, its full version as it ran (`python-version`, `3.11.9`)."""
    torch_index_url: str | None = None
    """The torch index the family came from, credentials redacted (`torch-index-url`; read from an
    older export's `index-url` too)."""
    family: tuple[str, ...] | None = None
    """The torch family's package names the env has (torch, torchvision, torchaudio)."""
    request: Mapping[str, object] | None = None
    """The options the plan was resolved with: `args` (the request as words), `strict-driver`."""
    rebuilt_from: str | None = None
    """The lock an `install --lock` rebuilt this env from (`rebuilt-from`)."""
    sources: tuple[str, ...] | None = None
    """Where packages came from, one line each (index.sources.Sources.describe)."""
    nccl: Mapping[str, object] | None = None
    """The NCCL pin the env was built with (lock.model.NcclPin.to_json)."""
    expected: Mapping[str, object] | None = None
    """The runtime versions `torchfit verify` should find (torch, cuda, cudnn, nccl, python)."""
    plan: Mapping[str, object] | None = None
    """`torchfit resolve --json` as recorded (compat.plan.plan_to_json), grown by each add."""
    host: Mapping[str, object] | None = None
    """One host's facts (compat.facts.facts_to_json): an older lock's single `[tool.torchfit.host]`."""
    hosts: tuple[Mapping[str, object], ...] | None = None
    """The facts of the hosts the lock was made for (`[[tool.torchfit.hosts]]`; none in an export)."""
    base: Mapping[str, object] | None = None
    """An adopted env's base (`torchfit adopt`): its family as installed (`family`: name -> version),
    every distribution installed then (`installed`), its site directories, its pip constraints."""
    added: tuple[Mapping[str, object], ...] | None = None
    """Each `torchfit add`, in order: `at`, `requirements`, `sources`, `accepted-base-label`."""
    extra: Mapping[str, object] = field(default_factory=dict)
    """The keys this torchfit does not know (a newer one's), written back as they were."""

    # --- reading -------------------------------------------------------------------------------

    @classmethod
    def from_toml(cls, data: object, where: str,
                  check_url: Callable[[object, str, str], object] | None = None) -> ToolTable:
        """The table of any lock torchfit wrote (see the module docstring), tolerant: a key of the
        wrong type reads as missing. `check_url(value, where, key)` judges each index URL the
        table names (lock.pylock's check: an installer may fetch from it)."""
        raw = data if isinstance(data, Mapping) else {}
        if check_url is not None:
            for key in (INDEX_KEY, OLD_INDEX_KEY):
                if raw.get(key) is not None:
                    check_url(raw[key], f"{where}: [tool.torchfit]", key)
        plan = _table(raw.get("plan"))
        old_export = {k: raw[k] for k in _OLD_EXPORT_KEYS if raw.get(k) is not None}
        if old_export:  # an exported lock's stack: the plan's keys, where the plan lacks them
            plan = {**old_export, **(plan or {})}
        known = set(_KEYS.values()) | {OLD_INDEX_KEY, *_OLD_EXPORT_KEYS}
        return cls(
            schema=raw.get("schema"),
            torchfit_version=_text(raw.get("torchfit-version")),
            created=_text(raw.get("created")),
            installer=_text(raw.get("installer")),
            python_version=_text(raw.get("python-version")),
            torch_index_url=_text(raw.get(INDEX_KEY)) or _text(raw.get(OLD_INDEX_KEY)),
            family=_strings(raw.get("family")),
            request=_table(raw.get("request")),
            rebuilt_from=_text(raw.get("rebuilt-from")),
            sources=_strings(raw.get("sources")),
            nccl=_table(raw.get("nccl")),
            expected=_table(raw.get("expected")),
            plan=plan,
            host=_table(raw.get("host")),
            hosts=_tables(raw.get("hosts")),
            base=_table(raw.get("base")),
            added=_tables(raw.get("added")),
            extra={k: v for k, v in raw.items() if k not in known},
        )

    def to_toml(self) -> dict[str, object]:
        """The table as a lock holds it (keys in writing order; None values are left out by the writer)."""
        out: dict[str, object] = dict(self.extra)
        for name, key in _KEYS.items():
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = [dict(v) if isinstance(v, Mapping) else v for v in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            out[key] = value
        return out

    @property
    def is_current(self) -> bool:
        """Of the schema this torchfit writes (TOOL_SCHEMA) and with a plan: what `install --lock`
        and `add` read."""
        return self.schema == TOOL_SCHEMA and self.plan is not None

    def check_current(self, source: str) -> None:
        """BadInput (one line naming `source`) unless `install --lock` can rebuild from this table."""
        if self == ToolTable():
            raise BadInput(f"{source}: no [tool.torchfit] table: not a lock written by `torchfit install`")
        if self.schema != TOOL_SCHEMA:
            raise BadInput(f"{source}: [tool.torchfit] schema {self.schema!r}; this torchfit reads {TOOL_SCHEMA}")
        if self.plan is None:
            raise BadInput(f"{source}: [tool.torchfit.plan] is missing")

    def accepted_base_labels(self) -> list[str]:
        """Every pin an earlier add accepted on an adopted base's label (`--accept-base-label`)."""
        return [str(x) for h in self.added or () for x in strings(h.get("accepted-base-label"))]

    # --- building ------------------------------------------------------------------------------

    def installable(self, plan: Plan, pin: Pin, torch_index: str | None,
                    hosts: Sequence[HostFacts]) -> ToolTable:
        """This table with what `install --lock` (and `install --pack`) rebuilds an env from and
        checks a host against: the schema, the torch index with its credentials redacted, the
        NCCL pin, the plan, the hosts' facts. A pack's group lock is its export's table so grown."""
        from torchfit.compat.facts import facts_to_json
        from torchfit.compat.plan import plan_to_json

        return replace(self, schema=TOOL_SCHEMA, torch_index_url=redact(torch_index) if torch_index else None,
                       nccl=pin.to_json(), plan=plan_to_json(plan), hosts=tuple(facts_to_json(h) for h in hosts))

    @classmethod
    def for_install(cls, plan: Plan, pin: Pin, torch_index: str | None, hosts: Sequence[HostFacts], *,
                    installer: str, python_version: str | None, family: Sequence[str], args: Sequence[str],
                    strict_driver: bool, rebuilt_from: str | None, sources: Sequence[str],
                    expected: Mapping[str, object]) -> ToolTable:
        """The table `torchfit install` writes: `installable`'s, plus torchfit's version, when, the
        installer, the env's Python, the request, the sources and the versions verify expects."""
        from torchfit import __version__

        return cls(torchfit_version=__version__, created=utc_now(), installer=installer,
                   python_version=python_version, family=tuple(family),
                   request={"args": list(args), "strict-driver": strict_driver}, rebuilt_from=rebuilt_from,
                   sources=tuple(sources), expected=dict(expected)).installable(plan, pin, torch_index, hosts)

    @classmethod
    def for_adopt(cls, *, python: str | None, torch: str, variant: str, family: Mapping[str, str],
                  installed: Mapping[str, str], base: Mapping[str, object], expected: Mapping[str, object],
                  created: str) -> ToolTable:
        """The table `torchfit adopt` writes: no packages are locked; the base (what the env had,
        never replaced) and a plan of its torch as installed, which `torchfit add` grows."""
        from torchfit import __version__

        plan = {"ok": True, "python": ".".join(str(python or "").split(".")[:2]), "python_version": python,
                "torch": torch, "variant": variant, "packages": sorted(family), "project": [], "constraints": [],
                "routed": [], "resolved": dict(sorted(installed.items()))}
        return cls(schema=TOOL_SCHEMA, torchfit_version=__version__, created=created, installer="adopted",
                   python_version=python, family=tuple(sorted(family)), base=dict(base), request={"args": []},
                   expected=dict(expected), plan=plan)

    def with_added(self, plan: Mapping[str, object], requirements: Sequence[str], sources: Sequence[str],
                   accepted_base_label: Sequence[str] = ()) -> ToolTable:
        """The table after a `torchfit add`: its grown plan, and the add appended to `added`."""
        entry: dict[str, object] = {"at": utc_now(), "requirements": list(requirements), "sources": list(sources)}
        if accepted_base_label:
            entry["accepted-base-label"] = list(accepted_base_label)
        return replace(self, plan=dict(plan), added=(*(self.added or ()), entry))

    @classmethod
    def for_export(cls, *, torch: str | None, variant: str | None, python: str | None, torch_index: str | None,
                   project: Sequence[str], constraints: Sequence[str]) -> ToolTable:
        """The table `torchfit export --format pylock` writes: the same schema, a plan of the stack
        (what it was resolved, or the env grown, for), without hosts: `torchfit pack` makes each
        group's installable (`installable`)."""
        from torchfit import __version__

        plan = {"torch": torch or None, "variant": variant or None, "python": python or None,
                "project": list(project) or None, "constraints": list(constraints) or None}
        return cls(schema=TOOL_SCHEMA, torchfit_version=__version__, torch_index_url=torch_index or None, plan=plan)
