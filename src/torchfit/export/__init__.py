"""Render a resolved stack for the tools people use: requirements.txt, uv, PEP 751 pylock.toml.

The one rule every format keeps: the torch family (torch, torchvision, torchaudio)
comes only from the variant's own index. Each format states it its own way
(docs/export.md explains why):

- **requirements**: pip cannot tie an index to a package, so the file names the
  variant index as the *only* index (`--index-url`; download.pytorch.org hosts the
  torch family's dependencies too) and pins torch with its local label (`+cu128`),
  which no PyPI file can carry. From a lock, every file is hash-pinned instead, and
  the lock's other indexes may be named: with `--require-hashes` an index can only
  serve the exact file locked.
- **uv**: an explicit `[[tool.uv.index]]` (used only by the packages routed to it)
  plus `[tool.uv.sources]` for the family; everything else from the default index.
- **pylock**: PEP 751, every package with its index and its wheels' URLs and
  hashes. From `--lock` the lock's packages are re-rendered; without one, the
  dependency closure is computed by `uv pip compile` with the variant index first
  (uv takes each name from the first index that has it).

Pure rendering (`render_*`) takes a `Stack`; `load_lock` and `lock_with_uv` are the
I/O. Index URLs never carry credentials into an exported file.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from torchfit._backports import FROZEN
from torchfit.compat.request import PACKAGES, Plan
from torchfit.errors import BadInput, TorchfitError
from torchfit.index.client import PYPI_SIMPLE, strip_credentials
from torchfit.lock.pylock import toml_value
from torchfit.redact import redact

FORMATS = ("requirements", "uv", "pylock")
UV_TIMEOUT = 600.0


class ExportFailed(TorchfitError):
    """A step of the export could not be done (uv missing or failing, a lock the stack contradicts)."""

    reference = "export-failed"


@dataclass(**FROZEN)
class LockedFile:
    """One wheel (or sdist) of a locked package: where it is and what it hashes to."""

    url: str | None
    path: str | None
    name: str | None
    hashes: Mapping[str, str]
    size: int | None = None
    kind: str = "wheel"  # wheel | sdist


@dataclass(**FROZEN)
class LockedPackage:
    """A PEP 751 `[[packages]]` entry, reduced to what torchfit renders."""

    name: str
    version: str | None
    index: str | None
    files: tuple[LockedFile, ...]
    marker: str | None = None
    requires_python: str | None = None


@dataclass(**FROZEN)
class Stack:
    """What gets exported: the torch family pins, the index, the target, and any locked files."""

    torch: str  # public version, "2.13.0"
    variant: str  # "cpu", "cu128"
    python: str  # "3.11"
    index_url: str  # the variant index (may hold credentials: never written out)
    family: tuple[tuple[str, str], ...]  # (name, version) of torch and the companions asked for
    arches: tuple[str, ...] = ("x86_64",)
    glibc: str | None = None  # the build's floor ("2.28"), for the manylinux target
    hosts: tuple[str, ...] = ()
    locked: tuple[LockedPackage, ...] = ()
    origin: str = "plan"  # "plan" | "lock FILE"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def index_name(self) -> str:
        """The uv index name: `pytorch-cu128`."""
        return "pytorch-" + re.sub(r"[^a-z0-9-]+", "-", self.variant.lower())


def stack_from_plan(plan: Plan, *, arches: Sequence[str] = (), glibc: str | None = None) -> Stack:
    family = [("torch", plan.torch)]
    for name in ("torchvision", "torchaudio"):
        ver = getattr(plan, name)
        if name in plan.packages and ver:
            family.append((name, ver))
    return Stack(
        torch=plan.torch, variant=plan.variant, python=plan.python, index_url=plan.index_url,
        family=tuple(family), arches=tuple(dict.fromkeys(arches)) or ("x86_64",), glibc=glibc,
        hosts=plan.hosts,
    )


def with_index(stack: Stack, url: str | None) -> Stack:
    """Replace the variant index (`--torch-index-url`, `{variant}` substituted)."""
    if not url:
        return stack
    return replace(stack, index_url=url.replace("{variant}", stack.variant).rstrip("/"))


# ---------------------------------------------------------------------------
# Reading a PEP 751 lock
# ---------------------------------------------------------------------------


def _lock_error(path: str, what: str) -> BadInput:
    return BadInput(f"--lock {path}: {what}")


def parse_lock(text: str, path: str = "pylock.toml") -> tuple[dict[str, Any], tuple[LockedPackage, ...]]:
    """The top-level table and the packages of a PEP 751 lock; BadInput (one line) when it is not one."""
    from torchfit.inputs import loads_toml

    doc = loads_toml(text, f"--lock {path}")
    version = doc.get("lock-version")
    if not isinstance(version, str) or not version.startswith("1."):
        raise _lock_error(path, "not a PEP 751 lock (needs lock-version = \"1.x\")")
    raw = doc.get("packages")
    if not isinstance(raw, list) or not raw:
        raise _lock_error(path, "has no [[packages]]")
    packages = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict) or not isinstance(p.get("name"), str):
            raise _lock_error(path, f"packages[{i}] has no name")
        files: list[LockedFile] = []
        for kind, entries in (("wheel", p.get("wheels") or []), ("sdist", [p["sdist"]] if "sdist" in p else [])):
            if not isinstance(entries, list):
                raise _lock_error(path, f"packages[{i}] ({p['name']}): wheels must be an array of tables")
            for w in entries:
                if not isinstance(w, dict) or not isinstance(w.get("hashes", {}), dict):
                    raise _lock_error(path, f"packages[{i}] ({p['name']}): a file entry is not a table")
                files.append(LockedFile(
                    url=w.get("url"), path=w.get("path"), name=w.get("name"),
                    hashes={str(k).lower(): str(v) for k, v in (w.get("hashes") or {}).items()},
                    size=w.get("size") if isinstance(w.get("size"), int) else None, kind=kind,
                ))
        packages.append(LockedPackage(
            name=canonicalize_name(p["name"]),
            version=str(p["version"]) if p.get("version") is not None else None,
            index=p.get("index") if isinstance(p.get("index"), str) else None,
            files=tuple(files),
            marker=p.get("marker") if isinstance(p.get("marker"), str) else None,
            requires_python=p.get("requires-python") if isinstance(p.get("requires-python"), str) else None,
        ))
    return doc, tuple(packages)


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def stack_from_lock(text: str, path: str) -> Stack:
    """A `Stack` whose pins and files are the lock's (variant from torch's local label)."""
    doc, packages = parse_lock(text, path)
    by_name = {p.name: p for p in packages}
    torch = by_name.get("torch")
    if torch is None or not torch.version:
        raise _lock_error(path, "locks no torch version")
    try:
        tv = Version(torch.version)
    except InvalidVersion:
        raise _lock_error(path, f"torch version {torch.version!r} is not a version") from None
    # [tool.torchfit]: this module's own keys, or the plan `torchfit install` records
    # ([tool.torchfit.plan] = `resolve --json`, plus its "torch-index-url").
    tool = _table(doc.get("tool"))
    meta = _table(tool.get("torchfit"))
    plan = _table(meta.get("plan"))
    variant = str(meta.get("variant") or plan.get("variant") or tv.local or "")
    if not variant:
        raise _lock_error(path, f"torch {torch.version} has no local label (+cu128) and the lock names no "
                                "[tool.torchfit] variant")
    index = torch.index or str(meta.get("index-url") or meta.get("torch-index-url") or plan.get("index_url") or "")
    if not index:
        raise _lock_error(path, "says nowhere which index torch came from (packages.index)")
    python = str(meta.get("python") or plan.get("python") or "")
    m = re.match(r"^\s*==\s*(\d+\.\d+)(\.\*)?\s*$", str(doc.get("requires-python", "")))
    if not python and m:
        python = m.group(1)
    arches = tuple(a for a in ("x86_64", "aarch64")
                   if any(a in (f.name or f.url or "") for f in torch.files)) or ("x86_64",)
    family = tuple((n, by_name[n].version or "") for n in PACKAGES if n in by_name)
    # The family came from the lock's torch index, whether or not each entry says so.
    packages = tuple(replace(p, index=p.index or index) if p.name in PACKAGES else p for p in packages)
    return Stack(
        torch=str(tv.public), variant=variant, python=python or "", index_url=index, family=family,
        arches=arches, locked=packages, origin=f"lock {path}",
    )


def load_lock(path: str) -> Stack:
    from torchfit.inputs import MAX_LOCK_BYTES, read_text_file

    return stack_from_lock(read_text_file(path, "--lock", limit=MAX_LOCK_BYTES), path)


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------


def _public_url(url: str) -> str:
    """An index URL safe to write into a file: no credentials."""
    return strip_credentials(url).rstrip("/")


def _header(stack: Stack, fmt: str, today: _dt.date | None) -> list[str]:
    from torchfit import __version__

    day = (today or _dt.date.today()).isoformat()
    what = ", ".join(f"{n} {v}" for n, v in stack.family)
    lines = [
        f"Generated by torchfit {__version__} (torchfit export --format {fmt}) on {day}.",
        f"Stack: {what} ({stack.variant}), Python {stack.python or 'as locked'}"
        + (f", for {', '.join(stack.hosts)}" if stack.hosts else "")
        + (f"; from {stack.origin}" if stack.origin != "plan" else "") + ".",
    ]
    if _public_url(stack.index_url) != stack.index_url.rstrip("/"):
        lines.append("Credentials were removed from the index URL: supply them through ~/.netrc, "
                     "keyring or the tool's environment variables.")
    lines.extend(stack.notes)
    return lines


def _pin(name: str, version: str, variant: str, *, local: bool) -> str:
    """`torch==2.8.0+cu128`: the local label ties the pin to the variant index's build."""
    if local and "+" not in version:
        return f"{name}=={version}+{variant}"
    return f"{name}=={version}"


