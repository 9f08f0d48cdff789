"""Round 4 repros for `torchfit add` (issue 25, "add" and "add not checking for processes using
the env"): a torch swapped behind torchfit's back, a message comparing a version with itself,
`torch @ URL` as a no-op, signals during the install and the lock rewrite (a wheel trickled by a
real HTTP server on 127.0.0.1; strace holding the lock's rename), a python running from the env.

Each case works on a private copy of the shared CPU env (`box.copy_env`)."""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from _common import TAG_VAR, Box, Case, tagged

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests/support's real wheels
from tests.support.wheels import Trickle, make_wheel, write_index

TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = (), tag: str = "py3-none-any",
           blob: int = 0) -> Path:
    """A real wheel (tests/support/wheels.py); `blob` bytes of random data besides its module."""
    files = {f"{name.replace('-', '_')}_mod/__init__.py": b"", f"{name.replace('-', '_')}_mod/blob.bin":
             os.urandom(blob)} if blob else None
    return make_wheel(directory, name, version, requires, tag=tag, files=files)


def _index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 tree over `wheels` (PEP 658 metadata beside them); returns root/simple."""
    return str(write_index(root, wheels))


def _trickled(box: Box) -> str:
    """An index on 127.0.0.1 whose `slow-pkg` wheel (600 KB) comes at 40 KB/s."""
    root = box.work / "trickle"
    _index(root, [_wheel(box.work / "w", "slow-pkg", "1.0", blob=600_000)])
    handler = functools.partial(Trickle, directory=str(root))
    return box.serve(handler) + "/simple"  # type: ignore[arg-type]


def _uv() -> str:
    return shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv") or "uv"


def _digest(prefix: Path) -> str:
    """The lock's bytes and every file of site-packages and bin/ (path and bytes)."""
    h = hashlib.sha256((prefix / "pylock.toml").read_bytes())
    for top in [*sorted((prefix / "lib").glob("python3.*")), prefix / "bin"]:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                p = Path(dirpath) / name
                h.update(str(p.relative_to(prefix)).encode() + b"\0")
                h.update(os.readlink(p).encode() if p.is_symlink() else p.read_bytes())
    return h.hexdigest()


def _links(box: Box) -> Path:
    d = box.work / "links"
    _wheel(d, "pure-new", "1.0")
    return d


# --- cases ------------------------------------------------------------------------------------


def swapped_torch(box: Box) -> str | None:
    env = box.copy_env()
    swap = box.work / "swap"
    _wheel(swap, "torch", "2.12.0", tag=TAG)
    subprocess.run([_uv(), "pip", "install", "--python", str(env / "bin" / "python"), "--reinstall", "--no-deps",
                    "--no-index", "--find-links", str(swap), "torch==2.12.0"], check=True, capture_output=True)
    res = box.tf("add", "pure-new", "--env", str(env), "--find-links", str(_links(box)))
    if res.code == 0:
        return f"torch swapped to 2.12.0 by uv pip install, add exit 0: {res.err.strip().splitlines()[-2:]}"
    if res.code != 1 or "2.12.0" not in res.err:
        return f"exit {res.code}, the swap not named: {res.err.strip()[-200:]}"
    return None


def same_version_other_file(box: Box) -> str | None:
    env = box.copy_env()
    other = _wheel(box.work / "w", "torch", "2.13.0+cpu", tag=TAG)
    index = _index(box.work / "idx", [other])
    res = box.tf("add", "pure-new", "--env", str(env), "--torch-index-url", Path(index).as_uri(), "--find-links",
                 str(_links(box)))
    if "has torch 2.13.0+cpu instead of the locked 2.13.0+cpu" in res.err:
        return "'has torch 2.13.0+cpu instead of the locked 2.13.0+cpu': compares a version with itself"
    if res.code != 1:
        return f"exit {res.code}"
    return None


def torch_url(box: Box) -> str | None:
    env = box.cpu_env()
    before = (env / "pylock.toml").read_bytes()
    res = box.tf("add", "torch @ https://example.invalid/torch-2.13.0-cp311-none-any.whl", "--env", str(env))
    if (env / "pylock.toml").read_bytes() != before:
        return "the lock changed"
    if res.code != 2 or res.traceback:
        return f"exit {res.code}: {res.err.strip().splitlines()[-1:] if res.err.strip() else ''}"
    return None


def _start(box: Box, env: Path, index: str, *wrap: str) -> tuple[subprocess.Popen[str], str]:
    tag = uuid.uuid4().hex
    full = dict(box.env, **{TAG_VAR: tag})
    argv = [*wrap, sys.executable, "-m", "torchfit", "add", "slow-pkg", "--env", str(env), "--extra-index-url",
            index, "--allow-insecure-index"]
    return subprocess.Popen(argv, env=full, cwd=str(box.work), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True), tag


