"""The project's plan (`ProjectPlanner`): the (variant, Python) attempts, the exact second
pass and the answer; the module's steps 1-4 of `torchfit.planning`.

Each attempt takes the family's plan among the builds that fit and that the sources serve
(`sources.TorchSources.fitting`), then uv's answer for the whole project with torchfit's
constraints (`constraints.Constraints`, `project.UvPasses`); no answer sends the next attempt
to the host's next Python (the interpreter is what fails) or to the next variant. The answer is
the matrix's row for the torch uv chose, with `resolved` exactly uv's set. No attempt solved:
`refusal.explain_refusal`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.compat.companions import Companions, companion_notes, format_sdist_warning
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import FAMILY_PACKAGES, PYPI_SIMPLE, Build, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.provider import Context
from torchfit.compat.request import Request
from torchfit.compat.resolver import resolve
from torchfit.compat.served import restrict_for_all, torch_constraint, variant_of_resolved
from torchfit.compat.wheelonly import Passed, built_note
from torchfit.errors import NoCompatibleSet
from torchfit.lock.platforms import Target, group_refusal
from torchfit.lock.uv import Compiled, classify_failure, explanation, names_family, routed_missing
from torchfit.owned import temp_dir
from torchfit.planning.constraints import Constraints
from torchfit.planning.project import UvPasses, name_of
from torchfit.planning.refusal import (
    check_local_reference,
    cuda_line,
    explain_held,
    explain_refusal,
    judge_failure,
    public,
    refuse_lying_metadata,
    refuse_plain_http,
    wheels_missing,
)
from torchfit.planning.sources import OnSources, TorchSources, family_request
from torchfit.progress import Progress
from torchfit.redact import strip_credentials

if TYPE_CHECKING:
    from torchfit.planning import PlanSettings

# (variant, Python) pairs tried before giving up: each is one uv run.
MAX_ATTEMPTS = 4


def plan_with_sources(hosts: Sequence[HostFacts], request: Request, matrix: Matrix, settings: PlanSettings,
                      progress: Progress) -> Plan:
    """`make_plan` past the fast path: the family alone from a torch source the user named, or a project."""
    torch = TorchSources(hosts, request, matrix, settings, progress)
    if not request.project.others:
        return torch.plan_family()
    return ProjectPlanner(torch).plan()


class ProjectPlanner(OnSources):
    """One project's planning: what each attempt said (`tried`, `uv_said`: for a refusal), the
    family members made direct dependencies, the companions the torch source lacks and the
    releases without a wheel for the host (`misfits`)."""

    def __init__(self, torch: TorchSources) -> None:
        self.torch = torch
        self.passes = UvPasses(torch)
        self.constraints = Constraints(torch, lambda line: self.tried.append(line))
        self.tried: list[str] = []  # what each uv run said, for a refusal
        self.direct: list[str] = []  # family members made direct dependencies (routed to the torch index)
        self.python_failed = False  # the last uv run failed on the interpreter (Requires-Python)
        self.uv_said: list[str] = []  # uv's own explanations, in order
        self.unrouted: set[str] = set()  # companions routed to a torch source that lacks them: left to the others
        self.misfits: dict[str, str] = {}  # releases without a wheel for the host: the host fact -> its hint

    def plan(self) -> Plan:
        """The project's plan (the package's steps 1-4); NoCompatibleSet when no attempt solves."""
        fam = family_request(self.request)
        for r in self.request.project.others:
            check_local_reference(r.text, getattr(r.requirement, "url", None))

        excluded: set[str] = set()
        request = fam
        with temp_dir("resolve") as work:
            for attempt in range(MAX_ATTEMPTS):
                try:
                    first, cut = self.torch.fitting(excluded, request, self.tried)
                except NoCompatibleSet:
                    if not self.tried:
                        raise
                    break  # no other (variant, Python) to try: uv's answers explain it
                builds = self._fitting_builds(request, cut, first)
                got = self._solve(first, builds, work, f"try{attempt}")
                unread = self.settings.torch_given and self.torch.served.get(first.variant) is None \
                    and first.variant not in self.torch.force_read
                if got is not None and (not unread or Version(got[1]).local in (None, first.variant)):
                    compiled, torch = got
                    first, builds, compiled = self._best_variant(request, cut, excluded, first, builds, compiled,
                                                                 Version(Version(torch).public), work)
                    return self._final(first, cut, builds, compiled, _version_of(compiled, "torch") or torch, work)
                if unread:  # read the remote source now: its builds and Pythons decide the retry
                    self.torch.force_read.add(first.variant)
                    self.torch.served.pop(first.variant, None)
                    self.tried = self.tried[:-1] if got is None else self.tried
                    continue
                if self.python_failed:
                    # the interpreter is what fails (Requires-Python): the next Python, same variant
                    python = (request.python or SpecifierSet()) & SpecifierSet(f"!={first.python}.*")
                    # a release the user pinned exactly that declares a Requires-Python: only a Python it
                    # accepts is tried next (vllm==0.10.1.1, <3.13: pyenv's 3.12, not 3.14)
                    for n, v, _ in self.passes.pyfit.get((first.python_version, first.free_threaded), []):
                        rp = self.passes.rp.get((n, v))
                        if rp and self._pinned_exactly(n, v):
                            with contextlib.suppress(InvalidSpecifier):
                                python &= SpecifierSet(rp)
                    request = replace(request, python=python)
                else:
                    excluded.add(first.variant)
            raise self._refusal(fam)

    def _pinned_exactly(self, name: str, version: str) -> bool:
        """Does the user's own requirement or constraint pin `name` to exactly `version`?"""
        for r in (*self.request.project.others, *self.request.project.constraints):
            spec = r.requirement.specifier
            if r.name == name and any(s.operator in ("==", "===") and "*" not in s.version for s in spec) \
                    and spec.contains(version, prereleases=True):
                return True
        return False

    def _best_variant(self, request: Request, cut: Matrix, excluded: set[str], first: Plan,
                      builds: list[Build], compiled: Compiled, torch: Version,
                      work: str) -> tuple[Plan, list[Build], Compiled]:
        """The variants were tried in the order of the newest release; uv chose `torch`, maybe an
        older one, for which the host may prefer another variant (2.8.0 cu128 before cu126 on
        driver 570): that variant, torch pinned, when its source has the build and uv solves."""
        pinned = replace(request, requirements=(*request.requirements, Requirement(f"torch=={torch}")))
        try:
            best = resolve(self.hosts, pinned, replace(cut, builds=tuple(
                b for b in cut.builds if b.variant not in excluded)), check_hints=False)
        except NoCompatibleSet:
            return first, builds, compiled
        if best.variant == first.variant or self.passes.pages:  # a wheel page is of one torch build
            return first, builds, compiled
        self.torch.read_source(best.variant)
        alt_cut = replace(cut, builds=tuple(b for b in cut.builds if b.variant == best.variant))
        alt_builds = self._fitting_builds(request, alt_cut, best)
        constraints = self.constraints.base(best, [b for b in alt_builds if b.torch == torch])
        if not constraints:
            return first, builds, compiled
        if self._same_question(first, best) and _answers(compiled, constraints):
            # One source for both variants, the same Python: uv's answer already holds every
            # constraint of the better variant, so asking again would ask the same question,
            # narrowed to an answer uv already gave (pypi.org's one unlabelled torch per
            # release: 0.7 s of a 1.5 s project resolve, issue 37).
            return best, alt_builds, compiled
        again = self.passes.compile(best, work, f"variant-{best.variant}", constraints, direct=self.direct,
                                    routed=self.passes.routed,
                                    no_build=self.settings.no_build or not self._built(compiled))
        if not again.ok:
            return first, builds, compiled
        return best, alt_builds, again

    def _same_question(self, first: Plan, best: Plan) -> bool:
        """Would uv be asked of the same sources and interpreter for `best` as for `first`?"""
        return (self.settings.sources(best.variant) == self.settings.sources(first.variant)
                and (best.python_version, best.free_threaded) == (first.python_version, first.free_threaded))

    @staticmethod
    def _built(compiled: Compiled) -> bool:
        """Does the answer hold a package built from source (an sdist, no wheel)?"""
        return any(d.needs_build for d in compiled.locked)

    def _fitting_builds(self, request: Request, cut: Matrix, first: Plan) -> list[Build]:
        """The builds of the plan's variant that fit every host with the plan's Python."""
        pinned = replace(request, python=SpecifierSet(f"=={first.python}.*"), free_threaded=first.free_threaded)
        ctx = Context(self.hosts, pinned, cut)
        return [b for b in ctx.ordered if b.variant == first.variant and not ctx.refusals(b)]

    def _solve(self, plan: Plan, builds: Sequence[Build], work: str, name: str) -> tuple[Compiled, str] | None:
        """uv's answer for the project with torch among `builds`; None (and why, in
        `self.tried`) when there is none. Wheels only first; then with builds from source."""
        self.constraints.companion_refused = False
        constraints = self.constraints.base(plan, builds)
        if not constraints and self.constraints.companion_refused:
            return None
        if not constraints:
            self.tried.append(f"{plan.variant}: no build of it that fits this host is served by "
                              f"{self.torch.where(plan.variant)}")
            return None
        routed = self.constraints.routed_first(plan, builds)
        self.passes.routed = routed  # where a release uv finds no wheel for is read from (misfits_of)
        compiled = None
        direct: list[str] = []
        for no_build in [True, False]:
            while True:
                compiled = self.passes.compile(plan, work, f"{name}-{'wheels' if no_build else 'sdists'}-{len(direct)}",
                                               constraints, direct=direct, routed=routed, no_build=no_build)
                # uv routes only direct dependencies to the torch index ([tool.uv.sources]): a
                # companion that came in further down and was not found elsewhere is made direct.
                missing = [n for n in ("torchvision", "torchaudio")
                           if not compiled.ok and n not in direct and re.search(rf"\b{n}\b", compiled.stderr)]
                # A companion routed to the torch index that this torch source lacks (a mirror of the
                # family only): looked for in the user's other sources instead (issue 33, class 9).
                lacking = routed_missing(compiled.stderr, routed) if not compiled.ok else []
                if not missing and not lacking:
                    break
                direct += missing
                routed = [n for n in routed if n not in lacking]
                self.unrouted |= set(lacking)
            if no_build and not compiled.ok and wheels_missing(compiled.stderr):
                compiled = self.passes.from_pages(plan, builds, work, name, direct, routed, self.constraints.companions,
                                                   self.constraints.base) or compiled
            # Builds from source only where wheels alone cannot answer, and never with --no-build.
            if compiled.ok or self.settings.no_build or not wheels_missing(compiled.stderr):
                break
            if no_build:
                self.passes.say_building(compiled, plan)
        assert compiled is not None
        if compiled.ok and (no_build or self.settings.no_build):
            compiled = self.passes.newer_from_source(plan, work, name, constraints, compiled, direct=direct,
                                                     routed=routed)
        self.direct = direct
        self.passes.routed = routed
        if not compiled.ok:
            said = explanation(compiled.stderr)
            kind, _ = classify_failure(compiled.stderr)
            self.misfits.update(self.passes.misfits_of(plan, said))
            misfit = self.passes.pyfit.get((plan.python_version, plan.free_threaded), [])
            if misfit and kind == "no-solution":  # no release of it installs on this interpreter: the next Python
                self.python_failed = True
                self.tried += [m[2] for m in misfit if m[2] not in self.tried]
                self.uv_said.append(said)
                return None
            group = next(((t, why) for t, why, c in self.passes.fleet_refused if c is compiled), None)
            if group is not None:  # one group's platform has no answer the others share
                if not names_family(group[1]):
                    raise self._group_refusal(*group)
                self.tried.append(f"{group[0].label}: {group[1]}")  # torch itself: another variant may serve it
                return None
            # no other (variant, Python) would help: raised; else, is the interpreter what fails?
            self.python_failed = judge_failure(kind, said, compiled.stderr, plan, no_build=self.settings.no_build,
                                               pages_named=self.passes.pages_named(), misfits=self.misfits)
            self.tried.append(f"uv, with torch limited to the {plan.variant} builds that fit this host and "
                              f"that {self.torch.where(plan.variant)} serves ({constraints[0]}) and Python "
                              f"{plan.python_version}: {said}")
            self.uv_said.append(said)
            return None
        torch = next((d.version for d in compiled.locked if d.name == "torch"), None)
        if torch is None:
            return None
        return compiled, str(torch)

    # -- the answer -------------------------------------------------------------------------
    def _final(self, first: Plan, cut: Matrix, builds: Sequence[Build], compiled: Compiled, torch: str,
               work: str) -> Plan:
        companions = self.constraints.companions
        compiled, notes, warnings, routed = self._refine(first, builds, compiled, Version(Version(torch).public),
                                                         companions, work)
        refuse_plain_http(compiled, allow_insecure=self.settings.allow_insecure)
        sources = self.settings.sources(first.variant)
        refuse_lying_metadata(compiled, work, client=lambda: self.torch.client, note=self.progress.warn,
                              indexes=() if sources.offline or sources.no_index else
                              [sources.torch_index, sources.index_url or PYPI_SIMPLE, *sources.extra_index_urls])
        resolved = {d.name: str(d.version) for d in compiled.locked}
        chosen = Version(Version(resolved["torch"]).public)  # the exact pass may have moved it (torchvision)
        # The matrix's row for what uv chose: the resolver again, among that release only.
        # An unlabelled torch (PyPI's, a flat mirror's) is the CUDA its set pins: the wheel's word, not the slot
        # the plan had for it (issue 33: PyPI's 2.6.0 is cu124, never "cu126")
        variant = variant_of_resolved(resolved) or first.variant
        keep = tuple(b for b in cut.builds if b.torch < chosen or (b.torch == chosen and b.variant == variant))

        pinned = replace(self.request, project=replace(self.request.project, requirements=()),
                         requirements=tuple(r for r in self.request.requirements
                                            if canonicalize_name(name_of(str(r))) == "torch"),
                         python=SpecifierSet(f"=={first.python}.*"), free_threaded=first.free_threaded)
        def not_this_variant(conflicts: Sequence[str]) -> NoCompatibleSet:
            return NoCompatibleSet([f"torch {chosen} from {self.torch.where(first.variant)} is a {variant} build (the "
                                    "resolved set pins its CUDA runtime: the wheel's METADATA), not the "
                                    f"{first.variant} build that fits this host", *conflicts],
                                   ["give a torch source whose wheels carry their variant (--torch-index-url "
                                    "https://download.pytorch.org/whl/VARIANT or a mirror of it)"])

        try:
            plan = resolve(self.hosts, pinned, replace(cut, builds=keep))
        except NoCompatibleSet as exc:
            if variant == first.variant:
                raise
            raise not_this_variant(exc.conflicts) from None
        if variant != first.variant and plan.build is not None and Version(plan.build.torch.public) != chosen:
            # An older release's row fitted where the one uv chose does not: the plan would name
            # that release while its resolved set holds uv's wheel (pypi.org's torch on a CPU host:
            # "torch 2.7.1 cpu" over a set holding 2.8.0 and its nvidia-* runtime). Refused.
            raise not_this_variant([f"the {first.variant} build that fits is torch {plan.build.torch}, which "
                                    f"uv did not choose"])
        if plan.variant != first.variant:
            notes = [f"torch {chosen} {plan.variant}: the build {self.torch.where(first.variant)} serves (its METADATA "
                     f"pins the CUDA {plan.cuda} runtime; the wheel carries no variant label)", *notes]
        held = [b for b in builds if b.torch > chosen]
        build = plan.build
        assert build is not None
        comp_reasons, comp_warnings, routed = companion_notes(
            companions, build, first.python,
            [(d.name, Version(str(d.version))) for d in compiled.locked if d.name not in FAMILY_PACKAGES],
            off_torch_index=self.unrouted, torch_index=self.torch.where(first.variant), pages=self.passes.pages)
        here = (first.python_version, first.free_threaded)
        kept_out = [f"{why}; kept out, uv chose again" for _, _, why in self.passes.pyfit.get(here, [])]
        kept_out += [f"passed over: {why}; planned instead: Python {first.python_version}"
                     for key, items in self.passes.pyfit.items() if key != here for _, _, why in items]
        kept = [(line, warn) for p, line, warn in self.passes.kept if resolved.get(p.name) == str(p.chosen)]
        notes = [*dict.fromkeys(self.constraints.held), *kept_out, *notes, *comp_reasons,
                 *_held_companions(companions, compiled, Version(build.torch.public)),
                 *(f"passed over: {line}; planned instead: {first.variant}, Python {first.python}"
                   for line in self.misfits), *(line for line, warn in kept if not warn)]
        warnings = [*warnings, *comp_warnings, *(line for line, warn in kept if warn)]
        sdists = [d for d in compiled.locked if d.needs_build]
        warnings += [_sdist_line(d.name, str(d.version), companions, self.passes.passed.get(d.name)) +
                     (f"; {fact}" if (fact := self.passes.unfit_of(f"{d.name} {d.version}")) else "") for d in sdists]
        culprit = self._held_by(plan, builds, held, work, resolved) if held and self.settings.explain else None
        final = assemble(plan, builds, held, resolved, routed, notes, warnings, request=self.request,
                         where=self.torch.where(plan.variant), read=self.torch.served.get(plan.variant) is not None,
                         culprit=culprit, platforms=self.passes.platforms, pages=self.passes.pages,
                         index_url=strip_credentials(self.settings.sources(plan.variant).torch_index),
                         torch_given=self.settings.torch_given, source_notes=self.torch.notes)
        return replace(final, files=tuple(a.url for d in compiled.locked for a in d.artifacts if a.url))

    def _refine(self, first: Plan, builds: Sequence[Build], compiled: Compiled, torch: Version,
                companions: Companions, work: str) -> tuple[Compiled, list[str], list[str], list[str]]:
        """The exact second pass, where the first needs one (the module's step 3)."""
        resolved = {d.name: d for d in compiled.locked}
        direct = {canonicalize_name(name_of(str(r))) for r in self.request.requirements} | {"torch", *self.direct}
        transitive = [n for n in FAMILY_PACKAGES if n in resolved and n not in direct]
        constraints: list[str] = []  # companions held to the releases built for the chosen torch
        cnotes: list[str] = []
        torch_moves: list[str] = []  # or: torch moved to what a companion's binary needs
        tnotes: list[str] = []
        warnings: list[str] = []
        held_notes: list[str] = []  # companions whose binary needs the very torch uv chose
        python = first.python
        for name, dist in resolved.items():
            comp = companions.get(name)
            if comp is None or name in FAMILY_PACKAGES:
                continue
            fits = companions.releases_for(name, torch=torch, variant=first.variant, python=python)
            known = {r.version for r in comp.releases}
            version = Version(str(dist.version))
            if version not in known or version in {r.version for r in fits}:
                continue
            if fits:
                constraints.append(name + torch_constraint([r.version for r in fits], sorted(known)))
                cnotes.append(f"{name} {version} has no binary for torch {torch} {first.variant} (companions.toml); "
                              f"constrained to the releases that do ({', '.join(str(r.version) for r in fits[:4])})")
            rel = next(r for r in comp.releases if r.version == version)
            if rel.torch is None:
                continue
            if rel.torch.contains(torch, prereleases=True):  # uv chose its torch: said, nothing to move
                held_notes.append(f"{name} {version}: its binary needs torch{rel.torch} (companions.toml, "
                                  f"{rel.source.get('torch', 'measured')}); the torch uv chose")
                continue
            held = [b for b in builds if rel.torch.contains(b.torch, prereleases=True)]
            if held:
                torch_moves.append(f"torch{self.constraints.torch_spec(first, held)}")
                tnotes.append(f"{name} {version}: its binary needs torch{rel.torch} (companions.toml, "
                              f"{rel.source.get('torch', 'measured')}); torch follows it")
        build = first.build
        assert build is not None
        _, _, routed = companion_notes(companions, self.matrix.find_build(str(torch), first.variant) or build,
                                       python, [(n, Version(str(d.version))) for n, d in resolved.items()],
                                       off_torch_index=self.unrouted)
        routed = list(dict.fromkeys([*self.passes.routed, *routed]))
        pins = self.constraints.vision_pairs(first, builds, torch, resolved)
        # The exact passes to try, in order, each with the notes it earns.
        tries: list[tuple[list[str], list[str]]] = [(pin, ["torchvision"]) for pin in pins]
        if not pins:
            if constraints or not torch_moves:
                tries.append(([self.constraints.exact_torch(first, builds, torch), *constraints], cnotes))
            if torch_moves:
                tries.append((torch_moves[:1], tnotes))
        if not (transitive or constraints or torch_moves or set(routed) - set(self.passes.routed) or pins):
            return compiled, held_notes, warnings, routed
        second = None
        for n, (pin, earned) in enumerate(tries):
            second = self.passes.compile_pass(first, work, f"exact-{n}", [*pin, *self.constraints.cuda_exclusions()],
                                              direct=[*self.direct, *transitive, *(["torchvision"] if pins else [])],
                                              routed=routed)
            if second.ok:
                if pins:
                    earned = [f"torchvision {public(_version_of(second, 'torchvision'))}: the build that matches "
                              f"torch {public(_version_of(second, 'torch'))} (data/matrix.toml), from the torch index"]
                return second, [*held_notes, *earned], warnings, routed
        assert second is not None
        warnings += [f"{note}: kept as uv first resolved it; no exact pass found an answer "
                     f"({explanation(second.stderr, 300)})" for note in [*cnotes, *tnotes]]
        if pins:
            warnings.append(f"torchvision {public(str(resolved['torchvision'].version))} is not the build the matrix "
                            f"pairs with torch {torch}, and no pairing the project allows was found: its C++ operators may "
                            "not load (verify checks)")
        return compiled, held_notes, warnings, list(self.passes.routed)

    def _held_by(self, first: Plan, builds: Sequence[Build], held: Sequence[Build], work: str,
                 resolved: dict[str, str]) -> str | None:
        """`--explain`: why no newer build: uv's own explanation with a newer torch asked for
        (the fitting builds of the plan's variant above the chosen one)."""
        newer = [b for b in builds if b.variant == first.variant and b.torch > Version(first.torch)]
        base = self.constraints.base(first, newer) if newer else []
        if not base:
            return None
        probe = self.passes.compile(first, work, "why", [*base, f"torch>{first.torch}"], direct=self.direct,
                                    routed=self.passes.routed, no_build=self.settings.no_build)
        return explain_held(probe, resolved, held, self.constraints.companions,
                            {r.name for r in self.request.project.others})

    # -- no answer ---------------------------------------------------------------------------
    def _refusal(self, fam: Request) -> NoCompatibleSet:
        """No (variant, Python) solved: the first-level reading names the culprit in host terms
        where it can; uv's explanations (with what the sources serve) otherwise. A release
        without a wheel for this host leads with the host fact (compat.wheelfit)."""
        torch = self.torch

        def first_level() -> None:
            resolve(self.hosts, self.request, restrict_for_all(self.matrix, torch.measured(), torch.archs),
                    torch.reader(), self.constraints.companions)

        return explain_refusal(
            self.hosts, self.arch, tried=self.tried, uv_said=self.uv_said, misfits=self.misfits,
            fleet_refused=self.passes.fleet_refused,
            cuda=cuda_line(self.matrix, self.hosts, self.constraints.cuda_exclusions(), self.uv_said),
            first_level=first_level, with_sources=lambda exc: torch.with_sources(exc, self.tried))

    def _group_refusal(self, target: Target, said: str) -> NoCompatibleSet:
        return self.torch.with_sources(NoCompatibleSet(*group_refusal(self.hosts, self.arch, target, said)),
                                       self.tried)