def render_requirements(stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None) -> str:
    """requirements.txt for pip: the variant index alone, or (from a lock) every file hash-pinned."""
    head = _header(stack, "requirements", today)
    index = _public_url(stack.index_url)
    py = f"python{stack.python}" if stack.python else "python3"
    if not stack.locked:
        head += [
            f"Install: {py} -m pip install -r requirements.txt",
            "",
            f"The only index named is the {stack.variant} index: pip cannot tie an index to a package, and",
            "with a second index it takes each name from whichever index offers the best version",
            "(how a CPU build, or a hijacked dependency, slips in). The variant index also hosts",
            "torch's own dependencies. torch is pinned with its local label, which PyPI never carries.",
            "Install the rest of your project in a second step, from PyPI, keeping this stack:",
            f"  {py} -m pip freeze | grep -iE '^(torch|torchvision|torchaudio)==' > torch-constraints.txt",
            f"  {py} -m pip install -c torch-constraints.txt -r your-requirements.txt",
        ]
        body = [f"--index-url {index}"]
        body += [_pin(n, v, stack.variant, local=(n == "torch")) for n, v in stack.family]
        return "".join(f"# {h}".rstrip() + "\n" for h in head) + "\n".join(body) + "\n"
    hashed = all(any(f.hashes for f in p.files) for p in stack.locked)
    family = {n for n, _ in stack.family}
    # A package the lock does not place came from the default index (`--pypi-url`).
    others = sorted({_public_url(p.index or pypi_url) for p in stack.locked
                     if p.name not in family} - {index})
    head += [
        f"Install: {py} -m pip install -r requirements.txt",
        "",
        "Every package of the lock is pinned by version" + (" and by the hashes of its files: pip runs" if hashed
        else "; the lock has no hashes for some files, so pip cannot verify them"),
    ]
    if hashed:
        head += ["in --require-hashes mode, so each index named below can serve only the files locked,",
                 "and naming several indexes is safe."]
    body = [f"--index-url {index}"] + [f"--extra-index-url {o}" for o in others]
    for p in sorted(stack.locked, key=lambda p: p.name):
        if not p.version:
            raise ExportFailed(f"the lock gives no version for {p.name}: a requirements file needs one")
        line = f"{p.name}=={p.version}"
        if p.marker:
            line += f" ; {p.marker}"
        hashes = sorted({f"{algo}:{h}" for f in p.files for algo, h in f.hashes.items() if algo == "sha256"})
        if hashed and hashes:
            line += " \\\n" + " \\\n".join(f"    --hash={h}" for h in hashes)
        body.append(line)
    return "".join(f"# {h}".rstrip() + "\n" for h in head) + "\n".join(body) + "\n"


