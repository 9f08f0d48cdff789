"""The findings a site accepts: `matrix check --known FILE`.

A known-findings file is TOML, a list of `[[finding]]` tables, each naming one finding by
its identity across nights (`report.Finding.key`): `fact` (the finding's kind: python,
glibc, torchvision, release, ...), `package`, `version` and, optionally, `variant` (left
out: any variant), with the `reason` it is accepted (required) and, as any fact torchfit
keeps, its `source` and `evidence` (optional). Known drift is reported as known and does
not fail the check; new drift still does; an entry the run covered (its package and version
among the builds and companions checked) that no longer occurs is reported stale, so the
file stays true. An index error is never known: an unread page is no answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from torchfit._backports import FROZEN
from torchfit.errors import BadInput
from torchfit.jsontypes import JsonObject
from torchfit.matrixcheck.report import DRIFT, CheckReport, Finding

MAX_KNOWN_BYTES = 1 << 20
_KEYS = {"fact", "package", "version", "variant", "reason", "source", "evidence"}


@dataclass(**FROZEN)
class KnownFinding:
    """One accepted finding, and where in its file it is (`known[3]`)."""

    fact: str
    package: str
    version: str
    variant: str | None
    reason: str
    where: str

    def matches(self, finding: Finding) -> bool:
        fact, package, version, variant = finding.key
        return (fact, package, version) == (self.fact, self.package, self.version) and (
            self.variant is None or variant == self.variant)

    def to_json(self) -> JsonObject:
        return {"fact": self.fact, "package": self.package, "version": self.version,
                "variant": self.variant, "reason": self.reason, "where": self.where}


def parse_known(data: Mapping[str, object], name: str) -> tuple[KnownFinding, ...]:
    """The entries of a known-findings file's parsed TOML; BadInput (`NAME: finding[i]: ...`) for
    a table that is not one, an unknown or missing key, or a value that is not a string."""
    entries = data.get("finding", [])
    extra = sorted(set(data) - {"finding"})
    if extra:
        raise BadInput(f"{name}: unknown key {extra[0]!r} (a known-findings file holds [[finding]] tables)")
    if not isinstance(entries, list):
        raise BadInput(f"{name}: finding must be a list of tables ([[finding]])")
    out: list[KnownFinding] = []
    for i, entry in enumerate(entries):
        where = f"{name}: finding[{i}]"
        if not isinstance(entry, dict):
            raise BadInput(f"{where}: not a table")
        unknown = sorted(set(entry) - _KEYS)
        if unknown:
            raise BadInput(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
        for key in ("fact", "package", "version", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise BadInput(f"{where}: {key} must be a non-empty string (a known finding says why it is accepted)"
                               if key == "reason" else f"{where}: {key} must be a non-empty string")
        variant = entry.get("variant")
        if variant is not None and (not isinstance(variant, str) or not variant):
            raise BadInput(f"{where}: variant must be a non-empty string (leave it out for any variant)")
        out.append(KnownFinding(entry["fact"], entry["package"], entry["version"], variant, entry["reason"],
                                f"{name}:finding[{i}]"))
    return tuple(out)


def load_known(path: str) -> tuple[KnownFinding, ...]:
    """A known-findings file (`--known FILE`): read bounded, parsed, checked; BadInput otherwise."""
    from torchfit.inputs import loads_toml, read_text_file, shown

    return parse_known(loads_toml(read_text_file(path, "--known", limit=MAX_KNOWN_BYTES), shown(path)), shown(path))


def apply_known(report: CheckReport, known: tuple[KnownFinding, ...]) -> CheckReport:
    """`report` with the drift `known` accepts moved to `known` (with its reason), and the entries
    the run covered and did not find listed as stale."""
    kept: list[Finding] = []
    accepted: list[tuple[Finding, str]] = []
    used: set[int] = set()
    for f in report.findings:
        hit = next((i for i, k in enumerate(known) if f.level == DRIFT and k.matches(f)), None)
        if hit is None:
            kept.append(f)
        else:
            used.add(hit)
            accepted.append((f, known[hit].reason))
    stale = tuple(k.to_json() for i, k in enumerate(known)
                  if i not in used and (k.package, k.version) in report.covered)
    return replace(report, findings=tuple(kept), known=tuple(accepted), stale=stale)


__all__ = ["KnownFinding", "apply_known", "load_known", "parse_known"]
