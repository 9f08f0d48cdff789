"""uv, the one adapter: where uv is, the project it resolves, its `uv pip compile`, its lock.

Every step that locks runs uv the same way: `install` (the plan's resolution,
`installer/backends.py`), `add` (`installer/add.py`), a project's whole set
(`installer/project.py`) and `export --format pylock` without `--lock`
(`export/uvlock.py`); `export --format uv` writes the same routing for the user.
So the knowledge lives here once:

- `uv_version`: whether the uv torchfit runs (`lock/uvbin.find_uv`: beside its own interpreter
  first, then the `uv` wheel's locator, then PATH) is new enough (`UV_MIN`);
- `uv_routing`: the `[tool.uv]` tables that pin packages to one index. uv's documented
  way to pin PyTorch to its index: an *explicit* index serves only the packages
  `[tool.uv.sources]` routes to it, and a routed package is looked for nowhere else;
  `uv_project` is the whole pyproject.toml `install` resolves, through the one TOML writer;
- `compile_argv`: the argv of `uv pip compile --format pylock.toml`;
- `read_uv_lock`: uv's pylock.toml through the one PEP 751 reader (`lock.pylock`);
- `compile_project`: the one compile step every caller above goes through (inputs written,
  uv run once, its lock read); a caller with its own step runner (install's, add's logged
  steps) passes it as `run`, and gets its sources' options and environment from `Sources`.

What uv writes (uv 0.13.9, measured: `uv pip compile --format pylock.toml` of
pyyaml 6.0.2 and six 1.16.0 from PyPI for one target): each registry package's
`sdist` *beside* the one wheel it chose for the target; a find-links file as a
`file://` wheel URL with the sha256 uv computed; a direct reference as `archive`
with a `path`. uv installs the wheel; the sdist is what it would build from only
where no wheel fits. `read_uv_lock` keeps each package's files as uv installs them:
its wheels, its archive, the sdist only when there is no wheel (the `Artifact` rule,
`lock.model`), so a lock records the files that were installed, and a rebuild on a
host where the wheel does not fit refuses instead of building the sdist.

This module is on the `lock` layer so that `installer` and `export` (siblings, which
may not import each other) both use it; it runs nothing itself but `uv --version`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.errors import BadInput, ToolMissing, ToolTimeout
from torchfit.lock.model import LockedDist
from torchfit.lock.pylock import file_name, load_pylock
from torchfit.lock.toml import Inline, dumps_toml
from torchfit.runner import Runner, RunResult, index_variables

UV_MIN = Version("0.8.0")  # `uv pip compile --format pylock.toml`, explicit indexes
TORCH_INDEX_NAME = "torchfit-torch"


# --- which uv -------------------------------------------------------------------------------


def uv_version(runner: Runner, uv: str) -> Version | None:
    """`uv --version`'s version; None when it does not run here."""
    try:
        res = runner.run([uv, "--version"], timeout=30, unset=index_variables())
    except (ToolMissing, ToolTimeout):
        return None
    m = re.search(r"uv (\d+\.\d+(\.\d+)?)", res.stdout)
    return Version(m.group(1)) if m else None


# --- the project uv resolves ------------------------------------------------------------------


class UvIndex(TypedDict, total=False):
    """One `[[tool.uv.index]]` table, as uv's docs name its keys."""

    name: str
    url: str
    explicit: bool  # only the packages whose `sources` name it come from it
    format: str  # "flat": a find-links location, not a simple index
    default: bool  # what uv takes every other package from, instead of PyPI


class UvRouting(TypedDict):
    """`[tool.uv]`'s `index` tables and its `sources` (package -> `{ index = NAME }`)."""

    index: list[UvIndex]
    sources: dict[str, Inline]


def uv_routing(index_name: str, index_url: str, routed: Sequence[str], *,
               default_index: str | None = None, flat: bool = False,
               pages: Mapping[str, str] | None = None) -> UvRouting:
    """`[tool.uv]`'s `index` and `sources`: `routed` from the explicit index `index_url` only.

    `default_index`: a `[[tool.uv.index]]` marked default (what uv takes every other
    package from) instead of PyPI. `flat`: `index_url` is a find-links location (a
    directory of wheels, `pip download` output), uv's `format = "flat"` index. `pages`:
    package -> a project's own wheel page (PyG's torch-2.8.0+cu128.html), each an explicit
    flat index that serves that package alone.
    """
    torch_index: UvIndex = {"name": index_name, "url": index_url, "explicit": True}
    if flat:
        torch_index["format"] = "flat"
    index: list[UvIndex] = [torch_index]
    sources = {n: Inline(index=index_name) for n in dict.fromkeys(routed)}
    for n, page in enumerate(dict.fromkeys((pages or {}).values())):
        index.append({"name": f"torchfit-page-{n}", "url": page, "explicit": True, "format": "flat"})
        sources.update({name: Inline(index=f"torchfit-page-{n}") for name, p in (pages or {}).items() if p == page})
    if default_index is not None:
        index.append({"name": "default", "url": default_index, "default": True})
    return {"index": index, "sources": sources}


