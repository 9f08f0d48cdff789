"""The user's own project, as values: what it requires, from where projects keep it.

A project reaches torchfit three ways (issue 18): PEP 508 requirements on the command
line, pip requirements files (`-r FILE`) and a pyproject.toml (`--project DIR`, its
`[project].dependencies` and the `--extra` groups of `[project.optional-dependencies]`).
This module turns each into a `ProjectSpec`: every requirement with the place it came
from ("requirements.txt:3"), the `-c` constraints, and the index options a
requirements file may carry (`--index-url`, `--extra-index-url`, `--find-links`,
`--no-index`, `--trusted-host`, `--pre`).

Pure: the caller reads the files (`inputs.read_text_file`) and passes a `read`
callable for the files a requirements file names itself (`-r`, `-c`).

The requirements-file syntax is pip's (pip/_internal/req/req_file.py): one
requirement or option per line, `\\` joins lines, `#` after whitespace starts a
comment, `${VAR}` names an environment variable, relative `-r`/`-c` paths are relative
to the file that names them. What a re-resolution cannot honour is refused with the
file and line (`-e`, a bare path, an option torchfit does not know), never dropped.

`PackageMeta`/`PackageIndex` are what the resolver learns about a project package:
its versions and, per version, the Requires-Dist and Requires-Python of its METADATA
(read by `torchfit.index.project` from the user's indexes).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.errors import BadInput

if TYPE_CHECKING:  # packaging.requirements costs ~5 ms of every start-up: imported where parsed
    from packaging.markers import Marker
    from packaging.requirements import Requirement

# Nested -r/-c files: pip has no limit; a cycle or a bomb must still end.
MAX_INCLUDE_DEPTH = 16

_ENV_VAR = re.compile(r"\$\{([A-Z0-9_]+)\}")  # pip expands only this form
_COMMENT = re.compile(r"(^|\s+)#.*$")


@dataclass(**FROZEN)
class ProjectReq:
    """One requirement of the project, and where it was written."""

    requirement: Requirement
    origin: str  # "requirements.txt:3", "pyproject.toml [project].dependencies", "command line"

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def text(self) -> str:
        return str(self.requirement)

    @property
    def is_family(self) -> bool:
        return self.name in FAMILY_PACKAGES


@dataclass(**FROZEN)
class ProjectSpec:
    """Requirements, constraints and the index options their files carry."""

    requirements: tuple[ProjectReq, ...] = ()
    constraints: tuple[ProjectReq, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    trusted_hosts: tuple[str, ...] = ()
    pre: bool = False
    notes: tuple[str, ...] = ()  # what was read but not used, said once

    def __add__(self, other: ProjectSpec) -> ProjectSpec:
        if self.index_url and other.index_url and self.index_url != other.index_url:
            raise BadInput(f"two --index-url lines disagree: {self.index_url} and {other.index_url}")
        return ProjectSpec(
            self.requirements + other.requirements,
            self.constraints + other.constraints,
            self.index_url or other.index_url,
            tuple(dict.fromkeys(self.extra_index_urls + other.extra_index_urls)),
            tuple(dict.fromkeys(self.find_links + other.find_links)),
            self.no_index or other.no_index,
            tuple(dict.fromkeys(self.trusted_hosts + other.trusted_hosts)),
            self.pre or other.pre,
            tuple(dict.fromkeys(self.notes + other.notes)),
        )

    @property
    def family(self) -> tuple[ProjectReq, ...]:
        return tuple(r for r in self.requirements if r.is_family)

    @property
    def others(self) -> tuple[ProjectReq, ...]:
        return tuple(r for r in self.requirements if not r.is_family)


def parse_requirement(text: str, origin: str) -> ProjectReq:
    """A PEP 508 requirement, or BadInput naming where it was written."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise BadInput(f"{origin}: {text!r} is not a PEP 508 requirement ({str(exc).splitlines()[0]})") from None
    if canonicalize_name(req.name) in FAMILY_PACKAGES:
        # torchfit picks the family's build and index itself: a URL would bypass both.
        if req.url:
            raise BadInput(f"{origin}: {text!r}: a direct URL for {req.name} bypasses torchfit's choice of "
                           "build; give a version (torch==2.8.0) and, for a mirror, --torch-index-url")
        if req.extras:
            raise BadInput(f"{origin}: {text!r}: extras of {req.name} are not installed by torchfit; "
                           f"give {req.name}{req.specifier}")
    return ProjectReq(req, origin)