def _environments(stack: Stack) -> list[str]:
    return [f"sys_platform == 'linux' and platform_machine == '{a}'" for a in stack.arches]


def render_uv(
    stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None, keep_credentials: bool = False,
) -> str:
    """A pyproject.toml for uv: explicit variant index, the family routed to it by [tool.uv.sources]."""
    public = (lambda u: u.rstrip("/")) if keep_credentials else _public_url
    head = [*_header(stack, "uv", today), "Use as is (uv sync, uv lock, uv pip install -r pyproject.toml) or merge its tables into your", "pyproject.toml. The variant index is explicit: only the packages [tool.uv.sources] routes to it", "come from it; everything else comes from the default index."]
    family_names = [n for n, _ in stack.family]
    deps = [_pin(n, v, stack.variant, local=(n == "torch")) for n, v in stack.family]
    out = ["".join(f"# {h}".rstrip() + "\n" for h in head), "[project]\n",
           'name = "torchfit-stack"\n', 'version = "0"\n']
    if stack.python:
        out.append(f"requires-python = {toml_value(f'=={stack.python}.*')}\n")
    out.append("dependencies = [\n" + "".join(f"    {toml_value(d)},\n" for d in deps) + "]\n\n")
    out.append("[tool.uv]\n")
    out.append("environments = [\n" + "".join(f"    {toml_value(e)},\n" for e in _environments(stack)) + "]\n")
    others = [p for p in stack.locked if p.name not in family_names and p.version]
    if others:
        out.append("# The lock's other versions, as constraints (uv re-locks with hashes itself).\n")
        out.append("constraint-dependencies = [\n"
                   + "".join(f"    {toml_value(f'{p.name}=={p.version}')},\n" for p in sorted(others, key=lambda p: p.name))
                   + "]\n")
    out.append("\n[[tool.uv.index]]\n")
    out.append(f"name = {toml_value(stack.index_name)}\nurl = {toml_value(public(stack.index_url))}\nexplicit = true\n")
    if _public_url(pypi_url) != PYPI_SIMPLE:
        out.append("\n[[tool.uv.index]]\n")
        out.append(f'name = "default"\nurl = {toml_value(public(pypi_url))}\ndefault = true\n')
    out.append("\n[tool.uv.sources]\n")
    for n in family_names:
        out.append(f"{n} = {{ index = {toml_value(stack.index_name)} }}\n")
    return "".join(out)


