"""The lock: PREFIX/pylock.toml, a PEP 751 lock file with a `[tool.torchfit]` table.

PEP 751 (https://peps.python.org/pep-0751/) gives every distribution its exact
version and the artifact installed, with its sha256; torchfit adds, under
`[tool.torchfit]`, what it needs to rebuild and to check the env later: the host
facts the lock was made for, the plan (`torchfit resolve --json`), the torch index,
the NCCL pin and the runtime versions `torchfit verify` should find.

`render_lock` writes TOML by hand (`dumps_toml`: a small writer for the subset a
lock needs, round-trip tested against tomllib); `load_lock` reads and validates.
No URL in the file holds credentials: wheel URLs lose their `user:password@`
(pip and uv take credentials from the index options when rebuilding), other
text passes through `redact`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from torchfit._backports import FROZEN
from torchfit.errors import BadInput, TorchfitError
from torchfit.redact import redact

LOCK_NAME = "pylock.toml"
LOCK_VERSION = "1.0"
TOOL_SCHEMA = 1
FAMILY = ("torch", "torchvision", "torchaudio")


class LockMismatch(TorchfitError):
    """This host contradicts the lock being rebuilt (exit 1; `--force` overrides)."""

    reference = "lock-host-mismatch"

    def __init__(self, message: str, conflicts: Sequence[str] = (), hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.conflicts = list(conflicts)


# --- the model ----------------------------------------------------------------------


@dataclass(**FROZEN)
class Artifact:
    """One file of a distribution: a wheel (or an sdist when no wheel was used)."""

    kind: str  # "wheel" | "sdist"
    sha256: str
    url: str | None = None
    path: str | None = None
    filename: str | None = None
    size: int | None = None


@dataclass(**FROZEN)
class LockedDist:
    """One installed distribution, pinned to its exact version and artifacts."""

    name: str  # canonical (PEP 503) name
    version: str
    artifacts: tuple[Artifact, ...]
    marker: str | None = None
    index: str | None = None  # PEP 751 packages.index: the index it came from, when known

    @property
    def is_family(self) -> bool:
        return self.name in FAMILY

    def requirement_line(self) -> str:
        """`name==version --hash=sha256:...` for a hash-checking install."""
        hashes = " ".join(f"--hash=sha256:{a.sha256}" for a in self.artifacts)
        return f"{self.name}=={self.version} {hashes}"


@dataclass(**FROZEN)
class Lock:
    """A lock's packages and its `[tool.torchfit]` table (plain data, as in the file)."""

    packages: tuple[LockedDist, ...]
    tool: Mapping[str, Any] = field(default_factory=dict)
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    path: str | None = None

    def family(self) -> list[LockedDist]:
        return [d for d in self.packages if d.is_family]

    def rest(self) -> list[LockedDist]:
        return [d for d in self.packages if not d.is_family]


def sorted_dists(dists: Sequence[LockedDist]) -> tuple[LockedDist, ...]:
    return tuple(sorted(dists, key=lambda d: d.name))


# --- TOML writing ---------------------------------------------------------------------


