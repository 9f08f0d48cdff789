"""`--format uv`: a pyproject.toml for uv.

An explicit `[[tool.uv.index]]` serves only the packages `[tool.uv.sources]` routes
to it (the torch family, and a project package whose binary for the build lives there:
`Stack.routed`); everything else comes from the default index. The
project's requirements (issue 18) follow the family in `dependencies`; the other
packages' versions (a lock's, or a plan's resolved set) and the project's `-c`
constraints become `constraint-dependencies`.
"""

from __future__ import annotations

import datetime as _dt

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.export.stack import Stack, comment, environments, header, pin, public_url
from torchfit.lock.toml import toml_array, toml_value
from torchfit.lock.uv import dumps_routing, uv_routing


def render_uv(
    stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None, keep_credentials: bool = False,
) -> str:
    """A pyproject.toml for uv: explicit variant index, the family routed to it by [tool.uv.sources]."""
    public = (lambda u: u.rstrip("/")) if keep_credentials else public_url
    head = [*header(stack, "uv", today),
            "Use as is (uv sync, uv lock, uv pip install -r pyproject.toml) or merge its tables into your",
            "pyproject.toml. The variant index is explicit: only the packages [tool.uv.sources] routes to it",
            "come from it; everything else comes from the default index."]
    family_names = [n for n, _ in stack.family]
    deps = [pin(n, v, stack.variant, local=(n == "torch")) for n, v in stack.family]
    deps += [r for r in stack.project if r not in deps]  # the project, as asked
    # A package whose binary is the torch index's is routed there like the family; uv
    # honours a source for a direct dependency only, so one that is not is pinned in.
    direct = {_name(r) for r in deps}
    versions = {d.name: d.version for d in stack.locked if d.version} or dict(stack.resolved)
    deps += [f"{n}=={versions[n]}" if n in versions else n for n in stack.routed if n not in direct]
    if stack.project:
        head += ["The project's own requirements follow the torch family in `dependencies`; the versions",
                 "they resolved to with this stack are `constraint-dependencies`, so uv rebuilds the same set."]
    out = [comment(head), "[project]\n", 'name = "torchfit-stack"\n', 'version = "0"\n']
    if stack.python:
        out.append(f"requires-python = {toml_value(f'=={stack.python}.*')}\n")
    out.append(f"dependencies = {toml_array(deps)}\n\n")
    out.append("[tool.uv]\n")
    out.append(f"environments = {toml_array(environments(stack))}\n")
    pins = _pins(stack)
    constraints = constraint_lines(stack)
    if constraints:
        if pins:
            where = "The lock's" if stack.locked else "The resolved set's"
            also = " and the project's -c constraints" if stack.constraints else ""
            out.append(f"# {where} other versions{also}, as constraints (uv re-locks with hashes itself).\n")
        else:
            out.append("# The project's -c constraints.\n")
        out.append(f"constraint-dependencies = {toml_array(constraints)}\n")
    # The routing install resolves with (lock.uv), written by the one TOML writer.
    routed = [*family_names, *(r for r in stack.routed if r not in family_names)]
    default = public(pypi_url) if public_url(pypi_url) != PYPI_SIMPLE else None
    out.append("\n" + dumps_routing(uv_routing(stack.index_name, public(stack.index_url), routed,
                                               default_index=default)))
    return "".join(out)


def _pins(stack: Stack) -> list[str]:
    """`name==version` of every package outside the family: a lock's, else a plan's resolved set."""
    family = {n for n, _ in stack.family}
    others = sorted((d for d in stack.locked if d.name not in family and d.version), key=lambda d: d.name)
    return [f"{d.name}=={d.version}" for d in others] or [f"{n}=={v}" for n, v in stack.resolved]


def constraint_lines(stack: Stack) -> list[str]:
    """The `constraint-dependencies` of the uv export: the project's -c constraints, then the pins.

    `uv lock`/`uv sync` read them from the file; `uv pip compile` does not (a project
    setting), so `uvlock.lock_with_uv` hands the same lines over with `-c`.
    """
    return list(dict.fromkeys([*stack.constraints, *_pins(stack)]))


def _name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return requirement
