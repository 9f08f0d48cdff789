"""What the planner knows of the torch sources (`TorchSources`), read once per planning.

Each variant's torch source is read for the builds it serves (`index.torchsource`), where
reading it can change the answer: a source the user named, local ones always, a remote one
with a project only when uv's answer asks (uv reads the same page). The family's plan is the
resolver's among the builds that fit and that the sources serve (`fitting`); a refusal among
them says what the sources had (`with_sources`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import quote

from packaging.version import InvalidVersion, Version

from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import PYPI_SIMPLE, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.request import Request
from torchfit.compat.resolver import resolve
from torchfit.compat.served import Served, describe_served, restrict_for_all
from torchfit.errors import IndexUnavailable, NoCompatibleSet
from torchfit.index.client import IndexClient
from torchfit.index.pages import format_off_site
from torchfit.index.project import SourcePackages
from torchfit.index.torchsource import local_path, read_torch_source
from torchfit.lock.platforms import bare_groups
from torchfit.progress import Progress
from torchfit.redact import redact, strip_credentials

if TYPE_CHECKING:
    from torchfit.planning import PlanSettings

# Seconds without an answer before a planning read of a torch source gives up (one retry).
PLAN_READ_TIMEOUT = 10.0


def family_request(request: Request) -> Request:
    """The request without the project's packages (its -c constraints kept: they bind the family too)."""
    return replace(request, project=replace(request.project, requirements=()))


class OnSources:
    """Planning's parts that work on one `TorchSources` (`self.torch`): its host facts, request,
    matrix, settings and progress read through it, never copied (one planning's facts, one place)."""

    torch: TorchSources

    @property
    def hosts(self) -> list[HostFacts]:
        return self.torch.hosts

    @property
    def request(self) -> Request:
        return self.torch.request

    @property
    def matrix(self) -> Matrix:
        return self.torch.matrix

    @property
    def settings(self) -> PlanSettings:
        return self.torch.settings

    @property
    def progress(self) -> Progress:
        return self.torch.progress

    @property
    def arch(self) -> str:
        return self.torch.arch


