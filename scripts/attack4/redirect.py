"""Round 4, https -> http for the files uv and pip download (issue 25, listed as partial after
round 3): an https dependency index whose wheel URL answers 302 to plain http. uv 0.13.9 and
pip 23 follow that hop silently (measured); install must refuse before either downloads it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Box, Case
from _plan_common import CPU, error_line, make_wheel, serve_dir, stand_in_torch

from tests.support.tls import make_certs, redirecting_index, trust_bundle


def redirect_http_download(box: Box) -> str | None:
    """install torch==2.13.0 purelib, purelib from an https index whose wheels answer 302 to an
    http:// server holding the same wheel; with uv, then with pip. torch is a stand-in (no code):
    what counts is whether install refuses before uv or pip is asked to install (an install that
    goes on ends later, at the build check, having fetched purelib through the hop)."""
    certs = make_certs(box.work / "tls")
    wheel = make_wheel(box.work / "files", "purelib", "1.0")
    plain = serve_dir(box, box.work)
    secure = serve_dir(box, box.work / "secure", redirecting_index(box.work / "secure", wheel, plain),
                       tls=(certs["cert"], certs["key"]))
    bundle = trust_bundle(certs)
    trust = {"REQUESTS_CA_BUNDLE": bundle, "SSL_CERT_FILE": bundle, "PIP_CERT": bundle}
    torch = stand_in_torch(box).as_uri()
    for installer in ("uv", "pip"):
        prefix = box.work / f"env-{installer}"
        res = box.tf("install", *CPU, "torch==2.13.0", "purelib", "--variant", "cpu", "--python", "3.11", "--prefix",
                     str(prefix), "--installer", installer, "--torch-index-url", torch, "--index-url",
                     f"{secure}/simple", env=trust, timeout=600)
        if res.code == 0:
            return f"--installer {installer}: installed purelib through an https -> http redirect, exit 0"
        line = error_line(res.err)
        if res.traceback or res.code != 1 or "redirected from https to plain http" not in line:
            return f"--installer {installer}: exit {res.code}: {line}"
        if wheel.name not in line or f"({plain}/files/" not in line:
            return f"--installer {installer}: the refusal names not the file and the hop: {line}"
        if prefix.exists():
            return f"--installer {installer}: refused, but PREFIX was left"
    return None


CASES = [
    Case("4-redirect-http-download", 6, "an https index's wheel redirects to plain http: install refuses "
         "(uv and pip), naming the file and the hop", redirect_http_download),
]
