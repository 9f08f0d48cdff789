"""The planner's refusals and explanations, as functions of values (no planner state).

What each says comes from where it is true: the host fact first (a driver below a CUDA major's
floor, a release without a wheel for this host: `compat.wheelfit`), then uv's own words, with
what the torch sources serve (the caller's `with_sources`). `check_local_reference` and
`refuse_plain_http` refuse the user's input and an index's plain-http file before anything
is fetched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name
from packaging.version import Version

from torchfit.compat.companions import Companions
from torchfit.compat.cudapkgs import blocked_majors
from torchfit.compat.facts import HostFacts
from torchfit.compat.matrix import FAMILY_PACKAGES, Build, Matrix
from torchfit.compat.plan import Plan
from torchfit.compat.wheelfit import lead_with, no_wheel_releases
from torchfit.errors import (
    BadInput,
    IndexUnavailable,
    MetadataMismatch,
    NoCompatibleSet,
    ResolveFailed,
)
from torchfit.index.client import IndexClient
from torchfit.index.metacheck import find_disagreement, find_remote_disagreement, local_path
from torchfit.lock.platforms import Target, group_refusal
from torchfit.lock.uv import Compiled, explanation, names_family, not_found
from torchfit.redact import redact


def explain_refusal(hosts: Sequence[HostFacts], arch: str, *, tried: Sequence[str], uv_said: Sequence[str],
                    misfits: dict[str, str], fleet_refused: Sequence[tuple[Target, str, Compiled]],
                    cuda: tuple[str, str] | None, first_level: Callable[[], object],
                    with_sources: Callable[[NoCompatibleSet], NoCompatibleSet]) -> NoCompatibleSet:
    """No (variant, Python) solved: the first-level reading (`first_level`: the resolver with
    the project's METADATA) names the culprit in host terms where it can; uv's explanations
    (`with_sources`: with what the sources serve) otherwise. A release without a wheel for this
    host leads with the host fact (compat.wheelfit); so does a CUDA package the driver cannot
    run (`cuda`: `cuda_line`'s)."""
    return lead_with(_refusal_of_uv(hosts, arch, tried, uv_said, misfits, fleet_refused, cuda, first_level,
                                    with_sources), misfits)


def _refusal_of_uv(hosts: Sequence[HostFacts], arch: str, tried: Sequence[str], uv_said: Sequence[str],
                   misfits: dict[str, str], fleet_refused: Sequence[tuple[Target, str, Compiled]],
                   cuda: tuple[str, str] | None, first_level: Callable[[], object],
                   with_sources: Callable[[NoCompatibleSet], NoCompatibleSet]) -> NoCompatibleSet:
    if fleet_refused:  # a group's platform: that group, named, before anything else
        target, said, _ = fleet_refused[-1]
        return with_sources(NoCompatibleSet(*group_refusal(hosts, arch, target, said)))
    interp = [t for t in tried if "declares Requires-Python" in t or "takes none of them" in t]
    if interp:  # the exact interpreter rules the files out: the host fact leads, uv's words follow
        return with_sources(NoCompatibleSet(
            interp, ["use a Python those files accept (--python, or pyenv for another), or pin a release that "
                     "has a file for this one"]))
    pins = [t for t in tried if "its binary needs" in t and "(companions.toml" in t]
    if pins and len(pins) == len(tried):  # the user's companion pin and the torch builds disagree
        return with_sources(NoCompatibleSet(
            [pins[0]], ["pin a release of it built for one of those torch builds, or pin torch to what it needs"]))
    if cuda is not None:  # a host fact uv's refusal rests on: it leads, uv's words follow
        return with_sources(NoCompatibleSet(
            [cuda[0]], [cuda[1], "or give a source with a release that does not need them (--find-links)"]))
    try:
        first_level()
    except NoCompatibleSet as exc:
        # Kept where it names what the first level shows for sure (a pin every host build refuses,
        # two pins together, a Requires-Python); its companion pairing is the matrix's, which
        # uv's reading of the METADATA overrules ("no build in the matrix meets it" is not said).
        if any(w in c for c in exc.conflicts for w in ("ruled out", "meets both", "Requires-Python")):
            return with_sources(NoCompatibleSet([*exc.conflicts], exc.hints, exc.remedies))
    except (IndexUnavailable, BadInput):
        pass
    if misfits and all(no_wheel_releases(said) for said in uv_said):
        # every uv run failed on a release without a wheel for this host, not on torch: no torch hint
        return with_sources(NoCompatibleSet([], list(misfits.values())))
    return with_sources(NoCompatibleSet(
        ["uv finds no set of the project's packages with a torch build that fits this host "
         "and that the torch source serves"],
        ["pin the package uv names to a release whose torch fits this host, or give a source that "
         "has one (--torch-index-url, --find-links)"]))


def cuda_line(matrix: Matrix, hosts: Sequence[HostFacts], exclusions: Sequence[str], uv_said: Sequence[str]) \
        -> tuple[str, str] | None:
    """When uv's refusal names a CUDA package this host's driver cannot run: the host fact and the fix."""
    blocked = blocked_majors(matrix, hosts)
    excluded = {re.split(r"[<>=!]", line, maxsplit=1)[0] for line in exclusions}
    named = sorted(n for n in excluded
                   if any(re.search(rf"(?<![\w.-]){re.escape(n)}(?![\w-])", said) for said in uv_said))
    if not blocked or not named:
        return None
    major, floor = blocked[0]
    drivers = ", ".join(sorted({str(h.driver) for h in hosts if h.driver is not None}))
    return (f"{', '.join(named)}: CUDA {major} packages, and this host's driver {drivers} is below CUDA "
            f"{major}.x's floor {floor} (NVIDIA's minor-version compatibility; data/matrix.toml [[cuda]]): "
            "the project's releases that need them cannot run here",
            f"upgrade the NVIDIA driver to >= {floor}, or pin a release of the project that does not need "
            f"CUDA {major} packages")


def judge_failure(kind: str, said: str, stderr: str, plan: Plan, *, no_build: bool, pages_named: str,
                  misfits: dict[str, str]) -> bool:
    """uv found no answer (`kind`: `lock.uv.classify_failure`'s, `said`: its explanation): raised
    where no other (variant, Python) would help (a failed build, uv itself, the project's own
    pins, a name no source has); else whether the interpreter is what fails (the next Python)."""
    if kind == "build":  # a build that failed: no other variant would help
        raise ResolveFailed(
            f"uv could not build a package to read its metadata ({plan.variant}, Python "
            f"{plan.python_version}): {said}",
            hint=f"give a source with its wheel (--find-links{pages_named}), or `--no-build` to "
                 "plan with wheels only")
    if kind != "no-solution":  # uv itself, or what it could not read: uv's words
        raise ResolveFailed(f"uv could not resolve the project: {said}")
    # uv names the interpreter when Requires-Python is what fails ("the requested Python version"),
    # or a release without a wheel for its ABI ("no wheels with a matching Python ABI tag"): another
    # of the host's Pythons may have one
    python_failed = bool(re.search(r"requested Python version|requires Python|Python ?[<>=!~]|"
                                   r"matching Python (?:ABI|implementation) tag", said, re.IGNORECASE))
    if not python_failed and not names_family(said):
        # The torch family is not in uv's cause (a name no source has, two of the project's own
        # pins): no other variant or Python would help, and no torch hint applies.
        missing = not_found(said)
        if missing:  # not a conflict: a name no source has
            raise ResolveFailed(f"{', '.join(missing)}: in none of your sources (uv: {said})",
                                hint="check the name, or give the index or directory that has it "
                                     "(--index-url, --extra-index-url, --find-links)")
        wheels = without_wheels(stderr) if no_build else []
        hint = (f"{', '.join(wheels)}: no wheel for this host in your sources, and --no-build plans with "
                f"wheels only: give a source with its wheel (--find-links{pages_named}), or drop "
                "--no-build" if wheels else
                "the project's own requirements conflict as uv says: relax the pins it names")
        # a release with no wheel for this host: the host fact leads, uv's words follow
        raise lead_with(NoCompatibleSet([said], [] if misfits and not wheels else [hint]), misfits)
    return python_failed


def explain_held(probe: Compiled, resolved: dict[str, str], held: Sequence[Build], companions: Companions,
                 direct: set[str]) -> str:
    """`--explain`: why no newer build, from uv's answer with a newer torch asked for (`probe`):
    the releases of the project's packages (`direct` first) that would move, or uv's words
    with the pins on torch they name."""
    if probe.ok:
        # uv prefers the newest releases of the project's own packages: a newer torch was possible
        # with other releases of them. Name the difference, the pins that would get it.
        other = {d.name: str(d.version) for d in probe.locked}
        names = sorted((n for n in other if n in resolved and other[n] != resolved[n] and n not in FAMILY_PACKAGES),
                       key=lambda n: (n not in direct, companions.get(n) is None, n))
        moved = [f"{n} {resolved[n]} -> {other[n]}" for n in names]
        return (f"a newer torch ({public(other.get('torch'))}) also resolves, with "
                f"{', '.join(moved[:6]) or 'other releases'}: uv prefers the newest releases of the "
                "project's packages; pin those (or torch) to choose")
    said = explanation(probe.stderr, 600)
    pins = [f"required by {dist_label(m.group(1), resolved)} (torch{m.group(2)})"
            for m in re.finditer(r"(?:all versions of )?([A-Za-z0-9_.-]+(?:[=<>!~]=?[A-Za-z0-9_.+*-]+)?) "
                                 r"depends? on torch([=<>!~]=?[^\s,]+)", said)
            if not m.group(1).startswith("torchfit-env")]
    head = "; ".join(dict.fromkeys(pins))
    return (head + "; " if head else "") + f"with torch {held[0].torch}, uv says: {said}"


def refuse_plain_http(compiled: Compiled, *, allow_insecure: bool) -> None:
    """IndexUnavailable (exit 1) when a file of the resolved set is fetched over plain http and
    --allow-insecure-index was not given: an https index that lists http:// links sends uv and
    pip there silently, and the file would travel in clear (what install, the lock and export
    would then carry). The user's own http:// sources need the flag already. Where an https
    file redirects is the fetch step's to check (installer/backends.StepContext.check_fetch),
    just before uv or pip downloads it."""
    if allow_insecure:
        return
    plain = [a.url for d in compiled.locked for a in d.artifacts
             if a.url and urlsplit(a.url).scheme.lower() == "http"]
    if plain:
        raise IndexUnavailable(plain[0], f"the index lists this file over plain http ({len(plain)} file"
                                         f"{'s' * (len(plain) != 1)} of the plan); refused: it would travel "
                                         "unencrypted", hint="fix the index, or pass --allow-insecure-index to "
                                                             "accept it")


def refuse_lying_metadata(compiled: Compiled, work: str, *, client: Callable[[], IndexClient] | None = None,
                          indexes: Sequence[str] = (), note: Callable[[str], None] = lambda _: None) -> None:
    """MetadataMismatch (exit 1) when a wheel of the plan came from a PEP 658 `.metadata` that
    says otherwise than the wheel (issue 34, R3): the wheel is what install installs and the lock
    hashes, so a plan read from that file would promise a set the wheel does not give. A local
    wheel: the `.metadata` beside it. A remote one (`client`, and `indexes`, the http(s) indexes
    the plan read; none when offline): one whose index page advertises a `.metadata`, the wheel's
    own METADATA read by range requests (index.metacheck.find_remote_disagreement); a wheel that
    could not be checked (a server without Range) is said through `note`."""
    wheels = [(d.name, a.url or a.path or "") for d in compiled.locked for a in d.artifacts if a.kind == "wheel"]
    paths = [os.path.join(work, p) for _, where in wheels for p in [local_path(where)] if p]
    found = find_disagreement(paths)
    if found is not None:
        path, diff = found
        raise MetadataMismatch(
            f"{path}: the index's metadata for it (PEP 658 {os.path.basename(path)}.metadata) disagrees with the "
            f"wheel's own METADATA, so the plan would promise what the wheel does not install: {'; '.join(diff)}",
            hint=LYING_METADATA_HINT)
    web = [i for i in indexes if urlsplit(i).scheme.lower() in ("http", "https")]
    remote = find_remote_disagreement(client(), wheels, web, note) if client is not None and web else None
    if remote is not None:
        raise MetadataMismatch(
            f"{remote.name} ({remote.filename}): the index {redact(remote.index)} serves a .metadata (PEP 658) for "
            "it that disagrees with the wheel's own METADATA (read by HTTP range requests), so the plan would "
            f"promise what the wheel does not install: {'; '.join(remote.diff)}", hint=LYING_METADATA_HINT)


LYING_METADATA_HINT = ("the wheel is what is installed: ask the index's owner to fix its .metadata file (or remove "
                       "it, and resolvers read the wheel), or use a source that serves the wheel's own")


# What uv installs from a path (uv 0.13.9's message lists them): a wheel, an sdist archive, or a
# directory (a project it builds).
ARCHIVE_SUFFIXES = (".whl", ".tar.gz", ".zip", ".tar.bz2", ".tar.lz", ".tar.lzma", ".tar.xz", ".tar.zst", ".tar",
                    ".tbz", ".tgz", ".tlz", ".txz")


def check_local_reference(text: str, url: str | None) -> None:
    """BadInput (exit 2) for `pkg @ file:///PATH` whose PATH is missing or is neither a directory
    nor a wheel or source archive (`/etc/passwd`): the user's input, said before uv runs (uv's own
    words for it depend on what it could fetch to try a build). The file is never read."""
    if not url or not url.lower().startswith("file:"):
        return
    path = unquote(urlsplit(url).path)
    if not os.path.exists(path):
        raise BadInput(f"{text}: no such file or directory")
    if not os.path.isdir(path) and not path.lower().endswith(ARCHIVE_SUFFIXES):
        raise BadInput(f"{text}: not a wheel, a source archive ({', '.join(ARCHIVE_SUFFIXES[:3])}, ...) or a "
                       "project directory")


def wheels_missing(text: str) -> bool:
    """uv's refusal under `--no-build` is about a package without a usable wheel."""
    return bool(re.search(r"building from source is disabled|--no-build|no usable wheels|source distribution",
                          text, re.IGNORECASE))


def without_wheels(text: str) -> list[str]:
    """The packages uv's wheels-only refusal names as having no usable wheel ("hangpkg 1.0")."""
    found = re.findall(r"([A-Za-z0-9][\w.-]*)==([\w.+!]+) (?:has|have) no usable wheels", text)
    found += [(m, "") for m in re.findall(r"Building source distributions for `([^`]+)` is disabled", text)]
    return list(dict.fromkeys(f"{n} {v}".strip() for n, v in found))


def dist_label(text: str, resolved: dict[str, str]) -> str:
    """uv's "pinlib==1.0" as "pinlib 1.0"; a bare name or a range ("vllmx<=1.0") as the version
    the plan has of it ("vllmx 1.0"), else as uv wrote it."""
    name = re.split(r"[=<>!~]", text, maxsplit=1)[0]
    if "==" in text:
        return f"{name} {text.split('==', 1)[1]}"
    version = resolved.get(str(canonicalize_name(name)))
    return f"{name} {version}" if version else text


def public(version: str | None) -> str | None:
    """"0.29.0" of "0.29.0+cpu": the plan names releases, the lock the exact builds."""
    return Version(version).public if version else None

