"""A throwaway CA and a leaf certificate for 127.0.0.1 (openssl), for real https servers in tests.

Clients trust it through REQUESTS_CA_BUNDLE (torchfit) and SSL_CERT_FILE (uv). The server is
tests/support/servers.http_server (or wheels.serve_dir) with `tls=(certs["cert"], certs["key"])`.
"""

from __future__ import annotations

import http.server
import subprocess
from pathlib import Path

import pytest


def make_certs(d: Path) -> dict[str, str]:
    """{"ca", "cert", "key"} paths under `d` (made); skips the test where openssl fails."""
    d.mkdir(parents=True, exist_ok=True)

    def ssl_(*argv: str) -> None:
        res = subprocess.run(["openssl", *argv], capture_output=True, text=True, timeout=60, cwd=d)
        if res.returncode != 0:
            pytest.skip(f"openssl: {res.stderr[-200:]}")

    ssl_("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=torchfit-test-ca",
         "-keyout", "ca.key", "-out", "ca.pem", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign")
    ssl_("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "leaf.key", "-out", "leaf.csr")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    ssl_("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
         "-extfile", "ext.cnf", "-out", "leaf.pem")
    return {"ca": str(d / "ca.pem"), "cert": str(d / "leaf.pem"), "key": str(d / "leaf.key")}


def trust_bundle(certs: dict[str, str]) -> str:
    """A CA bundle of the system's CAs and the test CA of `certs` (beside it): for a command that
    reaches a real index too (PyPI, or the proxy in front of it) as well as the test server."""
    ca = Path(certs["ca"])
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = ca.with_name("bundle.pem")
    bundle.write_bytes((system.read_bytes() if system.is_file() else b"") + ca.read_bytes())
    return str(bundle)


class RedirectFiles(http.server.SimpleHTTPRequestHandler):
    """Serves its directory, except that GET/HEAD of /files/NAME.whl answers 302 to `target` + the
    same path (set `target` on a subclass): an https mirror whose wheels redirect elsewhere (the
    rest, the wheels' PEP 658 `.metadata` included, is answered here)."""

    target = ""

    def log_message(self, *_a: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/files/") and self.path.endswith(".whl"):
            self.send_response(302)
            self.send_header("Location", self.target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    do_HEAD = do_GET


def redirecting_index(root: Path, wheel: Path, target: str) -> type[RedirectFiles]:
    """A PEP 503 tree at ROOT (tests/support/wheels.write_index: ROOT/simple/<name>/ linking
    ROOT/files/NAME.whl, its PEP 658 `.metadata` beside it, as a real mirror serves), and the
    handler class that redirects the wheel itself to `target`; serve ROOT with it."""
    from tests.support.wheels import write_index

    write_index(root, [wheel])
    return type("Redirect", (RedirectFiles,), {"target": target})