def dumps_routing(routing: UvRouting) -> str:
    """`uv_routing`'s tables as TOML text, to follow a `[tool.uv]` table's own keys."""
    return dumps_toml(routing, under=("tool", "uv"))


def uv_project(specs: Sequence[str], torch_index: str, routed: Sequence[str] = (), *, flat: bool = False,
               pages: Mapping[str, str] | None = None) -> str:
    """The pyproject.toml uv resolves for an install: the family (and `routed`) pinned to
    the torch index as an explicit index; every other package from the user's sources.

    Only names in `specs` are routed: uv ignores a source for a package that is not a
    direct dependency.
    """
    names = [canonicalize_name(Requirement(x).name) for x in specs]
    # uv applies [tool.uv.sources] to direct dependencies only (0.13.9, measured): a family
    # member further down must be made direct to come from the torch index (planning does).
    to_torch = list(dict.fromkeys(n for n in names if n in FAMILY_PACKAGES or n in routed))
    to_page = {n: p for n, p in (pages or {}).items() if n in names and n not in to_torch}
    return dumps_toml({"project": {"name": "torchfit-env", "version": "0", "dependencies": list(specs)},
                       "tool": {"uv": uv_routing(TORCH_INDEX_NAME, torch_index, to_torch, flat=flat,
                                                 pages=to_page)}})


# --- uv pip compile ---------------------------------------------------------------------------


def compile_argv(uv: str, project: str, out: str, *, python: str | None = None,
                 python_version: str | None = None, python_platform: str | None = None,
                 options: Sequence[str] = (), constraints: str | None = None, overrides: str | None = None,
                 quiet: bool = False) -> list[str]:
    """`uv pip compile` of `project` into the PEP 751 file `out` (uv insists on `pylock.*.toml`).

    `python`: the interpreter whose markers and tags decide; `python_version` and
    `python_platform`: a target given as values (another host, no interpreter);
    `options`: the sources' and the step's own (`--no-config`, indexes, `--offline`);
    `constraints`, `overrides`: requirements files (`uv pip` reads no [tool.uv]
    constraint-dependencies, a project setting).
    """
    argv = [uv, "pip", "compile", "--format", "pylock.toml", "--no-header"]
    if quiet:
        argv.append("--quiet")
    if python:
        argv += ["--python", python]
    if python_version:
        argv += ["--python-version", python_version]
    if python_platform:
        argv += ["--python-platform", python_platform]
    argv += options
    if constraints:
        argv += ["--constraints", constraints]
    if overrides:
        argv += ["--overrides", overrides]
    return [*argv, "-o", out, project]


# --- what uv wrote ----------------------------------------------------------------------------


def read_uv_lock(path: str) -> list[LockedDist]:
    """The packages of the pylock.toml uv wrote at `path`, each with the files uv installs.

    Through `lock.pylock.load_pylock` (files on this machine without a sha256 get one);
    per package its wheels and archive, the sdist only without a wheel (the module's
    docstring says why). BadInput names the file and the entry: no version, no file.
    """
    lock = load_pylock(path, f"uv's lock {path}", hash_local=True)
    out = []
    for d in lock.packages:
        if d.version is None:
            raise BadInput(f"uv's lock {path}: {d.name} has no version")
        # PEP 751: an `archive` excludes `wheels` and `sdist`, so "the wheels, else every file" is
        # "wheels and archive; the sdist only without a wheel".
        arts = [a for a in d.artifacts if a.kind == "wheel"] or list(d.artifacts)
        if not arts:
            raise BadInput(f"uv's lock gives no file for {d.name}")
        named = tuple(a if a.filename else replace(a, filename=file_name(a.url or a.path or "")) for a in arts)
        out.append(replace(d, artifacts=named))
    return out


# --- the one compile step -------------------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    """One `uv pip compile`: the distributions it chose (ok), or its explanation (not ok)."""

    ok: bool
    locked: tuple[LockedDist, ...]
    stderr: str
    argv: tuple[str, ...]
    seconds: float
    result: RunResult | None = None  # uv's run as it ended (its exit code, stdout and stderr apart)
    out: str = ""  # the lock uv wrote (or would have)


