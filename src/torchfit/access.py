"""Shared machines: why this user cannot use a path another user made, said as what it is.

An env built under `umask 077` and used by a colleague is not "not a virtual environment"
and has not lost its bin/python: the colleague may not enter it. `find_denied` names the
first directory this user cannot enter (or the file it cannot read or run), its owner,
group and mode, and who this user is; `PermissionDenied` carries that sentence. `umask` and
`shared_group` let `install` warn before it builds an env its parent directory's group could
not use. Only os.stat and os.access: the kernel's own answer for this user.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass


def _user(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


@dataclass(frozen=True)
class Denied:
    """`path` may not be `verb`ed (entered, read, run) by this user: its owner, group and mode."""

    path: str
    verb: str
    owner: str
    group: str
    mode: str  # `drwx------ (0700)`
    link: str = ""  # the symlink that led here: `/env/bin/python -> /home/bob/.pyenv/.../python3.11`
    because: str = ""  # a rule beyond the mode bits: the sticky directory it is in

    def sentence(self) -> str:
        me = _user(os.geteuid())
        groups = ", ".join(dict.fromkeys(_group(g) for g in [os.getegid(), *os.getgroups()]))
        return ((f"{self.link}, and " if self.link else "")
                + f"permission denied: {self.path} is {self.mode}, owned by {self.owner}:{self.group}, and you "
                f"({me}; groups {groups}) may not {self.verb} it" + (f": {self.because}" if self.because else ""))

    def hint(self, within: str | None = None) -> str:
        """How to fix it; `within`: the tree the user meant (an env): a denial outside it is
        not fixed by opening that other place up (another user's home)."""
        if within and os.path.commonpath([os.path.abspath(within), self.path]) != os.path.abspath(within):
            return (f"the env needs {self.path}, which only {self.owner} may {self.verb}: rebuild it from an "
                    "interpreter everyone may run (torchfit install --python /usr/bin/python3.X, or a shared pyenv)")
        return (f"it was made for its owner only (a umask of 077 does that): ask {self.owner} to run "
                f"`chmod -R g+rX {self.path}` (its group) or `chmod -R go+rX {self.path}` (everyone), "
                "or rebuild it under umask 022 or 002")


def _mode(st: os.stat_result) -> str:
    return f"{stat.filemode(st.st_mode)} ({stat.S_IMODE(st.st_mode):04o})"


def _denied(path: str, verb: str, because: str = "") -> Denied:
    st = os.lstat(path)
    return Denied(path, verb, _user(st.st_uid), _group(st.st_gid), _mode(st), because=because)


def find_denied(path: str, need: int = os.R_OK) -> Denied | None:
    """The first place on the way to `path` this user may not pass: a directory above it it may
    not enter, or `path` itself without `need` (os.R_OK, os.X_OK), following a symlink (a venv's
    bin/python links to its base interpreter, maybe in another user's home); None when nothing
    denies it, or what stops it is not another user's permission (a missing file, a file of
    ours without the bit: a damaged env, said elsewhere)."""
    path = os.path.abspath(path)
    if os.path.islink(path):
        found = find_denied(os.path.dirname(path), os.X_OK)
        target = os.path.realpath(path)
        if found is None and not os.path.islink(target):  # still a link: a loop, not a permission
            found = find_denied(target, need)
            if found is not None:
                found = Denied(found.path, found.verb, found.owner, found.group, found.mode, f"{path} -> {target}")
        return found
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        above = os.sep.join(parts[:i]) or os.sep
        try:
            st = os.stat(above)
        except OSError:
            return None  # missing, or a loop: not a permission problem
        if stat.S_ISDIR(st.st_mode) and not os.access(above, os.X_OK) and st.st_uid != os.geteuid():
            return _denied(above, "enter")
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        need = need | os.X_OK
    # Our own file without the bit (a bin/python of mode 0644) is a damaged env, not a shared one.
    if not os.access(path, need) and st.st_uid != os.geteuid():
        return _denied(path, "run" if need & os.X_OK and not stat.S_ISDIR(st.st_mode) else
                       "enter" if stat.S_ISDIR(st.st_mode) else "read")
    return None


def find_unreplaceable(path: str) -> Denied | None:
    """Why this user may not replace the directory `path` (install --force builds the new env
    beside it, renames one over the other, then removes the old tree), or None.

    Three kernel rules, each checked before anything is built: the parent directory must be
    writable (the new env is made there); in a sticky directory (/tmp, a mode-1777 scratch
    space) only the owner of an entry, or of the directory, may rename or remove it (an
    unprivileged rename of another user's env fails with EPERM: path_resolution(7),
    `sticky bit` in inode(7)); and every directory of the old tree must be writable, or its
    files cannot be removed. Root (euid 0) passes all three.
    """
    if os.geteuid() == 0:
        return None
    path = os.path.abspath(path)
    parent = os.path.dirname(path.rstrip(os.sep)) or os.sep
    if not os.access(parent, os.W_OK | os.X_OK):
        return _denied(parent, "write in")
    try:
        top, above = os.lstat(path), os.stat(parent)
    except OSError:
        return None
    if above.st_mode & stat.S_ISVTX and os.geteuid() not in (top.st_uid, above.st_uid):
        return _denied(path, "replace", f"{parent} is sticky ({_mode(above)}), and only an entry's owner may "
                       "rename or remove it there")
    for here, _dirs, _files in os.walk(path):
        if not os.access(here, os.W_OK | os.X_OK):
            return _denied(here, "remove files from")
    return None


def find_unwritable(directory: str) -> Denied | None:
    """Why this user may not make a file in the existing `directory` (adopt's lock beside an env
    it did not build), or None. access(2)'s answer for this user: the mode bits, and what stops
    root too: a read-only mount (EROFS), an immutable directory (chattr +i: EPERM)."""
    directory = os.path.abspath(directory)
    if os.access(directory, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    because = ("it is on a read-only filesystem" if read_only else
               "it is immutable (chattr +i) or its filesystem refuses writes" if os.geteuid() == 0 else "")
    return _denied(directory, "write in", because)


def umask() -> int:
    """This process's umask, read without changing it (/proc/self/status; else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def shared_group(directory: str) -> str | None:
    """The group `directory` is shared with, when it is: its group may enter it, and it is a
    team's directory (setgid, or another group than this user's own), not a world-writable
    sticky one like /tmp."""
    try:
        st = os.stat(directory)
    except OSError:
        return None
    mode = st.st_mode
    if not mode & stat.S_IXGRP or (mode & stat.S_ISVTX and mode & stat.S_IWOTH):
        return None
    if mode & stat.S_ISGID or st.st_gid != os.getegid():
        return _group(st.st_gid)
    return None
