"""The PEP 751 model: a Lock of LockedDists, each with the Artifacts (files) it pins.

One model for every lock torchfit reads or writes: the lock `torchfit install`
writes beside an env (with its `[tool.torchfit]` table), the one uv writes for
`torchfit export --format pylock`, and a lock a user hands to `export --lock`.
Reading and writing live in `lock.pylock`; this module is plain values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torchfit._backports import FROZEN
from torchfit.compat.matrix import FAMILY_PACKAGES
from torchfit.jsontypes import JsonObject
from torchfit.lock.tool import ToolTable

EXPECTED_KEYS = ("torch", "cuda", "cudnn", "nccl")


@dataclass(**FROZEN)
class Artifact:
    """One file of a distribution: a wheel, or an sdist when no wheel was used.

    `sha256` is the hash installs check; `hashes` keeps every hash the file gave
    (PEP 751 allows other algorithms), so re-rendering a foreign lock loses none.
    """

    kind: str  # "wheel" | "sdist"
    sha256: str | None
    url: str | None = None
    path: str | None = None
    filename: str | None = None
    size: int | None = None
    hashes: Mapping[str, str] = field(default_factory=dict)

    def all_hashes(self) -> dict[str, str]:
        """Every hash of the file, sha256 first: `{"sha256": "..."}`."""
        out = {"sha256": self.sha256} if self.sha256 else {}
        out.update((k, v) for k, v in self.hashes.items() if k != "sha256")
        return out


@dataclass(**FROZEN)
class LockedDist:
    """One distribution (a PEP 751 `[[packages]]` entry): its exact version and files."""

    name: str  # canonical (PEP 503) name
    version: str | None
    artifacts: tuple[Artifact, ...]
    marker: str | None = None
    index: str | None = None  # PEP 751 packages.index: the index it came from, when known
    requires_python: str | None = None

    @property
    def is_family(self) -> bool:
        return self.name in FAMILY_PACKAGES

    @property
    def needs_build(self) -> bool:
        """Locked from a source distribution only: installing it runs its build backend."""
        return bool(self.artifacts) and all(a.kind == "sdist" for a in self.artifacts)


@dataclass(**FROZEN)
class Lock:
    """A lock's packages and its `[tool.torchfit]` table (lock.tool.ToolTable)."""

    packages: tuple[LockedDist, ...]
    tool: ToolTable = field(default_factory=ToolTable)
    requires_python: str | None = None
    environments: tuple[str, ...] = ()
    path: str | None = None

    def rest(self) -> list[LockedDist]:
        return [d for d in self.packages if not d.is_family]

    def find(self, name: str) -> LockedDist | None:
        return next((d for d in self.packages if d.name == name), None)

    # --- [tool.torchfit], through lock.tool.ToolTable (its one reader) ---------------------

    def plan(self) -> Mapping[str, object]:
        """[tool.torchfit.plan]: `torchfit resolve --json` as recorded at install ({} if none)."""
        return self.tool.plan or {}

    def pin(self) -> Mapping[str, object]:
        """[tool.torchfit.nccl]: the NCCL pin the env was built with ({} if none)."""
        return self.tool.nccl or {}

    def request(self) -> Mapping[str, object]:
        """[tool.torchfit.request]: the options the plan was resolved with ({} if none)."""
        return self.tool.request or {}

    def torch_index_url(self) -> str:
        """The torch index the family came from ("" if the lock does not say)."""
        return self.tool.torch_index_url or ""

    def hosts(self) -> list[Mapping[str, object]]:
        """The host facts the lock was made for: [tool.torchfit.host], or install's [[tool.torchfit.hosts]]."""
        return [h for h in [self.tool.host or {}, *(self.tool.hosts or ())] if h]

    def base(self) -> Mapping[str, object]:
        """[tool.torchfit.base]: an env torchfit adopted (`torchfit adopt`) rather than built: its
        torch family as installed (`family`: name -> version), never replaced, every other
        distribution installed then (`installed`), the pip constraints it honours ({} if none)."""
        return self.tool.base or {}

    def family(self) -> list[LockedDist]:
        """The torch family: the locked entries, or an adopted base's (no files: installed)."""
        base = self.base().get("family")
        if isinstance(base, Mapping) and base:
            return [LockedDist(str(n), str(v), ()) for n, v in sorted(base.items())]
        return [d for d in self.packages if d.is_family]

    def expected(self) -> dict[str, str]:
        """[tool.torchfit.expected]: the runtime versions `verify` should find, as text.

        Only torch, cuda, cudnn and nccl; empty values are left out.
        """
        raw = self.tool.expected or {}
        return {k: str(v) for k, v in raw.items() if k in EXPECTED_KEYS and v not in (None, "")}


def sorted_dists(dists: Sequence[LockedDist]) -> tuple[LockedDist, ...]:
    return tuple(sorted(dists, key=lambda d: d.name))


# --- the NCCL pin an env was built with ([tool.torchfit.nccl]) ------------------------


@dataclass(**FROZEN)
class NcclPin:
    """How the env's NCCL is chosen.

    mechanism: "none" (CPU or ROCm build), "wheel" (the plan's nvidia-nccl-cuXX),
    "wheel-override" (`--nccl VERSION`), "ld-preload" (`--nccl-lib PATH`).
    """

    mechanism: str
    package: str | None = None
    version: str | None = None
    library: str | None = None

    def describe(self) -> str:
        if self.mechanism == "ld-preload":
            return f"LD_PRELOAD {self.library}" + (f" (NCCL {self.version})" if self.version else "")
        if self.mechanism in ("wheel", "wheel-override"):
            return f"{self.package}=={self.version or '(torch pin)'}" + (
                " (--nccl)" if self.mechanism == "wheel-override" else "")
        return "none (no NCCL in this build)"

    def to_json(self) -> JsonObject:
        return {"mechanism": self.mechanism, "package": self.package, "version": self.version,
                "library": self.library}


def pin_from_json(data: Any) -> NcclPin:
    if not isinstance(data, dict) or data.get("mechanism") not in ("none", "wheel", "wheel-override", "ld-preload"):
        return NcclPin("none")
    return NcclPin(data["mechanism"], data.get("package"), data.get("version"), data.get("library"))


@dataclass(**FROZEN)
class EnvSetting:
    """One variable of an env's environment: `value` replaces it, or (prepend) goes first in it."""

    name: str
    value: str
    prepend: bool = False


def env_settings(prefix: str, pin: NcclPin) -> tuple[EnvSetting, ...]:
    """What `torchfit run --env PREFIX` (and `PREFIX/bin/activate`) gives a process: PREFIX/bin
    first on PATH, VIRTUAL_ENV, and the NCCL pin PREFIX/bin/torchfit-env exports. One list for
    every place that sets them outside a shell: a modulefile, a container image."""
    out = [
        EnvSetting("PATH", f"{prefix}/bin", prepend=True),
        EnvSetting("VIRTUAL_ENV", prefix),
        EnvSetting("TORCHFIT_ENV", prefix),
        EnvSetting("TORCHFIT_NCCL", pin.describe()),
    ]
    if pin.mechanism == "ld-preload" and pin.library:
        # pip's torch finds libnccl through DT_RPATH, which LD_LIBRARY_PATH cannot override:
        # a preloaded libnccl.so.2 is used before any search path is looked at.
        out += [EnvSetting("TORCHFIT_NCCL_LIB", pin.library), EnvSetting("LD_PRELOAD", pin.library, prepend=True)]
    return tuple(out)
