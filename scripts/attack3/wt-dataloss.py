"""Repros of class 0 (data loss: a bind mount inside an env, a full disk under -o, links
planted in torchfit's state and cache, an env replaced while in use) and class 8
(concurrency and signals: two installs, SIGSTOP/SIGCONT of the installer child, signals
at random moments of verify and matrix probe). Real conditions: we are root, so real
mounts, a real second user, real processes using the env."""

from __future__ import annotations

import hashlib
import os
import pwd
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from _common import Box, Case

from tests.support.mounts import fill

CPU = ("torch==2.13.0", "--variant", "cpu", "--python", "3.11")
WHEEL_GLOB = "torch-2.13.0+cpu-*.whl"
ATTACKER = "tfattacker"


# --- helpers ----------------------------------------------------------------------------------


def _mount(box: Box, *argv: str) -> None:
    subprocess.run(["mount", *argv], check=True, capture_output=True)

    def unmount_all() -> None:  # wherever the mount went (82c371b moved it with the env)
        root = str(box.work) + "/"
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            points = [line.split(" ")[4] for line in fh]
        for point in sorted((p for p in points if p.startswith(root)), reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)

    box.on_exit(unmount_all)


def _tmpfs(box: Box, where: Path, size: str = "64k") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    _mount(box, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where))
    return where


def _attacker() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", ATTACKER],
                       check=True, capture_output=True)
        return pwd.getpwnam(ATTACKER)


def _as_attacker(*argv: str) -> None:
    subprocess.run(["runuser", "-u", ATTACKER, "--", *argv], check=True, capture_output=True)


def _shared(box: Box) -> Path:
    """A directory every user can reach (box.work's ancestors may be private)."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tf-dataloss-", dir="/tmp"))
    path.chmod(0o1777)
    box.on_exit(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def _wheel() -> Path:
    links = os.environ.get("PIP_FIND_LINKS") or subprocess.run(
        ["pip", "config", "get", "global.find-links"], capture_output=True, text=True).stdout.strip()
    return sorted(Path(links.split()[0] if links else "/opt/wheels").glob(WHEEL_GLOB))[0]


def _install(box: Box, prefix: Path, *extra: str, **kw: object):  # type: ignore[no-untyped-def]
    return box.tf("install", *CPU, "--torch-index-url", box.torch_index, "--prefix", str(prefix), *extra,
                  timeout=300, **kw)  # type: ignore[arg-type]


def _fresh_env(box: Box) -> Path | str:
    prefix = box.work / "env"
    res = _install(box, prefix)
    if res.code != 0:
        return f"setup: install exit {res.code}: {res.err[-200:]}"
    return prefix


USER_CODE = """
import sys, torch
print("ready", flush=True)
sys.stdin.readline()
import torch.utils.benchmark
print("still works", flush=True)
"""


def _user(prefix: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([str(prefix / "bin" / "python"), "-c", USER_CODE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    return proc


def _user_survived(proc: subprocess.Popen[str]) -> str | None:
    try:
        out, err = proc.communicate("go\n", timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "hung"
    if "still works" in out:
        return None
    return (err.strip().splitlines() or ["?"])[-1][:140]


# --- 0a ---------------------------------------------------------------------------------------


def bind_mount(box: Box) -> str | None:
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    data = box.work / "data"
    data.mkdir()
    (data / "checkpoint.pt").write_bytes(b"weeks of training")
    (prefix / "data").mkdir()
    _mount(box, "--bind", str(data), str(prefix / "data"))
    res = _install(box, prefix, "--force")
    if not (data / "checkpoint.pt").exists():
        return f"install --force exit {res.code}: the bind-mounted directory's files were deleted"
    if res.code == 0:
        return "install --force exit 0 over a bind mount (its files survived only by luck of the walk)"
    if "mount point" not in res.err:
        return f"exit {res.code} without naming the mount point: {res.err.strip()[-160:]}"
    return None


def symlink_out(box: Box) -> str | None:
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    outside = box.work / "outside"
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (prefix / "lib" / "outside-link").symlink_to(outside)
    res = _install(box, prefix, "--force")
    if not (outside / "keep").exists():
        return f"install --force exit {res.code} followed a symlink out of the env and deleted its target's files"
    return None


# --- 0b ---------------------------------------------------------------------------------------


def _full_disk_output(box: Box, argv: list[str], what: str) -> str | None:
    fs = _tmpfs(box, box.work / "fs")
    target = fs / "out.txt"
    target.write_text("the previous output, still needed\n")
    fill(fs)
    res = box.tf(*argv, "-o", str(target), timeout=120)
    now = target.read_text() if target.exists() else None
    if now != "the previous output, still needed\n":
        size = "gone" if now is None else f"{len(now)} bytes now"
        return f"{what} on a full disk: exit {res.code}, the old file was clobbered ({size})"
    if res.code == 0:
        return f"{what} on a full disk: exit 0 though nothing was written"
    if res.code == 2:
        return f"{what} on a full disk: exit 2 (bad input) for a full disk: {res.err.strip()[:140]}"
    leftovers = [p.name for p in fs.iterdir() if p.name not in ("out.txt", "fill", "fill2")]
    if leftovers:
        return f"{what}: left {leftovers[0]} on the full disk"
    return None


def _big_lock(box: Box) -> Path:
    """The CPU env's lock grown by 60 entries: an export of several blocks."""
    text = (box.cpu_env() / "pylock.toml").read_text()
    extra = "".join(
        f'\n[[packages]]\nname = "extra-pkg-{i}"\nversion = "1.0.{i}"\n\n[[packages.wheels]]\n'
        f'name = "extra_pkg_{i}-1.0.{i}-py3-none-any.whl"\n'
        f'url = "https://files.pythonhosted.org/packages/00/00/extra_pkg_{i}-1.0.{i}-py3-none-any.whl"\n'
        f'size = 1000\nhashes = {{ sha256 = "{i + 1:064x}" }}\n' for i in range(60))
    cut = text.index("\n[tool]\n")
    path = box.work / "big-pylock.toml"
    path.write_text(text[:cut] + "\n" + extra + text[cut:])
    return path