def assemble(plan: Plan, builds: Sequence[Build], held: Sequence[Build], resolved: dict[str, str],
             routed: Sequence[str], notes: Sequence[str], warnings: Sequence[str], *, request: Request, where: str,
             read: bool, culprit: str | None, platforms: Sequence[Target], pages: dict[str, str], index_url: str,
             torch_given: bool, source_notes: Sequence[str]) -> Plan:
    """The plan: the matrix's row for the torch uv chose (`plan`), with uv's set (`resolved`) and
    why: the newest fitting build the project allows (`held`: the newer ones; `culprit`: why
    not, under --explain), read from `where` (`read`: measured) or by uv."""
    torch = plan.torch
    user_pin = str(request.spec("torch"))
    count = len({b.torch for b in builds})
    fit = f"that fit this host and that {where} serves" if read else \
        f"that fit this host (uv read {where} for what it serves)"
    if count == 1:
        fit = fit.replace("that fit", "that fits", 1)
    if held:
        newer = ", ".join(dict.fromkeys(str(b.torch) for b in held))
        why = (f"{_newest(count)} {fit} which the project's dependencies allow "
               f"(uv resolved the whole project; newer: {newer})")
        if culprit:
            why += f"; {culprit}"
        elif user_pin and not any(Version(str(b.torch)) in request.spec("torch") for b in held):
            why = f"within your torch{user_pin} ({_newest(count)} {fit})"
    else:
        why = f"{_newest(count)} {fit}"
        if user_pin:
            why += f", within your torch{user_pin}"
    reasons = [r for r in plan.reasons if not r.startswith(f"torch {torch}:")]
    reasons.insert(0, f"torch {torch}: {why}")
    reasons.append(f"the whole project ({len(resolved)} package{'s' * (len(resolved) != 1)}) resolved by uv in one pass; "
                   f"the torch family from {where} only")
    if len(platforms) > 1:  # a fleet of several architectures: the one set installs on each
        reasons.append("the same set for every group's platform (uv, once per platform): "
                       + "; ".join(t.label for t in platforms))
    reasons += list(notes)
    family = [n for n in FAMILY_PACKAGES if n in resolved]
    ruled = [*plan.ruled_out[: plan.ruled_out_relevant],
             *(f"{b.label}: the project's dependencies need another torch (uv's resolution)" for b in held),
             *plan.ruled_out[plan.ruled_out_relevant:]]
    why_map = dict(plan.why)
    why_map["torch"] = why
    why_map["torchvision"] = "required by the project; resolved by uv from the torch index" \
        if "torchvision" in resolved else "not part of the plan"
    why_map["torchaudio"] = "required by the project; resolved by uv from the torch index" \
        if "torchaudio" in resolved else "not part of the plan"
    why_map["index_url"] = f"the torch source given ({where})" if torch_given \
        else why_map.get("index_url", "")
    return replace(
        plan,
        torchvision=public(resolved.get("torchvision")),
        torchaudio=public(resolved.get("torchaudio")),
        packages=tuple(family),
        index_url=index_url,
        reasons=tuple(dict.fromkeys(reasons)),
        warnings=tuple(dict.fromkeys([*plan.warnings, *warnings, *source_notes])),
        ruled_out=tuple(ruled),
        ruled_out_relevant=plan.ruled_out_relevant + len(held),
        why=why_map,
        project=tuple(r.public_text for r in request.project.others),
        constraints=tuple(r.public_text for r in request.project.constraints),
        resolved=resolved,
        routed=tuple(routed),
        pages=dict(pages),
    )


