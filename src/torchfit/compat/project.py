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

from packaging.version import Version

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.errors import BadInput
from torchfit.inputs import shown
from torchfit.redact import strip_credentials

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
        # packaging.utils imports packaging.tags (logging, platform): not on a plain resolve's path (issue 37)
        from packaging.utils import canonicalize_name

        return canonicalize_name(self.requirement.name)

    @property
    def text(self) -> str:
        return str(self.requirement)

    @property
    def is_family(self) -> bool:
        return self.name in FAMILY_PACKAGES

    @property
    def public_text(self) -> str:
        """The requirement as a plan, a lock, `--json` and an export carry it: a direct URL's
        credentials (`user:secret@`, `?token=`) dropped (`redact.strip_credentials`), as every
        index URL torchfit writes down; the real URL stays in the request uv resolves."""
        url = self.requirement.url
        if not url or strip_credentials(url) == url:
            return self.text
        from packaging.requirements import Requirement

        req = Requirement(self.text)
        req.url = strip_credentials(url)
        return str(req)


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
    # (url, "FILE:LINE: --extra-index-url"): where each index line of a file was written, for its refusal
    origins: tuple[tuple[str, str], ...] = ()

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
            tuple(dict.fromkeys(self.origins + other.origins)),
        )

    @property
    def family(self) -> tuple[ProjectReq, ...]:
        return tuple(r for r in self.requirements if r.is_family)

    @property
    def others(self) -> tuple[ProjectReq, ...]:
        return tuple(r for r in self.requirements if not r.is_family)


