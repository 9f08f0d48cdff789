"""PEP 751 pylock.toml: parse, load and render; the lock `torchfit install` writes.

PEP 751 (https://peps.python.org/pep-0751/) gives every distribution its exact
version and the artifact installed, with its sha256; torchfit adds, under
`[tool.torchfit]`, what it needs to rebuild and to check the env later: the host
facts the lock was made for, the plan (`torchfit resolve --json`), the torch index,
the NCCL pin and the runtime versions `torchfit verify` should find (the accessors
on `lock.model.Lock`).

Two readers over one parser: `parse_pylock` takes any PEP 751 lock (uv's output, a
user's lock for `export --lock`); `parse_lock` is the strict one `install --lock`
uses (a torchfit lock: `[tool.torchfit]`, every file with a sha256).
`render_lock` writes through the one TOML writer (`lock.toml`). No URL in the file
holds credentials: wheel URLs lose their `user:password@` (pip and uv take
credentials from the index options when rebuilding), other text passes through
`redact`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from torchfit.errors import BadInput
from torchfit.inputs import (
    MAX_LOCK_BYTES,
    MAX_LOCK_PACKAGES,
    loads_toml,
    read_text_file,
    shown,
    terminal_text,
)
from torchfit.lock.model import Artifact, Lock, LockedDist
from torchfit.lock.toml import Inline, drop_none, dumps_toml
from torchfit.lock.tool import ToolTable, find_table, table
from torchfit.redact import redact, strip_credentials

__all__ = [
    "LOCK_NAME",
    "LOCK_VERSION",
    "artifact_table",
    "file_name",
    "load_expected",
    "load_lock",
    "load_pylock",
    "local_file",
    "package_table",
    "parse_lock",
    "parse_pylock",
    "render_lock",
    "replace_lock",
    "requirements_text",
    "sha256_file",
    "write_lock",
]

LOCK_NAME = "pylock.toml"
LOCK_VERSION = "1.0"

# Every field of a lock that can reach an installer is checked against these (whole
# match: `$` would accept a trailing newline). PEP 508 names; hex digests.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_HEX = re.compile(r"[0-9a-f]+")
_HASH_NAME = re.compile(r"[a-z0-9_-]{1,32}")
_URL_SCHEMES = ("https", "http", "file")


# --- reading ------------------------------------------------------------------------


def parse_pylock(text: str, source: str, *, local_root: str | None = None) -> Lock:
    """Any PEP 751 lock: its packages, files and `[tool.torchfit]` (empty if none).

    Lenient where PEP 751 is (a file may lack a hash, a package its version); strict
    about the structure. BadInput, one line naming `source` and the entry, otherwise.

    `local_root` (the lock's directory, which a relative `path` is read from): a file
    the lock gives without a sha256 that lies on this machine (a `path`, a `file://`
    URL) gets the sha256 of its bytes. uv hashes the files it finds itself; an index
    that gives no hash leaves a remote file without one (the caller decides).
    """
    check_package_count(text, source)
    return _pylock_of(loads_toml(text, source), source, local_root)


def check_package_count(text: str, source: str, count: int | None = None) -> None:
    """BadInput when a lock lists more than MAX_LOCK_PACKAGES packages (issue 34, T1): said at
    once, from its `[[packages]]` headers before the TOML is parsed (40,000 take seconds to
    parse), and from the parsed list (`count`: an inline array has no headers)."""
    n = count if count is not None else len(_PACKAGES_HEADER.findall(text))
    if n > MAX_LOCK_PACKAGES:
        raise BadInput(f"{source}: {n} packages; torchfit reads locks of at most {MAX_LOCK_PACKAGES} packages "
                       "(an env's lock holds a few hundred)")


_PACKAGES_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*packages[ \t]*\]\]", re.MULTILINE)


def _pylock_of(data: Mapping[str, object], source: str, local_root: str | None) -> Lock:
    """`parse_pylock` of the parsed TOML."""
    version = data.get("lock-version")
    # PEP 751: lock-version is "MAJOR.MINOR"; a reader refuses a major it does not know.
    if not isinstance(version, str) or not re.fullmatch(r"1\.[0-9]+", version):
        raise BadInput(f"{source}: not a PEP 751 lock (lock-version {version!r:.80}; needs \"1.x\")")
    raw = data.get("packages")
    if not isinstance(raw, list) or not raw:
        raise BadInput(f"{source}: no [[packages]]")
    check_package_count("", source, len(raw))
    dists = [_read_package(p, f"{source}: packages[{i}]", local_root) for i, p in enumerate(raw)]
    envs = data.get("environments")
    envs = envs if isinstance(envs, list) else []
    return Lock(
        packages=tuple(dists),
        tool=ToolTable.from_toml(find_table(data), source, _check_url),
        requires_python=_check_text(_str(data.get("requires-python")), source, "requires-python"),
        environments=tuple(_check_marker(e, source, "environments") or "" for e in envs if isinstance(e, str)),
        path=source,
    )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _shown(value: object) -> str:
    """A field's value for a one-line message: escaped, cut."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_name(raw: Any, where: str) -> str:
    """A PEP 508 name, canonical (PEP 503); BadInput otherwise."""
    if not isinstance(raw, str) or not _NAME.fullmatch(raw):
        raise BadInput(f"{where}: name {_shown(raw)} is not a package name")
    return canonicalize_name(raw)


def _check_version(raw: Any, where: str) -> str:
    """A PEP 440 version, as written (nothing but its own characters: `Version()`
    alone would take surrounding whitespace and newlines)."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(raw, str) or not raw or " " in raw or not _is_one_line(raw):
        raise BadInput(f"{where}: version {_shown(raw)} is not a version")
    try:
        Version(raw)
    except InvalidVersion:
        raise BadInput(f"{where}: version {_shown(raw)} is not a version") from None
    return raw


def _check_url(raw: Any, where: str, what: str = "url") -> str:
    """A URL an installer may fetch: https, http or file, no whitespace or control characters."""
    if not isinstance(raw, str) or not raw or " " in raw or not _is_one_line(raw):
        raise BadInput(f"{where}: {what} {_shown(redact(str(raw)))} is not a URL")
    try:
        parts = urlsplit(raw)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise BadInput(f"{where}: {what} {_shown(redact(raw))} is not a URL") from None
    if parts.scheme.lower() not in _URL_SCHEMES or "://" not in raw:
        raise BadInput(f"{where}: {what} {_shown(redact(raw))}: only https://, http:// and file:// URLs")
    if parts.scheme.lower() != "file" and not parts.hostname:
        raise BadInput(f"{where}: {what} {_shown(redact(raw))} has no host")
    return raw


def _check_text(raw: Any, where: str, what: str) -> str | None:
    """Optional plain text of one line (a path, a file name, a marker): no control characters."""
    if raw is None:
        return None
    if not isinstance(raw, str) or not _is_one_line(raw):
        raise BadInput(f"{where}: {what} {_shown(raw)} is not one line of text")
    return raw


def _is_one_line(text: str) -> bool:
    """No control, format or line-breaking character (Python's splitlines() breaks at
    U+2028 and U+0085 too); plain spaces only."""
    import unicodedata

    return not any((ch.isspace() and ch != " ") or unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
                   for ch in text)


def _check_marker(raw: Any, where: str, what: str = "marker") -> str | None:
    from packaging.markers import InvalidMarker, Marker

    text = _check_text(raw, where, what)
    if text is not None:
        try:
            Marker(text)
        except InvalidMarker:
            raise BadInput(f"{where}: {what} {_shown(text)} is not a PEP 508 marker") from None
    return text


def _check_hashes(raw: Any, where: str) -> dict[str, str]:
    """`{algorithm: hex digest}`: a hashlib name (or another plain name) and lowercase hex,
    of the algorithm's length when hashlib knows it."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: hashes must be a table")
    out: dict[str, str] = {}
    for key, value in raw.items():
        algo = str(key).lower()
        digest = value.lower() if isinstance(value, str) else value
        if not _HASH_NAME.fullmatch(algo) or not isinstance(digest, str) or not _HEX.fullmatch(digest):
            raise BadInput(f"{where}: hash {_shown(key)} = {_shown(value)} is not a hex digest")
        if algo in hashlib.algorithms_guaranteed and not algo.startswith("shake"):
            size = hashlib.new(algo).digest_size * 2
            if len(digest) != size:
                raise BadInput(f"{where}: {algo} hash {_shown(value)} is not {size} hex digits")
        out[algo] = digest
    return out


def _read_package(p: Any, where: str, local_root: str | None) -> LockedDist:
    if not isinstance(p, dict) or p.get("name") is None:
        raise BadInput(f"{where}: has no name")
    name = _check_name(p["name"], where)
    where = f"{where} ({name})"
    wheels = p.get("wheels") or []
    if not isinstance(wheels, list):
        raise BadInput(f"{where}: wheels must be an array of tables")
    arts = [_read_artifact(w, "wheel", where, local_root) for w in wheels]
    if isinstance(p.get("archive"), dict):  # PEP 751 packages.archive: a direct URL/path file
        a = p["archive"]
        last = file_name(str(a.get("url") or a.get("path") or ""))
        arts.append(_read_artifact(a, "wheel" if last.endswith(".whl") else "sdist", where, local_root))
    if "sdist" in p:
        arts.append(_read_artifact(p["sdist"], "sdist", where, local_root))
    version = p.get("version")
    rp = _check_text(p.get("requires-python"), where, "requires-python")
    if rp is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(rp)
        except InvalidSpecifier:
            raise BadInput(f"{where}: requires-python {_shown(rp)} is not a version specifier") from None
    index = p.get("index")
    return LockedDist(
        name, _check_version(version, where) if version is not None else None, tuple(arts),
        marker=_check_marker(p.get("marker"), where),
        index=_check_url(index, where, "index") if index is not None else None,
        requires_python=rp,
    )


def _read_artifact(raw: Any, kind: str, where: str, local_root: str | None) -> Artifact:
    if not isinstance(raw, dict):
        raise BadInput(f"{where}: a {kind} entry is not a table")
    hashes = _check_hashes(raw.get("hashes"), f"{where}: a {kind}")
    size = raw.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise BadInput(f"{where}: a {kind}'s size {_shown(size)} is not a number of bytes")
    url = _check_url(raw["url"], where) if raw.get("url") is not None else None
    path = _check_text(raw.get("path"), where, f"a {kind}'s path")
    filename = _check_text(raw.get("name"), where, f"a {kind}'s name")
    if filename is not None and ("/" in filename or filename in (".", "..")):
        raise BadInput(f"{where}: a {kind}'s name {_shown(filename)} is not a file name")
    sha = hashes.get("sha256")
    if sha is None and local_root is not None:
        local = local_file(url, path, local_root)
        if local is not None:
            sha = sha256_file(local)
    return Artifact(kind, sha, url, path, filename, size, hashes)


def local_file(url: str | None, path: str | None, root: str) -> str | None:
    """The file on this machine an artifact names (a `file://` URL, or a `path` relative to
    `root`), when it is there; None for a remote URL or a missing file."""
    if url:
        parts = urlsplit(url)
        found = unquote(parts.path) if parts.scheme == "file" else None
    else:
        found = os.path.join(root, path) if path else None
    return found if found and os.path.isfile(found) else None


def artifact_size(a: Artifact, root: str = "") -> int:
    """The bytes of an artifact: the lock's `size`, else a local file's own (uv writes no size for
    a file:// wheel), else 0 (unknown)."""
    if a.size is not None:
        return a.size
    found = local_file(a.url, a.path, root)
    return os.path.getsize(found) if found else 0


def file_name(location: str) -> str:
    """The file name a URL or a path ends in, %-escapes decoded (`torch-2.13.0+cpu-...whl`)."""
    return unquote(os.path.basename(urlsplit(location).path)) if "://" in location else os.path.basename(location)


def sha256_file(path: str) -> str:
    """The sha256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def parse_lock(text: str, source: str) -> Lock:
    """A lock `torchfit install --lock` can rebuild: BadInput naming what is wrong (and where).

    On top of `parse_pylock`: a `[tool.torchfit]` table of this schema with a plan,
    and every package with a version and files that carry a sha256 and a location.
    """
    check_package_count(text, source)
    data = loads_toml(text, source)  # once: a lock of thousands takes seconds to parse
    lock = _pylock_of(data, source, None)
    tool = lock.tool
    tool.check_current(source)
    assert tool.plan is not None  # check_current's
    # The plan table is input too: every command that reads it (install --lock, add, export,
    # pack, verify) gets it checked here, once (compat.plan.plan_from_json).
    from torchfit.compat.plan import check_plan_table

    check_plan_table(tool.plan, f"{source}: [tool.torchfit.plan]")
    _check_consistent(lock, source)
    for i, d in enumerate(lock.packages):
        where = f"{source}: packages[{i}]"
        if d.version is None:
            raise BadInput(f"{where}: needs a name and a version")
        if not d.artifacts:
            raise BadInput(f"{where} ({d.name}): no wheels or sdist with a sha256")
        for a in d.artifacts:
            if not a.sha256:  # its form was checked by the reader
                raise BadInput(f"{where}: a {a.kind} without a valid sha256 hash")
            if a.url is None and a.path is None:
                raise BadInput(f"{where}: a {a.kind} needs a url or a path")
    _validate_pep751(data, source)
    return lock


def _validate_pep751(data: Mapping[str, object], source: str) -> None:
    """PEP 751's own rules for a lock `install --lock` rebuilds, through packaging's reader of
    the format (`packaging.pylock.Pylock`, packaging >= 26.1): the keys each table needs and
    their types, one source kind per package, normalized names, wheel file names, markers,
    specifiers and versions. It runs after torchfit's checks, whose messages name the package
    and keep an installer option out of every field (issue 21). The lenient reader does not
    run it: uv's answer and a user's lock may lack what PEP 751 requires and torchfit supplies
    (docs/architecture.md, "lock/ and packaging's pylock"). A lock without `created-by` is read."""
    from packaging.pylock import Pylock, PylockValidationError

    try:
        Pylock.from_dict(data if "created-by" in data else {**data, "created-by": "unknown"})
    except PylockValidationError as exc:
        raise BadInput(f"{source}: not a valid PEP 751 lock: {terminal_text(str(exc))[:300]}") from None


def _check_consistent(lock: Lock, source: str) -> None:
    """A lock says one thing: each package once, and a Python its plan agrees with."""
    seen: dict[str, str | None] = {}
    for d in lock.packages:
        if d.name in seen:
            raise BadInput(f"{source}: {d.name} is locked twice ({seen[d.name]} and {d.version}); "
                           "a lock names each package once")
        seen[d.name] = d.version
    rp = lock.requires_python
    python = lock.plan().get("python")
    if isinstance(rp, str) and isinstance(python, str):
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            spec = SpecifierSet(rp)
        except InvalidSpecifier:
            raise BadInput(f"{source}: requires-python {rp!r} is not a version specifier") from None
        if not spec.contains(f"{python}.0" if python.count(".") == 1 else python, prereleases=True):
            raise BadInput(f"{source}: requires-python {rp!r} contradicts its own plan (Python {python})")


def _read_text(path: str) -> str:
    return read_text_file(path, "--lock", limit=MAX_LOCK_BYTES)


def load_lock(path: str) -> Lock:
    """The strict reader over a file (`install --lock PATH`, `pack`): a lock an env can be
    built from. An adopted env's lock (`[tool.torchfit.base]`) is not one: its torch is the
    installed build no index serves."""
    lock = parse_lock(_read_text(path), shown(path))
    if lock.base():
        raise BadInput(f"{shown(path)}: the lock of an adopted env (torchfit adopt): its torch "
                       f"{table(lock.base().get('family')).get('torch', '?')} is the one installed there, which no "
                       "index serves; adopt the same base image's env instead of installing from this lock")
    return lock


def load_env_lock_file(path: str) -> Lock:
    """An env's own lock: `load_lock`'s, or an adopted env's before anything was added to it
    (`torchfit adopt`: `[tool.torchfit.base]` and no `[[packages]]` yet, its torch being the
    installed one). Everything else is `parse_lock`'s to judge."""
    text = _read_text(path)
    data = loads_toml(text, shown(path))
    tool = ToolTable.from_toml(find_table(data), shown(path))
    if tool.base is not None and not data.get("packages") and tool.is_current:
        return Lock(packages=(), tool=tool, path=path)
    return parse_lock(text, shown(path))


def load_pylock(path: str, source: str | None = None, *, hash_local: bool = False) -> Lock:
    """The lenient reader over a file (`export --lock PATH`, uv's output). `hash_local`:
    files without a sha256 that are on this machine get one (`parse_pylock`'s `local_root`)."""
    root = os.path.dirname(os.path.abspath(path)) if hash_local else None
    return parse_pylock(_read_text(path), source or f"--lock {shown(path)}", local_root=root)


def load_expected(path: str) -> tuple[dict[str, str] | None, str | None]:
    """[tool.torchfit] expected = {torch, cuda, cudnn, nccl} of the lock at `path`, for verify.

    Tolerant: a missing file is (None, None); an unreadable one (None, why). Keys
    other than the four are ignored; values are kept as text (`Lock.expected`).
    """
    if not os.path.isfile(path):
        return None, None
    try:
        data = loads_toml(_read_text(path), shown(path))
    except BadInput as exc:
        return None, exc.message
    raw = find_table(data)
    if "expected" in raw and not isinstance(raw["expected"], dict):
        return None, f"{path}: [tool.torchfit] expected is not a table"
    lock = Lock(packages=(), tool=ToolTable.from_toml(raw, shown(path)), path=path)
    return lock.expected(), None


def load_pin_mechanism(path: str) -> str | None:
    """[tool.torchfit.nccl] mechanism of the lock at `path` ("wheel", "wheel-override", ...),
    tolerant like `load_expected`: None when the file or the key cannot be read."""
    try:
        data = loads_toml(_read_text(path), shown(path))
    except (BadInput, OSError):
        return None
    nccl = ToolTable.from_toml(find_table(data), shown(path)).nccl or {}
    return str(nccl["mechanism"]) if nccl.get("mechanism") else None


# --- writing ------------------------------------------------------------------------


def render_lock(lock: Lock) -> str:
    """The pylock.toml text of `lock` (credentials stripped and redacted)."""
    packages = [package_table(d) for d in lock.packages]
    doc: dict[str, object] = {
        "lock-version": LOCK_VERSION,
        "created-by": "torchfit",
        "requires-python": lock.requires_python,
        "environments": list(lock.environments) or None,
        "packages": packages,
        "tool": {"torchfit": drop_none(lock.tool.to_toml())},
    }
    header = (
        "# PEP 751 lock written by `torchfit install`. Rebuild this env elsewhere with\n"
        "#   torchfit install --lock pylock.toml --prefix DIR\n"
        "# [tool.torchfit] holds the host it was made for, the plan, the NCCL pin and the\n"
        "# runtime versions `torchfit verify` should find.\n"
    )
    return redact(header + dumps_toml(doc))


def package_table(d: LockedDist, *, verbatim: bool = False) -> dict[str, object]:
    """A PEP 751 `[[packages]]` entry: its wheels (or sdist), index and hashes; no credentials.

    `verbatim`: the URLs as they are, credentials included, for a file only this user
    reads that an installer consumes at once (a signed file URL works only whole)."""
    url: Callable[[str], str] = (lambda u: u) if verbatim else strip_credentials
    entry: dict[str, object] = {"name": d.name, "version": d.version, "marker": d.marker,
                                "requires-python": d.requires_python,
                                "index": url(d.index).rstrip("/") if d.index else None}
    wheels = [a for a in d.artifacts if a.kind == "wheel"]
    sdists = [a for a in d.artifacts if a.kind == "sdist"]
    if sdists:
        entry["sdist"] = artifact_table(sdists[0], verbatim=verbatim)
    if wheels:
        entry["wheels"] = [artifact_table(a, verbatim=verbatim) for a in wheels]
    return entry


def artifact_table(a: Artifact, *, verbatim: bool = False) -> dict[str, object]:
    """A PEP 751 file table (`wheels` entry, `sdist`): no credentials in its URL (unless `verbatim`)."""
    return {
        "name": a.filename,
        "url": (a.url if verbatim else strip_credentials(a.url)) if a.url else None,
        "path": a.path if not a.url else None,
        "size": a.size,
        "hashes": Inline(a.all_hashes()),
    }


def write_lock(path: str, lock: Lock) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_lock(lock))