# --- requirements files ---------------------------------------------------------------

_VALUE_OPTIONS = {
    "-r": "requirement", "--requirement": "requirement",
    "-c": "constraint", "--constraint": "constraint",
    "-i": "index-url", "--index-url": "index-url",
    "--extra-index-url": "extra-index-url",
    "-f": "find-links", "--find-links": "find-links",
    "--trusted-host": "trusted-host",
    "--only-binary": "ignored", "--no-binary": "ignored",
}
_FLAG_OPTIONS = {"--no-index": "no-index", "--pre": "pre", "--prefer-binary": "ignored"}
# Options pip allows after a requirement on its line.
_PER_REQ = ("--hash", "--config-settings", "--global-option")


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, text) with `\\` continuations joined and comments removed."""
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw
        if not buf:
            start = number
        if line.endswith("\\") and not _COMMENT.search(line[:-1]):
            buf.append(line[:-1])
            continue
        buf.append(line)
        joined = _COMMENT.sub("", " ".join(buf)).strip()
        buf = []
        if joined:
            yield start, joined
    if buf:
        joined = _COMMENT.sub("", " ".join(buf)).strip()
        if joined:
            yield start, joined


def _expand(text: str, environ: Mapping[str, str], where: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in environ:
            raise BadInput(f"{where}: ${{{m.group(1)}}} is not set in the environment")
        return environ[m.group(1)]

    return _ENV_VAR.sub(sub, text)


def parse_requirements_file(
    text: str,
    path: str,
    read: Callable[[str], str],
    environ: Mapping[str, str],
    *,
    constraint: bool = False,
    _depth: int = 0,
    _seen: frozenset[str] = frozenset(),
) -> ProjectSpec:
    """A pip requirements file as a ProjectSpec; `read(path)` reads a file it names.

    In a constraints file (`constraint=True`, reached through `-c`) every line is a
    constraint, as pip reads it.
    """
    if _depth > MAX_INCLUDE_DEPTH:
        raise BadInput(f"{path}: -r/-c nested deeper than {MAX_INCLUDE_DEPTH} files")
    seen = _seen | {os.path.normpath(path)}
    base = os.path.dirname(path) if path not in ("-", "") else ""
    spec = ProjectSpec()
    reqs: list[ProjectReq] = []
    cons: list[ProjectReq] = []
    notes: list[str] = []
    for number, line in _logical_lines(text):
        where = f"{path}:{number}"
        line = _expand(line, environ, where)
        if line.startswith("-"):
            key, value = _option(line, where)
            if key == "requirement" or key == "constraint":
                target = value if os.path.isabs(value) or not base else os.path.join(base, value)
                if os.path.normpath(target) in seen:
                    raise BadInput(f"{where}: {line!r} includes {target} again (a cycle)")
                nested = parse_requirements_file(
                    read(target), target, read, environ,
                    constraint=constraint or key == "constraint", _depth=_depth + 1, _seen=seen,
                )
                spec = spec + nested
            elif key == "index-url":
                spec = spec + ProjectSpec(index_url=value)
            elif key == "extra-index-url":
                spec = spec + ProjectSpec(extra_index_urls=(value,))
            elif key == "find-links":
                local = value if "://" in value or os.path.isabs(value) or not base else os.path.join(base, value)
                spec = spec + ProjectSpec(find_links=(local,))
            elif key == "trusted-host":
                spec = spec + ProjectSpec(trusted_hosts=(value,))
            elif key == "no-index":
                spec = spec + ProjectSpec(no_index=True)
            elif key == "pre":
                spec = spec + ProjectSpec(pre=True)
            else:
                notes.append(f"{where}: {line.split()[0]} is left to the installer's defaults")
            continue
        req_text, per_req = _split_per_requirement(line, where)
        if per_req:
            notes.append(f"{where}: {', '.join(per_req)} not used: torchfit re-resolves and locks every file "
                         "with its own sha256")
        if req_text.startswith((".", "/")) or (os.sep in req_text.split(";")[0] and "@" not in req_text):
            raise BadInput(f"{where}: {req_text!r} is a path; torchfit resolves named requirements "
                           "(name @ file:///path works for a wheel or sdist)")
        item = parse_requirement(req_text, where)
        (cons if constraint else reqs).append(item)
    return spec + ProjectSpec(tuple(reqs), tuple(cons), notes=tuple(notes))


def _option(line: str, where: str) -> tuple[str, str]:
    """(pip option key, value) of an option line; BadInput for what torchfit cannot honour."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise BadInput(f"{where}: {line!r}: {exc}") from None
    head, _, inline = words[0].partition("=")
    if head in ("-e", "--editable"):
        raise BadInput(f"{where}: {line!r}: editable installs are not resolved by torchfit; "
                       "install the project into the env afterwards (torchfit run --env PREFIX -- pip install -e .)")
    if head in _FLAG_OPTIONS:
        if inline or len(words) > 1:
            raise BadInput(f"{where}: {head} takes no value")
        return _FLAG_OPTIONS[head], ""
    key = _VALUE_OPTIONS.get(head)
    if key is None and head.startswith("-r") and len(head) > 2:
        key, inline = "requirement", head[2:]
    if key is None and head.startswith("-c") and len(head) > 2:
        key, inline = "constraint", head[2:]
    if key is None:
        raise BadInput(f"{where}: {words[0]!r} is not a requirements-file option torchfit reads "
                       "(-r, -c, -i, --extra-index-url, -f, --no-index, --trusted-host, --pre)")
    value = inline or (words[1] if len(words) > 1 else "")
    if not value or len(words) > (1 if inline else 2):
        raise BadInput(f"{where}: {head} takes exactly one value")
    return key, value


