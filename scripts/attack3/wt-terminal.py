"""Repros of wt-terminal: terminals and pipes (class 6), full disks and exhausted inodes (class 1)."""

from __future__ import annotations

import http.server
import json
import os
import pty
import select
import struct
import subprocess
import sys
import time

from _common import Box, Case

ESC = "\x1b["
ELLIPSIS = "\u2026"


def _facts(box: Box) -> str:
    """A GPU host on an older driver: the plan has bullets, a warning and ruled-out builds."""
    path = box.work / "gpu-host.json"
    if not path.exists():
        res = box.tf("detect", "--json")
        data = json.loads(res.out)
        data.update(driver_version="550.54.15", gpus=[{
            "index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "memory_mib": 24564,
            "uuid": None, "pci_bus_id": "00000000:01:00.0"}])
        path.write_text(json.dumps(data))
    return str(path)


def _pty(box: Box, *args: str, cols: int = 80, env: dict[str, str] | None = None,
         timeout: float = 120) -> tuple[int, str]:
    """torchfit on a real terminal `cols` wide (stdin, stdout, stderr): (exit code, what it showed)."""
    import fcntl
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "torchfit", *args], stdin=slave, stdout=slave, stderr=slave,
                            env=dict(box.env, **(env or {})), cwd=str(box.work), start_new_session=True)
    os.close(slave)
    chunks = []
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def _crash(res: object) -> str | None:
    text = res.out + res.err  # type: ignore[attr-defined]
    for word in ("Traceback (most recent call last)", "internal error", "UnicodeEncodeError", "AttributeError"):
        if word in text:
            line = next((ln for ln in text.splitlines() if word in ln or "Error" in ln), word)
            return f"exit {res.code}: {line.strip()[:150]}"  # type: ignore[attr-defined]
    return None


# --- class 6: terminals and pipes -----------------------------------------------------------


def closed_stdout(box: Box) -> str | None:
    res = box.tf("detect", stdout=None, preexec_fn=lambda: os.close(1))
    return _crash(res) or (None if res.code == 2 and "stdout" in res.err else f"exit {res.code}: {res.err.strip()[:150]!r}")


def closed_stderr(box: Box) -> str | None:
    res = box.tf("resolve", "--facts", _facts(box), "--json", stderr=None, preexec_fn=lambda: os.close(2))
    try:
        json.loads(res.out)
    except ValueError:
        return f"exit {res.code}, stdout not the plan: {res.out[:100]!r}"
    return None if res.code == 0 else f"exit {res.code}"


def _encoding(env: dict[str, str], *args: str) -> object:
    def fn(box: Box) -> str | None:
        argv = [a.replace("FACTS", _facts(box)) for a in args]
        if "ENV" in argv:
            argv[argv.index("ENV")] = str(box.cpu_env())
        res = box.tf(*argv, env=env, timeout=300)
        return _crash(res) or (None if res.code in (0, 1) else f"exit {res.code}: {res.err.strip()[-150:]}")
    return fn


def _no_escapes(env: dict[str, str]) -> object:
    def fn(box: Box) -> str | None:
        for args in (["resolve", "--facts", _facts(box), "--explain"], ["detect"], ["matrix", "show", "--unknown"]):
            _code, text = _pty(box, *args, env=env)
            if ESC in text:
                at = text.index(ESC)
                return f"{args[0]}: escape sequence sent: {text[at:at + 8]!r}"
        return None
    return fn


def _json_object(*args: str, server: int | None = None) -> object:
    def fn(box: Box) -> str | None:
        argv = list(args)
        if server is not None:
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_GET(self) -> None:
                    self.send_response(server)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

                def log_message(self, *a: object) -> None:
                    pass

            argv = [a.replace("URL", box.serve(Handler)) for a in argv]
        res = box.tf(*argv)
        try:
            data = json.loads(res.out)
        except ValueError:
            return f"exit {res.code}, stdout {res.out[:60]!r}, not one JSON object"
        if res.code == 0:
            return f"exit 0 with {res.out[:60]!r}"
        if not isinstance(data, dict) or data.get("ok") is not False:
            return f"exit {res.code}, stdout {res.out[:60]!r} is not an error object"
        return None
    return fn


def doctor_pipe(box: Box) -> str | None:
    res = box.tf("doctor")
    cut = [ln for ln in res.out.splitlines() if ln.rstrip().endswith(ELLIPSIS)]
    return f"{len(cut)} lines cut with an ellipsis through a pipe" if cut else None


def _narrow(*args: str) -> object:
    def fn(box: Box) -> str | None:
        code, text = _pty(box, *args, cols=40, env={"COLUMNS": "40"})
        cut = [ln for ln in text.splitlines() if ELLIPSIS in ln]
        return f"{len(cut)} lines cut at 40 columns" if cut else _crash(type("R", (), {"out": text, "err": "", "code": code}))
    return fn