def render_pylock(stack: Stack, *, today: _dt.date | None = None) -> str:
    """PEP 751 pylock.toml from the stack's locked packages (their files, hashes and indexes)."""
    if not stack.locked:
        raise ExportFailed("a pylock.toml needs locked files: give --lock FILE, or let torchfit lock "
                           "with uv (export --format pylock without --lock)")
    family = {n for n, _ in stack.family}
    index = _public_url(stack.index_url)
    for p in stack.locked:
        if p.name in family and p.index and _public_url(p.index) != index:
            raise ExportFailed(f"{p.name} is locked from {redact(p.index)}, not the {stack.variant} index "
                               f"{redact(index)}: refusing to export a stack whose torch family comes "
                               "from another index")
    head = [*_header(stack, "pylock", today),
            "Install: uv pip install -r pylock.toml, or with pip >= 26: pip install -r pylock.toml."]
    out = ["".join(f"# {h}".rstrip() + "\n" for h in head)]
    out.append('lock-version = "1.0"\n')
    out.append("environments = [" + ", ".join(toml_value(e) for e in _environments(stack)) + "]\n")
    if stack.python:
        out.append(f"requires-python = {toml_value(f'=={stack.python}.*')}\n")
    out.append('created-by = "torchfit"\n')
    for p in sorted(stack.locked, key=lambda p: (p.name not in family, p.name)):
        out.append("\n[[packages]]\n")
        out.append(f"name = {toml_value(p.name)}\n")
        if p.version:
            out.append(f"version = {toml_value(p.version)}\n")
        if p.marker:
            out.append(f"marker = {toml_value(p.marker)}\n")
        if p.requires_python:
            out.append(f"requires-python = {toml_value(p.requires_python)}\n")
        if p.index:
            out.append(f"index = {toml_value(_public_url(p.index))}\n")
        wheels = [f for f in p.files if f.kind == "wheel"]
        sdists = [f for f in p.files if f.kind == "sdist"]
        if wheels:
            out.append("wheels = [\n")
            for f in wheels:
                out.append(f"    {toml_value(_file_table(f))},\n")
            out.append("]\n")
        if sdists:
            out.append(f"sdist = {toml_value(_file_table(sdists[0]))}\n")
    out.append("\n[tool.torchfit]\n")
    for k, v in (("torch", stack.torch), ("variant", stack.variant), ("python", stack.python),
                 ("index-url", index)):
        if v:
            out.append(f"{k} = {toml_value(v)}\n")
    return "".join(out)