def _split_per_requirement(line: str, where: str) -> tuple[str, list[str]]:
    """The requirement, and the per-requirement options after it (`--hash=...`)."""
    m = re.search(r"\s(--[a-z-]+)", line)
    if not m:
        return line, []
    req, rest = line[: m.start()].strip(), line[m.start():].split()
    opts = [w.split("=")[0] for w in rest if w.startswith("--")]
    unknown = [o for o in opts if o not in _PER_REQ]
    if unknown:
        raise BadInput(f"{where}: {unknown[0]} is not an option pip allows after a requirement")
    return req, sorted(set(opts))


# --- pyproject.toml ---------------------------------------------------------------------------


def parse_pyproject(data: Mapping[str, Any], path: str, extras: Sequence[str]) -> ProjectSpec:
    """`[project].dependencies` and the `extras` groups of `[project.optional-dependencies]`.

    A group may name the project itself (`myproj[cuda]`): its groups are followed.
    """
    project = data.get("project")
    if not isinstance(project, Mapping):
        raise BadInput(f"{path} has no [project] table; torchfit reads [project].dependencies "
                       "(PEP 621). For another layout give -r requirements.txt")
    dynamic = project.get("dynamic") or []
    if "dependencies" in dynamic:
        raise BadInput(f"{path}: [project].dependencies is dynamic (computed by the build backend); "
                       "torchfit cannot read it: give the requirements with -r FILE")
    own = canonicalize_name(str(project.get("name") or ""))
    deps = project.get("dependencies") or []
    optional = project.get("optional-dependencies") or {}
    if not isinstance(deps, list) or not isinstance(optional, Mapping):
        raise BadInput(f"{path}: [project].dependencies must be a list and optional-dependencies a table")
    groups = {canonicalize_name(str(k)): (str(k), v) for k, v in optional.items()}
    out: list[ProjectReq] = []
    done: set[str] = set()

    def take(items: Any, origin: str) -> None:
        if not isinstance(items, list):
            raise BadInput(f"{path}: {origin} must be a list of requirements")
        for item in items:
            req = parse_requirement(str(item), f"{path} {origin}")
            if own and req.name == own:
                for extra in sorted(req.requirement.extras):
                    add_group(extra, f"{path} {origin}")
                continue
            out.append(req)

    def add_group(extra: str, where: str) -> None:
        key = canonicalize_name(extra)
        if key in done:
            return
        if key not in groups:
            have = ", ".join(sorted(k for k, _ in groups.values())) or "none"
            raise BadInput(f"{where}: no optional-dependencies group {extra!r} (it has: {have})")
        done.add(key)
        real, items = groups[key]
        take(items, f"[project.optional-dependencies].{real}")

    take(deps, "[project].dependencies")
    for extra in extras:
        add_group(extra, f"--extra {extra}")
    return ProjectSpec(tuple(out))


