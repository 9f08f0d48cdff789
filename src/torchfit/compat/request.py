"""What the user asks for: `Request`, and the parsers of its requirement strings.

A value: the CLI builds a `Request` from its arguments and the resolver answers it
with a `compat.plan.Plan` (whose JSON, `plan_to_json`, is the `torchfit resolve
--json` contract: docs/architecture.md, "Contracts").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.compat.project import ProjectReq, ProjectSpec, parse_requirement
from torchfit.errors import BadInput

if TYPE_CHECKING:
    from packaging.requirements import Requirement



@dataclass(**FROZEN)
class PlainRequirement:
    """`name` and version specifiers only: what `torch==2.8.0` means, read without a parser.

    packaging.requirements (markers, tags, platform, logging) costs ~10 ms to
    import; the plain form needs none of it. Anything beyond a name and
    comma-separated specifiers goes through `packaging.requirements.Requirement`.
    Both read a plain requirement the same way (a test fuzzes that).
    """

    name: str
    specifier: SpecifierSet
    url: None = None
    extras: frozenset[str] = field(default_factory=frozenset)
    marker: None = None

    def __str__(self) -> str:
        return f"{self.name}{self.specifier}"


AnyRequirement = Union["Requirement", PlainRequirement]

# A PEP 508 name, then specifiers separated by commas; no extras, URL, marker or
# parentheses. SpecifierSet checks each specifier.
_OP = r"(?:~=|===|==|!=|<=|>=|<|>)"
_VERSION_TOKEN = r"[^\s,;@()\[\]]+"
_PLAIN = re.compile(  # spaces and tabs only: PEP 508 whitespace (packaging refuses "\r")
    rf"[ \t]*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)[ \t]*"
    rf"({_OP}[ \t]*{_VERSION_TOKEN}[ \t]*(?:,[ \t]*{_OP}[ \t]*{_VERSION_TOKEN}[ \t]*)*)?"
)


def parse_plain_requirement(text: str) -> PlainRequirement | None:
    """`torch>=2.4,<2.7` as a PlainRequirement; None for anything else (and any invalid specifier)."""
    m = _PLAIN.fullmatch(text)
    if not m:
        return None
    try:
        return PlainRequirement(m.group(1), SpecifierSet(m.group(2) or ""))
    except InvalidSpecifier:
        return None


def parse_spec(text: str, what: str) -> SpecifierSet:
    """"3.12" -> ==3.12.*, "12" -> ==12.*, ">=3.10,<3.13" as written; BadInput otherwise."""
    text = text.strip()
    if re.match(r"^\d+(\.\d+)*$", text):
        text = f"=={text}.*"
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise BadInput(f"{what} {text!r} is not a version or specifier like >=3.10,<3.13") from None


def parse_python_spec(text: str) -> tuple[SpecifierSet, bool | None]:
    """--python: "3.13t" -> (==3.13.*, True): a free-threaded interpreter; else (spec, None)."""
    text = text.strip()
    if re.match(r"^\d+\.\d+(\.\d+)?t$", text):
        return parse_spec(text[:-1], "--python"), True
    return parse_spec(text, "--python"), None


def parse_requirements(items: Iterable[str]) -> tuple[AnyRequirement, ...]:
    """Positional requirements of the torch family (`torch>=2.4,<2.7`, `torchvision`)."""
    family, others = split_requirements(items)
    if others:
        first = others[0]
        raise BadInput(f"requirement {first.text!r}: only torch, torchvision and torchaudio are taken here")
    return family


def split_requirements(items: Iterable[str]) -> tuple[tuple[AnyRequirement, ...], tuple[ProjectReq, ...]]:
    """Positional REQs: the torch family's (whose build torchfit picks) and the project's others.

    A family requirement may not carry a URL, extras or a marker: torchfit picks the
    build, the index and the Python itself, and would drop them without a word. Any
    other PEP 508 requirement is the project's, resolved with the family by uv.
    """
    family: list[AnyRequirement] = []
    others: list[ProjectReq] = []
    for item in items:
        req: AnyRequirement | None = parse_plain_requirement(item)
        if req is None:
            from packaging.requirements import InvalidRequirement, Requirement

            try:
                req = Requirement(item)
            except InvalidRequirement:
                raise BadInput(f"requirement {item!r} is not a PEP 508 requirement like 'torch>=2.4,<2.7' "
                               "or 'vllm==0.10.2'") from None
        name = req.name.lower().replace("_", "-").replace(".", "-")
        if name not in FAMILY_PACKAGES:
            others.append(parse_requirement(item, "command line"))
            continue
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
        family.append(req)
    return tuple(family), tuple(others)


def split_local_labels(requirements: Iterable[AnyRequirement], constraints: Iterable[ProjectReq],
                       variant: str | None, variants: Iterable[str]) -> tuple[
                           tuple[AnyRequirement, ...], tuple[ProjectReq, ...], str | None]:
    """PyTorch's own spelling of a family pin: `torch==2.7.1+cu126` (its install pages write
    `torch==2.7.1+cu126 torchaudio==2.7.1+cu126`) is release 2.7.1 of the cu126 variant.

    The local label selects the variant (as `--variant cu126` would) and the pin keeps the
    release (`torch==2.7.1`), so the resolver matches the matrix's builds and uv the index's
    files `2.7.1+cu126`. Labels that disagree with each other or with `--variant`, or name no
    variant of the matrix, are BadInput naming both. Other packages' pins are left as written.
    """
    known = set(variants)
    labels: dict[str, str] = {}  # label -> the requirement that carries it
    if variant:
        labels[variant] = f"--variant {variant}"

    def strip(req: AnyRequirement, shown: str) -> AnyRequirement:
        specs = list(req.specifier)
        local = [s for s in specs if s.operator in ("==", "===") and "+" in s.version]
        if not local:
            return req
        for s in local:
            label = s.version.split("+", 1)[1].lower()
            if label not in known:
                raise BadInput(f"{shown}: local label +{label} names no variant torchfit knows "
                               "(e.g. +cu126, +cpu, +rocm6.4)")
            other = next((w for lb, w in labels.items() if lb != label), None)
            if other is not None:
                raise BadInput(f"{shown} asks for the {label} build and {other} for another: give one variant")
            labels.setdefault(label, shown)
        kept = [s for s in specs if s not in local] + [
            Specifier(f"{s.operator}{s.version.split('+', 1)[0]}") for s in local]
        spec = SpecifierSet(",".join(str(s) for s in kept))
        if isinstance(req, PlainRequirement):
            return PlainRequirement(req.name, spec)
        from packaging.requirements import Requirement

        out = Requirement(str(req))
        out.specifier = spec
        return out

    reqs = tuple(strip(r, str(r)) for r in requirements)
    cons = []
    for c in constraints:
        if not c.is_family:
            cons.append(c)
            continue
        new = strip(c.requirement, f"{c.origin}: {c.text}")
        cons.append(c if new is c.requirement else ProjectReq(new, c.origin))  # type: ignore[arg-type]
    chosen = next((lb for lb in labels if labels[lb] != f"--variant {variant}"), None) or variant
    return reqs, tuple(cons), chosen


@dataclass(**FROZEN)
class Request:
    """The user's constraints: package requirements, Python, CUDA, variant, strictness."""

    requirements: tuple[AnyRequirement, ...] = ()
    python: SpecifierSet | None = None
    cuda: SpecifierSet | None = None
    variant: str | None = None
    strict_driver: bool = False
    # --python 3.13t: only a free-threaded interpreter (True); None: either kind.
    free_threaded: bool | None = None
    # The project's own requirements (not the family's), its -c constraints, and the
    # index options its files carry (compat.project).
    project: ProjectSpec = field(default_factory=ProjectSpec)

    def spec(self, name: str) -> SpecifierSet:
        """The user's specifier on a family package: its requirements and -c constraints."""
        out = SpecifierSet()
        for r in self.requirements:
            if r.name.lower() == name:
                out &= r.specifier
        for c in self.project.constraints:
            if c.name == name:
                out &= c.requirement.specifier
        return out

    def wants(self, name: str) -> bool:
        return any(r.name.lower() == name for r in self.requirements)

    def describe(self, project: bool = True) -> list[str]:
        """The request as the user wrote it; `project=False`: the family's part only."""
        out = [str(r) for r in self.requirements] + [r.text for r in self.project.others if project]
        if self.python:
            out.append(f"--python {self.python}" + (" (free-threaded)" if self.free_threaded else ""))
        elif self.free_threaded:
            out.append("--python (free-threaded)")
        if self.cuda:
            out.append(f"--cuda {self.cuda}")
        if self.variant:
            out.append(f"--variant {self.variant}")
        if self.strict_driver:
            out.append("--strict-driver")
        return out


__all__ = [
    "AnyRequirement",
    "PlainRequirement",
    "Request",
    "parse_plain_requirement",
    "parse_python_spec",
    "parse_requirements",
    "parse_spec",
    "split_local_labels",
    "split_requirements",
]
