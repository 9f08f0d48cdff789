"""index/wheelmeta.py: a wheel's METADATA read by HTTP range requests (the tail, then the member when it lies
outside it), cached under the wheel's sha256; no METADATA from a server that ignores Range."""

from __future__ import annotations

import pytest

from tests.support.indexes import body
from torchfit.index.client import IndexClient
from torchfit.index.wheelmeta import wheel_metadata
from torchfit.matrixcheck.wheels import parse_pins


def _zip_with_metadata(metadata: str, *, noise: int = 0) -> bytes:
    """A wheel-shaped zip; `noise` incompressible bytes after METADATA push it out of the last 64 KiB."""
    import io
    import os
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("torch-2.8.0.dist-info/METADATA", metadata)
        zf.writestr("torch/_lib.so", os.urandom(noise))
        zf.writestr("torch-2.8.0.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return buf.getvalue()


def _serve_ranges(rsps, url: str, blob: bytes, honour: bool = True) -> None:  # type: ignore[no-untyped-def]
    import re as _re

    def answer(request):  # type: ignore[no-untyped-def]
        spec = request.headers.get("Range", "")
        m = _re.match(r"bytes=(\d*)-(\d*)$", spec)
        if not honour or not m:
            return 200, {}, blob
        a, b = m.groups()
        start, end = (len(blob) - int(b), len(blob) - 1) if not a else (int(a), int(b) if b else len(blob) - 1)
        start = max(start, 0)
        return 206, {"Content-Range": f"bytes {start}-{end}/{len(blob)}"}, blob[start:end + 1]

    rsps.add_callback("GET", url, callback=answer)


@pytest.mark.parametrize("noise", [0, 300_000])
def test_metadata_by_range_requests(rsps, tmp_path, noise: int) -> None:
    from torchfit.index.pages import IndexFile

    meta = body("pypi.org/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata")
    url = "https://files.example/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    _serve_ranges(rsps, url, _zip_with_metadata(meta, noise=noise))
    f = IndexFile(url.rsplit("/", 1)[1], url + "#sha256=" + "c" * 64, hashes={"sha256": "c" * 64})
    c = IndexClient(backoff=0, timeout=5, cache_dir=tmp_path / "c")
    text = wheel_metadata(c, f)
    assert text == meta and parse_pins(text) == {"cudnn": "9.10.2.21", "nccl": "2.27.3"}
    calls = len(rsps.calls)
    assert calls == (1 if not noise else 3)  # the tail; then the local header and METADATA when outside it
    assert wheel_metadata(c, f) == meta
    assert len(rsps.calls) == calls  # cached under the wheel's sha256


def test_metadata_by_range_needs_range_support(rsps) -> None:
    from torchfit.index.pages import IndexFile

    url = "https://files.example/t-1.0-py3-none-any.whl"
    _serve_ranges(rsps, url, _zip_with_metadata("Name: t\n"), honour=False)
    assert wheel_metadata(IndexClient(backoff=0, timeout=5, use_cache=False), IndexFile("t-1.0-py3-none-any.whl", url)) is None