# --- markers -------------------------------------------------------------------------------------


def target_environment(arch: str, python: str, extra: str = "") -> dict[str, str]:
    """The PEP 508 marker environment of the target: Linux, its arch, CPython `python`."""
    minor = ".".join(python.split(".")[:2])
    return {
        "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
        "platform_machine": arch, "platform_release": "", "platform_version": "",
        "implementation_name": "cpython", "platform_python_implementation": "CPython",
        "implementation_version": python, "python_version": minor, "python_full_version": python,
        "extra": extra,
    }


def applies(marker: Marker | None, env: Mapping[str, str], extras: Iterable[str] = ()) -> bool:
    """Does a requirement with `marker` apply on the target (with these extras asked for)?"""
    if marker is None:
        return True
    names = list(extras) or [""]
    return any(marker.evaluate({**env, "extra": e}) for e in names)


# --- what the resolver learns about a project package ----------------------------------------


@dataclass(**FROZEN)
class PackageMeta:
    """A release's core metadata, as far as the resolver needs it."""

    name: str
    version: Version
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None
    source: str = ""  # "METADATA of vllm-0.10.2-cp38-abi3-manylinux1_x86_64.whl (https://...)"
    files: tuple[str, ...] = field(default_factory=tuple)  # the release's file names
    sdist_only: bool = False
    # The Requires-Dist on the torch family, parsed once: a hostile METADATA of 100,000 lines
    # (issue 25) is scanned once by name, not parsed line by line for every build the resolver asks about.
    family_dist: tuple[Requirement, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "family_dist", parse_family_lines(self.requires_dist))

    def family_requirements(self, env: Mapping[str, str], extras: Iterable[str] = ()) -> tuple[Requirement, ...]:
        """Its Requires-Dist on torch, torchvision, torchaudio that apply on the target."""
        return tuple(replace_marker(req) for req in self.family_dist if applies(req.marker, env, extras))


# A Requires-Dist line's project name (PEP 508): what decides whether the line is parsed at all.
# Real releases name torch in a few lines (one per extra or platform); past this many the rest
# are not read (a hostile METADATA; the reading only explains a refusal, uv decides).
MAX_FAMILY_LINES = 64
_DIST_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def parse_family_lines(lines: Iterable[str]) -> tuple[Requirement, ...]:
    """The lines of `lines` (Requires-Dist) that name the torch family, parsed; a broken one
    is left out (the installer's to report)."""
    from packaging.requirements import InvalidRequirement, Requirement

    out = []
    for text in lines:
        m = _DIST_NAME.match(text)
        if m is None or canonicalize_name(m.group(1)) not in FAMILY_PACKAGES:
            continue
        try:
            out.append(Requirement(text))
        except InvalidRequirement:
            continue
        if len(out) >= MAX_FAMILY_LINES:
            break
    return tuple(out)


def replace_marker(req: Requirement) -> Requirement:
    """The requirement without its marker (it has been evaluated)."""
    from packaging.requirements import Requirement

    out = Requirement(str(req))
    out.marker = None
    return out


class PackageIndex(Protocol):
    """Versions and metadata of the project's packages (implemented in torchfit.index.project)."""

    def versions(self, name: str) -> Sequence[Version]:
        """Every version the sources offer, newest first (yanked ones left out)."""
        ...

    def metadata(self, name: str, version: Version) -> PackageMeta | None:
        """That release's core metadata; None where no file's metadata can be read."""
        ...


__all__ = [
    "PackageIndex",
    "PackageMeta",
    "ProjectReq",
    "ProjectSpec",
    "applies",
    "parse_pyproject",
    "parse_requirement",
    "parse_requirements_file",
    "target_environment",
]
