"""`torchfit pack --lock FILE -o DIR`: a lock's files in a directory a site carries across an air
gap (issue 26, item 1), and `install --pack DIR` on the other side.

The pack, every path inside it relative (it installs wherever it is carried):

    DIR/pylock.toml           the lock, as given
    DIR/simple/<project>/     a PEP 503 tree of the torch family (torch, torchvision, torchaudio):
                              the torch index of `install --pack`
    DIR/files/                the family's wheels the tree links to (`../../files/NAME#sha256=...`)
    DIR/wheels/               every other file of the lock: a find-links directory
    DIR/locks/GROUP.toml      a fleet's pack: each group's lock in place of DIR/pylock.toml, and
    DIR/locks/groups.json     each group's nodes (its hostlist), for `install --pack DIR --group`
    DIR/README.txt            how to install from it
    DIR/install.sh            with torchfit's own wheels (DIR/torchfit-wheels) and a Python
                              (DIR/python): the pack that stands alone (export/standalone.py)
    DIR/.torchfit-pack.json   which lock it holds (a different pack is never overwritten)

Every file is the lock's own (its URL or path as the lock records it, a relative path the lock's
directory's) and is checked against the lock's sha256 as it is written; a file the lock gives no
sha256 is refused (nothing unchecked crosses the gap). Each is read bounded (lock.artifacts): a
local one a regular file only, none past the lock's size; plain http:// only with
--allow-insecure-index. Written beside its final name and renamed, so an interrupted pack resumes:
a file already there with the right sha256 is kept, not fetched again.

The pack's directory holds only what torchfit wrote: every file goes in through files.write_beside
(or a `.part` opened O_NOFOLLOW|O_EXCL, resumed only when it is a regular file no other name
shares), each directory inside is opened without following a link, and a symlink, FIFO or
directory where a file goes (a planted `*.part`, README.txt, simple/index.html, a "wheel" that
links outside the pack) is refused naming it (files.NotOurs, exit 2), never written through or kept.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from urllib.parse import quote

from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.errors import BadInput, LockMismatch
from torchfit.files import commit, existing_file, open_beneath, open_existing, write_beside
from torchfit.index.pages import format_off_site, off_site_hosts
from torchfit.index.sources import refuse_insecure
from torchfit.inputs import decode_json, shown
from torchfit.lock.artifacts import copy_local, local_location, lock_dir, size_limit
from torchfit.lock.model import Artifact, Lock, LockedDist
from torchfit.lock.pylock import artifact_size, file_name, load_lock, sha256_file
from torchfit.lock.served import wanted as _wanted
from torchfit.redact import redact
from torchfit.space import Place, from_oserror, is_no_space

MARKER = ".torchfit-pack.json"
GROUPS = "groups.json"  # under locks/ in a fleet's pack: group name -> {"hostlist": its nodes}
README = """This directory is a torchfit pack: the files of {lock} ({count} files, {size}),
each checked against the lock's sha256, every path inside relative.

Carry it anywhere (no network needed there), then:

    torchfit install --offline --pack DIR --prefix /path/to/env

