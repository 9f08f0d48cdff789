"""Repros of the corrupt-state (class 2) and hostile-server/archive (class 3) engineer."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import os
import re
import resource
import struct
import time
import zipfile
from pathlib import Path
from typing import Any, Callable

from _common import Box, Case

from tests.support.tls import make_certs

# --- class 2: corrupt state ---------------------------------------------------------------


def _tampered_lock(box: Box, injected: str) -> str:
    """The shared env's lock with `injected` appended to mpmath's version; its path."""
    text = (box.cpu_env() / "pylock.toml").read_text()
    m = re.search(r'(name = "mpmath"\nversion = ")([^"]*)(")', text)
    if not m:
        raise RuntimeError("the shared env's lock has no mpmath")
    escaped = injected.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    out = box.work / "pylock.toml"
    out.write_text(text[:m.end(2)] + escaped + text[m.end(2):])
    return str(out)


def _recorder(box: Box) -> tuple[str, list[str]]:
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_a: Any) -> None:
            pass

    return box.serve(Handler), seen


def lock_injects_index(box: Box) -> str | None:
    url, seen = _recorder(box)
    text = (box.cpu_env() / "pylock.toml").read_text()
    sha = re.search(r'name = "mpmath"\n(?:.*\n)*?hashes = \{ sha256 = "([0-9a-f]{64})" \}', text)
    lock = _tampered_lock(box, f" --hash=sha256:{sha.group(1) if sha else 'a' * 64}\n--extra-index-url {url}/simple")
    res = box.tf("install", "--lock", lock, "--prefix", str(box.work / "env"),
                 "--allow-insecure-index", timeout=300)
    new_lock = box.work / "env" / "pylock.toml"
    if seen:
        return f"exit {res.code}: the installer asked the injected index ({len(seen)} requests, {seen[0]})"
    if new_lock.exists() and "--extra-index-url" in new_lock.read_text():
        return f"exit {res.code}: the new env's lock keeps the injected --extra-index-url"
    if res.code != 2:
        return f"exit {res.code} (expected 2, the lock refused)"
    return None


def lock_injects_requirements_file(box: Box) -> str | None:
    secret = box.work / "secret"
    secret.write_text("root:$6$SECRET-FIRST-LINE:20228:0:99999:7:::\n")
    secret.chmod(0o600)
    lock = _tampered_lock(box, f"\n-r {secret}")
    # pip: it prints the first line of a -r file it cannot parse (uv does not)
    res = box.tf("install", "--lock", lock, "--prefix", str(box.work / "env"), "--installer", "pip", timeout=300)
    logs = list((box.work / "state").rglob("*.log"))
    leaked = [str(p) for p in logs if "SECRET-FIRST-LINE" in p.read_text(errors="replace")]
    if "SECRET-FIRST-LINE" in res.text:
        return f"exit {res.code}: the -r file's first line is printed"
    if leaked:
        return f"exit {res.code}: the -r file's first line is in the install log {leaked[0]}"
    if res.code != 2:
        return f"exit {res.code} (expected 2, the lock refused)"
    return None


def _fifos(paths: list[Path]) -> None:
    for p in paths:
        if p.exists() or p.is_symlink():
            p.unlink()
        p.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(p, 0o600)


def fifo_start_up_cache(box: Box) -> str | None:
    args = ("resolve", "torch==2.13.0", "--variant", "cpu", "--assume", "python=3.11")
    first = box.tf(*args, timeout=60)
    records = sorted((box.work / "cache" / "torchfit").glob("*.json"))
    if first.code != 0 or not records:
        return f"setup: resolve exit {first.code}, {len(records)} records"
    _fifos(records)
    res = box.tf(*args, timeout=30)
    if res.timed_out:
        return f"resolve hung ({res.seconds:.0f} s) on a FIFO in the start-up cache"
    return None if res.code == 0 else f"exit {res.code} with a FIFO in the start-up cache"


# PEP 691 negotiation as index.client sends it; the HTTP cache's key is sha256(URL + "\n" + Accept).
_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
           "text/html;q=0.01")


def _handler(fn: Callable[[http.server.BaseHTTPRequestHandler], None]) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def handle(self) -> None:
            try:
                super().handle()
            except OSError:  # the client hung up (it refused the body): expected here
                pass

        def do_GET(self) -> None:
            try:
                fn(self)
            except OSError:
                pass

        def log_message(self, *_a: Any) -> None:
            pass

    return Handler


def _answer(h: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str) -> None:
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k.replace("_", "-"), v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


def _probe(box: Box, base: str, *extra: str, timeout: float = 60, **popen: Any) -> Any:
    return box.tf("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", base,
                  *extra, timeout=timeout, **popen)


def fifo_http_cache(box: Box) -> str | None:
    base = box.serve(_handler(lambda h: _answer(h, 200, b"<html></html>", Content_Type="text/html")))
    key = hashlib.sha256(f"{base}/cpu/torch/\n{_ACCEPT}".encode()).hexdigest()
    http_dir = box.work / "cache" / "torchfit" / "http"
    http_dir.mkdir(parents=True, mode=0o700)
    _fifos([http_dir / f"{key}.json", http_dir / f"{key}.body"])
    res = _probe(box, base, timeout=30)
    if res.timed_out:
        return f"matrix probe hung ({res.seconds:.0f} s) on a FIFO in the HTTP cache"
    return None


def _limit_memory(mib: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))
    return apply


def _memory_verdict(res: Any, what: str) -> str | None:
    if res.timed_out:
        return f"{what}: timed out after {res.seconds:.0f} s"
    if "MemoryError" in res.text or res.traceback:
        return f"{what}: exit {res.code}, MemoryError/traceback"
    if res.code != 1:
        return f"{what}: exit {res.code} (expected 1, the page refused)"
    return None


def gzip_bomb_page(box: Box) -> str | None:
    bomb = gzip.compress(b"\0" * (16 << 20), compresslevel=9) * 128  # 2 GiB inflated, ~2 MB sent
    base = box.serve(_handler(lambda h: _answer(h, 200, bomb, Content_Type="text/html", Content_Encoding="gzip")))
    res = _probe(box, base, timeout=120, preexec_fn=_limit_memory(1500))
    return _memory_verdict(res, "a gzip-bombed index page (2 GiB inflated, 1.5 GiB address space)")


def range_ignored_huge(box: Box) -> str | None:
    size = 1 << 30

    def whole(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", str(size))
        h.end_headers()
        block = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            h.wfile.write(block)

    base = box.serve(_handler(whole))
    res = box.tf("matrix", "probe", f"{base}/torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                 timeout=120, preexec_fn=_limit_memory(1200))
    return _memory_verdict(res, "a server ignoring Range on a 1 GiB body (1.2 GiB address space)")


def _wheel(path: Path, members: dict[str, bytes], bomb: str | None = None, inflated: int = 0) -> None:
    """A wheel of `members`; `bomb`: one more member of `inflated` zeros that declares 1,000 bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        if bomb:
            info = zipfile.ZipInfo(bomb)
            info.compress_type = zipfile.ZIP_DEFLATED
            with zf.open(info, "w") as fh:
                for _ in range(inflated >> 20):
                    fh.write(b"\0" * (1 << 20))
    if bomb:
        data = bytearray(path.read_bytes())
        name = bomb.encode()
        for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
            pos = data.find(sig, 0)
            while pos >= 0 and name not in data[pos:pos + 46 + len(name) + 4]:
                pos = data.find(sig, pos + 4)
            data[pos + at:pos + at + 4] = struct.pack("<I", 1000)
        path.write_bytes(bytes(data))