def _held_companions(companions: Companions, compiled: Compiled, torch: Version) -> list[str]:
    """Why a METADATA-silent companion is not its newest release: the newer ones need another torch."""
    out = []
    for d in compiled.locked:
        newer = companions.newer_for_other_torch(d.name, Version(str(d.version)), torch)
        if newer:
            shown = ", ".join(f"{r.version} needs torch{companions.torch_of(r)}" for r in newer[:3])
            out.append(f"{d.name} {d.version}: the newest release with a binary for torch {torch} "
                       f"(companions.toml; {shown}{', ...' if len(newer) > 3 else ''})")
    return out


def _newest(count: int) -> str:
    return "the one release" if count == 1 else f"the newest of the {count} releases"


def _version_of(compiled: Compiled, name: str) -> str | None:
    return next((str(d.version) for d in compiled.locked if d.name == name), None)


def _sdist_line(name: str, version: str, companions: Companions, passed: Passed | None = None) -> str:
    comp = companions.get(name)
    rel = next((r for r in comp.releases if str(r.version) == version), None) if comp else None
    if rel is not None and rel.sdist_only:
        return format_sdist_warning(rel)
    if passed is not None:  # its newest release, as plain uv takes it; an older one has a wheel
        return (f"{name} {version} has no wheel for this host in your sources: installing it builds it from its "
                f"source distribution (runs its build, needs its compilers){built_note(passed, version)}")
    return (f"{name} {version} has no wheel for this host in your sources: installing it builds it from its "
            "source distribution (runs its build, needs its compilers); `resolve --no-build` refuses instead")


def _answers(compiled: Compiled, constraints: Sequence[str]) -> bool:
    """Does every distribution of uv's answer already satisfy `constraints` (plain requirements
    on names; one with a URL or a marker is not judged here: False)?"""
    for line in constraints:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            return False
        if req.url or req.marker:
            return False
        name = canonicalize_name(req.name)
        for dist in compiled.locked:
            if dist.name == name and (dist.version is None
                                      or not req.specifier.contains(dist.version, prereleases=True)):
                return False
    return True
