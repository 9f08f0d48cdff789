"""Repros of the corrupt-state (class 2) and hostile-server/archive (class 3) engineer."""

from __future__ import annotations

import http.server
import re
from typing import Any

from _common import Box, Case

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


CASES = [
    Case("2-lock-inject-index", 2, "install --lock: a version with a newline and --extra-index-url (uv)",
         lock_injects_index),
    Case("2-lock-inject-r-file", 2, "install --lock: a version with a newline and -r FILE (pip)",
         lock_injects_requirements_file),
]
