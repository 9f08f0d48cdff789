"""`export --format containerfile`: an OCI image of a lock's env, built by torchfit itself (issue 27, item 1).

The build context is the directory of `-o DIR/Containerfile`:

    DIR/Containerfile
    DIR/torchfit-wheels/   torchfit's own wheel and its dependencies' (export/ownwheels.py), with
                           requirements.txt hash-pinning every one: torchfit installs without an index
    DIR/pylock.toml        the lock (without --pack): its files come from its indexes at build time
    DIR/<PACK>/            with --pack, a pack `torchfit pack` wrote, inside DIR: the build needs no
                           network at all (`podman build --network none`)

The image runs `torchfit install` on the lock (or the pack), so everything install does happens at
build time: every file checked against the lock's sha256, the torch family from its own index, the
NCCL pin written, and the build check (installer.buildcheck) run, whose failure fails the build.
The context's files are bind-mounted into those RUN steps (`RUN --mount=type=bind`, podman/buildah
and BuildKit), so no wheel is copied into a layer twice. The env then gets what `torchfit run`
sets (lock.model.env_settings, shared with the Lmod exporter) and `CMD torchfit verify`.

The base is a Python image of the lock's Python whose glibc meets the wheels' floor, of the OS family
the facts name (BASES), or `--base IMAGE`; the build's first step checks the base's Python.
Labels: OCI's keys (org.opencontainers.image.*) and torchfit's own under `io.torchfit.` naming the
stack (torch, variant, CUDA, NCCL, the lock's sha256).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from torchfit._backports import FROZEN
from torchfit.compat.tags import glibc_of_tag
from torchfit.errors import BadInput
from torchfit.export.stack import Stack, comment
from torchfit.lock.model import EnvSetting, NcclPin, env_settings

PREFIX = "/opt/torch"  # the env in the image
# The unprivileged user the env and the entry run as (root only installs). A fixed UID/GID, as
# Docker's best practices advise (the next free one differs between rebuilds); useradd
# --no-log-init there too: a large UID would otherwise fill /var/log/faillog in the layer.
USER_NAME, USER_ID = "torchfit", 10001
HOME = f"/home/{USER_NAME}"
# A digest reference: NAME[:TAG]@sha256:<64 lowercase hex> (the OCI image spec's sha256 digest
# encoding, [a-f0-9]{64}; Docker's FROM takes `image@digest` and `image:tag@digest`).
_DIGEST_RE = re.compile(r"^[^@\s]+@sha256:[a-f0-9]{64}$")
TOOL = "/opt/torchfit"  # torchfit's own venv in the image
WHEELS = "torchfit-wheels"  # the context's directory of torchfit's wheels
LABEL_NS = "io.torchfit."


@dataclass(**FROZEN)
class Base:
    """A base image torchfit knows: its OS family, glibc and Python (the image's own python3)."""

    image: str
    family: str  # "debian" | "rhel"
    glibc: tuple[int, int]
    python: str


# Docker's official python images (Debian: bookworm ships glibc 2.36, trixie 2.41; the image tags
# per Python version are listed on hub.docker.com/_/python) and Red Hat's UBI 9 Python images
# (RHEL 9: glibc 2.34; catalog.redhat.com, ubi9/python-39, -311, -312). Table order is preference.
BASES: tuple[Base, ...] = (
    *(Base(f"docker.io/library/python:{py}-slim-bookworm", "debian", (2, 36), py)
      for py in ("3.9", "3.10", "3.11", "3.12", "3.13")),
    *(Base(f"docker.io/library/python:{py}-slim-trixie", "debian", (2, 41), py)
      for py in ("3.10", "3.11", "3.12", "3.13", "3.14")),
    *(Base(f"registry.access.redhat.com/ubi9/python-{py.replace('.', '')}", "rhel", (2, 34), py)
      for py in ("3.9", "3.11", "3.12")),
)

# /etc/os-release ID (host.system.parse_os_release's "ID:VERSION_ID") -> the family of its packages.
_FAMILIES = {"debian": "debian", "ubuntu": "debian", "linuxmint": "debian", "pop": "debian",
             "rhel": "rhel", "centos": "rhel", "rocky": "rhel", "almalinux": "rhel", "ol": "rhel",
             "fedora": "rhel", "amzn": "rhel"}


def os_family(os_fact: str | None) -> str | None:
    """"ubuntu:24.04" -> "debian"; None for an OS torchfit has no base for."""
    return _FAMILIES.get((os_fact or "").split(":")[0].lower()) if os_fact else None


def glibc_floor(stack: Stack) -> tuple[int, int] | None:
    """The newest glibc any locked package's wheel needs (the plan's floor when nothing is locked).

    Per package the most compatible of its wheels for the stack's machine counts (an installer
    takes the one the image supports), across packages the highest: the image must meet it."""
    floors: list[tuple[int, int]] = []
    if stack.glibc:
        floors.append(tuple(int(x) for x in stack.glibc.split(".")[:2]))  # type: ignore[arg-type]
    arch = stack.arches[0]
    for d in stack.locked:
        needs: list[tuple[int, int] | None] = []
        for a in d.artifacts:
            try:
                _, _, _, tags = parse_wheel_filename(a.filename or "")
            except InvalidWheelFilename:
                continue
            for tag in tags:
                if tag.platform == "any":
                    needs.append(None)
                elif tag.platform.endswith(arch):
                    needs.append(glibc_of_tag(tag.platform))
        if needs and None not in needs:
            floors.append(min(n for n in needs if n is not None))
    return max(floors) if floors else None


def choose_base(python: str, floor: tuple[int, int] | None, families: Sequence[str | None]) -> tuple[Base, str]:
    """The first known base with the lock's Python and a glibc at least `floor`, of the hosts' OS
    family when one is named; (base, why). BadInput when none fits (then --base is the way)."""
    fits = [b for b in BASES if b.python == python and (floor is None or b.glibc >= floor)]
    need = f"Python {python}" + (f" and glibc >= {floor[0]}.{floor[1]}" if floor else "")
    if not fits:
        raise BadInput(f"no base image torchfit knows has {need}; give one with --base IMAGE "
                       f"(its python3 must be Python {python}, with venv)")
    wanted = [f for f in dict.fromkeys(families) if f]
    for fam in wanted:
        for b in fits:
            if b.family == fam:
                return b, f"{need}, {fam} family (the hosts' OS)"
    why = f"{need}" + (f"; no {'/'.join(wanted)} base fits, so another family" if wanted else "")
    return fits[0], why


def check_base(ref: str) -> str:
    """`--base` as given (kept verbatim); BadInput (one line) for no image reference, or for a
    digest that is not `sha256:` and 64 lowercase hex digits: a mistyped pin must not build."""
    if not ref.strip() or any(c.isspace() for c in ref):
        raise BadInput(f"--base {ref!r}: not an image reference (like docker.io/library/python:3.11-slim)")
    if "@" in ref and not _DIGEST_RE.match(ref):
        raise BadInput(f"--base {ref}: a digest-pinned base is IMAGE@sha256:<64 lowercase hex digits> "
                       "(podman image inspect --format '{{.Digest}}' IMAGE prints it)")
    return ref


def base_digest(ref: str) -> str | None:
    """The digest a checked --base pins (`sha256:...`), or None for a tag."""
    return ref.rpartition("@")[2] if "@" in ref else None


def _env_value(text: str) -> str:
    """A double-quoted Containerfile word: `\\`, `"` and `$` escaped (no substitution inside)."""
    if "\n" in text:
        raise BadInput(f"{text[:80]!r}: cannot be written into a Containerfile (a newline)")
    return '"' + re.sub(r'(["\\$])', r"\\\1", text) + '"'


def _env_line(var: EnvSetting) -> str:
    if var.prepend:  # ${NAME:+:$NAME}: the image's own value after ours, no stray ':' when unset
        return f'{var.name}={_env_value(var.value)[:-1]}${{{var.name}:+:${var.name}}}"'
    return f"{var.name}={_env_value(var.value)}"


def labels(stack: Stack, *, pin: NcclPin, cuda: str | None, lock_sha256: str, base: str,
           version: str) -> dict[str, str]:
    """The image's labels: OCI's annotation keys, and the stack under `io.torchfit.`."""
    family = ", ".join(f"{n} {v}" for n, v in stack.family)
    return {
        "org.opencontainers.image.title": f"torch {stack.torch} ({stack.variant})",
        "org.opencontainers.image.description": f"PyTorch stack built by torchfit {version} from a lock: {family}; "
                                                f"CUDA {cuda or 'none'}; NCCL {pin.describe()}",
        "org.opencontainers.image.version": f"{stack.torch}+{stack.variant}",
        "org.opencontainers.image.base.name": base,
        **({"org.opencontainers.image.base.digest": digest} if (digest := base_digest(base)) else {}),
        LABEL_NS + "torch": stack.torch,
        LABEL_NS + "variant": stack.variant,
        LABEL_NS + "packages": family,
        LABEL_NS + "python": stack.python,
        LABEL_NS + "cuda": cuda or "none",
        LABEL_NS + "nccl": pin.version or ("none" if pin.mechanism == "none" else pin.describe()),
        LABEL_NS + "nccl-pin": pin.describe(),
        LABEL_NS + "lock-sha256": lock_sha256,
        LABEL_NS + "env": PREFIX,
        LABEL_NS + "user": f"{USER_NAME} ({USER_ID}:{USER_ID})",
        LABEL_NS + "version": version,
    }


@dataclass(**FROZEN)
class Source:
    """Where the build takes the stack from: a pack in the context (offline) or the lock's indexes."""

    pack: str | None  # the pack's path relative to the context, or None
    lock: str  # the lock's path relative to the context (without a pack)


def render_containerfile(stack: Stack, *, source: Source, pin: Mapping[str, Any], plan: Mapping[str, Any],
                         lock_sha256: str, base: str, base_why: str, version: str, wheels_sha256: str) -> str:
    """The Containerfile text (the context's other files are written by the caller).

    Each RUN that reads the context first checks the file it trusts against the digest written
    here (the lock; torchfit-wheels/requirements.txt, which pins every wheel's sha256): a context
    that is not this Containerfile's fails the build, and the digests, being in the RUN lines,
    are in the layer cache's key (buildah does not hash a bind mount's content)."""
    from torchfit.lock.model import pin_from_json

    nccl = pin_from_json(pin)
    if nccl.mechanism == "ld-preload":
        raise BadInput(f"the lock pins NCCL by LD_PRELOAD of {nccl.library}, a file of its host that an image "
                       "does not hold: lock the env with the NCCL wheel (install --nccl VERSION) to export it")
    cuda = str(plan.get("cuda") or "") or None
    py = stack.python
    head = [
        f"Written by `torchfit export --format containerfile` (torchfit {version}) from {stack.origin}.",
        f"Stack: {', '.join(f'{n} {v}' for n, v in stack.family)} ({stack.variant}), Python {py}, "
        f"CUDA {cuda or 'none'}, NCCL {nccl.describe()}; lock sha256 {lock_sha256}.",
        f"Base: {base} ({base_why}).",
        "Build it from this directory (the build context) with podman, buildah or docker (BuildKit):",
        "  podman build -t torch:" + f"{stack.torch}-{stack.variant} "
        + ("--network none " if source.pack else "") + "-f Containerfile .",
        "then prove it where it runs (CMD: torchfit verify; a container's default /dev/shm of 64 MB is too",
        "small for NCCL and DataLoader workers): podman run --device nvidia.com/gpu=all --shm-size=8g IMAGE",
        "The install step runs torchfit's build check: an image whose torch is not the lock's fails to build.",
    ]
    for path in (source.pack, source.lock):
        if path and re.search(r"[\s,\"'\\]", path):
            raise BadInput(f"{path!r}: a path a build's --mount option cannot name (a space, comma, quote or "
                           "backslash); rename it")
    if source.pack:
        stack_mount = f"--mount=type=bind,source={source.pack},target=/mnt/pack"
        install = f"torchfit install --offline --pack /mnt/pack --prefix {PREFIX} --force"
        mounted_lock = "/mnt/pack/pylock.toml"
    else:
        stack_mount = f"--mount=type=bind,source={source.lock},target=/mnt/pylock.toml"
        install = f"torchfit install --lock /mnt/pylock.toml --prefix {PREFIX} --force"
        mounted_lock = "/mnt/pylock.toml"
    check_python = ("import sys; v = '%d.%d' % sys.version_info[:2]; "
                    f"sys.exit(0 if v == '{py}' else 'torchfit: the base image has Python ' + v + "
                    f"', the lock is for Python {py}: give a base with Python {py} (--base IMAGE)')")
    body = [
        f"FROM {base}",
        "USER 0",
        "LABEL " + " \\\n      ".join(f"{k}={_env_value(v)}" for k, v in
                                      labels(stack, pin=nccl, cuda=cuda, lock_sha256=lock_sha256, base=base,
                                             version=version).items()),
        "# The base's python3 must be the lock's Python (uv takes no other without a network).",
        f"RUN python3 -c {json.dumps(check_python)}",
        f"# torchfit itself, from its wheels in the context, every one hash-checked; then {TOOL}/bin on PATH.",
        f"RUN --mount=type=bind,source={WHEELS},target=/mnt/{WHEELS} \\",
        f'    echo "{wheels_sha256}  /mnt/{WHEELS}/requirements.txt" | sha256sum -c --quiet - && \\',
        f"    python3 -m venv {TOOL} && \\",
        f"    {TOOL}/bin/python -m pip install --quiet --no-index --no-cache-dir --disable-pip-version-check \\",
        f"        --require-hashes --find-links /mnt/{WHEELS} -r /mnt/{WHEELS}/requirements.txt",
        "ENV " + _env_line(EnvSetting("PATH", f"{TOOL}/bin", prepend=True)),
        "# The env, by torchfit install: the lock's files checked against its sha256 (the torch family from",
        "# its own index), the NCCL pin written, the build check run; its cache is not kept in the image.",
        "# --force: the build host is not the target (it may have no GPU or another driver).",
        f"RUN {stack_mount} \\",
        f'    echo "{lock_sha256}  {mounted_lock}" | sha256sum -c --quiet - && \\',
        f"    XDG_CACHE_HOME=/tmp/torchfit-cache {install} && \\",
        "    rm -rf /tmp/torchfit-cache",
        *_user_lines(),
        "# What `torchfit run` sets (the env first on PATH, its NCCL pin).",
        "ENV " + " \\\n    ".join(_env_line(v) for v in env_settings(PREFIX, nccl)),
        'CMD ["torchfit", "verify"]',
    ]
    return comment(head) + "\n".join(body) + "\n"


def _user_lines() -> list[str]:
    """The unprivileged user, made after the install steps (the only ones that need root): the env
    and torchfit stay root's, read-only to it; the entry and whatever runs in the image are its.
    useradd where the base has it (Debian, RHEL), else the passwd and group lines themselves."""
    uid = USER_ID
    return [
        f"# An unprivileged user ({USER_NAME}, {uid}:{uid}) runs the env and the entry; root above only to install.",
        "RUN if command -v useradd >/dev/null 2>&1; then \\",
        f"      groupadd --gid {uid} {USER_NAME} && \\",
        f"      useradd --no-log-init --uid {uid} --gid {uid} --create-home --home-dir {HOME} "
        f"--shell /bin/sh {USER_NAME}; \\",
        "    else \\",
        f"      echo '{USER_NAME}:x:{uid}:{uid}::{HOME}:/bin/sh' >> /etc/passwd && \\",
        f"      echo '{USER_NAME}:x:{uid}:' >> /etc/group && \\",
        f"      mkdir -p {HOME} && chown {uid}:{uid} {HOME}; \\",
        "    fi",
        f"USER {uid}:{uid}",
        f"ENV HOME={HOME}",
        f"WORKDIR {HOME}",
    ]