def parse_requirement(text: str, origin: str, shown: str | None = None) -> ProjectReq:
    """A PEP 508 requirement, or BadInput naming where it was written.

    `shown`: how an error quotes the requirement (default `repr(text)`): a line of a
    requirements file is quoted as written, before `${VAR}` expansion (`_parse_file`)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    quoted = repr(text) if shown is None else shown
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise BadInput(f"{origin}: {quoted} is not a PEP 508 requirement ({str(exc).splitlines()[0]})") from None
    if canonicalize_name(req.name) in FAMILY_PACKAGES:
        # torchfit picks the family's build and index itself: a URL would bypass both.
        if req.url:
            raise BadInput(f"{origin}: {quoted}: a direct URL for {req.name} bypasses torchfit's choice of "
                           "build; give a version (torch==2.8.0) and, for a mirror, --torch-index-url")
        if req.extras:
            raise BadInput(f"{origin}: {quoted}: extras of {req.name} are not installed by torchfit; "
                           f"give {req.name}{req.specifier}")
    return ProjectReq(req, origin)


def dedupe(reqs: Iterable[ProjectReq]) -> tuple[ProjectReq, ...]:
    """The requirements with each one kept once (the same text: the first place it was written)."""
    kept: dict[str, ProjectReq] = {}
    for r in reqs:
        kept.setdefault(r.text, r)
    return tuple(kept.values())


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


@dataclass(frozen=True)
class SourceFile:
    """A requirements file as read: its text, and whether an error may quote its lines.

    A file reached through a symbolic link may be anything the link points at (a
    checkout's `requirements.txt -> ~/.netrc`): its lines are never quoted, only
    FILE:LINE and what is wrong."""

    text: str
    quotable: bool = True


_UNQUOTED = "the line (not shown: the file is a symbolic link)"

# What `-r` reads in all, across every file it names (issue 25): pip has no bound, so 17
# small files each naming the next four never finished. Each file is read once (a file
# named again is skipped; a file naming one of its own includers is a cycle), and the
# total is bounded: a big monorepo's requirements are a few files and ~1,000 lines.
MAX_REQUIREMENT_FILES = 256
MAX_REQUIREMENT_LINES = 50_000
MAX_REQUIREMENTS_TOTAL_BYTES = 16 << 20


class _Reading:
    """One `-r` walk: the files read (each once), the totals against the bounds, and what
    was found, in order."""

    def __init__(self, read: Callable[[str], SourceFile | str], environ: Mapping[str, str]) -> None:
        self.read, self.environ = read, environ
        self.done: set[str] = set()
        self.lines = 0
        self.size = 0
        self.reqs: list[ProjectReq] = []
        self.cons: list[ProjectReq] = []
        self.notes: list[str] = []
        self.spec = ProjectSpec()

    def load(self, path: str, where: str) -> SourceFile | None:
        """The file at `path`, or None when it was read already; BadInput past a bound."""
        key = os.path.normpath(path)
        if key in self.done:
            return None
        if len(self.done) >= MAX_REQUIREMENT_FILES:
            raise BadInput(f"{where}: the requirements files name more than {MAX_REQUIREMENT_FILES} files "
                           "(-r/-c); torchfit reads at most that many: merge them")
        self.done.add(key)
        got = self.read(path)
        source = got if isinstance(got, SourceFile) else SourceFile(got)
        self.size += len(source.text)
        if self.size > MAX_REQUIREMENTS_TOTAL_BYTES:
            raise BadInput(f"{where}: the requirements files hold more than "
                           f"{MAX_REQUIREMENTS_TOTAL_BYTES >> 20} MiB in all; torchfit reads at most that much")
        return source

    def count(self, where: str) -> None:
        self.lines += 1
        if self.lines > MAX_REQUIREMENT_LINES:
            raise BadInput(f"{where}: the requirements files hold more than {MAX_REQUIREMENT_LINES:,} lines in all; "
                           "torchfit reads at most that many")

    def result(self) -> ProjectSpec:
        return self.spec + ProjectSpec(dedupe(self.reqs), dedupe(self.cons), notes=tuple(dict.fromkeys(self.notes)))


def parse_requirements_file(
    text: str | SourceFile,
    path: str,
    read: Callable[[str], SourceFile | str],
    environ: Mapping[str, str],
    *,
    constraint: bool = False,
) -> ProjectSpec:
    """A pip requirements file as a ProjectSpec; `read(path)` reads a file it names.

    In a constraints file (`constraint=True`, reached through `-c`) every line is a
    constraint, as pip reads it. Each file is read once, the files read in all are
    bounded (MAX_REQUIREMENT_FILES, _LINES, _TOTAL_BYTES), and a requirement written
    twice is kept once.
    """
    walk = _Reading(read, environ)
    source = text if isinstance(text, SourceFile) else SourceFile(text)
    walk.done.add(os.path.normpath(path))
    walk.size += len(source.text)
    _parse_file(walk, source, path, constraint, (os.path.normpath(path),))
    return walk.result()


def _parse_file(walk: _Reading, source: SourceFile, path: str, constraint: bool, chain: tuple[str, ...]) -> None:
    if len(chain) > MAX_INCLUDE_DEPTH + 1:
        raise BadInput(f"{shown(path)}: -r/-c nested deeper than {MAX_INCLUDE_DEPTH} files")
    base = os.path.dirname(path) if path not in ("-", "") else ""
    for number, written in _logical_lines(source.text):
        where = f"{shown(path)}:{number}"  # a path as typed, escaped, never stripped
        walk.count(where)
        # Quoted as written: `${TOKEN}` stays a name in every message, never its value.
        quoted = repr(written) if source.quotable else _UNQUOTED
        if written.startswith("-"):
            key, raw = _option(written, where, quoted)
            value = _expand(raw, walk.environ, where)
            if key == "requirement" or key == "constraint":
                target = value if os.path.isabs(value) or not base else os.path.join(base, value)
                if os.path.normpath(target) in chain:
                    raise BadInput(f"{where}: {quoted} includes a file that includes it (a cycle)")
                try:
                    nested = walk.load(target, where)
                except BadInput as exc:
                    if raw == value:
                        raise
                    # the path holds a variable's value (a token, say): the file is named as written
                    said = str(exc)
                    prefix = f"-r {shown(target)}: "
                    why = said[len(prefix):] if said.startswith(prefix) else "cannot read it"
                    raise BadInput(f"{where}: {quoted}: {why}") from None
                if nested is not None:
                    _parse_file(walk, nested, target, constraint or key == "constraint",
                                (*chain, os.path.normpath(target)))
            elif key == "index-url":
                walk.spec = walk.spec + ProjectSpec(index_url=value, origins=((value, f"{where}: --{key}"),))
            elif key == "extra-index-url":
                walk.spec = walk.spec + ProjectSpec(extra_index_urls=(value,), origins=((value, f"{where}: --{key}"),))
            elif key == "find-links":
                local = value if "://" in value or os.path.isabs(value) or not base else os.path.join(base, value)
                walk.spec = walk.spec + ProjectSpec(find_links=(local,), origins=((local, f"{where}: --{key}"),))
            elif key == "trusted-host":
                walk.spec = walk.spec + ProjectSpec(trusted_hosts=(value,))
            elif key == "no-index":
                walk.spec = walk.spec + ProjectSpec(no_index=True)
            elif key == "pre":
                walk.spec = walk.spec + ProjectSpec(pre=True)
            else:
                walk.notes.append(f"{where}: {written.split()[0]} is left to the installer's defaults")
            continue
        req_written, per_req = _split_per_requirement(written, where)
        if per_req:
            walk.notes.append(f"{where}: {', '.join(per_req)} not used: torchfit re-resolves and locks every file "
                              "with its own sha256")
        if req_written.startswith((".", "/")) or (os.sep in req_written.split(";")[0] and "@" not in req_written):
            shown_req = repr(req_written) if source.quotable else _UNQUOTED
            raise BadInput(f"{where}: {shown_req} is a path; torchfit resolves named requirements "
                           "(name @ file:///path works for a wheel or sdist)")
        req_text = _expand(req_written, walk.environ, where)
        item = parse_requirement(req_text, where, repr(req_written) if source.quotable else _UNQUOTED)
        (walk.cons if constraint else walk.reqs).append(item)


def _option(line: str, where: str, quoted: str) -> tuple[str, str]:
    """(pip option key, value) of an option line, as written; BadInput for what torchfit
    cannot honour (the line shown as `quoted`)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise BadInput(f"{where}: {quoted}: {exc}") from None
    head, _, inline = words[0].partition("=")
    if head in ("-e", "--editable"):
        raise BadInput(f"{where}: {quoted}: editable installs are not resolved by torchfit; "
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
        raise BadInput(f"{where}: {quoted} is not a requirements-file option torchfit reads "
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


def parse_pyproject(data: Mapping[str, object], path: str, extras: Sequence[str]) -> ProjectSpec:
    """`[project].dependencies` and the `extras` groups of `[project.optional-dependencies]`.

    A group may name the project itself (`myproj[cuda]`): its groups are followed.
    """
    from packaging.utils import canonicalize_name

    project = data.get("project")
    if not isinstance(project, Mapping):
        raise BadInput(f"{path} has no [project] table; torchfit reads [project].dependencies "
                       "(PEP 621). For another layout give -r requirements.txt")
    dynamic = project.get("dynamic", [])
    if not isinstance(dynamic, list) or not all(isinstance(d, str) for d in dynamic):
        raise BadInput(f"{path}: [project].dynamic must be a list of field names (PEP 621), not {_type(dynamic)}")
    if "dependencies" in dynamic:
        raise BadInput(f"{path}: [project].dependencies is dynamic (computed by the build backend); "
                       "torchfit cannot read it: give the requirements with -r FILE")
    name = project.get("name", "")
    if not isinstance(name, str):
        raise BadInput(f"{path}: [project].name must be a string (PEP 621), not {_type(name)}")
    own = canonicalize_name(name)
    deps = project.get("dependencies", [])
    optional = project.get("optional-dependencies", {})
    if not isinstance(deps, list):
        raise BadInput(f"{path}: [project].dependencies must be a list of requirements, not {_type(deps)}")
    if not isinstance(optional, Mapping):
        raise BadInput(f"{path}: [project].optional-dependencies must be a table, not {_type(optional)}")
    groups: dict[str, tuple[str, Any]] = {}
    for k, v in optional.items():
        key = canonicalize_name(str(k))
        if key in groups:  # PEP 685: extras compare normalized; two spellings of one are ambiguous
            raise BadInput(f"{path}: [project.optional-dependencies] has {groups[key][0]!r} and {k!r}, one "
                           f"group once normalized ({key!r}, PEP 685): keep one")
        groups[key] = (str(k), v)
    out: list[ProjectReq] = []
    done: set[str] = set()

    def take(items: Any, origin: str) -> None:
        if not isinstance(items, list):
            raise BadInput(f"{path}: {origin} must be a list of requirements, not {_type(items)}")
        for k, item in enumerate(items):
            if not isinstance(item, str):
                raise BadInput(f"{path}: {origin}[{k}] must be a string (a PEP 508 requirement), not {_type(item)}")
            req = parse_requirement(item, f"{path} {origin}")
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


def _type(value: object) -> str:
    """A TOML value's type, as a message names it."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
             dict: "a table"}
    return next((n for t, n in names.items() if isinstance(value, t)), type(value).__name__)


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
    from packaging.utils import canonicalize_name

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
    "SourceFile",
    "applies",
    "dedupe",
    "parse_pyproject",
    "parse_requirement",
    "parse_requirements_file",
    "target_environment",
]
