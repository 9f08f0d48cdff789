"""What `torchfit add` says when it refuses (issue 36 change 5: out of AddJob, which kept the job):
a package that needs another torch family, a family package asked for, a base whose torch only
differs by its label, a family entry uv would change; and the one command that rebuilds the env
with everything asked for (`rebuild_command`). Values in, AddRefused out; nothing is changed."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.compat.matrix import DEFAULT_INDEX, FAMILY_PACKAGES, PYPI_SIMPLE
from torchfit.errors import AddRefused
from torchfit.index.sources import Sources
from torchfit.lock.model import Lock, LockedDist
from torchfit.lock.tool import strings
from torchfit.progress import Progress
from torchfit.redact import redact, strip_credentials


@dataclass(frozen=True)
class AddRefusals:
    """The refusals of one add: the env at `prefix`, its lock, what was asked (`requirements`)
    and the source options given (`source_args`, for the rebuild command)."""

    prefix: str
    lock: Lock
    requirements: Sequence[Requirement]
    sources: Sources
    observer: Progress
    source_args: Sequence[str] = ()

    def refuse(self, culprits: Sequence[tuple[str, str, str]], family: dict[str, LockedDist], *,
                asked: bool = False, uv_message: str = "") -> None:
        torch = family["torch"]
        if not culprits and not asked:
            self._refuse_unserved(uv_message, family)
        where = f"{self.prefix} is locked to " + ", ".join(f"{d.name} {d.version}" for d in family.values())
        if asked:
            (name, _, req), = culprits
            what = (f"{req} asks for another {name} than the env's" if name in family else
                    f"{req}: this env has no {name}, and a companion's build must match the locked torch")
        elif culprits:
            what = "; ".join(f"{n}{' ' + v if v else ''} requires {r}" for n, v, r in culprits)
        else:
            what = f"uv cannot add it with torch {torch.version} pinned: {uv_reason(uv_message)}"
        message = f"{what}; {where}, and `torchfit add` never replaces the torch family"
        adopted = ("nothing was changed; the adopted base's torch is never replaced (torchfit adopt): pick a "
                   f"release of the package built for torch {torch.version}") if self.base_installed() else None
        raise AddRefused(message, culprits, self.rebuild_command([n for n, _, _ in culprits]),
                         {d.name: d.version or "" for d in family.values()}, hint=adopted)

    def _refuse_unserved(self, uv_message: str, family: dict[str, LockedDist]) -> None:
        """A family package the torch source does not have at all (uv: "torchvision was not found in
        the package registry"): no other torch would help, the source lacks it (issue 35: this was
        "needs another torch")."""
        from torchfit.lock.uv import not_found

        missing = [canonicalize_name(n) for n in not_found(uv_message) if canonicalize_name(n) in FAMILY_PACKAGES]
        if not missing:
            return
        torch = family["torch"]
        names = " or ".join(dict.fromkeys(missing))
        where = redact(strip_credentials(self.sources.torch_index)) or "the torch source"
        command = self.rebuild_command(missing)
        raise AddRefused(
            f"the torch source {where} serves no {names} for torch {torch.version} (uv found none there); "
            "nothing was changed", [(n, "", n) for n in dict.fromkeys(missing)], command,
            {n: d.version or "" for n, d in family.items()},
            hint=f"put {names} for torch {torch.version} on that source, or name one that has it with "
                 f"--torch-index-url (`torchfit docs mirrors`); the env's rebuild, its sources kept: {command}")

    # -- an adopted base (torchfit adopt) ------------------------------------------------------------
    def base_installed(self) -> dict[str, str]:
        """name -> version of every distribution an adopted env had (empty for an env torchfit built)."""
        raw = self.lock.base().get("installed")
        return {canonicalize_name(str(n)): str(v) for n, v in raw.items()} if isinstance(raw, dict) else {}

    def label_only(self, req: str) -> bool:
        """Does a culprit's torch-family requirement refuse the base only for its prerelease/local label?"""
        from torchfit.compat.versions import differs_only_by_label

        try:
            r = Requirement(req)
        except InvalidRequirement:
            return False
        have = next((d.version for d in self.lock.family() if d.name == canonicalize_name(r.name)), None)
        return have is not None and differs_only_by_label(r, have)

    def refuse_label(self, culprits: Sequence[tuple[str, str, str]], family: dict[str, LockedDist], *,
                      asked: bool = False) -> None:
        torch = family["torch"]
        what = "; ".join(f"{r} is asked for" if asked else f"{n}{' ' + v if v else ''} requires {r}"
                         for n, v, r in culprits)
        raise AddRefused(
            f"{what}: the base's torch {torch.version} is that release with a prerelease/local label "
            f"({torch.version} is not =={'.'.join(str(x) for x in Version(torch.version or '0').release)} to pip or uv), the "
            "build the image ships; nothing was changed", culprits, "",
            {d.name: d.version or "" for d in family.values()},
            hint="add it anyway with --accept-base-label (the base's torch stays; the package was built against "
                 "the release, so a compiled extension may not load: verify it)")

    def caveat(self, culprits: Sequence[tuple[str, str, str]], family: dict[str, LockedDist]) -> None:
        names = ", ".join(dict.fromkeys(n for n, _, _ in culprits))
        self.observer.warn(f"--accept-base-label: {names} pinned the release, and gets the base's torch "
                           f"{family['torch'].version}; a package with compiled code built against the release "
                           "may not match its ABI (C++ symbols, CUDA kernels): `torchfit verify --env "
                           f"{shlex.quote(self.prefix)}` and an import of it are the proof")

    def refuse_family_change(self, d: LockedDist, family: dict[str, LockedDist]) -> None:
        have = family.get(d.name)
        if have is None:
            why = (f"the new packages need {d.name}, which this env does not have; torchfit add does not add "
                   f"to the torch family (its build must match torch {family['torch'].version})")
        elif d.version != have.version:
            why = f"uv's answer has {d.name} {d.version} instead of the locked {have.version}"
        else:  # the same version from another file: the index serves another build under that name
            got = ", ".join(a.sha256[:12] for a in d.artifacts if a.sha256) or "no sha256"
            want = ", ".join(a.sha256[:12] for a in have.artifacts if a.sha256) or "no sha256"
            where = redact(strip_credentials(self.sources.torch_index)) or "the torch index"
            why = (f"{where} serves {d.name} {d.version} as another file than the locked one (sha256 {got}..., "
                   f"the lock has {want}...): the same version, another build")
        raise AddRefused(f"{why}; nothing was changed", [(d.name, d.version or "", d.name)],
                         self.rebuild_command([d.name]), {n: x.version or "" for n, x in family.items()})

    def rebuild_command(self, extra_names: Sequence[str] = ()) -> str:
        """`torchfit install --force --prefix PREFIX ...`: the lock's recorded request, the
        family unpinned (the joint resolution picks the build the packages need), the
        project so far and the new requirements."""
        args: list[str] = []
        reqs: list[str] = []
        for item in strings(self.lock.request().get("args")):
            text = str(item)
            if text.startswith("--"):
                flag, _, value = text.partition(" ")
                args += [flag, value] if value else [flag]
                continue
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            name = canonicalize_name(req.name)
            reqs.append(name if name in FAMILY_PACKAGES else text)
        project = strings(self.lock.plan().get("project"))
        asked = [str(r) for r in self.requirements]
        # A family package asked for with a version replaces the recorded bare name.
        asked_family = {canonicalize_name(Requirement(x).name) for x in asked} & set(FAMILY_PACKAGES)
        reqs = [r for r in reqs if r not in asked_family]
        names = {canonicalize_name(Requirement(x).name) for x in [*reqs, *project, *asked] if parses(x)}
        extra = [n for n in extra_names if n in FAMILY_PACKAGES and n not in names]
        words = ["torchfit", "install", "--force", "--prefix", self.prefix, *args, *self.built_sources(),
                 *self.source_args,
                 *dict.fromkeys([*reqs, *extra, *project, *asked])]
        return " ".join(shlex.quote(w) for w in words)


    def built_sources(self) -> list[str]:
        """The source options the env was built with, from its lock's [tool.torchfit] (`torch-index-url`,
        `sources`), less those this add names itself: a rebuild from where the env came (issue 35: the
        command dropped --torch-index-url when it was the plan's). The public defaults are left out."""
        variant = str(self.lock.plan().get("variant") or "")
        given = set(self.source_args)
        out: list[str] = []
        index = strip_credentials(self.lock.torch_index_url()).rstrip("/")
        if index and index != DEFAULT_INDEX.format(variant=variant) and "--torch-index-url" not in given:
            out += ["--torch-index-url", index]
        flags = {"dependencies: index ": "--index-url", "dependencies: extra index ": "--extra-index-url",
                 "dependencies: find-links ": "--find-links"}
        for line in self.lock.tool.sources or ():
            for lead, flag in flags.items():
                url = strip_credentials(line[len(lead):]) if line.startswith(lead) else ""
                if url and "***" not in url and url.rstrip("/") != PYPI_SIMPLE and url not in given \
                        and not (flag == "--index-url" and flag in given):
                    out += [flag, url]
        return out


def parses(text: str) -> bool:
    try:
        Requirement(text)
    except InvalidRequirement:
        return False
    return True


def uv_reason(text: str) -> str:
    """uv's message without its "No solution found" header: the reason, first."""
    text = re.sub(r"^error: No solution found when resolving dependencies:?\s*(cause:)?\s*", "", text.strip())
    return text[:400] or "no output"
