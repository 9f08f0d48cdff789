"""Round 4, hostile project indexes and uv's failures of a project (issue 25): a PEP 658
`.metadata` of 12 MB, one that disagrees with its wheel, and requirements uv cannot use."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Box, Case
from _plan_common import CPU, error_line, make_wheel, serve_dir, stand_in_torch

from tests.support.wheels import write_index_with_metadata as lying_metadata


def huge_metadata(box: Box) -> str | None:
    """bigmeta's wheel is honest; its `.metadata` is 14 MB of Requires-Dist (torch==9.9 first)."""
    stand_in_torch(box)
    body = ("Metadata-Version: 2.1\nName: bigmeta\nVersion: 1.0\nRequires-Dist: torch==9.9\n"
            + "".join(f"Requires-Dist: filelock>=1 ; extra == 'x{i}'\n" for i in range(300_000))).encode()
    lying_metadata(box.work / "idx", make_wheel(box.work / "w", "bigmeta", "1.0"), body)
    url = serve_dir(box, box.work)
    start = time.monotonic()
    res = box.tf("resolve", *CPU, "--index-url", f"{url}/idx/simple", "--torch-index-url", f"{url}/torch/simple",
                 "--allow-insecure-index", "bigmeta", timeout=90)
    took = time.monotonic() - start
    if res.timed_out or took > 40:
        return f"resolve ran {took:.0f} s{' (killed)' if res.timed_out else ''}"
    return None if res.code == 1 else f"exit {res.code}: {error_line(res.err)}"


def metadata_disagrees_with_wheel(box: Box) -> str | None:
    """liar 1.0: the index's `.metadata` says torch==2.13.0, its wheel's METADATA torch==2.12.0."""
    wheel = make_wheel(box.work / "w", "liar", "1.0", ["torch==2.12.0"])
    lying_metadata(box.work / "idx", wheel, b"Metadata-Version: 2.1\nName: liar\nVersion: 1.0\n"
                                            b"Requires-Dist: torch==2.13.0\n\n")
    url = serve_dir(box, box.work)
    prefix = box.work / "env"
    res = box.tf("install", "torch==2.13.0", "liar", "--variant", "cpu", "--python", "3.11", "--prefix", str(prefix),
                 "--torch-index-url", box.torch_index, "--extra-index-url", f"{url}/idx/simple",
                 "--allow-insecure-index", timeout=600)
    if res.code == 0:
        return "installed liar 1.0 (its wheel requires torch==2.12.0) beside torch 2.13.0: the .metadata believed"
    if wheel.name not in res.err:
        return f"exit {res.code} without naming {wheel.name}: {error_line(res.err)}"
    return None if not prefix.exists() else "refused, but PREFIX was left"


def _uv_failure(box: Box, req: str, code: int, words: str) -> str | None:
    links = box.work / "links"
    make_wheel(links, "purelib", "1.0")
    torch = stand_in_torch(box)
    res = box.tf("resolve", "--offline", *CPU, "--torch-index-url", torch.as_uri(), "--find-links", str(links), req,
                 timeout=120)
    line = error_line(res.err)
    if res.traceback:
        return "traceback"
    if res.code != code:
        return f"exit {res.code} (want {code}): {line}"
    if words not in line or "no compatible set" in line:
        return f"the cause is not first: {line}"
    hints = [h for h in res.err.splitlines() if h.strip().startswith("hint:")]
    if any("torch" in h.replace("--torch", "") for h in hints):
        return f"a torch hint where torch is not the cause: {hints[0].strip()}"
    return None


def passwd_requirement(box: Box) -> str | None:
    return _uv_failure(box, "foo @ file:///etc/passwd", 2, "file:///etc/passwd")


def missing_file_requirement(box: Box) -> str | None:
    return _uv_failure(box, "foo @ file:///nonexistent/foo-1.0-py3-none-any.whl", 2, "nonexistent")


def unknown_package(box: Box) -> str | None:
    return _uv_failure(box, "nosuchpkg", 1, "nosuchpkg")


def https_index_lists_plain_http(box: Box) -> str | None:
    """An https dependency index whose page links purelib's wheel over plain http."""
    import hashlib

    from tests.support.tls import make_certs

    certs = make_certs(box.work / "tls")
    wheel = make_wheel(box.work / "files", "purelib", "1.0")
    plain = serve_dir(box, box.work)
    page = box.work / "secure" / "simple" / "purelib"
    page.mkdir(parents=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (page / "index.html").write_text(f'<a href="{plain}/files/{wheel.name}#sha256={digest}">{wheel.name}</a>\n')
    secure = serve_dir(box, box.work / "secure", tls=(certs["cert"], certs["key"]))
    torch = stand_in_torch(box)
    res = box.tf("resolve", *CPU, "--torch-index-url", torch.as_uri(), "--index-url",
                 f"{secure}/simple", "purelib", timeout=120,
                 env={"REQUESTS_CA_BUNDLE": certs["ca"], "SSL_CERT_FILE": certs["ca"]})
    if res.code == 0:
        return "planned purelib from a plain-http link of an https index, without --allow-insecure-index"
    return None if "plain http" in res.err else f"exit {res.code}: {error_line(res.err)}"


CASES = [
    Case("4-idx-huge-metadata", 1, "a 14 MB PEP 658 .metadata: resolve bounded (< 40 s)", huge_metadata),
    Case("4-idx-metadata-lies", 6, "a .metadata that disagrees with its wheel: install refuses, naming the wheel",
         metadata_disagrees_with_wheel),
    Case("4-msg-passwd", 4, "`foo @ file:///etc/passwd`: exit 2, uv's cause, no torch hint", passwd_requirement),
    Case("4-msg-missing-file", 4, "a missing file:// requirement: exit 2, uv's cause", missing_file_requirement),
    Case("4-idx-https-lists-http", 6, "an https dependency index listing an http:// file: refused",
         https_index_lists_plain_http),
    Case("4-msg-not-found", 5, "a package no source has: uv's cause, no torch hint", unknown_package),
]