def _uv_installing(pid: int) -> bool:
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                if int(fh.read().rpartition(")")[2].split()[1]) != pid:
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if os.path.basename(argv[0]) == b"uv" and argv[1:3] == [b"pip", b"install"]:
            return True
    return False


def _after(box: Box, env: Path, before: str, proc: subprocess.Popen[str], tag: str, sig: str) -> str | None:
    """The verdict: nothing of the run left running; env and lock the old state, or whole new
    (after SIGKILL: once the next add has run)."""
    _, err = proc.communicate(timeout=120)
    end = time.monotonic() + 10
    while tagged(tag) and time.monotonic() < end:
        time.sleep(0.2)
    if tagged(tag):
        return f"left running after {sig}: {tagged(tag)[:2]}"
    if "Traceback (most recent call last)" in err:
        return f"traceback after {sig}"
    if sig == "SIGKILL":
        box.tf("add", "slow-pkg==0.1", "--env", str(env))  # any next add: an interrupted one is undone first
    if [p.name for p in env.iterdir() if p.name.startswith(".pylock.toml.")]:
        return f"a temporary lock left beside pylock.toml after {sig}"
    now = _digest(env)
    locked = "slow-pkg" in (env / "pylock.toml").read_text()
    installed = bool(list((env / "lib").glob("python3.*/site-packages/slow_pkg-1.0.dist-info")))
    if now == before:
        return None
    if locked and installed:
        return None  # the new state, whole
    return (f"after {sig} the env and its lock disagree: slow-pkg {'locked' if locked else 'not locked'}, "
            f"{'installed' if installed else 'not installed'} (exit {proc.returncode})")


_HOLD_RENAME = ("strace", "-qq", "-o", "/dev/null", "-e", "trace=rename,renameat,renameat2", "-e",
                "inject=rename,renameat,renameat2:delay_enter=4000000")


def _signal_at(step: str, sig: str):  # type: ignore[no-untyped-def]
    """A case: `sig` while uv installs (`install`), or while strace holds the lock's rename (`lock`)."""
    def case(box: Box) -> str | None:
        if step == "lock" and not shutil.which("strace"):
            raise RuntimeError("strace is not installed (apt-get install strace)")
        env = box.copy_env()
        index = _trickled(box)
        before = _digest(env)
        proc, tag = _start(box, env, index, *(_HOLD_RENAME if step == "lock" else ()))
        arrived = ((lambda: _uv_installing(proc.pid)) if step == "install" else
                   (lambda: bool([p for p in env.iterdir() if p.name.startswith(".pylock.toml.")])))
        end = time.monotonic() + 300
        while not arrived():
            if proc.poll() is not None or time.monotonic() > end:
                return f"never reached the {step} step: exit {proc.poll()} {proc.communicate()[1][-300:]}"
            time.sleep(0.05)
        time.sleep(1.0 if step == "install" else 0.5)
        os.killpg(proc.pid, getattr(signal, sig))  # torchfit and strace: the terminal's Ctrl-C
        return _after(box, env, before, proc, tag, sig)
    return case


def in_use(box: Box) -> str | None:
    env = box.copy_env()
    links = _links(box)
    _wheel(links, "typing-extensions", "99.0")  # replaces a locked package: torch's dependency
    _wheel(links, "needs-new-te", "1.0", ("typing-extensions>=99",))
    runner = subprocess.Popen([str(env / "bin" / "python"), "-c", "import time; time.sleep(300)"])
    box.on_exit(lambda: (runner.kill(), runner.wait()))
    time.sleep(0.5)
    res = box.tf("add", "needs-new-te", "--env", str(env), "--find-links", str(links))
    if str(runner.pid) not in res.err:
        return (f"a python running from the env (pid {runner.pid}) not mentioned; exit {res.code}, "
                f"typing-extensions replaced under it" if res.code == 0 else f"exit {res.code}, pid not named")
    return None


CASES = [
    Case("add-swapped-torch", 6, "a torch swapped by uv pip install: add must notice (exit 1)", swapped_torch),
    Case("add-same-version-msg", 5, "another file under the locked version: not 'X instead of the locked X'",
         same_version_other_file),
    Case("add-torch-url", 4, "add 'torch @ URL' is a no-op exit 0: exit 2", torch_url),
    *(Case(f"add-{s.lower()}-install", 0, f"{s} while uv installs: env and lock whole", _signal_at("install", s))
      for s in ("SIGINT", "SIGTERM", "SIGKILL")),
    *(Case(f"add-{s.lower()}-lock", 0, f"{s} during the lock's rename: env and lock whole", _signal_at("lock", s))
      for s in ("SIGINT", "SIGTERM", "SIGKILL")),
    Case("add-in-use", 6, "a python running from the env: named before a package is replaced", in_use),
]