def _file_table(f: LockedFile) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if f.name:
        t["name"] = f.name
    if f.url:
        t["url"] = strip_credentials(f.url)
    elif f.path:
        t["path"] = f.path
    if f.size is not None:
        t["size"] = f.size
    t["hashes"] = dict(f.hashes)
    return t


# ---------------------------------------------------------------------------
# Locking with uv (pylock without --lock)
# ---------------------------------------------------------------------------


def uv_platform(arch: str, glibc: str | None) -> str:
    """uv's --python-platform for the build's glibc floor: x86_64-manylinux_2_28."""
    floor = "2_28" if glibc and tuple(int(x) for x in glibc.split(".")[:2]) >= (2, 28) else "2_17"
    return f"{arch}-manylinux_{floor}"


def lock_with_uv(stack: Stack, runner: Any, *, pypi_url: str = PYPI_SIMPLE, on_wait: Any = None) -> Stack:
    """Resolve the stack's full closure with `uv pip compile --format pylock.toml`.

    uv compiles the `--format uv` project: the variant index is explicit and
    `[tool.uv.sources]` routes the torch family to it, so uv takes the family from
    that index or fails, and everything else from the default index (`--no-config`:
    no user configuration adds an index). uv's pylock output names no `index`; the
    routing is what makes it known, and the renderer records it.
    """
    if len(stack.arches) != 1:
        raise BadInput("a pylock.toml export covers one platform; the hosts are "
                       f"{' and '.join(stack.arches)} (export for one --facts file at a time)")
    if not stack.python:
        raise BadInput("the stack names no Python version to lock for")
    # The uv `install` uses: on PATH, else beside torchfit's own Python.
    from torchfit.installer.backends import find_uv

    uv = find_uv(runner)
    if uv is None:
        raise ExportFailed("exporting a pylock.toml without --lock needs uv to lock the dependencies",
                           hint="pip install uv (on PATH or into torchfit's own venv), or export from an "
                                "existing lock with --lock FILE")
    from torchfit.runner import temp_dir

    with temp_dir("export") as tmp:
        project = os.path.join(tmp, "pyproject.toml")
        out = os.path.join(tmp, "pylock.toml")  # uv insists on this file name
        # The index URL keeps its credentials here (uv needs them); the file is private and temporary.
        text = render_uv(stack, pypi_url=pypi_url, keep_credentials=True)
        fd = os.open(project, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        argv = [
            uv, "pip", "compile", project, "--format", "pylock.toml", "-o", out, "--quiet", "--no-config",
            "--no-header", "--python-version", stack.python,
            "--python-platform", uv_platform(stack.arches[0], stack.glibc),
            "--default-index", pypi_url,
        ]
        # Bounded and visible: uv's per-request timeout, a stall limit (no bytes moved), and
        # `on_wait` for a progress line naming what is awaited.
        from torchfit.installer.flow import stall_timeout

        uv_env = {"UV_PREVIEW_FEATURES": "pylock", "UV_HTTP_TIMEOUT": os.environ.get("UV_HTTP_TIMEOUT", "30")}
        result = runner.run(argv, timeout=UV_TIMEOUT, cwd=tmp, env=uv_env, stall=stall_timeout(),
                            on_wait=on_wait)
        if not result.ok:
            tail = redact((result.stderr or result.stdout).strip())
            raise ExportFailed(f"uv pip compile could not lock {stack.variant} torch {stack.torch} "
                               f"for Python {stack.python}: {' '.join(tail.split())[-400:] or 'no output'}")
        with open(out, encoding="utf-8") as fh:
            locked_text = fh.read()
    _doc, packages = parse_lock(locked_text, "uv pip compile output")
    family = {n for n, _ in stack.family}
    missing = family - {p.name for p in packages}
    if missing:
        raise ExportFailed(f"uv's lock has no {', '.join(sorted(missing))}")
    packages = tuple(
        replace(p, index=p.index or (stack.index_url if p.name in family else pypi_url)) for p in packages
    )
    return replace(stack, locked=packages)


def render(fmt: str, stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None) -> str:
    if fmt == "requirements":
        return render_requirements(stack, pypi_url=pypi_url, today=today)
    if fmt == "uv":
        return render_uv(stack, pypi_url=pypi_url, today=today)
    if fmt == "pylock":
        return render_pylock(stack, today=today)
    raise BadInput(f"--format {fmt}: one of {', '.join(FORMATS)}")