The torch family comes from DIR/simple (a PEP 503 tree), everything else from DIR/wheels
(a find-links directory); {where_lock}. Made by torchfit {version}.
{standalone}"""
FLEET_README = ("the locks are DIR/locks/GROUP.toml, one per group of the fleet (DIR/locks/groups.json: each "
                "group's nodes);\n`install --pack DIR` installs the group whose lock fits the node, and says which; "
                "name one with\n`--group NAME` (group-N, its hostlist, or one of its nodes)")


# IndexClient.download: fetch(url, fh, limit=the lock's size) -> (bytes, sha256); resuming a
# .part, fetch(url, fh, start=bytes already there, digest=their sha256 so far, limit=...) ->
# (bytes, sha256 of the whole file). Past `limit` it stops, refusing (a body longer than the file).
Fetch = Callable[..., tuple[int, str]]


@dataclass
class PackResult:
    out: str
    files: int = 0
    fetched: int = 0
    kept: int = 0
    bytes_total: int = 0


def _name(a: Artifact) -> str:
    name = a.filename or file_name(a.url or a.path or "")
    if not name or "/" in name or name in (".", ".."):
        raise BadInput(f"the lock names a file without a usable name: {a.url or a.path}")
    return name


def _marker(lock_path: str | Sequence[str]) -> dict[str, str]:
    paths = [lock_path] if isinstance(lock_path, str) else list(lock_path)
    if len(paths) == 1:
        return {"format": "torchfit-pack-1", "lock_sha256": sha256_file(paths[0])}
    joined = "\n".join(sorted(sha256_file(p) for p in paths))  # a fleet's locks, one per group
    return {"format": "torchfit-pack-1", "lock_sha256": hashlib.sha256(joined.encode()).hexdigest()}


def merged(locks: Sequence[Lock]) -> Lock:
    """One lock holding every file of `locks` (a fleet's groups), each file once; the first
    lock's [tool.torchfit]. For packing only: two groups may lock one package at two versions."""
    seen: set[tuple[str, ...]] = set()
    packages = []
    for lock in locks:
        for d in lock.packages:
            key = (d.name, d.version or "", *sorted(_name(a) for a in _wanted(d)))
            if key not in seen:
                seen.add(key)
                packages.append(d)
    return replace(locks[0], packages=tuple(packages))


def check_out_dir(out: str, lock_path: str | Sequence[str]) -> None:
    """A new directory, or a pack of this very lock (to resume); anything else is refused."""
    if not os.path.exists(out):
        return
    if not os.path.isdir(out):
        raise BadInput(f"-o {out}: exists and is not a directory")
    entries = os.listdir(out)
    if not entries:
        return
    try:
        dfd = open_beneath(out, create=False)
        try:
            with os.fdopen(open_existing(dfd, MARKER, os.path.join(out, MARKER)), "rb") as fh:
                have = decode_json(fh.read(1 << 20))
        finally:
            os.close(dfd)
    except (OSError, ValueError, BadInput):
        raise BadInput(f"-o {out}: not empty and not a torchfit pack; give a new directory") from None
    if have != _marker(lock_path):
        raise BadInput(f"-o {out}: a pack of another lock; give a new directory (a pack is never overwritten)")


def make_pack(lock: Lock, lock_path: str | Sequence[str], out: str, *, fetch: Fetch, say: Callable[[str], None],
              version: str, warn: Callable[[str], None] | None = None,
              hostlists: Sequence[str] = (), allow_insecure: bool = False,
              standalone: Callable[[], str] | None = None) -> PackResult:
    """Write the pack of `lock` into `out` (check_out_dir first). `fetch` writes a remote file
    (IndexClient.download, resuming a `.part` with start= and digest=, stopping at limit=) and
    returns (bytes, sha256 of the whole file); local files (file:// or a path, relative to the
    lock's directory) are copied (lock.artifacts: regular files only, bounded by the lock's size).
    A plain http:// file is refused before any request unless `allow_insecure`
    (--allow-insecure-index). `lock_path`: the lock, or a fleet's locks (one per group, its
    nodes' hostlist in `hostlists`). `standalone`: writes what makes the pack stand alone
    (export.standalone), after the lock's files and before the README, and returns the README's
    part on it."""
    check_out_dir(out, lock_path)
    # PEP 751: a relative path is the lock file's directory's (a fleet's locks share one)
    root = lock_dir(lock_path if isinstance(lock_path, str) else lock_path[0])
    shown_lock = lock_path if isinstance(lock_path, str) else "a group's lock"
    plan = []
    for d in lock.packages:
        for a in _wanted(d):
            if not a.sha256:
                raise BadInput(f"{shown_lock}: {d.name} {d.version}: {_name(a)} has no sha256 in the lock; "
                               "a pack carries checked files only")
            if a.url:  # before any request: a credential in the URL must never travel in clear
                refuse_insecure(a.url, f"{shown_lock}: {d.name} {d.version}:", allow_insecure)
            sub = "files" if d.name in FAMILY_PACKAGES else "wheels"
            plan.append((d, a, sub, _name(a)))
    total = sum(artifact_size(a, root) for _, a, _, _ in plan)  # a file:// wheel: its own size
    index = lock.torch_index_url()
    off = off_site_hosts([a.url or "" for d, a, _, _ in plan if d.name in FAMILY_PACKAGES], index) if index else []
    if off:
        # The env was built "from the mirror", yet its torch files came from elsewhere: the pack
        # fetches them from there too (it carries them across the gap all the same).
        (warn or say)(format_off_site(f"the lock's torch index {redact(index)}", off))
    with _writing(out, out):
        os.makedirs(out, exist_ok=True)
        rootfd = open_beneath(out)
    try:
        _judge_targets(out, rootfd, [(sub, name) for _, _, sub, name in plan], lock, lock_path)
        return _fill(lock, lock_path, out, rootfd, plan, total, fetch=fetch, say=say, version=version,
                     hostlists=hostlists, root=root, shown_lock=shown_lock, standalone=standalone)
    finally:
        os.close(rootfd)


def _fill(lock: Lock, lock_path: str | Sequence[str], out: str, rootfd: int, plan: list[tuple[LockedDist, Artifact,
          str, str]], total: int, *, fetch: Fetch, say: Callable[[str], None], version: str,
          hostlists: Sequence[str], root: str, shown_lock: str,
          standalone: Callable[[], str] | None = None) -> PackResult:
    """make_pack's writing, every file relative to `rootfd` (the pack's directory, opened once);
    a local file of the lock is read relative to `root` (the lock's directory)."""
    def put(rel: str, name: str, data: bytes) -> None:
        where = os.path.join(out, rel, name)
        with _writing(where, out):
            dfd = open_beneath(out, rel)
            try:
                write_beside(dfd, name, data, where=where)
            finally:
                os.close(dfd)

    with _writing(os.path.join(out, MARKER), out):
        write_beside(rootfd, MARKER, json.dumps(_marker(lock_path)).encode(), where=os.path.join(out, MARKER))
        subs = {sub: open_beneath(out, sub) for sub in ("files", "wheels", "simple")}
    result = PackResult(out, files=len(plan), bytes_total=total)
    done = 0
    try:
        for n, (d, a, sub, name) in enumerate(plan, 1):
            where = os.path.join(out, sub, name)
            size = has_file(subs[sub], name, a.sha256 or "", where)
            if size is not None:
                result.kept += 1
            else:
                with _writing(where + ".part", out):
                    size = write_checked(a, subs[sub], name, where, fetch, say, root=root,
                                         what=f"{shown_lock}: {d.name} {d.version}")
                result.fetched += 1
            done += a.size or size
            say(f"pack: {n}/{len(plan)} {name} ({_mb(done)} of {_mb(total) if total else '?'})")
    finally:
        for fd in subs.values():
            os.close(fd)
    for rel, name, text in _index_pages(lock):
        put(rel, name, text.encode())
    if isinstance(lock_path, str):
        put("", "pylock.toml", _read(lock_path))
        what, where_lock = os.path.basename(lock_path), "the lock is DIR/pylock.toml"
    else:  # a fleet: each group's lock under locks/
        groups = {}
        for i, path in enumerate(lock_path):
            name = os.path.splitext(os.path.basename(path))[0]
            put("locks", name + ".toml", _read(path))
            groups[name] = {"hostlist": hostlists[i] if i < len(hostlists) else ""}
        put("locks", GROUPS, json.dumps(groups, indent=1).encode())
        what = (f"{len(lock_path)} locks (locks/: one per group of the fleet: "
                + ", ".join(f"{n} {g['hostlist']}".rstrip() for n, g in groups.items())
                + ")")
        where_lock = FLEET_README
    extra = standalone() if standalone is not None else ""
    put("", "README.txt", README.format(lock=what, count=len(plan), size=_mb(done), version=version,
                                        where_lock=where_lock, standalone=extra).encode())
    return result


def _judge_targets(out: str, root: int, files: list[tuple[str, str]], lock: Lock,
                   lock_path: str | Sequence[str]) -> None:
    """Every path the pack will write, judged before anything is fetched: a symlink, a FIFO or a
    directory at one (files.NotOurs) is refused naming it while the pack is as it was."""
    named = [(sub, name) for sub, name in files] + [(sub, name + ".part") for sub, name in files]
    named += [(rel, name) for rel, name, _ in _index_pages(lock)] + [("", MARKER), ("", "README.txt")]
    if isinstance(lock_path, str):
        named.append(("", "pylock.toml"))
    else:
        named += [("locks", GROUPS)] + [("locks", os.path.splitext(os.path.basename(p))[0] + ".toml")
                                        for p in lock_path]
    for rel, name in named:
        try:
            dfd = open_beneath(out, rel, create=False) if rel else os.dup(root)
        except FileNotFoundError:
            continue  # made by this run
        try:
            existing_file(dfd, name, os.path.join(out, rel, name))
        finally:
            os.close(dfd)


def _read(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def has_file(dfd: int, name: str, sha256: str, where: str) -> int | None:
    """The size of `name` in `dfd` when it is a regular file whose sha256 is `sha256` (kept, not
    fetched again); None when absent or other bytes; NotOurs for a symlink (a "wheel" that points
    outside the pack is never kept) or anything else that is not a regular file."""
    if existing_file(dfd, name, where) is None:
        return None
    h, size = hashlib.sha256(), 0
    with os.fdopen(open_existing(dfd, name, where), "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return size if h.hexdigest() == sha256 else None


def _pack_place(out: str) -> Place:
    return Place("the pack's filesystem (-o)", out, "free space there, or give -o a directory on a filesystem "
                                                    "with room (run pack again there: it resumes)")


@contextlib.contextmanager
def _writing(path: str, out: str) -> Iterator[None]:
    """A write into the pack that fails, as one line: out of space or quota names `path` (what
    was being written) on the pack's filesystem, not TMPDIR (the boundary's guess when an
    OSError has no file name, as a failed write() has none); something in the way of a
    directory the pack makes (a file, a directory where a file goes) names its path."""
    try:
        yield
    except OSError as exc:
        if is_no_space(exc):
            raise from_oserror(exc, "torchfit pack", [_pack_place(out)], path=path) from None
        if exc.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY):
            where = exc.filename if isinstance(exc.filename, str) else path
            raise BadInput(f"{shown(where)}: cannot write the pack there ({exc.strerror}); move what is "
                           "there away, or give -o a new directory") from None
        raise


def write_checked(a: Artifact, dfd: int, name: str, where: str, fetch: Fetch,
                  say: Callable[[str], None] | None = None, *, root: str = "", what: str = "") -> int:
    """The file of `a` as `name` in directory `dfd` (`where` its path, for messages), its sha256
    the lock's (written to `name.part`, then renamed); its size. A remote file's `.part` left by an
    interrupted run is continued where it stopped, not fetched again; a `.part` that is not a
    regular file of its own (a symlink, a FIFO, a hard link) is refused (NotOurs), never written
    through, and a new one is made O_EXCL. Neither is read or fetched past the lock's size
    (lock.artifacts); a local `path` is relative to `root`, the lock's directory. `what` names
    the package in a refusal."""
    part = name + ".part"
    source = a.url or a.path or ""
    local = local_location(a, root)
    limit = size_limit(a)
    found = existing_file(dfd, part, where + ".part")
    have = 0
    if found is not None and local is None and 0 < found.st_size <= limit:
        fd = open_existing(dfd, part, where + ".part", os.O_RDWR)
        have = os.fstat(fd).st_size
    else:
        if found is not None:  # a stale .part of a local copy, or an empty one: started again
            os.unlink(part, dir_fd=dfd)
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dfd)
    with os.fdopen(fd, "r+b") as fh:
        h = hashlib.sha256()
        if local is not None:
            try:
                _, got = copy_local(a, local, fh, what or _name(a))
            except BadInput:
                os.unlink(part, dir_fd=dfd)  # refused unread, or cut at the lock's size: nothing of it kept
                raise
        else:
            if have:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
                if say is not None:
                    say(f"pack: resuming {name} after {_mb(have)}")
            _, got = (fetch(source, fh, start=have, digest=h, limit=limit) if have
                      else fetch(source, fh, limit=limit))
        size = fh.tell()
    if got != a.sha256:
        os.unlink(part, dir_fd=dfd)
        raise BadInput(f"{source}: sha256 {got} is not the lock's {a.sha256}; nothing kept")
    commit(dfd, part, name, where)
    return size


def _index_pages(lock: Lock) -> list[tuple[str, str, str]]:
    """DIR/simple: the family's projects, each linking its files with their sha256 (relative);
    (directory under the pack, file name, text) of each page."""
    projects: dict[str, list[str]] = {}
    for d in lock.packages:
        if d.name not in FAMILY_PACKAGES:
            continue
        for a in _wanted(d):
            name = _name(a)
            projects.setdefault(d.name, []).append(
                f'<a href="../../files/{quote(name)}#sha256={a.sha256}">{name}</a>')
    pages = [(f"simple/{project}", "index.html", "<!DOCTYPE html><html><body>\n" + "\n".join(links)
              + "\n</body></html>\n") for project, links in projects.items()]
    pages.append(("simple", "index.html", "<!DOCTYPE html><html><body>\n"
                  + "\n".join(f'<a href="{p}/">{p}</a>' for p in sorted(projects)) + "\n</body></html>\n"))
    return pages


def load_pack_groups(pack: str) -> dict[str, tuple[str, str]]:
    """A fleet's pack: group name -> (its lock's path, its nodes' hostlist); {} for a pack of one lock.
    BadInput for a pack that is neither."""
    if os.path.isfile(os.path.join(pack, "pylock.toml")):
        return {}
    try:
        with open(os.path.join(pack, "locks", GROUPS), encoding="utf-8") as fh:
            data = decode_json(fh.read(1 << 20))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict) or not data:
        raise BadInput(f"--pack {pack}: holds neither pylock.toml nor locks/{GROUPS}: not a whole pack")
    out = {}
    for name, group in data.items():
        path = os.path.join(pack, "locks", f"{name}.toml")
        if "/" in name or not os.path.isfile(path) or not isinstance(group, dict):
            raise BadInput(f"--pack {pack}: locks/{GROUPS} names a group without its lock: {name!r}")
        out[name] = (path, str(group.get("hostlist") or ""))
    return out


