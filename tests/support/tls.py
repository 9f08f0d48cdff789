"""A throwaway CA and a leaf certificate for 127.0.0.1 (openssl), for real https servers in tests.

The attack-3 downgrade tests keep their own copy of this (that file is being renamed elsewhere);
new tests take it from here. Clients trust it through REQUESTS_CA_BUNDLE (torchfit) and
SSL_CERT_FILE (uv).
"""

from __future__ import annotations

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