_META = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cu128\n\n"


def zip_bomb(box: Box) -> str | None:
    whl = box.work / "torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    _wheel(whl, {"torch/__init__.py": b""}, bomb="torch-2.13.0+cu128.dist-info/METADATA", inflated=1 << 30)
    res = box.tf("matrix", "probe", str(whl), timeout=120, preexec_fn=_limit_memory(1000))
    if res.timed_out or res.traceback or "MemoryError" in res.text:
        return f"a METADATA inflating to 1 GiB (declared 1,000 bytes, 1 GiB address space): exit {res.code}, " + (
            "timed out" if res.timed_out else "MemoryError/traceback")
    return None if res.code in (1, 2) else f"exit {res.code} for a zip bomb"


def version_py_backtrack(box: Box) -> str | None:
    whl = box.work / "torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    _wheel(whl, {"torch-2.13.0+cu128.dist-info/METADATA": _META,
                 "torch/version.py": b"__version__ = '2.13.0+cu128'\n" + b"cuda:\n" * 40000})
    res = box.tf("matrix", "probe", str(whl), "--json", timeout=40)
    if res.timed_out:
        return f"a crafted torch/version.py (40,000 lines 'cuda:'): still parsing after {res.seconds:.0f} s"
    return None


def arch_string_backtrack(box: Box) -> str | None:
    whl = box.work / "torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    # Not an ELF with sections: the probe scans the whole member for the arch list.
    elf = (b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 56, 0, 64, 0, 0))
    lib = elf + b"sm_90 " * 30000 + b"x\0"
    _wheel(whl, {"torch-2.13.0+cu128.dist-info/METADATA": _META,
                 "torch/version.py": b"__version__ = '2.13.0+cu128'\ncuda = '12.8'\n",
                 "torch/lib/libtorch_python.so": lib})
    res = box.tf("matrix", "probe", str(whl), "--json", timeout=40)
    if res.timed_out:
        return f"a crafted libtorch_python.so (180 KB of 'sm_90 '): still scanning after {res.seconds:.0f} s"
    return None