# --- class 1: full disks and exhausted inodes -------------------------------------------------


def _used(where: str) -> tuple[int, int]:
    st = os.statvfs(where)
    return (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_files - st.f_ffree


_NEEDS: dict[str, tuple[int, int]] = {}


def _install_needs(box: Box) -> tuple[int, int]:
    """(bytes, inodes) an install of the CPU env takes on a tmpfs, measured once per run."""
    if "env" not in _NEEDS:
        where = str(box.tmpfs("measure", "size=2g"))
        res = box.tf(*_INSTALL, "--torch-index-url", box.torch_index, "--prefix", f"{where}/env", timeout=600)
        if res.code != 0:
            raise RuntimeError(f"the measuring install failed: {res.err[-300:]}")
        _NEEDS["env"] = _used(where)
    return _NEEDS["env"]


_INSTALL = ("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11")


def _judge_full(res: object, where: str, cache: bool = False) -> str | None:
    """`cache`: the full filesystem is uv's cache, whose content is uv's (not torchfit's leftovers)."""
    code, err = res.code, res.err  # type: ignore[attr-defined]
    left = os.listdir(where)
    crash = _crash(res)
    if crash:
        return crash
    if code != 1 or "stdout" in err or where not in err or "free" not in err:
        return f"exit {code}: {err.strip().splitlines()[-1][:200] if err.strip() else '(nothing)'}"
    if not cache and [p for p in left if p not in ("fill",)]:
        return f"left behind on the full filesystem: {left[:3]}"
    return None


def _install_short(kind: str) -> object:
    def fn(box: Box) -> str | None:
        need, inodes = _install_needs(box)
        opts = f"size={need - 24 * 1024}" if kind == "bytes" else f"size=2g,nr_inodes={inodes - 3}"
        where = str(box.tmpfs("fs", opts))
        res = box.tf(*_INSTALL, "--torch-index-url", box.torch_index, "--prefix", f"{where}/env", timeout=600)
        return _judge_full(res, where)
    return fn


def install_full_uv_cache(box: Box) -> str | None:
    cache = str(box.tmpfs("uv-cache", "size=40m"))
    res = box.tf(*_INSTALL, "--torch-index-url", box.torch_index, "--prefix", str(box.work / "env"),
                 env={"UV_CACHE_DIR": cache}, timeout=600)
    if (box.work / "env").exists() or [p for p in os.listdir(box.work) if ".torchfit-" in p]:
        return "the env or its temporary directory was left behind"
    return _judge_full(res, cache, cache=True) or (None if "uv's cache" in res.err else "uv's cache not named")


def add_full_env_fs(box: Box) -> str | None:
    """`torchfit add` of a 4 MB package into an env whose filesystem has 1 MB left. (82c371b had
    no `add`: not applicable there. Main had it from issue 18 on: exit 0 and a package without
    its 4 MB file, uv's out-of-space failure taken for a cache miss and retried.)"""
    if "add" not in box.tf("--help").out:
        return None
    import base64
    import hashlib
    import zipfile

    links = box.work / "links"
    links.mkdir()
    info = "bigpkg-1.0.dist-info"
    files = {"bigpkg/__init__.py": b"", "bigpkg/blob.bin": os.urandom(4 << 20),
             f"{info}/METADATA": b"Metadata-Version: 2.1\nName: bigpkg\nVersion: 1.0\n",
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rec = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},"
                  f"{len(d)}\n" for p, d in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(links / "bigpkg-1.0-py3-none-any.whl", "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(f"{info}/RECORD", rec)
    where = str(box.tmpfs("fs", "size=2g"))
    env = f"{where}/env"
    res = box.tf(*_INSTALL, "--torch-index-url", box.torch_index, "--prefix", env, timeout=600)
    if res.code != 0:
        raise RuntimeError(f"the install failed: {res.err[-300:]}")
    st = os.statvfs(where)
    with open(os.path.join(where, "fill"), "wb") as fh:
        fh.write(b"\0" * (st.f_bavail * st.f_frsize - (1 << 20)))
    res = box.tf("add", "bigpkg", "--env", env, "--find-links", str(links), timeout=300)
    blob = list((box.work / "fs" / "env" / "lib").glob("python3*/site-packages/bigpkg/blob.bin"))
    if res.code == 0:
        return "exit 0: added" + ("" if blob else ", and bigpkg/blob.bin is missing from the env (a broken package)")
    return _judge_full(res, where, cache=True)


def verify_full_tmpdir(box: Box) -> str | None:
    where = str(box.tmpfs("fulltmp", "size=256k"))
    with open(os.path.join(where, "fill"), "wb") as fh:
        fh.write(b"\0" * (240 << 10))
    res = box.tf("verify", "--env", str(box.cpu_env()), "--no-bandwidth", env={"TMPDIR": where}, timeout=300)
    return _judge_full(res, where)


def probe_full_tmpdir(box: Box) -> str | None:
    body = os.urandom(2 << 20)

    class NoRange(http.server.BaseHTTPRequestHandler):  # ignores Range: the whole body comes
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        def log_message(self, *a: object) -> None:
            pass

    url = box.serve(NoRange)
    where = str(box.tmpfs("fulltmp", "size=256k"))
    with open(os.path.join(where, "fill"), "wb") as fh:
        fh.write(b"\0" * (128 << 10))
    res = box.tf("matrix", "probe", f"{url}/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "--no-cache",
                 env={"TMPDIR": where})
    return _judge_full(res, where)


ASCII = {"PYTHONIOENCODING": "ascii"}
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}

CASES = [
    Case("1-install-bytes-short", 1, "install onto a tmpfs 24 KB short of the env", _install_short("bytes")),  # type: ignore[arg-type]
    Case("1-install-inodes-short", 1, "install onto a tmpfs 3 inodes short of the env",
         _install_short("inodes")),  # type: ignore[arg-type]
    Case("1-install-full-uv-cache", 1, "install with UV_CACHE_DIR on a 40 MB tmpfs", install_full_uv_cache),
    Case("1-add-full-env-fs", 1, "add a 4 MB package to an env whose filesystem has 1 MB left", add_full_env_fs),
    Case("1-verify-full-tmpdir", 1, "verify with TMPDIR on a tmpfs with 16 KB left", verify_full_tmpdir),
    Case("1-probe-full-tmpdir", 1, "matrix probe of a 2 MB wheel from a server ignoring Range, TMPDIR 128 KB free",
         probe_full_tmpdir),
    Case("6-closed-stdout", 6, "torchfit detect >&- (stdout closed)", closed_stdout),
    Case("6-closed-stderr", 6, "torchfit resolve --json 2>&- (stderr closed)", closed_stderr),
    Case("6-ascii-resolve", 6, "PYTHONIOENCODING=ascii resolve --explain (a GPU host)",
         _encoding(ASCII, "resolve", "--facts", "FACTS", "--explain")),  # type: ignore[arg-type]
    Case("6-c-locale-resolve", 6, "LC_ALL=C (no UTF-8 mode) resolve --explain",
         _encoding(C_LOCALE, "resolve", "--facts", "FACTS", "--explain")),  # type: ignore[arg-type]
    Case("6-ascii-doctor", 6, "PYTHONIOENCODING=ascii doctor through a pipe",
         _encoding(ASCII, "doctor")),  # type: ignore[arg-type]
    Case("6-ascii-verify", 6, "PYTHONIOENCODING=ascii verify of a CPU env (gloo)",
         _encoding(ASCII, "verify", "--env", "ENV", "--no-bandwidth")),  # type: ignore[arg-type]
    Case("6-no-color", 6, "NO_COLOR=1 on a terminal: resolve, detect, matrix show --unknown",
         _no_escapes({"NO_COLOR": "1", "TERM": "xterm-256color"})),  # type: ignore[arg-type]
    Case("6-term-dumb", 6, "TERM=dumb on a terminal: resolve, detect, matrix show --unknown",
         _no_escapes({"TERM": "dumb"})),  # type: ignore[arg-type]
    Case("6-json-detect-timeout", 6, "detect --timeout 0 --json",
         _json_object("detect", "--timeout", "0", "--json")),  # type: ignore[arg-type]
    Case("6-json-verify-slurm-time", 6, "verify --slurm --time abc --json",
         _json_object("verify", "--slurm", "--time", "abc", "--json")),  # type: ignore[arg-type]
    Case("6-json-resolve-usage", 6, "resolve --json --cuda (no value)",
         _json_object("resolve", "--json", "--cuda")),  # type: ignore[arg-type]
    Case("6-json-probe-404", 6, "matrix probe --torch 2.13.0 --variant cpu --json against an index answering 404",
         _json_object("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", "URL", "--json",
                      "--no-cache", "--backoff", "0", server=404)),  # type: ignore[arg-type]
    Case("6-json-probe-500", 6, "matrix probe --torch 2.13.0 --variant cpu --json against an index answering 500",
         _json_object("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", "URL", "--json",
                      "--no-cache", "--backoff", "0", "--timeout", "5", server=500)),  # type: ignore[arg-type]
    Case("6-doctor-pipe-cut", 6, "doctor | cat: evidence lines cut with an ellipsis", doctor_pipe),
    Case("6-narrow-detect", 6, "detect on a 40-column terminal", _narrow("detect")),  # type: ignore[arg-type]
    Case("6-narrow-doctor", 6, "doctor on a 40-column terminal", _narrow("doctor")),  # type: ignore[arg-type]
    Case("6-narrow-unknown", 6, "matrix show --unknown on a 40-column terminal",
         _narrow("matrix", "show", "--unknown")),  # type: ignore[arg-type]
]
