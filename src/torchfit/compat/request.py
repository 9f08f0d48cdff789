"""What the user asks for (`Request`) and what the resolver answers (`Plan`).

Both are values: the CLI builds a `Request` from its arguments, the resolver
returns a `Plan`, and `plan_to_json` is the `torchfit resolve --json` contract
(DESIGN.md, "Contracts": keys may be added, never renamed). `Plan` and its JSON
live in `compat.plan`; they are re-exported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet

from torchfit._backports import FROZEN
from torchfit.compat.plan import Plan, plan_from_json, plan_to_json
from torchfit.errors import BadInput

PACKAGES = ("torch", "torchvision", "torchaudio")


def parse_spec(text: str, what: str) -> SpecifierSet:
    """"3.12" -> ==3.12.*, "12" -> ==12.*, ">=3.10,<3.13" as written; BadInput otherwise."""
    text = text.strip()
    if re.match(r"^\d+(\.\d+)*$", text):
        text = f"=={text}.*"
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise BadInput(f"{what} {text!r} is not a version or specifier like >=3.10,<3.13") from None


def parse_requirements(items: Iterable[str]) -> tuple[Requirement, ...]:
    """Positional `torch>=2.4,<2.7` / `torchvision`; only the torch family is resolved."""
    reqs: list[Requirement] = []
    for item in items:
        try:
            req = Requirement(item)
        except InvalidRequirement:
            raise BadInput(f"requirement {item!r} is not like 'torch>=2.4,<2.7'") from None
        name = req.name.lower().replace("_", "-")
        if name not in PACKAGES:
            raise BadInput(
                f"requirement {item!r}: torchfit resolves {', '.join(PACKAGES)}; "
                "install other packages into the env afterwards"
            )
        # torchfit picks the build, the index and the Python itself: a URL, extras or a
        # marker would be dropped without a word, so they are refused instead.
        if req.url:
            raise BadInput(
                f"requirement {item!r}: a direct URL is not resolved by torchfit; give a version "
                "(torch==2.8.0) and, for a mirror, --torch-index-url"
            )
        if req.extras:
            raise BadInput(
                f"requirement {item!r}: extras ({', '.join(sorted(req.extras))}) are not installed by "
                f"torchfit; give {req.name}{req.specifier} and install the extras into the env afterwards"
            )
        if req.marker is not None:
            raise BadInput(
                f"requirement {item!r}: environment markers are not evaluated by torchfit; "
                "use --python/--assume to describe the target instead"
            )
        reqs.append(req)
    return tuple(reqs)


@dataclass(**FROZEN)
class Request:
    """The user's constraints: package requirements, Python, CUDA, variant, strictness."""

    requirements: tuple[Requirement, ...] = ()
    python: SpecifierSet | None = None
    cuda: SpecifierSet | None = None
    variant: str | None = None
    strict_driver: bool = False

    def spec(self, name: str) -> SpecifierSet:
        out = SpecifierSet()
        for r in self.requirements:
            if r.name.lower() == name:
                out &= r.specifier
        return out

    def wants(self, name: str) -> bool:
        return any(r.name.lower() == name for r in self.requirements)

    def describe(self) -> list[str]:
        out = [str(r) for r in self.requirements]
        if self.python:
            out.append(f"--python {self.python}")
        if self.cuda:
            out.append(f"--cuda {self.cuda}")
        if self.variant:
            out.append(f"--variant {self.variant}")
        if self.strict_driver:
            out.append("--strict-driver")
        return out


__all__ = ["PACKAGES", "Plan", "Request", "parse_requirements", "parse_spec", "plan_from_json", "plan_to_json"]