def find_group(groups: dict[str, tuple[str, str]], wanted: str) -> str | None:
    """The group `wanted` names: its name (`group-2`, or `2`), its hostlist, or one of its nodes."""
    from torchfit.fleet.hostlist import expand_hostlist

    for name, (_, hostlist) in groups.items():
        if wanted in (name, name.removeprefix("group-"), hostlist):
            return name
    for name, (_, hostlist) in groups.items():
        try:
            if hostlist and wanted in expand_hostlist(hostlist):
                return name
        except BadInput:  # a hostlist this torchfit cannot read: matched by name only
            continue
    return None


def format_groups(groups: dict[str, tuple[str, str]]) -> str:
    """`group-1 (x86[01-02]), group-2 (aar[01-02])`: the groups a message lists."""
    return ", ".join(f"{n} ({h})" if h else n for n, (_, h) in groups.items())


def pick_group(pack: str, groups: dict[str, tuple[str, str]], fits: Callable[[Lock], object],
               say: Callable[[str], None]) -> str:
    """The lock of the one group of a fleet's pack that fits this host, said; `fits(lock)` raises
    LockMismatch for a lock this host contradicts (install's own rule, installer.flow.check_lock_host).
    BadInput listing the groups when none or several fit."""
    found, why = [], []
    for name, (path, _) in groups.items():
        try:
            fits(load_lock(path))
            found.append(name)
        except LockMismatch as exc:
            why.append(f"{name}: {exc.conflicts[0] if exc.conflicts else exc}")
    if len(found) == 1:
        name = found[0]
        say(f"pack: installing group {name}{f' ({groups[name][1]})' if groups[name][1] else ''}, "
            f"the one whose lock fits this host ({shown(groups[name][0])})")
        return groups[name][0]
    if found:
        raise BadInput(f"--pack {shown(pack)}: {len(found)} of its groups fit this host ({', '.join(found)}); "
                       f"give --group NAME (its groups: {format_groups(groups)})")
    raise BadInput(f"--pack {shown(pack)}: none of its groups fits this host ({'; '.join(why)}); give --group NAME "
                   f"with --force to install one anyway (its groups: {format_groups(groups)})")


def lock_in_pack(lock: Lock, pack: str) -> Lock:
    """The lock with every file pointing into the pack where it now is (install --pack)."""
    packages = []
    for d in lock.packages:
        sub = "files" if d.name in FAMILY_PACKAGES else "wheels"
        arts = tuple(replace(a, url="file://" + quote(os.path.join(os.path.abspath(pack), sub, _name(a))), path=None)
                     for a in _wanted(d))
        packages.append(replace(d, artifacts=arts))
    return replace(lock, packages=tuple(packages))


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"
