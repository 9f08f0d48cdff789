"""`--format requirements`: a pip requirements file.

pip cannot tie an index to a package, so from a plan the file names the variant
index as the *only* index and pins torch with its local label (`+cu128`), which no
PyPI file can carry. A plan with a project (issue 18) needs a second index for it:
the variant index stays first, torch keeps its label pin, and every other package
of the resolved set is pinned to its exact version. From a lock, every file is
hash-pinned instead, and the lock's other indexes may be named: with
`--require-hashes` an index can only serve the exact file locked.
"""

from __future__ import annotations

import datetime as _dt

from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.errors import ExportFailed
from torchfit.export.stack import Stack, comment, header, pin, public_url
from torchfit.lock.model import LockedDist


def render_requirements(stack: Stack, *, pypi_url: str = PYPI_SIMPLE, today: _dt.date | None = None) -> str:
    """requirements.txt for pip: the variant index alone, or (from a lock) every file hash-pinned."""
    head = header(stack, "requirements", today)
    index = public_url(stack.index_url)
    py = f"python{stack.python}" if stack.python else "python3"
    if not stack.locked and (stack.project or stack.resolved):
        return _render_project(stack, head, index, py, public_url(pypi_url))
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
        body += [pin(n, v, stack.variant, local=(n == "torch")) for n, v in stack.family]
        return comment(head) + "\n".join(body) + "\n"
    hashed = all(any(a.sha256 for a in d.artifacts) for d in stack.locked)
    family = {n for n, _ in stack.family}
    # A package the lock does not place came from the default index (`--pypi-url`), unless
    # its files are local (a find-links directory, a file:// index: uv's lock names no
    # index for them); pip then finds them in their directory.
    links = sorted({d2 for d in stack.locked if d.name not in family and not d.index
                    for d2 in [_local_dir(d)] if d2})
    others = sorted({public_url(d.index or pypi_url) for d in stack.locked
                     if d.name not in family and (d.index or not _local_dir(d))} - {index})
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
    body += [f"--find-links {d}" for d in links]
    for d in sorted(stack.locked, key=lambda d: d.name):
        if not d.version:
            raise ExportFailed(f"the lock gives no version for {d.name}: a requirements file needs one")
        line = f"{d.name}=={d.version}"
        if d.marker:
            line += f" ; {d.marker}"
        hashes = sorted({f"sha256:{a.sha256}" for a in d.artifacts if a.sha256})
        if hashed and hashes:
            line += " \\\n" + " \\\n".join(f"    --hash={h}" for h in hashes)
        body.append(line)
    return comment(head) + "\n".join(body) + "\n"


def _local_dir(d: LockedDist) -> str | None:
    """The one local directory every file of `d` lies in (file:// URL or path), else None."""
    from urllib.parse import unquote, urlsplit

    dirs = set()
    for a in d.artifacts:
        loc = a.url or a.path or ""
        parts = urlsplit(loc)
        if parts.scheme not in ("", "file") or not loc:
            return None
        path = unquote(parts.path) if parts.scheme == "file" else loc
        dirs.add(path.rsplit("/", 1)[0] or "/")
    return dirs.pop() if len(dirs) == 1 else None


def _render_project(stack: Stack, head: list[str], index: str, py: str, pypi: str) -> str:
    """A plan with a project (issue 18): the family from its index, the project from `pypi`.

    One file needs both indexes. torch keeps the label pin no PyPI file can carry; every
    other package of the resolved set is pinned to the version resolved with this stack
    (a higher version elsewhere cannot win), the project's requirements as asked.
    """
    head += [
        f"Install: {py} -m pip install -r requirements.txt",
        "",
        f"Two indexes: the {stack.variant} index for the torch family and {pypi} for the project.",
        "pip takes each name from whichever index offers the best version, so torch is pinned with",
        "its local label (no PyPI file can carry it) and every other package of the set resolved with",
        "this stack is pinned to its exact version. For a hash-checked file, export the env's lock:",
        "  torchfit export --format requirements --lock PREFIX/pylock.toml",
    ]
    if stack.routed:
        head += [f"{', '.join(stack.routed)}: the binary for this build is on the {stack.variant} index (PyPI's is",
                 "another build), and pip cannot tie one package to an index: the version is pinned, but a",
                 "file of that version on the other index may be taken. Export the env's lock for hash pins."]
    body = [f"--index-url {index}"] + ([f"--extra-index-url {pypi}"] if pypi != index else [])
    body += [pin(n, v, stack.variant, local=(n == "torch")) for n, v in stack.family]
    if stack.project:
        body += ["# the project, as asked", *stack.project]
    if stack.resolved:
        body += ["# the rest of the set, as resolved with this stack", *(f"{n}=={v}" for n, v in stack.resolved)]
    elif stack.constraints:
        # A requirements file can name a constraints file (-c FILE), not hold constraints.
        body += ["# the project's constraints: keep them in a file and add `-c FILE` here",
                 *(f"#   {c}" for c in stack.constraints)]
    return comment(head) + "\n".join(body) + "\n"
