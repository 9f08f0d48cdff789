"""`export --format containerfile` (issue 27, items 1 and 3).

Fast: the Containerfile's text (the lock's pins and labels, the base chosen from the lock's Python,
glibc floor and OS, `--base`), and bad input (exit 2, one line). Slow, with Debian's real podman
(CI installs it; TORCHFIT_REQUIRE_PODMAN=1 turns a missing podman into a failure): a base made with
`debootstrap --variant=minbase` and `podman import` (no registry), the CPU env's lock packed,
exported, `podman build --network none`, then `podman run --network none IMAGE` runs
`torchfit verify` (gloo) and passes, the labels name the stack, doctor in the image says it is in
a podman container without GPUs, and a pack whose file differs from the lock fails the build.

podman's private store, runtime and ulimits: tests/support/podman.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.export.conftest import container_lock
from tests.installer.conftest import (
    cpu_env,
    cpu_wheel,
    one_line_error,
    run_tf,
    state_home,
    torch_index,
)
from tests.support.podman import debootstrap_root, run_podman, tar_root
from tests.support.wheels import sha256_file
from torchfit.export.containerfile import (
    BASES,
    Source,
    choose_base,
    glibc_floor,
    render_containerfile,
)
from torchfit.export.stack import load_lock

__all__ = ["cpu_env", "cpu_wheel", "state_home", "torch_index"]  # the installer's fixtures, used here

# Names of this run's own (two engineers' podman tests may share a machine).
BASE_NAME = f"localhost/torchfit-test-base:bookworm-{os.getpid()}"
IMAGE = f"localhost/torchfit-test-torch:cpu-{os.getpid()}"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _render(lock: Path, *, pack: str | None = "pack", base: str | None = None) -> str:
    from torchfit.lock.pylock import load_lock as load_pylock

    stack, parsed = load_lock(str(lock)), load_pylock(str(lock))
    chosen, why = choose_base(stack.python, glibc_floor(stack), ["debian"])
    return render_containerfile(stack, source=Source(pack=pack, lock="pylock.toml"), pin=parsed.pin(),
                                plan=parsed.plan(), lock_sha256="c" * 64, base=base or chosen.image, base_why=why,
                                version="0.1.0", wheels_sha256="d" * 64)


def test_a_digest_pinned_base_is_kept_verbatim_and_labelled(tmp_path: Path) -> None:
    ref = f"docker.io/library/python:3.11-slim-bookworm@{DIGEST}"
    text = _render(container_lock(tmp_path), base=ref)
    assert f"FROM {ref}" in text.splitlines()
    assert f'org.opencontainers.image.base.name="{ref}"' in text
    assert f'org.opencontainers.image.base.digest="{DIGEST}"' in text
    assert "base.digest" not in _render(container_lock(tmp_path))  # a tag pins nothing: no digest label
    # through the command: exported as given, said in the file's head
    out = tmp_path / "ctx" / "Containerfile"
    proc = run_tf("export", "--format", "containerfile", "--lock", str(container_lock(tmp_path)), "--base", ref,
                  "-o", str(out), state=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"FROM {ref}\n" in out.read_text() and f"# Base: {ref} (--base, pinned by its digest)." in out.read_text()


def test_the_env_and_the_entry_run_as_an_unprivileged_user(tmp_path: Path) -> None:
    lines = _render(container_lock(tmp_path)).splitlines()
    install = next(i for i, ln in enumerate(lines) if "torchfit install --offline --pack" in ln)
    user = lines.index("USER 10001:10001")
    # root (USER 0 after FROM) for the install steps only; the user is made after them, then taken
    assert lines.index("USER 0") < install < user and lines[-1] == 'CMD ["torchfit", "verify"]'
    assert not [ln for ln in lines[user + 1:] if ln.startswith(("USER", "RUN"))]
    made = "\n".join(lines[install:user])
    assert "useradd --no-log-init --uid 10001 --gid 10001 --create-home --home-dir /home/torchfit" in made
    assert "echo 'torchfit:x:10001:10001::/home/torchfit:/bin/sh' >> /etc/passwd" in made  # a base without useradd
    assert "ENV HOME=/home/torchfit" in lines and 'io.torchfit.user="torchfit (10001:10001)" \\' in "\n".join(lines)


def test_the_text_pins_the_lock_labels_the_stack_and_installs_with_the_build_check(tmp_path: Path) -> None:
    text = _render(container_lock(tmp_path))
    lines = text.splitlines()
    assert "FROM docker.io/library/python:3.11-slim-bookworm" in lines
    assert 'io.torchfit.torch="2.13.0" \\' in text and 'io.torchfit.variant="cpu" \\' in text
    assert f'io.torchfit.lock-sha256="{"c" * 64}"' in text and 'io.torchfit.cuda="none"' in text
    assert 'org.opencontainers.image.title="torch 2.13.0 (cpu)"' in text
    # torchfit from the context's wheels, hash-checked; the env by torchfit install from the pack
    assert "--require-hashes --find-links /mnt/torchfit-wheels -r /mnt/torchfit-wheels/requirements.txt" in text
    assert f'    echo "{"d" * 64}  /mnt/torchfit-wheels/requirements.txt" | sha256sum -c --quiet - && \\' in lines
    assert "RUN --mount=type=bind,source=pack,target=/mnt/pack \\" in lines
    assert f'    echo "{"c" * 64}  /mnt/pack/pylock.toml" | sha256sum -c --quiet - && \\' in lines
    assert any("torchfit install --offline --pack /mnt/pack --prefix /opt/torch --force" in ln for ln in lines)
    # what `torchfit run` sets, and verify as the command
    assert 'ENV PATH="/opt/torch/bin${PATH:+:$PATH}" \\' in lines
    assert '    TORCHFIT_NCCL="none (no NCCL in this build)"' in lines
    assert lines[-1] == 'CMD ["torchfit", "verify"]'
    # without a pack: the lock in the context, its files from its indexes
    online = _render(container_lock(tmp_path), pack=None)
    assert "RUN --mount=type=bind,source=pylock.toml,target=/mnt/pylock.toml \\" in online
    assert "torchfit install --lock /mnt/pylock.toml --prefix /opt/torch --force" in online


def test_the_base_follows_python_glibc_and_the_os_family(tmp_path: Path) -> None:
    stack = load_lock(str(container_lock(tmp_path)))
    assert glibc_floor(stack) == (2, 28)  # the torch wheel's manylinux_2_28; filelock is pure
    assert choose_base("3.11", (2, 28), ["debian"])[0].image == "docker.io/library/python:3.11-slim-bookworm"
    rhel, why = choose_base("3.11", (2, 28), ["rhel"])
    assert rhel.image == "registry.access.redhat.com/ubi9/python-311" and "rhel family" in why
    # a floor above bookworm's 2.36: trixie
    assert choose_base("3.12", (2, 39), [None])[0].image == "docker.io/library/python:3.12-slim-trixie"
    # a floor no RHEL 9 base meets: a Debian one, said so
    other, why = choose_base("3.12", (2, 38), ["rhel"])
    assert other.family == "debian" and "no rhel base fits" in why
    assert all(b.glibc >= (2, 28) for b in BASES)


@pytest.mark.parametrize(("args", "needle"), [
    (("--lock", "LOCK"), "give -o DIR/Containerfile"),
    (("--lock", "LOCK", "-o", "OUT", "--base", "a b"), "--base 'a b': not an image reference"),
    (("--lock", "LOCK", "-o", "OUT", "--base", "python:3.11@sha256:abc"), "IMAGE@sha256:<64 lowercase hex digits>"),
    (("--lock", "LOCK", "-o", "OUT", "--base", "python@" + DIGEST.upper()), "IMAGE@sha256:<64 lowercase hex"),
    (("--lock", "LOCK", "-o", "OUT", "--base", "python@md5:" + "0" * 32), "IMAGE@sha256:<64 lowercase hex"),
    (("--lock", "LOCK", "-o", "OUT", "--base", f"python@{DIGEST}@{DIGEST}"), "IMAGE@sha256:<64 lowercase hex"),
    (("--lock", "LOCK", "-o", "OUT", "--pack", "NOPACK"), "not a pack"),
    (("-o", "OUT"), "give --lock FILE"),
    (("--lock", "LDLOCK", "-o", "OUT"), "LD_PRELOAD of /usr/lib/x86_64-linux-gnu/libnccl.so.2"),
    (("--lock", "PY38LOCK", "-o", "OUT"), "no base image torchfit knows has Python 3.8"),
])
def test_bad_input(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    lock = container_lock(tmp_path)
    (tmp_path / "ld").mkdir()
    ld = container_lock(tmp_path / "ld", mechanism="ld-preload", library="/usr/lib/x86_64-linux-gnu/libnccl.so.2")
    (tmp_path / "py38").mkdir()
    py38 = tmp_path / "py38" / "pylock.toml"
    py38.write_text(lock.read_text().replace("==3.11.*", "==3.8.*").replace('python = "3.11"', 'python = "3.8"'))
    (tmp_path / "nopack").mkdir()
    subs = {"LOCK": str(lock), "LDLOCK": str(ld), "PY38LOCK": str(py38), "OUT": str(tmp_path / "ctx" / "Containerfile"),
            "NOPACK": str(tmp_path / "nopack")}
    proc = run_tf("export", "--format", "containerfile", *[subs.get(a, a) for a in args], state=tmp_path)
    assert needle in one_line_error(proc)
    assert not (tmp_path / "ctx" / "Containerfile").exists()


def test_pack_and_base_belong_to_the_containerfile(tmp_path: Path) -> None:
    proc = run_tf("export", "--format", "requirements", "--lock", str(container_lock(tmp_path)), "--base", "x", state=tmp_path)
    assert "--base: only for --format containerfile" in one_line_error(proc)


# --- real podman -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def base_tarball(tmp_path_factory: pytest.TempPathFactory, podman: dict[str, str]) -> Path:
    """A Debian bookworm root with python3 and venv (debootstrap minbase), as a tar, once a session."""
    work = tmp_path_factory.mktemp("debootstrap")
    root = debootstrap_root(work / "root", ["python3", "python3-venv"])
    return tar_root(root, work / "bookworm.tar")


@pytest.fixture(scope="session")
def base_image(podman: dict[str, str], base_tarball: Path) -> str:
    proc = run_podman(podman, "import", str(base_tarball), BASE_NAME)
    assert proc.returncode == 0, proc.stderr
    return BASE_NAME


@pytest.mark.slow
def test_an_image_of_the_cpu_lock_builds_offline_and_verifies(
        podman: dict[str, str], base_image: str, cpu_env: dict[str, Any], tmp_path: Path, state_home: Path) -> None:
    lock = cpu_env["prefix"] / "pylock.toml"
    ctx = tmp_path / "ctx"
    packed = run_tf("pack", "--lock", str(lock), "-o", str(ctx / "pack"), "--no-torchfit", state=state_home,
                    timeout=1800)
    assert packed.returncode == 0, packed.stderr
    # the base pinned by its digest, as a site pins it (the imported image's own manifest digest)
    digest = run_podman(podman, "image", "inspect", "--format", "{{.Digest}}", base_image).stdout.strip()
    assert digest.startswith("sha256:"), digest
    pinned = f"{base_image}@{digest}"
    out = run_tf("export", "--format", "containerfile", "--pack", str(ctx / "pack"), "--base", pinned,
                 "-o", str(ctx / "Containerfile"), state=state_home, timeout=900)
    assert out.returncode == 0, out.stderr
    assert "podman build --network none" in out.stderr
    pins = (ctx / "torchfit-wheels" / "requirements.txt").read_text().splitlines()[1:]
    assert pins[0].startswith("torchfit==") and len(pins) >= 10  # torchfit, packaging, requests, rich, uv, ...
    assert all(" --hash=sha256:" in line for line in pins), pins
    assert f'echo "{sha256_file(lock)}  /mnt/pack/pylock.toml" | sha256sum -c' in (ctx / "Containerfile").read_text()
    try:
        built = run_podman(podman, "build", "--network", "none", "-t", IMAGE, "-f", str(ctx / "Containerfile"),
                        str(ctx))
        assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-3000:]
        assert "torchfit: created /opt/torch" in built.stdout + built.stderr  # torchfit install ran, check included
        # `podman run IMAGE`: its CMD is torchfit verify (gloo: no GPU here), in the env torchfit built
        ran = run_podman(podman, "run", "--rm", "--network", "none", IMAGE, timeout=600)
        assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
        assert "verify: PASS" in ran.stdout and "torch 2.13.0+cpu" in ran.stdout, ran.stdout
        assert "(env /opt/torch)" in ran.stdout
        labels = json.loads(run_podman(podman, "inspect", "--format", "{{json .Config.Labels}}", IMAGE).stdout)
        assert labels["io.torchfit.torch"] == "2.13.0" and labels["io.torchfit.variant"] == "cpu"
        assert labels["io.torchfit.lock-sha256"] == sha256_file(lock)
        assert labels["io.torchfit.cuda"] == "none" and labels["io.torchfit.nccl"] == "none"
        assert labels["org.opencontainers.image.base.name"] == pinned
        assert labels["org.opencontainers.image.base.digest"] == digest
        # the entry runs as the unprivileged user; the env is root's, not writable by it
        who = run_podman(podman, "run", "--rm", "--network", "none", IMAGE, "sh", "-c",
                      "id -u; id -g; echo $HOME; test -w /opt/torch/bin || echo read-only", timeout=300)
        assert who.stdout.split() == ["10001", "10001", "/home/torchfit", "read-only"], who.stdout + who.stderr
        # doctor in the image: a podman container, no GPU passed in
        doc = run_podman(podman, "run", "--rm", "--network", "none", IMAGE, "torchfit", "doctor", "--json", timeout=600)
        check = next(c for c in json.loads(doc.stdout)["checks"] if c["id"] == "container-gpu-access")
        assert "in a podman" in check["evidence"] and "(/run/.containerenv)" in check["evidence"], check
        assert check["fix"] and "nvidia.com/gpu=all" in check["fix"]
        # a file of the pack that is not the lock's: the build fails at torchfit install
        victim = next((ctx / "pack" / "wheels").glob("filelock-*.whl"))
        victim.write_bytes(victim.read_bytes() + b"\0")
        # (--no-cache: the lock is the same, so its layer would be taken from the cache)
        broken = run_podman(podman, "build", "--no-cache", "--network", "none", "-t", IMAGE + "-broken", "-f",
                         str(ctx / "Containerfile"), str(ctx))
        assert broken.returncode != 0, broken.stdout[-3000:]
        assert "torchfit install --offline --pack" in broken.stdout + broken.stderr
    finally:
        for name in (IMAGE, IMAGE + "-broken"):
            run_podman(podman, "rmi", "--force", name)