def export_full_disk(box: Box) -> str | None:
    lock = _big_lock(box)
    return _full_disk_output(box, ["export", "--format", "requirements", "--lock", str(lock)], "export -o")


def probe_full_disk(box: Box) -> str | None:
    wheel = str(_wheel())
    return _full_disk_output(box, ["matrix", "probe", *[wheel] * 6], "matrix probe --output")


def output_mode_kept(box: Box) -> str | None:
    target = box.work / "req.txt"
    target.write_text("old\n")
    target.chmod(0o640)
    res = box.tf("export", "--format", "requirements", "--lock", str(box.cpu_env() / "pylock.toml"),
                 "-o", str(target))
    mode = target.stat().st_mode & 0o777
    if res.code != 0 or mode != 0o640:
        return f"export -o over a 0640 file: exit {res.code}, mode now {mode:04o}"
    return None


# --- 0c ---------------------------------------------------------------------------------------


def _plant(directory: Path, names: list[str], victim: Path) -> None:
    for name in names:
        try:
            os.symlink(victim, directory / name)
        except FileExistsError:
            pass


def state_dir_links(box: Box) -> str | None:
    """XDG_STATE_HOME on shared ground: another user made torchfit/logs (0777) and planted a
    symlink for every log name of the next seconds and pids."""
    _attacker()
    shared = _shared(box)
    logs = shared / "torchfit" / "logs"
    _as_attacker("mkdir", "-p", "-m", "0777", str(logs))
    victim = box.work / "victim"
    victim.write_text("root's file\n")
    with open("/proc/sys/kernel/ns_last_pid") as fh:
        last = int(fh.read())
    now = time.time()
    names = [f"install-env-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now + s))}-{pid}.log"
             for s in range(0, 25) for pid in range(last + 1, last + 120)]
    _plant(logs, names, victim)
    res = _install(box, box.work / "env", env={"XDG_STATE_HOME": str(shared)})
    if victim.read_text() != "root's file\n":
        return f"install exit {res.code} wrote its log through a symlink planted by another user"
    own = [p for p in logs.iterdir() if not p.is_symlink()]
    if own:
        return f"install wrote {own[0].name} into a directory another user owns"
    if "install log" not in res.err:
        return "install used another user's log directory without a word"
    return None


