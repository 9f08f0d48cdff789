"""What `torchfit matrix check` found: `Finding`s, the `CheckReport`, and its text form."""

from __future__ import annotations

from dataclasses import dataclass, field

from torchfit._backports import FROZEN
from torchfit.jsontypes import JsonObject
from torchfit.redact import redact

DRIFT, NOTE, ERROR = "drift", "note", "error"


@dataclass(**FROZEN)
class Finding:
    """One disagreement (drift), one fact the index adds (note), or a page that failed (error)."""

    level: str  # drift | note | error
    subject: str  # "torch 2.8.0 cu128", "cu128 index", "index"
    fact: str  # exists|python|platform|glibc|cudnn|nccl|torchvision|torchaudio|release|variant|metadata|page
    message: str
    matrix: str | None = None
    index: str | None = None
    url: str | None = None  # redacted
    line: int | None = None  # the matrix entry (its [[series.variant]] header line)
    series_line: int | None = None
    torch: str | None = None
    variant: str | None = None
    package: str | None = None  # the package the fact is about: torch, torchvision, torchaudio
    version: str | None = None  # that package's version (a companion's own, not torch's)

    @property
    def key(self) -> tuple[str, str | None, str | None, str | None]:
        """The finding's identity across nights (a known-findings file's entry, matrixcheck.known):
        its kind, package, version and variant; never its message, whose wording may change."""
        return (self.fact, self.package, self.version, self.variant)

    def to_json(self) -> JsonObject:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["where"] = f"matrix.toml:{self.line}" if self.line else None
        return out


@dataclass(**FROZEN)
class CheckReport:
    """What one `matrix check` found, and what it read."""

    target: str  # redacted description of the indexes read
    builds: int
    findings: tuple[Finding, ...]
    pages: tuple[str, ...]
    observed: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # (torch, variant) -> pins
    covered: frozenset[tuple[str, str]] = frozenset()  # (package, version) of every build and companion checked
    known: tuple[tuple[Finding, str], ...] = ()  # drift the site's known-findings file accepts, with its reason
    stale: tuple[JsonObject, ...] = ()  # that file's entries the run covered and no longer found

    @property
    def drift(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == DRIFT)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == ERROR)

    @property
    def ok(self) -> bool:
        return not self.drift and not self.errors

    def to_json(self) -> JsonObject:
        return {
            "ok": self.ok,
            "target": self.target,
            "builds_checked": self.builds,
            "drift": len(self.drift),
            "errors": len(self.errors),
            "notes": sum(1 for f in self.findings if f.level == NOTE),
            "findings": [f.to_json() for f in self.findings],
            "known": [{**f.to_json(), "reason": why} for f, why in self.known],
            "stale": list(self.stale),
            "pages": list(self.pages),
        }

def format_report(report: CheckReport, *, notes: bool = True) -> str:
    """The human report: one line per finding, grouped by build, then a summary line."""
    lines = [f"torchfit matrix check: {report.builds} builds against {report.target}"]
    mark = {DRIFT: "DRIFT", NOTE: "note ", ERROR: "ERROR"}
    for f in report.findings:
        if f.level == NOTE and not notes:
            continue
        where = f" (matrix.toml:{f.line})" if f.line else ""
        lines.append(redact(f"  {mark[f.level]} {f.subject}{where}: {f.message}"))
    for f, why in report.known:
        lines.append(redact(f"  known {f.subject}: {f.message} ({why})"))
    for entry in report.stale:
        lines.append(f"  STALE {entry['where']}: {entry['fact']} {entry['package']} {entry['version']} no longer "
                     "occurs; remove it from the known-findings file")
    n_notes = sum(1 for f in report.findings if f.level == NOTE)
    known = f", {len(report.known)} known" if report.known else ""
    if report.ok:
        lines.append(f"ok: the matrix agrees with the index ({len(report.pages)} pages read, {n_notes} notes{known})")
    elif report.drift:
        unread = f", and {len(report.errors)} index errors" if report.errors else ""
        n = len(report.drift)
        lines.append(f"drift: {n} disagreement{'s' if n != 1 else ''}{unread} ({n_notes} notes{known}); "
                     "`torchfit matrix update` proposes the changes as a diff")
    else:
        lines.append(f"incomplete: {len(report.errors)} index errors, no disagreement among the pages read "
                     f"({len(report.pages)} pages)")
    return "\n".join(lines) + "\n"