def write_private(work: str, name: str, text: str) -> str:
    """`work/name` with `text`, readable by this user only (it may hold a credentialed URL)."""
    path = os.path.join(work, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:  # a write's error names no file: name it (a full disk says where)
        raise OSError(exc.errno, exc.strerror, exc.filename or path) from exc
    return path


@dataclass(frozen=True)
class CompileInputs:
    """The files of one `uv pip compile`, written 0600 (they may hold a credentialed URL), and
    the target; `argv(options, out)` is its command line for given options and output."""

    uv: str
    pyproject: str
    constraints: str | None
    overrides: str | None
    python: str | None = None
    target: tuple[str, str] | None = None

    def argv(self, options: Sequence[str], out: str, *, quiet: bool = False) -> list[str]:
        return compile_argv(self.uv, self.pyproject, out, python=self.python,
                            python_version=self.target[0] if self.target else None,
                            python_platform=self.target[1] if self.target else None, options=options,
                            constraints=self.constraints, overrides=self.overrides, quiet=quiet)


def write_compile_inputs(uv: str, where: str, *, specs: Sequence[str] = (), torch_index: str = "",
                         routed: Sequence[str] = (), flat: bool = False, pages: Mapping[str, str] | None = None,
                         project_text: str | None = None,
                         constraints: Sequence[str] = (), overrides: Sequence[str] = (),
                         python: str | None = None, target: tuple[str, str] | None = None) -> CompileInputs:
    """Write the project uv compiles (`uv_project` of `specs`, or `project_text` as given), its
    constraints and overrides under `where` (made 0700), for the one compile step every caller
    shares: planning, install, add and export."""
    project = os.path.join(where, "project")
    os.makedirs(project, mode=0o700, exist_ok=True)
    text = project_text if project_text is not None else uv_project(specs, torch_index, routed, flat=flat,
                                                                    pages=pages)
    pyproject = write_private(project, "pyproject.toml", text)
    cons = write_private(where, "constraints.txt", "".join(f"{c}\n" for c in constraints)) if constraints else None
    over = write_private(where, "overrides.txt", "".join(f"{c}\n" for c in overrides)) if overrides else None
    return CompileInputs(uv, pyproject, cons, over, python, target)


def compile_project(runner: Runner, uv: str, *, work: str, env: Mapping[str, str], specs: Sequence[str] = (),
                    torch_index: str = "", options: Sequence[str] = (), routed: Sequence[str] = (),
                    flat: bool = False, pages: Mapping[str, str] | None = None, python: str | None = None,
                    target: tuple[str, str] | None = None, project_text: str | None = None,
                    constraints: Sequence[str] = (), overrides: Sequence[str] = (), timeout: float = 600.0,
                    stall: float | None = None, name: str = "plan", out: str | None = None,
                    prefer: str | None = None, cached: bool = False, quiet: bool = False,
                    preview: Sequence[str] = (), cwd: str | None = None,
                    on_wait: Callable[[float, int], None] | None = None,
                    on_start: Callable[[], None] | None = None,
                    run: Callable[[list[str], dict[str, str]], RunResult] | None = None) -> Compiled:
    """`uv pip compile` of `specs` (or `project_text`) into a pylock: the inputs written under
    `work/name/` (`work` itself for an empty `name`; `write_compile_inputs`), uv run once (a
    failure is a result, read by the caller), its lock read (`read_uv_lock`: BadInput when unreadable).

    `target`: (Python version, uv platform) when resolving for a host rather than for the
    interpreter `python`; `env`: uv's whole environment (what it lacks of ours is unset).
    `out`: uv's output file (`where/pylock.toml`); `prefer`: a lock's text written there first,
    whose versions uv then prefers (add: only what must move moves). `cached`: uv's cache alone
    (`--offline`, the find-links directories left out: install's early hint). `preview`: uv's
    preview features to enable (UV_PREVIEW_FEATURES). `run`: the caller's own step runner
    (argv, env) -> RunResult (install and add log and report through theirs); without it,
    `runner.run` with `timeout`, `stall`, `cwd`, `on_wait` and `on_start` (called once uv has
    started: the caller's own reads run beside uv's, issue 37).
    """
    import time

    where = os.path.join(work, name) if name else work
    os.makedirs(where, mode=0o700, exist_ok=True)
    inputs = write_compile_inputs(uv, where, specs=specs, torch_index=torch_index, routed=routed, flat=flat,
                                  pages=pages, project_text=project_text, constraints=constraints,
                                  overrides=overrides, python=python, target=target)
    out = out or os.path.join(where, "pylock.toml")
    if prefer is not None:
        write_private(os.path.dirname(out), os.path.basename(out), prefer)
    uv_env = dict(env)
    if cached:
        options = [*options, "--offline"]
        uv_env.pop("UV_FIND_LINKS", None)
    if preview:
        uv_env["UV_PREVIEW_FEATURES"] = ",".join(preview)
    argv = inputs.argv(options, out, quiet=quiet)
    start = time.monotonic()
    if run is not None:
        res = run(argv, uv_env)
    else:
        res = runner.run(argv, timeout=timeout, env=uv_env, unset=[k for k in os.environ if k not in uv_env],
                         stall=stall, cwd=cwd, on_wait=on_wait, on_start=on_start)
    seconds = time.monotonic() - start
    if res.returncode != 0:
        return Compiled(False, (), res.stderr + res.stdout, tuple(argv), seconds, res, out)
    return Compiled(True, tuple(read_uv_lock(out)), res.stderr, tuple(argv), seconds, res, out)


# uv's words for a source it could not reach (uv 0.13.9, measured against an unresolvable
# host, a closed port on 127.0.0.1 and a missing file:// directory): its "cause:" chain.
_UNREACHABLE = re.compile(
    r"(dns error|failed to lookup address|Connection refused|tcp connect error|error sending request|"
    r"operation timed out|certificate|Network is unreachable|failed to read from file|No such file or directory)",
    re.IGNORECASE)
_FETCH_URL = re.compile(r"(?:Failed to fetch|error sending request for url|failed to read from file)[:` (]+([^\s`)]+)")
# A direct reference (`pkg @ URL`, `pkg @ file:///path`) uv cannot use (uv 0.13.9, measured): a
# file that is not there, a path that is no wheel or sdist, a URL the server says is not there.
_BAD_REFERENCE = re.compile(
    r"Distribution not found at:? `?(?P<missing>[^\s`]+)"
    r"|Expected path \(`(?P<path>[^`]+)`\) to end in a supported file extension"
    r"|HTTP status client error \((?:404|410)[^)]*\) for url \((?P<gone>[^)\s]+)\)"
    r"|is not a valid wheel filename",
    re.IGNORECASE)
# A package no source has (uv 0.13.9: "X was not found in the package registry", "... in the
# provided package locations" with find-links alone).
_NOT_FOUND = re.compile(r"(?P<name>[A-Za-z0-9][\w.-]*) was not found in (?:the package registry|the provided package "
                        r"locations|the cache)", re.IGNORECASE)
# The torch family (or a CUDA package of it) in uv's explanation: only then is torch the cause.
_FAMILY_WORD = re.compile(r"(?<![\w.-])(?:torch|torchvision|torchaudio|nvidia-[\w-]+|cuda-[\w-]+)(?![\w-])",
                          re.IGNORECASE)


def classify_failure(text: str) -> tuple[str, str | None]:
    """What a failed `uv pip compile` says, uv's cause first:

    - ("reference", what): a direct reference it cannot use (a missing file, a path that is
      no wheel or sdist, a URL answered 404/410: the user's input, exit 2); `what` the path or URL;
    - ("unreachable", url): a source it could not read (DNS, refused, a missing file:// tree);
    - ("no-solution", None): a resolution with no answer (`names_family` says whether torch is in it);
    - ("build", None): a package whose build failed; else ("other", None).
    """
    bad = _BAD_REFERENCE.search(text)
    if bad is not None:
        return "reference", next((g for g in bad.groups() if g), None)
    if "No solution found" in text or "unsatisfiable" in text:
        return "no-solution", None
    if _UNREACHABLE.search(text):
        m = _FETCH_URL.search(text)
        return "unreachable", m.group(1) if m else None
    if "Failed to build" in text or "Failed to download and build" in text or "build backend" in text:
        return "build", None
    return "other", None


def names_family(text: str) -> bool:
    """Does uv's explanation name the torch family (or a CUDA package), so that torch is in the cause?"""
    return _FAMILY_WORD.search(text) is not None


def not_found(text: str) -> list[str]:
    """The packages uv says no source has."""
    return list(dict.fromkeys(m.group("name") for m in _NOT_FOUND.finditer(text)))


def routed_missing(text: str, routed: Sequence[str]) -> list[str]:
    """The `routed` packages (sent to the torch index alone) that uv's refusal says it could not
    find there: "X was not found in ...", or "there is no version of X..." (uv 0.13.9's words)."""
    out = []
    for name in routed:
        word = re.escape(name).replace("\\-", "[-_.]")
        if re.search(rf"(?<![\w.-]){word} was not found in|there is no version of {word}(?![\w-])", text,
                     re.IGNORECASE):
            out.append(name)
    return out


def explanation(text: str, limit: int = 1200) -> str:
    """uv's explanation as one paragraph: its `cause:` text and hints, whitespace folded."""
    body = text.split("cause:", 1)[1] if "cause:" in text else text
    folded = " ".join(w for w in body.replace("error:", "").split() if w.strip("^"))  # uv's carets under a line
    return folded if len(folded) <= limit else folded[: limit - 3] + "..."