HTTP_CACHE_CODE = """
import sys
from pathlib import Path
from torchfit.index.cache import DiskCache
sys.stdin.readline()
root = Path(sys.argv[1])
key = DiskCache.key("https://example.invalid/simple/torch/", "text/html")
DiskCache(root).store(key, {"url": "https://example.invalid/simple/torch/"}, b"<html>page</html>")
print(DiskCache(root).load(key) is not None)
"""


def http_cache_links(box: Box) -> str | None:
    """Symlinks at the HTTP cache's temporary names (predictable: key and pid)."""
    root = box.work / "cache" / "torchfit" / "http"
    root.mkdir(parents=True, mode=0o700)
    victim = box.work / "victim"
    victim.write_text("precious\n")
    env = dict(box.env)
    proc = subprocess.Popen([sys.executable, "-c", HTTP_CACHE_CODE, str(root)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    key = hashlib.sha256(b"https://example.invalid/simple/torch/\ntext/html").hexdigest()
    _plant(root, [f"{key}.body.tmp{proc.pid}", f"{key}.json.tmp{proc.pid}", f"{key}.body"], victim)
    _, err = proc.communicate("go\n", timeout=60)
    if victim.read_text() != "precious\n":
        return "the HTTP cache wrote a page through a symlink planted at its temporary name"
    if proc.returncode != 0:
        return f"the HTTP cache failed: {err.strip()[-140:]}"
    return None


def http_cache_other_user(box: Box) -> str | None:
    """The HTTP cache directory belongs to another user: never read (poisoning), never written."""
    _attacker()
    shared = _shared(box)
    root = shared / "torchfit" / "http"
    _as_attacker("mkdir", "-p", "-m", "0777", str(root))
    code = ("import sys;from pathlib import Path;from torchfit.index.cache import DiskCache as D;"
            "k=D.key('u','a');D(Path(sys.argv[1])).store(k,{'url':'u'},b'page')")
    subprocess.run([sys.executable, "-c", code, str(root)], env=box.env, check=True, timeout=60)
    if list(root.iterdir()):
        return "the HTTP cache wrote into a directory another user owns (and would read their records back)"
    return None


# --- 0d ---------------------------------------------------------------------------------------


def in_use_torch(box: Box) -> str | None:
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    user = _user(prefix)
    try:
        res = _install(box, prefix, "--force")
        broke = _user_survived(user)
    finally:
        user.kill()
    if res.code == 0 and broke:
        return f"install --force replaced the env under a running Python (pid {user.pid}), which then failed: {broke}"
    if res.code == 0:
        return "install --force replaced an env a running Python had imported torch from"
    if str(user.pid) not in res.err or "--wait" not in res.err:
        return f"refused (exit {res.code}) without naming pid {user.pid} and --wait: {res.err.strip()[-160:]}"
    if broke:
        return f"refused, yet the running Python failed: {broke}"
    return None


def in_use_cwd(box: Box) -> str | None:
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    shell = subprocess.Popen(["sleep", "30"], cwd=prefix / "lib")
    try:
        res = _install(box, prefix, "--force")
    finally:
        shell.kill()
        shell.wait()
    if res.code == 0:
        return f"install --force removed the working directory of pid {shell.pid} (sleep 30) from under it"
    if str(shell.pid) not in res.err:
        return f"refused (exit {res.code}) without naming pid {shell.pid}"
    return None


def in_use_wait(box: Box) -> str | None:
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    user = subprocess.Popen(["sleep", "3"], cwd=prefix)
    res = _install(box, prefix, "--force", "--wait", "60")
    ended = user.poll() is not None
    if res.code != 0:
        return f"install --force --wait 60 exit {res.code}: {res.err.strip()[-160:]}"
    if not ended:
        return f"install --force --wait replaced the env while pid {user.pid} still worked in it"
    return None


def promise(box: Box) -> str | None:
    """The message without --force must not promise what is not true."""
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    res = _install(box, prefix)
    if "keeps working until the new one is complete" in res.err:
        return "the refusal promises the old env keeps working, which a process using it does not"
    return None


# --- class 8 ----------------------------------------------------------------------------------


def _is_uv_install(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return bool(argv) and os.path.basename(argv[0]) == b"uv" and argv[1:3] == [b"pip", b"install"]


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for kid in kids.get(todo.pop(), []):
            out.append(kid)
            todo.append(kid)
    return out


def _wait_uv(proc: subprocess.Popen[str], timeout: float = 120) -> int | None:
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        for pid in _descendants(proc.pid):
            if _is_uv_install(pid):
                return pid
        time.sleep(0.02)
    return None


def sigstop_user_arrives(box: Box) -> str | None:
    """SIGSTOP the installer child, a Python starts using the old env, SIGCONT."""
    prefix = _fresh_env(box)
    if isinstance(prefix, str):
        return prefix
    seen: dict[str, object] = {}

    def during(proc: subprocess.Popen[str]) -> None:
        child = _wait_uv(proc)
        if child is None:
            return
        os.kill(child, signal.SIGSTOP)
        seen["user"] = _user(prefix)
        time.sleep(0.5)
        os.kill(child, signal.SIGCONT)

    res = _install(box, prefix, "--force", env={"UV_CACHE_DIR": str(box.work / "uv-cache")}, during=during)
    user = seen.get("user")
    if not isinstance(user, subprocess.Popen):
        return f"setup: the uv child was never seen (exit {res.code})"
    try:
        broke = _user_survived(user)
    finally:
        user.kill()
    if res.code == 0:
        return f"after SIGSTOP/SIGCONT the install swapped the env under pid {user.pid}" + (
            f", which then failed: {broke}" if broke else "")
    if broke:
        return f"exit {res.code}, yet the Python using the env failed: {broke}"
    return None


def sigstop_cont(box: Box) -> str | None:
    """A plain SIGSTOP/SIGCONT of the installer child: the install still completes."""

    def during(proc: subprocess.Popen[str]) -> None:
        child = _wait_uv(proc)
        if child is not None:
            os.kill(child, signal.SIGSTOP)
            time.sleep(2)
            os.kill(child, signal.SIGCONT)

    prefix = box.work / "env"
    res = _install(box, prefix, env={"UV_CACHE_DIR": str(box.work / "uv-cache")}, during=during)
    if res.code != 0 or not (prefix / "pylock.toml").is_file():
        return f"SIGSTOP/SIGCONT of uv: exit {res.code}: {res.err.strip()[-160:]}"
    return None


def two_installs(box: Box) -> str | None:
    """Two installs into one prefix at once: one builds, the other waits (--wait) then replaces."""
    prefix = box.work / "env"
    box_env = {"UV_CACHE_DIR": str(box.work / "uv-cache")}
    first = subprocess.Popen([sys.executable, "-m", "torchfit", "install", *CPU, "--torch-index-url",
                              box.torch_index, "--prefix", str(prefix)], env=dict(box.env, **box_env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    second = _install(box, prefix, "--force", "--wait", "300", env=box_env)
    _, err1 = first.communicate(timeout=300)
    if first.returncode != 0 or second.code != 0:
        return f"two installs: exit {first.returncode} and {second.code}: {(err1 + second.err).strip()[-160:]}"
    if not (prefix / "pylock.toml").is_file():
        return "two installs: no env at PREFIX afterwards"
    left = [p.name for p in box.work.iterdir() if ".torchfit-" in p.name or p.name.endswith(".lock")]
    if left:
        return f"two installs left {left[0]}"
    return None


def _signal_sweep(box: Box, args: list[str], sigs: list[int], count: int, seed: int) -> str | None:
    rng = random.Random(seed)
    whole = box.tf(*args, timeout=300)
    seen = []
    for i in range(count):
        sig = sigs[i % len(sigs)]
        moment = rng.uniform(0.1, max(0.2, whole.seconds * 1.05))

        def hit(proc: subprocess.Popen[str], moment: float = moment, sig: int = sig) -> None:
            time.sleep(moment)
            if proc.poll() is None:
                os.kill(proc.pid, sig)

        res = box.tf(*args, during=hit, timeout=120)
        name = signal.Signals(sig).name
        if res.timed_out:
            seen.append(f"{name} at {moment:.2f} s: hung")
        elif res.code == -sig or res.traceback or res.left:
            seen.append(f"{name} at {moment:.2f} s: exit {res.code}" + (" traceback" if res.traceback else "")
                        + (f" left {res.left[0]}" if res.left else ""))
        elif res.code not in (0, 1, 130, whole.code):  # the unsignalled run's own answer stands
            seen.append(f"{name} at {moment:.2f} s: exit {res.code}")
        left = [p.name for p in (box.work / "tmp").iterdir() if p.name.startswith("torchfit-")]
        if left and res.code != 0:
            seen.append(f"{name} at {moment:.2f} s: left {left[0]} in TMPDIR")
    return "; ".join(seen[:3]) + (f" (and {len(seen) - 3} more)" if len(seen) > 3 else "") or None


def signals_verify(box: Box) -> str | None:
    env = box.cpu_env()
    return _signal_sweep(box, ["verify", "--env", str(env), "--backend", "gloo", "--nproc", "2"],
                         [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], 5, 21)


def _range_server(box: Box, path: Path, delay: float) -> str:
    """The wheel over HTTP with Range support, each answer `delay` s late (a slow mirror)."""
    import http.server

    size = path.stat().st_size

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _span(self) -> tuple[int, int]:
            spec = (self.headers.get("Range") or "").removeprefix("bytes=")
            if not spec:
                return 0, size - 1
            a, _, b = spec.partition("-")
            if not a:
                return max(0, size - int(b)), size - 1
            return int(a), min(size - 1, int(b)) if b else size - 1

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self) -> None:
            time.sleep(delay)
            start, end = self._span()
            self.send_response(206 if self.headers.get("Range") else 200)
            self.send_header("Content-Length", str(end - start + 1))
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            with open(path, "rb") as fh:
                fh.seek(start)
                left = end - start + 1
                while left > 0:
                    chunk = fh.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    try:
                        self.wfile.write(chunk)
                    except OSError:
                        return
                    left -= len(chunk)

    return box.serve(Handler) + "/" + path.name


def signals_probe(box: Box) -> str | None:
    url = _range_server(box, _wheel(), 0.05)
    return _signal_sweep(box, ["matrix", "probe", url, "--allow-insecure-index", "--no-cache", "--json",
                               "-o", str(box.work / "probe.json")],
                         [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], 6, 8)


def startup_signal(box: Box) -> str | None:
    """SIGTERM/SIGHUP the instant torchfit opens torchfit/cli to import it (inotify): before
    cli.main has its handlers, the default action used to kill torchfit (exit -15, no word)."""
    import ctypes
    import ctypes.util
    import select

    cli = box.src / "torchfit" / "cli"
    subprocess.run([sys.executable, "-m", "torchfit", "--help"], env=box.env, capture_output=True, timeout=60)
    seen = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        for p in (cli, cli / "__pycache__"):
            if p.exists():
                libc.inotify_add_watch(fd, os.fsencode(p), 0x20)  # IN_OPEN
        try:
            proc = subprocess.Popen([sys.executable, "-m", "torchfit", "resolve", *CPU], env=box.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if select.select([fd], [], [], 30)[0]:
                proc.send_signal(sig)
            _, err = proc.communicate(timeout=60)
        finally:
            os.close(fd)
        if proc.returncode != 130:
            seen.append(f"{signal.Signals(sig).name} during the start-up imports: exit {proc.returncode}"
                        + ("" if err.strip() else ", nothing said"))
    return "; ".join(seen) or None


STOPPED_CODE = """
import os, signal, sys, threading, time
from torchfit.runner import Runner
from torchfit.errors import ToolStalled

def resume():
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    pid = int(open(sys.argv[1]).read())
    for _ in range(600):
        if open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0] == "T":
            break
        time.sleep(0.05)
    time.sleep(4)
    os.kill(pid, signal.SIGCONT)

threading.Thread(target=resume, daemon=True).start()
p = sys.argv[1]
try:
    res = Runner().run(["sh", "-c", f"echo $$ > {p}.t && mv {p}.t {p} && kill -STOP $$ && echo resumed"],
                       timeout=60, stall=2)
    print("exit", res.returncode, res.stdout.strip())
except ToolStalled as err:
    print("stalled:", err)
"""


def sigstop_stall(box: Box) -> str | None:
    """A child stopped (SIGSTOP) for twice the stall limit, then continued: the runner (every
    install step goes through it) must not kill it as a hung index."""
    res = subprocess.run([sys.executable, "-c", STOPPED_CODE, str(box.work / "pid")], env=box.env,
                         capture_output=True, text=True, timeout=120)
    if "exit 0 resumed" not in res.stdout:
        return f"a SIGSTOPped child was killed as stalled: {(res.stdout + res.stderr).strip()[-160:]}"
    return None


CASES = [
    Case("0a-bind-mount", 0, "install --force over an env with a bind mount inside", bind_mount),
    Case("0a-symlink-out", 0, "install --force over an env with a symlink to a directory outside", symlink_out),
    Case("0b-export-full-disk", 0, "export -o FILE on a full tmpfs", export_full_disk),
    Case("0b-probe-full-disk", 0, "matrix probe --output FILE on a full tmpfs", probe_full_disk),
    Case("0b-output-mode", 0, "export -o over an existing 0640 file keeps its mode", output_mode_kept),
    Case("0c-state-dir-links", 0, "install logs into another user's state directory with planted symlinks",
         state_dir_links),
    Case("0c-http-cache-links", 0, "HTTP cache store with symlinks planted at its temporary names", http_cache_links),
    Case("0c-http-cache-other-user", 0, "HTTP cache in a directory another user owns", http_cache_other_user),
    Case("0d-in-use-torch", 0, "install --force while a Python that imported torch from the env runs", in_use_torch),
    Case("0d-in-use-cwd", 0, "install --force while a process works inside the env", in_use_cwd),
    Case("0d-in-use-wait", 0, "install --force --wait while a short process works inside the env", in_use_wait),
    Case("0d-promise", 0, "the refusal without --force promises nothing untrue", promise),
    Case("8-sigstop-user-arrives", 8, "SIGSTOP of uv, a Python starts using the old env, SIGCONT",
         sigstop_user_arrives),
    Case("8-sigstop-cont", 8, "SIGSTOP/SIGCONT of the installer child", sigstop_cont),
    Case("8-sigstop-stall", 8, "a child SIGSTOPped for twice the stall limit, then SIGCONT", sigstop_stall),
    Case("8-two-installs", 8, "two installs into one prefix at once (--wait)", two_installs),
    Case("8-signals-verify-gloo", 8, "SIGINT/TERM/HUP at 5 random moments of verify --backend gloo --nproc 2",
         signals_verify),
    Case("8-signal-at-start-up", 8, "SIGTERM/SIGHUP while torchfit imports torchfit.cli (inotify)", startup_signal),
    Case("8-signals-matrix-probe", 8, "SIGINT/TERM/HUP at 6 random moments of matrix probe URL -o (a slow range server)", signals_probe),
]