def https_to_http(box: Box) -> str | None:
    seen: list[str] = []

    def plain(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.path)
        _answer(h, 200, b"<html></html>", Content_Type="text/html")

    http_base = box.serve(_handler(plain))
    certs = make_certs(box.work / "tls")
    secure = box.serve(_handler(lambda h: _answer(h, 302, Location=http_base + h.path)),
                       tls=(certs["cert"], certs["key"]))
    ca = certs["ca"]
    trust = {"REQUESTS_CA_BUNDLE": ca, "CURL_CA_BUNDLE": ca, "SSL_CERT_FILE": ca}
    res = box.tf("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", secure,
                 timeout=60, env=trust)
    if seen:
        return f"matrix probe followed https -> http ({len(seen)} plain requests), exit {res.code}"
    if res.code != 1 or "plain http" not in res.err:
        return f"exit {res.code}, no word of the https -> http redirect"
    return None


def _probe_fails(box: Box, fn: Callable[[http.server.BaseHTTPRequestHandler], None], what: str,
                 timeout: float = 60, extra: tuple[str, ...] = ()) -> str | None:
    base = box.serve(_handler(fn))
    res = _probe(box, base, *extra, timeout=timeout)
    if res.timed_out:
        return f"{what}: timed out after {res.seconds:.0f} s"
    if res.code != 1 or "127.0.0.1" not in res.err or res.traceback:
        return f"{what}: exit {res.code}, stdout {res.out.strip()[:40]!r}" + (" traceback" if res.traceback else "")
    return None


def probe_404(box: Box) -> str | None:
    return _probe_fails(box, lambda h: _answer(h, 404), "an index answering 404")


def probe_500(box: Box) -> str | None:
    return _probe_fails(box, lambda h: _answer(h, 500), "an index answering 500", extra=("--timeout", "2"))


def probe_loop(box: Box) -> str | None:
    return _probe_fails(box, lambda h: _answer(h, 302, Location=h.path), "an index redirecting to itself")