def replace_lock(path: str, lock: Lock) -> None:
    """Rewrite the lock at `path` atomically (files.write_atomic: a temporary file beside
    it, flushed to disk, the old file's mode, renamed over it). Until the rename the old
    lock is whole and in place; a failure (disk full, a signal) leaves it so."""
    from torchfit.files import write_atomic

    write_atomic(path, render_lock(lock))


def requirements_text(dists: Sequence[LockedDist]) -> str:
    """A hash-checking requirements file for pip/uv (`--require-hashes --no-deps`).

    One `name==version --hash=sha256:HEX` line per package, each part checked again
    here (the reader checked them once): a requirements file is pip's and uv's option
    syntax too, and a name or version carrying a newline would add options
    (`--extra-index-url`, `-r /etc/shadow`). BadInput if any part is not its own form.
    """
    lines = []
    for d in dists:
        where = f"requirement {_shown(d.name)}"
        hashes = [_check_hashes({"sha256": a.sha256}, where)["sha256"] for a in d.artifacts if a.sha256]
        if not hashes:
            raise BadInput(f"{where}: no sha256 to check")
        line = f"{_check_name(d.name, where)}=={_check_version(d.version, where)} "
        lines.append(line + " ".join(f"--hash=sha256:{h}" for h in hashes) + "\n")
    return "".join(lines)
