"""What torchfit tells uv before it solves (`Constraints`, issue 33).

torch limited to exactly the builds that fit the hosts and that the source serves (a
specifier: `torch>=2.12,<=2.15.0,!=2.14.0`), the CUDA packages the driver cannot run kept
out, the companions' binary tables (data/companions.toml, loaded once per planning): a
companion pinned by the user holds torch to what its binary needs, one whose binary for
these builds is the torch index's is routed there; and for the exact pass, torchvision's
pair (data/matrix.toml).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from packaging.version import Version

from torchfit.cache import load_companions
from torchfit.compat.companions import Companions
from torchfit.compat.cudapkgs import cuda_exclusions
from torchfit.compat.matrix import DEFAULT_INDEX, Build
from torchfit.compat.plan import Plan
from torchfit.compat.served import allowed_for_all, torch_constraint
from torchfit.lock.model import LockedDist
from torchfit.planning.sources import OnSources, TorchSources


class Constraints(OnSources):
    """torchfit's facts as uv's constraints, for one planning. `held`: torch narrowed by the
    user's companion pins, said in the plan; a pin that leaves no torch build is said through
    `refuse` (the planner's record of what each attempt said) and sets `companion_refused`."""

    def __init__(self, torch: TorchSources, refuse: Callable[[str], None]) -> None:
        self.torch = torch
        self.refuse = refuse
        self._companions: Companions | None = None
        self.held: list[str] = []  # torch narrowed by the user's companion pins (companions.toml), said
        self.companion_refused = False  # a companion pin left no torch build: said through `refuse`

    @property
    def companions(self) -> Companions:
        """data/companions.toml, loaded once per planning (each load decodes the cached record)."""
        if self._companions is None:
            self._companions = load_companions()
        return self._companions

    def base(self, plan: Plan, builds: Sequence[Build]) -> list[str]:
        """uv's constraints for the project with torch among `builds`: none where no build is left."""
        allowed = allowed_for_all(builds, self.torch.served.get(plan.variant), self.torch.archs)
        if not allowed:
            return []
        companions = self.companions
        allowed = self._held_by_companion_pins(companions, allowed, plan.variant)
        if not allowed:
            return []
        # torchfit's facts enter uv before it solves (issue 33): the companions' binary tables too
        return [f"torch{torch_constraint(allowed, self.torch.present(plan.variant))}", *self.cuda_exclusions(),
                *companions.torch_exclusions(allowed)]

    def _held_by_companion_pins(self, companions: Companions, allowed: list[Version], variant: str) -> list[Version]:
        """A companion the user pins whose METADATA names no torch (torchcodec==0.10.0) holds
        torch to what its binary needs (companions.toml), before uv solves; none left: why, through
        `refuse` (a refusal names both the pin and the builds)."""
        for r in self.request.project.others:
            rels = companions.torch_needed(r.name, r.requirement.specifier)
            if rels is None:
                continue
            needs = [companions.torch_of(rel) for rel in rels]
            kept = [v for v in allowed if any(n is not None and n.contains(Version(v.public), prereleases=True)
                                              for n in needs)]
            srcs = ", ".join(dict.fromkeys(rel.source.get("torch", "inferred") for rel in rels))
            what = "; ".join(dict.fromkeys(f"torch{n}" for n in needs if n is not None))
            if not kept:
                self.refuse(f"{r.text}: its binary needs {what} (companions.toml: {srcs}); the {variant} "
                                  f"torch builds that fit this host and your pins: "
                                  f"{', '.join(str(v) for v in allowed[:6])}")
                self.companion_refused = True
                return []
            if kept != allowed:
                self.held.append(f"torch held to {what} by your {r.text}: its binary needs it and its METADATA "
                                 f"does not say so (companions.toml: {srcs})")
            allowed = kept
        return allowed

    def routed_first(self, plan: Plan, builds: Sequence[Build]) -> list[str]:
        """Direct requirements whose binary for these builds is the torch index's (companions.toml:
        xformers' cuXXX wheels, where PyPI's is another CUDA): routed there from the first pass."""
        companions = self.companions
        out = []
        for r in self.request.project.others:
            comp = companions.get(r.name)
            if comp is None or comp.route != DEFAULT_INDEX:
                continue
            if any(companions.routing(r.name, torch=b.torch, variant=b.variant) for b in builds):
                out.append(comp.name)
        return out

    def cuda_exclusions(self) -> list[str]:
        """Constraints that keep out CUDA packages of a major the driver cannot run."""
        return cuda_exclusions(self.matrix, self.hosts)

    def torch_spec(self, first: Plan, builds: Sequence[Build]) -> str:
        """The specifier admitting exactly `builds` on the plan's source (`torch_constraint`)."""
        allowed = allowed_for_all(builds, self.torch.served.get(first.variant), self.torch.archs)
        return torch_constraint(allowed, self.torch.present(first.variant)) if allowed else "<0"

    def exact_torch(self, first: Plan, builds: Sequence[Build], torch: Version) -> str:
        exact = [v for v in allowed_for_all(builds, self.torch.served.get(first.variant), self.torch.archs)
                 if Version(v.public) == torch]
        return f"torch=={exact[0]}" if exact else f"torch=={torch}"

    def vision_pairs(self, first: Plan, builds: Sequence[Build], torch: Version,
                      resolved: dict[str, LockedDist]) -> list[list[str]]:
        """torchvision's C++ operators load only with the torch they were built against; its
        METADATA says so up to 0.29.0 (torch==X) and no longer after (torch>=X). When uv's
        torchvision is not the matrix's pair of its torch: the pairs to try, the chosen torch's
        first, then the torch whose pair is the torchvision uv chose (a project that pins it)."""
        dist = resolved.get("torchvision")
        if dist is None:
            return []
        vision = Version(Version(str(dist.version)).public)
        pair = {b.torch: b.torchvision for b in builds if b.torchvision}
        if pair.get(torch) is None or Version(pair[torch]) == vision:
            return []
        out = [[self.exact_torch(first, builds, torch), f"torchvision=={pair[torch]}"]]
        back = [t for t, v in pair.items() if Version(v) == vision]
        if back:
            out.append([self.exact_torch(first, builds, max(back)), f"torchvision=={vision}"])
        return out

