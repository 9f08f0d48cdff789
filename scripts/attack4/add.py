"""Round 4 repros for `torchfit add` (issue 25, "add" and "add not checking for processes using
the env"): a torch swapped behind torchfit's back, a message comparing a version with itself,
`torch @ URL` as a no-op, signals during the install and the lock rewrite (a wheel trickled by a
real HTTP server on 127.0.0.1; strace holding the lock's rename), a python running from the env.

Each case works on a private copy of the shared CPU env (`box.copy_env`)."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path

from _common import TAG_VAR, Box, Case, tagged

TAG = "cp311-cp311-manylinux_2_28_x86_64"


def _wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = (), tag: str = "py3-none-any",
           blob: int = 0) -> Path:
    """A real wheel (METADATA, WHEEL, RECORD with sha256); `blob` bytes of random data besides."""
    directory.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    meta = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
                    *(f"Requires-Dist: {r}\n" for r in requires), "\n"])
    files = {f"{dist}_mod/__init__.py": b"", f"{info}/METADATA": meta.encode(),
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: attack4\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()}
    if blob:
        files[f"{dist}_mod/blob.bin"] = os.urandom(blob)
    record = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                     f"{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in files.items():
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", record)
    return path


def _index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 tree over `wheels` (with PEP 658 metadata), relative links; returns root/simple."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[str]] = {}
    for w in wheels:
        data = w.read_bytes()
        (root / "files" / w.name).write_bytes(data)
        with zipfile.ZipFile(w) as zf:
            meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
        (root / "files" / (w.name + ".metadata")).write_bytes(meta)
        project = w.name.split("-")[0].lower().replace("_", "-")
        projects.setdefault(project, []).append(
            f'<a href="../../files/{w.name.replace("+", "%2B")}#sha256={hashlib.sha256(data).hexdigest()}" '
            f'data-core-metadata="sha256={hashlib.sha256(meta).hexdigest()}">{w.name}</a>')
    for project, links in projects.items():
        (root / "simple" / project).mkdir(parents=True, exist_ok=True)
        (root / "simple" / project / "index.html").write_text("\n".join(links) + "\n")
    return str(root / "simple")


class _Trickle(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *_a: object) -> None:
        pass

    def copyfile(self, source, outputfile) -> None:  # type: ignore[no-untyped-def]
        if not self.path.endswith(".whl"):
            return super().copyfile(source, outputfile)
        while block := source.read(4096):
            outputfile.write(block)
            time.sleep(0.1)
        return None


def _trickled(box: Box) -> str:
    """An index on 127.0.0.1 whose `slow-pkg` wheel (600 KB) comes at 40 KB/s."""
    root = box.work / "trickle"
    _index(root, [_wheel(box.work / "w", "slow-pkg", "1.0", blob=600_000)])
    handler = functools.partial(_Trickle, directory=str(root))
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


def _signal_at_install(sig: str):  # type: ignore[no-untyped-def]
    def case(box: Box) -> str | None:
        env = box.copy_env()
        index = _trickled(box)
        before = _digest(env)
        proc, tag = _start(box, env, index)
        end = time.monotonic() + 300
        while not _uv_installing(proc.pid):
            if proc.poll() is not None or time.monotonic() > end:
                return f"uv never installed: exit {proc.poll()} {proc.communicate()[1][-300:]}"
            time.sleep(0.05)
        time.sleep(1.0)
        os.kill(proc.pid, getattr(signal, sig))
        return _after(box, env, before, proc, tag, sig)
    return case


def _signal_at_lock(sig: str):  # type: ignore[no-untyped-def]
    def case(box: Box) -> str | None:
        if not shutil.which("strace"):
            raise RuntimeError("strace is not installed (apt-get install strace)")
        env = box.copy_env()
        index = _trickled(box)
        before = _digest(env)
        proc, tag = _start(box, env, index, "strace", "-qq", "-o", "/dev/null", "-e",
                           "trace=rename,renameat,renameat2", "-e",
                           "inject=rename,renameat,renameat2:delay_enter=4000000")
        end = time.monotonic() + 300
        while not [p for p in env.iterdir() if p.name.startswith(".pylock.toml.")]:
            if proc.poll() is not None or time.monotonic() > end:
                return f"the lock was never rewritten: exit {proc.poll()} {proc.communicate()[1][-300:]}"
            time.sleep(0.05)
        time.sleep(0.5)
        os.killpg(proc.pid, getattr(signal, sig))
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
    *(Case(f"add-{s.lower()}-install", 0, f"{s} while uv installs: env and lock whole", _signal_at_install(s))
      for s in ("SIGINT", "SIGTERM", "SIGKILL")),
    *(Case(f"add-{s.lower()}-lock", 0, f"{s} during the lock's rename: env and lock whole", _signal_at_lock(s))
      for s in ("SIGINT", "SIGTERM", "SIGKILL")),
    Case("add-in-use", 6, "a python running from the env: named before a package is replaced", in_use),
]