def probe_hang(box: Box) -> str | None:
    def hang(h: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(30)

    return _probe_fails(box, hang, "an index that never answers", timeout=60,
                        extra=("--timeout", "1"))


def _broken_env(box: Box, how: str) -> Path:
    env = box.copy_env()
    for name in ("python", "python3"):
        exe = env / "bin" / name
        if exe.is_symlink() or exe.exists():
            exe.unlink()
        if how == "dangling":
            exe.symlink_to("/nonexistent/python3.11")
        elif how == "loop":
            exe.symlink_to(name)
    return env


def _damaged_env_case(how: str) -> Callable[[Box], str | None]:
    def case(box: Box) -> str | None:
        env = _broken_env(box, how)
        seen = []
        for cmd in ("verify", "doctor"):
            res = box.tf(cmd, "--env", str(env), timeout=120)
            if res.code != 1 or "broken" not in res.err:
                seen.append(f"{cmd} exit {res.code}")
        marker = box.work / "ran"
        res = box.tf("run", "--env", str(env), "--", "python", "-c", f"open({str(marker)!r}, 'w')", timeout=60)
        if marker.exists():
            seen.append("run ran the command with another python")
        elif res.code != 1:
            seen.append(f"run exit {res.code}")
        return "; ".join(seen) or None
    return case


def doctor_empty_init(box: Box) -> str | None:
    env = box.copy_env()
    init = next((env / "lib").glob("python*/site-packages/torch/__init__.py"))
    init.unlink()  # a fresh file: the copy's original may be linked from uv's cache
    init.write_text("")
    res = box.tf("doctor", "--env", str(env), timeout=180)
    if res.code == 0 or "Nothing failed" in res.text:
        return f"doctor on a torch with an empty __init__.py: exit {res.code}, 'Nothing failed'"
    if "RECORD" not in res.text:
        return f"doctor exit {res.code}, no word of the file that differs from RECORD"
    return None


def uv_cache_damaged(box: Box) -> str | None:
    cache = box.work / "uv-cache"
    env = {"UV_CACHE_DIR": str(cache)}
    args = ("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--torch-index-url",
            box.torch_index)
    first = box.tf(*args, "--prefix", str(box.work / "first"), env=env, timeout=600)
    inits = sorted(cache.glob("archive-v0/*/torch/__init__.py"))
    if first.code != 0 or not inits:
        return f"setup: install exit {first.code}, {len(inits)} torch in uv's cache"
    inits[0].write_bytes(b"")
    second = box.tf(*args, "--prefix", str(box.work / "second"), env=env, timeout=600)
    if second.code == 0:
        return "install from a damaged uv cache: exit 0, 'created' while import torch fails"
    verify = box.tf("verify", "--env", str(box.work / "first"), timeout=300)
    if "RECORD" not in verify.text:
        return f"install exit {second.code}; verify exit {verify.code} names no file that differs from RECORD"
    return None


def install_https_to_http(box: Box) -> str | None:
    """install --torch-index-url https://...: the index redirects to plain http (uv follows it)."""
    certs = make_certs(box.work / "tls")
    seen: list[str] = []

    def plain(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.path)
        _answer(h, 404)

    http_base = box.serve(_handler(plain))
    secure = box.serve(_handler(lambda h: _answer(h, 302, Location=http_base + h.path)),
                       tls=(certs["cert"], certs["key"]))
    ca = certs["ca"]
    res = box.tf("install", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--torch-index-url",
                 f"{secure}/whl/cpu", "--prefix", str(box.work / "env"),
                 env={"REQUESTS_CA_BUNDLE": ca, "CURL_CA_BUNDLE": ca, "SSL_CERT_FILE": ca}, timeout=300)
    if seen:
        return f"install followed https -> http ({len(seen)} plain requests, {seen[0]}), exit {res.code}"
    if res.code != 1 or "plain http" not in res.err:
        return f"exit {res.code}, no word of the https -> http redirect"
    return None


CASES = [
    Case("2-lock-inject-index", 2, "install --lock: a version with a newline and --extra-index-url (uv)",
         lock_injects_index),
    Case("2-lock-inject-r-file", 2, "install --lock: a version with a newline and -r FILE (pip)",
         lock_injects_requirements_file),
    Case("2-fifo-start-up-cache", 2, "resolve with a FIFO in place of every start-up cache record",
         fifo_start_up_cache),
    Case("2-fifo-http-cache", 2, "matrix probe with FIFOs in place of the HTTP cache's body and record",
         fifo_http_cache),
    Case("2-env-python-missing", 2, "verify, doctor, run on an env whose bin/python is gone",
         _damaged_env_case("missing")),
    Case("2-env-python-dangling", 2, "verify, doctor, run on an env whose bin/python is a dangling symlink",
         _damaged_env_case("dangling")),
    Case("2-env-python-loop", 2, "verify, doctor, run on an env whose bin/python is a symlink loop",
         _damaged_env_case("loop")),
    Case("2-doctor-empty-init", 2, "doctor on a torch whose __init__.py is empty", doctor_empty_init),
    Case("2-uv-cache-damaged", 2, "install from a uv cache whose torch/__init__.py is emptied; verify the older env",
         uv_cache_damaged),
    Case("3-gzip-bomb-page", 3, "matrix probe --torch: the index page is a gzip bomb (2 GiB inflated)",
         gzip_bomb_page),
    Case("3-range-ignored-huge", 3, "matrix probe URL: the server ignores Range and sends 1 GiB",
         range_ignored_huge),
    Case("3-zip-bomb", 3, "matrix probe WHEEL: METADATA inflates to 1 GiB, declares 1,000 bytes", zip_bomb),
    Case("3-regex-version-py", 3, "matrix probe WHEEL: torch/version.py crafted against its regex",
         version_py_backtrack),
    Case("3-regex-arch-list", 3, "matrix probe WHEEL: libtorch_python.so crafted against the arch-list regex",
         arch_string_backtrack),
    Case("3-https-to-http", 3, "matrix probe --index-url https://...: the index redirects to plain http",
         https_to_http),
    Case("3-install-https-to-http", 3, "install --torch-index-url https://...: the index redirects to plain http",
         install_https_to_http),
    Case("3-probe-404", 3, "matrix probe --torch --index-url: the index answers 404", probe_404),
    Case("3-probe-500", 3, "matrix probe --torch --index-url: the index answers 500", probe_500),
    Case("3-probe-redirect-loop", 3, "matrix probe --torch --index-url: the index redirects to itself",
         probe_loop),
    Case("3-probe-hang", 3, "matrix probe --torch --index-url: the index never answers (--timeout 1)",
         probe_hang),
]
