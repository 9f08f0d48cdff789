"""Does a resolved file install on the exact interpreter that will run the plan? (issue 33)

uv's `--python-version` is a *minimum* ("the minimum Python version that must be supported",
uv pip compile --help) and it checks a package's Requires-Python by its lower bound only:
measured with uv 0.13.10, `--python-version 3.14.1` takes torchvision 0.29.2, whose
Requires-Python is `>=3.10,!=3.14.1`, and `--python-version 3.13.1` takes vllm 0.10.1.1
(`<3.13,>=3.9`). Nor does a target of a version and a platform say "free-threaded": a
`cp39-abi3` wheel does not install on CPython 3.13t (PEP 703: the stable ABI is not
available there; `packaging.tags.cpython_tags` for a `cp313t` ABI lists no `abi3`).

So each file uv chose is judged here against the interpreter itself, its full version and its
ABI: the exact Requires-Python (the file's METADATA, read by the caller) and the wheel's
interpreter and ABI tags (`packaging.tags`, the same tags pip and uv use to install). Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version


@functools.lru_cache(maxsize=16)
def interpreter_tags(python: str, free_threaded: bool) -> frozenset[tuple[str, str]]:
    """The (interpreter, ABI) pairs a CPython `python` ("3.13.1") takes, as pip and uv take them.

    Cached: every resolved package is judged against the same interpreter, and packaging's
    tag lists (~1 ms each) were made again for each of them (issue 37)."""
    major, minor = (int(p) for p in python.split(".")[:2])
    abi = f"cp{major}{minor}{'t' if free_threaded else ''}"
    tags = [*cpython_tags((major, minor), [abi], ["any"]), *compatible_tags((major, minor), f"cp{major}{minor}", ["any"])]
    return frozenset((t.interpreter, t.abi) for t in tags)


def interpreter_label(python: str, free_threaded: bool) -> str:
    """"CPython 3.13.1 (cp313)", "a free-threaded CPython 3.13 (cp313t)"."""
    major, minor = python.split(".")[:2]
    tag = f"cp{major}{minor}{'t' if free_threaded else ''}"
    return f"{'a free-threaded ' if free_threaded else ''}CPython {python} ({tag})"


def judge_file_set(name: str, version: str, filenames: Sequence[str], requires_python: str | None,
                   python: str, free_threaded: bool) -> str | None:
    """Why `name` `version` (its chosen files `filenames`) does not install on the interpreter,
    or None when it does (or nothing says otherwise: an unknown Requires-Python, an sdist).

    `python` is the interpreter's version as known: "3.14.1" judges every clause of the
    Requires-Python; a bare "3.14" (a patch not known) judges it as 3.14.0.
    """
    label = interpreter_label(python, free_threaded)
    if requires_python:
        try:
            spec = SpecifierSet(requires_python)
            if not spec.contains(Version(python), prereleases=True):
                return f"{name} {version} declares Requires-Python {requires_python}: not {label}"
        except (InvalidSpecifier, InvalidVersion):
            pass  # a Requires-Python no installer can read is not ours to judge
    wheels = [f for f in filenames if f.endswith(".whl")]
    if not wheels or len(wheels) != len(filenames):
        return None  # an sdist builds for whatever runs it
    ok = interpreter_tags(python, free_threaded)
    fitting, seen = False, []
    for filename in wheels:
        try:
            _, _, _, tags = parse_wheel_filename(filename)
        except InvalidWheelFilename:
            return None
        seen += [f"{t.interpreter}-{t.abi}" for t in tags]
        fitting = fitting or any((t.interpreter, t.abi) in ok for t in tags)
    if fitting:
        return None
    return f"{name} {version}: its wheels are for {', '.join(sorted(set(seen)))} only; {label} takes none of them"


__all__ = ["interpreter_label", "interpreter_tags", "judge_file_set"]