class TorchSources:
    """The torch sources as the planner knows them: `served` (variant -> what its source serves;
    None: not read, the public index the matrix tracks), `force_read` (variants uv's answer asks
    to read), the one index client (a planning read, bounded) and `notes` (a source that could
    not be read). The user's other sources are read through the same client (`reader`)."""

    def __init__(self, hosts: Sequence[HostFacts], request: Request, matrix: Matrix, settings: PlanSettings,
                 progress: Progress) -> None:
        self.hosts = list(hosts)
        self.request = request
        self.matrix = matrix
        self.settings = settings
        self.progress = progress
        self.arch = hosts[0].arch or os.uname().machine
        # every group's architecture (a fleet of x86_64 and aarch64): builds must be served for each
        self.archs = list(dict.fromkeys(h.arch or self.arch for h in hosts))
        # variant -> what its torch source serves; None: not read (the public index, which
        # the matrix tracks: a request of the default source keeps the matrix's word)
        self.served: dict[str, Served | None] = {}
        self._client: IndexClient | None = None
        self._client_lock = threading.Lock()
        self.notes: list[str] = []  # warnings of the planning itself (a source that could not be read)
        self.force_read: set[str] = set()  # variants whose remote source uv's answer asks to read
        self._sources_reader: SourcePackages | None = None

    @property
    def client(self) -> IndexClient:
        with self._client_lock:  # made once, whichever thread asks first (a page read runs beside uv)
            return self._make_client()

    def _make_client(self) -> IndexClient:
        if self._client is None:
            # A planning read, bounded well below install's stall limit: a mirror that does not answer
            # leaves a family-only plan to the matrix (warned) instead of holding the command.
            self._client = IndexClient(progress=self.progress, honor_max_age=True,
                                       allow_insecure=self.settings.allow_insecure,
                                       timeout=min(PLAN_READ_TIMEOUT, self.settings.timeout), retries=1)
        return self._client

    def read_source(self, variant: str) -> Served | None:
        if variant not in self.served:
            where = self.settings.sources(variant).torch_index
            # A remote source with a project is uv's to read (it reads the same page): read here only
            # when uv's answer asks for it (no answer, a build of another variant); local ones cost ms.
            deferred = bool(self.request.project.others) and local_path(where) is None \
                and variant not in self.force_read
            try:
                self.served[variant] = read_torch_source(self.client, where, variant) \
                    if self.settings.torch_given and not deferred else None
                served = self.served[variant]
                if served is not None and served.off_site:
                    self.notes.append(format_off_site(f"the torch source {served.where}", served.off_site))
            except IndexUnavailable as exc:
                if self.request.project.others:
                    raise  # uv must read it anyway: say so now
                # The family alone (an export written on a login node for a mirror it cannot reach):
                # the matrix's plan, said to be unchecked against the source.
                self.served[variant] = None
                self.notes.append(f"the torch source {exc.url} could not be read ({exc.why}): the plan is the "
                                  "matrix's, not checked against what that source serves")
        return self.served[variant]

    def measured(self) -> dict[str, Served]:
        return {v: s for v, s in self.served.items() if s is not None}

    def where(self, variant: str) -> str:
        """The torch source of `variant`, as shown (credentials redacted)."""
        served = self.served.get(variant)
        return served.where if served is not None else redact(self.settings.sources(variant).torch_index)

    def present(self, variant: str) -> list[Version]:
        """What the source lists for `variant`, or (not read) the matrix's releases of it."""
        served = self.served.get(variant)
        if served is not None:
            return sorted({v for a in self.archs for v in served.versions(a)}, reverse=True)
        return sorted({b.torch for b in self.matrix.builds if b.variant == variant}, reverse=True)

    def fitting(self, excluded: set[str], request: Request, tried: Sequence[str] = ()) -> tuple[Plan, Matrix]:
        """The resolver's plan for the family among builds that fit and that the sources
        serve (each variant's source read when the resolver first prefers it); `tried`: what
        each uv run said, for a refusal."""
        while True:
            cut = restrict_for_all(self.matrix, self.measured(), self.archs)
            cut = replace(cut, builds=tuple(b for b in cut.builds if b.variant not in excluded))
            try:
                plan = resolve(self.hosts, request, cut)  # hints checked against the builds that exist
            except NoCompatibleSet as exc:
                raise self.with_sources(exc, tried) from None
            if plan.variant in self.served:
                return plan, cut
            self.read_source(plan.variant)

    def with_sources(self, exc: NoCompatibleSet, tried: Sequence[str] = ()) -> NoCompatibleSet:
        """A refusal among served builds says what the sources had (variants a mirror does not
        hold on one line), then what uv said (`tried`)."""
        measured = self.measured()
        unknown = self._unknown_release()
        if not measured and not tried and not self.settings.torch_given and not unknown:
            return exc
        exc = NoCompatibleSet(exc.conflicts, self._served_hints(exc.hints), exc.remedies)
        measured = self.measured()
        lines = []
        for arch in self.archs:  # a fleet's every architecture: each must be served
            on = f" for {arch}" if len(self.archs) > 1 else ""
            lines += [f"{s.where} ({s.variant}) serves torch{on} {describe_served(s, arch)}"
                      for s in measured.values() if s.for_any(arch)]
            empty = [s.variant for s in measured.values() if not s.for_any(arch)]
            if empty:
                where = {s.where for s in measured.values() if s.variant in empty}
                lines.append(f"no {'/'.join(empty)} torch wheel for {arch} on "
                             f"{', '.join(sorted(where)) if len(where) < 3 else 'the torch source'}")
        lead, fix = bare_groups(self.hosts, self.arch, measured)
        first = [unknown] if unknown else []  # the cause, before what the builds say
        return NoCompatibleSet(list(dict.fromkeys([*lead, *first, *exc.conflicts, *lines, *tried])),
                               [*fix, *exc.hints] or ["give a torch source that holds a build for this host "
                                                      "(--torch-index-url; `torchfit docs mirrors`)"])

    def _unknown_release(self) -> str | None:
        served = {s.where: [Version(v.public) for v in self.present(s.variant)] for s in self.measured().values()}
        return unknown_release(self.request, self.matrix, served)

    def _served_hints(self, hints: Sequence[str]) -> list[str]:
        """The resolver checked its hints against the matrix; with a torch source of the user's,
        a hint whose build that source does not serve is dropped (its variant read to know), and
        a "would fit" names the newest release the source does serve instead (issue 35: "2.15.0
        would fit" from a source holding 2.13.0 only)."""
        if not self.settings.torch_given:
            return list(hints)
        out = []
        for hint in hints:
            fits = re.search(r"torch (\S+) (\S+?) would fit", hint)
            if fits:
                try:
                    served = self.read_source(fits.group(2))
                except IndexUnavailable:
                    served = None
                if served is not None:
                    have = [v for v in sorted({Version(p.public) for p in self.present(fits.group(2))}, reverse=True)
                            if all(served.for_build(v, a) for a in self.archs)]
                    if not have:
                        continue
                    hint = (hint[:fits.start(1)] + str(have[0]) + hint[fits.end(1):]
                            + f" ({served.where} serves it)")
                out.append(hint)
                continue
            m = re.search(r"to get torch (\S+) (\S+?)\b(?![.\d])", hint)
            if m:
                try:
                    version = Version(m.group(1))
                except InvalidVersion:
                    out.append(hint)
                    continue
                try:
                    served = self.read_source(m.group(2))
                except IndexUnavailable:
                    served = None
                if served is not None and not all(served.for_build(version, a) for a in self.archs):
                    continue
            out.append(hint)
        return out

    def plan_family(self) -> Plan:
        """The family alone from a torch source the user named: the resolver's plan among the
        builds that source serves, said to be measured."""
        plan, _ = self.fitting(set(), family_request(self.request))
        return self._finish_family(plan)

    def _finish_family(self, plan: Plan) -> Plan:
        source = self.settings.sources(plan.variant)
        said = [f"torch {plan.torch} {plan.variant}: served by {self.where(plan.variant)} (read from the source: "
                "measured)"] if self.served.get(plan.variant) is not None else []
        return replace(plan, index_url=strip_credentials(source.torch_index), reasons=(*plan.reasons, *said),
                       warnings=tuple(dict.fromkeys([*plan.warnings, *self.notes])))

    def reader(self) -> SourcePackages:
        """The project's packages as the user's sources list them, each page read once."""
        if self._sources_reader is None:
            sources = self.settings.sources("cpu")
            indexes = [] if sources.no_index else [sources.index_url or PYPI_SIMPLE, *sources.extra_index_urls]
            self._sources_reader = SourcePackages(self.client, indexes, list(sources.find_links), self.arch)
        return self._sources_reader


def unknown_release(request: Request, matrix: Matrix, served: Mapping[str, Sequence[Version]]) -> str | None:
    """A refusal's line when the user pins torch to a release that does not exist (`torch==2.99`):
    in no row of the matrix, and in none of the `served` lists (source -> its public versions)
    that were read (issue 35: the refusal said only "outside torch==2.99")."""
    pins = [sp.version for sp in request.spec("torch") if sp.operator in ("==", "===") and "*" not in sp.version]
    if len(pins) != 1:
        return None
    try:
        pin = Version(Version(pins[0]).public)
    except InvalidVersion:
        return None
    if any(b.torch == pin for b in matrix.builds) or any(pin in vs for vs in served.values()):
        return None
    newest = max((b.torch for b in matrix.builds), default=None)
    said = "".join(f"; {where} serves up to {max(vs)}" for where, vs in served.items() if vs)
    return f"torch=={pins[0]}: no such torch release is known (data/matrix.toml lists releases up to {newest}{said})"


def as_url(location: str) -> str:
    """A torch source for uv: a plain path becomes a file:// URL."""
    if "://" in location:
        return location
    return "file://" + quote(os.path.abspath(location))

