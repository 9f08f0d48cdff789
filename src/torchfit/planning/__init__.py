"""Plan a request: the one planning step `resolve`, `install` and `export` share (issue 24).

Two kinds of knowledge meet here, each from where it is true:

- **what fits** is the matrix's and the host's (`compat.resolver.resolve`: drivers,
  arch lists, glibc, Pythons with wheels);
- **what exists** is the sources': the torch source is read for the builds it serves
  (`index.torchsource`, cut into the matrix by `compat.served.restrict_matrix`), and
  everything else is uv's to find, once, for the whole graph.

So a request with a project (or a torch source the user named) is planned in steps:

1. the torch builds that fit the hosts *and* that the source serves: the family alone
   through the resolver, which gives the preferred variant and Python;
2. **one solver for the graph**: `uv pip compile` of the whole project with torch
   constrained to exactly those builds (a specifier: `torch>=2.12,<=2.15.0,!=2.14.0`),
   the family routed to the torch index as direct dependencies, the CUDA packages the
   driver cannot run excluded, wheels only (`--no-build`) first, then (still before any build)
   a project's own wheel page for a fitting torch release (PyG's: `lock.pages`). uv chooses torch: a pin
   two levels down holds it where it must be. Once per (variant, Python) in preference
   order, stopping at the first that solves (usually the first);
3. a second, exact pass only where the first needs it: a family member that came in
   transitively (routed now as a direct dependency), a companion (companions.toml) whose
   resolved release has no binary for the chosen torch (constrained to those that do),
   a companion whose binary for this build is the torch index's (routed there);
4. the plan is the matrix's row for the torch uv chose, with `resolved` exactly uv's set:
   what resolve prints is what install installs, the lock records and export writes.

A request of the torch family alone against the public index keeps the fast path: the
matrix alone, no network (the matrix tracks that index).

When uv finds no answer, the old first-level reading explains it in host terms where it
can (`compat.resolver.resolve` with the project's METADATA: the culprit package, its
torch pin and the host fact that rules out each build it needs); otherwise uv's own
explanation is shown, with the builds that fit this host and that the source serves. A
release uv finds no wheel for leads with the host fact that rules its wheels out
(`compat.wheelfit`: glibc, Python ABI, machine), before uv's words; one without a wheel
for the Python tried sends the plan to the host's next Python. A source that cannot be
reached is `index-unavailable`, never "no compatible set".

The package, by object (architecture review 4, change 6):

- here: `PlanSettings`, `make_plan` and the fast path (a family-only resolve loads nothing
  more than this module and the resolver);
- `sources.TorchSources`: what the planner knows of the torch sources (what each variant's
  source serves, read once; the index client; the notes of a source that could not be read);
- `constraints.Constraints`: what torchfit tells uv before it solves (torch limited to the
  builds that fit, CUDA packages kept out, companions' binary tables, routing, torchvision's pair);
- `project.UvPasses`: uv's passes over the project (one compile judged against the exact
  interpreter, the project's own wheel pages, wheels-only then builds, a newer release from source);
- `planner.ProjectPlanner`: the (variant, Python) attempts, the exact second pass and the answer;
- `refusal`: the refusals and explanations, as functions of values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.request import Request
from torchfit.errors import NoCompatibleSet
from torchfit.progress import Progress

if TYPE_CHECKING:
    from torchfit.index.sources import Sources


@dataclass(frozen=True)
class PlanSettings:
    """What the command line decided (cli/settings.py), as values.

    `sources(variant)`: the install's sources with that variant's torch index;
    `torch_given`: the user named the torch source (flag, environment, a lock), so it is
    read even for a request of the family alone.
    """

    sources: Callable[[str], Sources]
    torch_given: bool = False
    allow_insecure: bool = False
    timeout: float = 600.0
    explain: bool = False
    no_build: bool = False


def make_plan(hosts: Sequence[HostFacts], request: Request, matrix: Matrix, settings: PlanSettings, *,
              progress: Progress | None = None) -> Plan:
    """The plan for `request` on `hosts`: NoCompatibleSet, IndexUnavailable or BadInput if none."""
    # Both imports here, not at the top: a family-only resolve loads the resolver and nothing of
    # the planner (cli/settings.py imports PlanSettings for commands that may never plan).
    from torchfit.compat.resolver import resolve

    if not request.project.others and not settings.torch_given:
        try:
            return resolve(hosts, request, matrix)
        except NoCompatibleSet as exc:
            from torchfit.planning.sources import unknown_release

            line = unknown_release(request, matrix, {})
            if line is None:
                raise
            raise NoCompatibleSet([line, *exc.conflicts], exc.hints, exc.remedies) from None
    from torchfit.planning.planner import plan_with_sources

    return plan_with_sources(hosts, request, matrix, settings, progress or Progress())