class Inline(dict):  # type: ignore[type-arg]
    """A table written inline (`hashes = { sha256 = "..." }`)."""


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_str(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_str(key)


def toml_value(value: Any) -> str:
    """One TOML value (strings, numbers, bools, dates, lists, inline tables; None is left out)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("TOML lock values must be finite")
        return repr(value)
    if isinstance(value, str):
        return _toml_str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = [f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value if v is not None) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def _is_table(value: Any) -> bool:
    return isinstance(value, Mapping) and not isinstance(value, Inline)


def _is_table_array(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_table(v) for v in value)


def dumps_toml(data: Mapping[str, Any]) -> str:
    """TOML text for `data`: dicts become [tables], lists of dicts [[arrays of tables]].

    None values are left out (TOML has no null). Keys of a table come before its
    sub-tables, as TOML requires.
    """
    lines: list[str] = []
    _emit(lines, [], data)
    return "\n".join(lines).lstrip("\n") + "\n"


def _emit(lines: list[str], path: list[str], table: Mapping[str, Any]) -> None:
    for key, value in table.items():
        if value is None or _is_table(value) or _is_table_array(value):
            continue
        lines.append(f"{_toml_key(str(key))} = {toml_value(value)}")
    for key, value in table.items():
        sub = [*path, _toml_key(str(key))]
        if _is_table(value):
            lines += ["", "[" + ".".join(sub) + "]"]
            _emit(lines, sub, value)
        elif _is_table_array(value):
            for item in value:
                lines += ["", "[[" + ".".join(sub) + "]]"]
                _emit(lines, sub, item)


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        cls = Inline if isinstance(value, Inline) else dict
        return cls((k, _drop_none(v)) for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return [_drop_none(v) for v in value if v is not None]
    return value


def render_lock(lock: Lock) -> str:
    """The pylock.toml text of `lock` (credentials stripped and redacted)."""
    packages = []
    for d in lock.packages:
        entry: dict[str, Any] = {"name": d.name, "version": d.version, "marker": d.marker,
                                 "index": _public_index(d.index) if d.index else None}
        wheels = [a for a in d.artifacts if a.kind == "wheel"]
        sdists = [a for a in d.artifacts if a.kind == "sdist"]
        if sdists:
            entry["sdist"] = _artifact_table(sdists[0])
        if wheels:
            entry["wheels"] = [_artifact_table(a) for a in wheels]
        packages.append(entry)
    doc: dict[str, Any] = {
        "lock-version": LOCK_VERSION,
        "created-by": "torchfit",
        "requires-python": lock.requires_python,
        "environments": list(lock.environments) or None,
        "packages": packages,
        "tool": {"torchfit": _drop_none(lock.tool)},
    }
    header = (
        "# PEP 751 lock written by `torchfit install`. Rebuild this env elsewhere with\n"
        "#   torchfit install --lock pylock.toml --prefix DIR\n"
        "# [tool.torchfit] holds the host it was made for, the plan, the NCCL pin and the\n"
        "# runtime versions `torchfit verify` should find.\n"
    )
    return redact(header + dumps_toml(doc))


def _public_index(url: str) -> str:
    from torchfit.installer.sources import strip_credentials

    return strip_credentials(url)


def _artifact_table(a: Artifact) -> dict[str, Any]:
    from torchfit.installer.sources import strip_credentials

    return {
        "name": a.filename,
        "url": strip_credentials(a.url) if a.url else None,
        "path": a.path if not a.url else None,
        "size": a.size,
        "hashes": Inline(sha256=a.sha256),
    }


def write_lock(path: str, lock: Lock) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_lock(lock))


# --- reading ------------------------------------------------------------------------


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def parse_lock(text: str, source: str) -> Lock:
    """A lock from pylock.toml text; BadInput naming what is wrong (and where)."""
    from torchfit.inputs import loads_toml

    data = loads_toml(text, source)
    version = data.get("lock-version")
    if not isinstance(version, str) or version.split(".")[0] != "1":
        raise BadInput(f"{source}: lock-version {version!r} is not a PEP 751 lock-version 1.x")
    tool = (data.get("tool") or {}).get("torchfit")
    if not isinstance(tool, dict):
        raise BadInput(f"{source}: no [tool.torchfit] table: not a lock written by `torchfit install`")
    if tool.get("schema") != TOOL_SCHEMA:
        raise BadInput(f"{source}: [tool.torchfit] schema {tool.get('schema')!r}; this torchfit reads {TOOL_SCHEMA}")
    if not isinstance(tool.get("plan"), dict):
        raise BadInput(f"{source}: [tool.torchfit.plan] is missing")
    raw = data.get("packages")
    if not isinstance(raw, list) or not raw:
        raise BadInput(f"{source}: no [[packages]]")
    dists = []
    for i, p in enumerate(raw):
        where = f"{source}: packages[{i}]"
        if not isinstance(p, dict) or not isinstance(p.get("name"), str) or not isinstance(p.get("version"), str):
            raise BadInput(f"{where}: needs a name and a version")
        arts = []
        for w in p.get("wheels") or []:
            arts.append(_read_artifact(w, "wheel", where))
        if isinstance(p.get("sdist"), dict):
            arts.append(_read_artifact(p["sdist"], "sdist", where))
        if not arts:
            raise BadInput(f"{where} ({p['name']}): no wheels or sdist with a sha256")
        marker, index = p.get("marker"), p.get("index")
        dists.append(LockedDist(canonicalize_name(p["name"]), p["version"], tuple(arts),
                                marker if isinstance(marker, str) else None,
                                index if isinstance(index, str) else None))
    _check_consistent(dists, data, tool, source)
    envs = data.get("environments") or []
    return Lock(
        packages=tuple(dists),
        tool=tool,
        requires_python=data.get("requires-python") if isinstance(data.get("requires-python"), str) else None,
        environments=tuple(e for e in envs if isinstance(e, str)),
        path=source,
    )


def _check_consistent(dists: Sequence[LockedDist], data: Mapping[str, Any], tool: Mapping[str, Any],
                      source: str) -> None:
    """A lock says one thing: each package once, and a Python its plan agrees with."""
    seen: dict[str, str] = {}
    for d in dists:
        if d.name in seen:
            raise BadInput(f"{source}: {d.name} is locked twice ({seen[d.name]} and {d.version}); "
                           "a lock names each package once")
        seen[d.name] = d.version
    rp = data.get("requires-python")
    python = (tool.get("plan") or {}).get("python")
    if isinstance(rp, str) and isinstance(python, str):
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            spec = SpecifierSet(rp)
        except InvalidSpecifier:
            raise BadInput(f"{source}: requires-python {rp!r} is not a version specifier") from None
        if not spec.contains(f"{python}.0" if python.count(".") == 1 else python, prereleases=True):
            raise BadInput(f"{source}: requires-python {rp!r} contradicts its own plan (Python {python})")


def _read_artifact(raw: Any, kind: str, where: str) -> Artifact:
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: a {kind} entry must be a table")
    sha = (raw.get("hashes") or {}).get("sha256") if isinstance(raw.get("hashes"), dict) else None
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise BadInput(f"{where}: a {kind} without a valid sha256 hash")
    url, path = raw.get("url"), raw.get("path")
    if not isinstance(url, str) and not isinstance(path, str):
        raise BadInput(f"{where}: a {kind} needs a url or a path")
    size = raw.get("size")
    return Artifact(kind, sha, url if isinstance(url, str) else None, path if isinstance(path, str) else None,
                    raw.get("name") if isinstance(raw.get("name"), str) else None,
                    size if isinstance(size, int) else None)


def load_lock(path: str) -> Lock:
    from torchfit.inputs import MAX_LOCK_BYTES, read_text_file

    return parse_lock(read_text_file(path, "--lock", limit=MAX_LOCK_BYTES), path)


def requirements_text(dists: Sequence[LockedDist]) -> str:
    """A hash-checking requirements file for pip/uv (`--require-hashes --no-deps`)."""
    return "".join(d.requirement_line() + "\n" for d in dists)


# --- what verify compares ---------------------------------------------------------------

EXPECTED_KEYS = ("torch", "cuda", "cudnn", "nccl")


def load_expected(path: str) -> tuple[dict[str, str] | None, str | None]:
    """`[tool.torchfit] expected = {torch, cuda, cudnn, nccl}` of a pylock.toml.

    Unlike `load_lock` this is tolerant (verify reads any env's lock and must not
    stop on one it cannot use): a missing file is (None, None); an unreadable one
    (None, why). Keys other than the four are ignored; values are kept as text.
    """
    if not os.path.isfile(path):
        return None, None
    from torchfit.inputs import MAX_LOCK_BYTES, loads_toml, read_text_file

    try:
        data = loads_toml(read_text_file(path, "--lock", limit=MAX_LOCK_BYTES), path)
    except BadInput as exc:
        return None, exc.message
    tool = data.get("tool", {}).get("torchfit", {}) if isinstance(data.get("tool"), dict) else {}
    expected = tool.get("expected", {}) if isinstance(tool, dict) else {}
    if not isinstance(expected, dict):
        return None, f"{path}: [tool.torchfit] expected is not a table"
    out = {k: str(v) for k, v in expected.items() if k in EXPECTED_KEYS and v not in (None, "")}
    return out, None
