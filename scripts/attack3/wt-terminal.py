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


ASCII = {"PYTHONIOENCODING": "ascii"}
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}

CASES = [
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
