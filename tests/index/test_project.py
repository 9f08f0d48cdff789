"""`SourcePackages` over recorded PyPI pages and METADATA of real releases (issue 18).

tests/data/projects/pypi holds what PyPI served on 2026-12-01/02 (its README names the
URLs): PEP 691 pages and each release's METADATA. A real HTTP server on 127.0.0.1
serves them as an index (file URLs pointed at itself), and the resolver, reading the
project through it, must land on the torch each release pins.
"""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.version import Version

from tests.support.servers import http_server, reply
from torchfit.cache import load_matrix
from torchfit.compat.facts import HostFacts, PythonInstall
from torchfit.compat.project import ProjectSpec
from torchfit.compat.request import Request, split_requirements
from torchfit.compat.resolver import resolve
from torchfit.index.client import IndexClient
from torchfit.index.project import SourcePackages

DATA = Path(__file__).resolve().parents[1] / "data" / "projects" / "pypi"


@pytest.fixture(scope="module")
def recorded_index() -> Iterator[str]:
    def answer(h: http.server.BaseHTTPRequestHandler) -> None:
        base = f"http://{h.headers['Host']}"
        parts = h.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "simple" and (DATA / parts[1] / "index.json").is_file():
            page = json.loads((DATA / parts[1] / "index.json").read_text())
            for f in page["files"]:
                f["url"] = f"{base}/files/{parts[1]}/{f['filename']}"
            reply(h, 200, json.dumps(page).encode(), Content_Type="application/vnd.pypi.simple.v1+json")
        elif len(parts) == 3 and parts[0] == "files" and (DATA / parts[1] / parts[2]).is_file():
            reply(h, 200, (DATA / parts[1] / parts[2]).read_bytes(), Content_Type="text/plain")
        else:
            reply(h, 404)

    with http_server(answer) as srv:
        yield f"{srv.url}/simple"


def h100() -> HostFacts:
    from torchfit.compat.facts import Gpu

    return HostFacts(name="h100", driver_version="570.124.06", gpus=(Gpu(0, "NVIDIA H100 80GB HBM3", "9.0"),),
                     glibc="2.35", os="ubuntu:22.04", arch="x86_64",
                     pythons=(PythonInstall("3.12.3", "/usr/bin/python3.12"),
                              PythonInstall("3.10.12", "/usr/bin/python3.10")))


@pytest.mark.parametrize(
    ("requirement", "torch", "extra"),
    [
        ("xformers==0.0.32.post2", "2.8.0", {}),
        ("xformers==0.0.29.post3", "2.6.0", {}),
        ("vllm==0.10.1.1", "2.7.1", {"torchvision": "0.22.1", "torchaudio": "2.7.1"}),
        ("vllm==0.13.0", "2.9.0", {"torchvision": "0.24.0", "torchaudio": "2.9.0"}),
        ("torchao==0.3.0", "2.3.1", {}),
        ("torchao==0.13.0", "2.8.0", {}),  # no torch in its METADATA: companions.toml's documented torch
    ],
)
def test_recorded_releases_resolve_to_the_torch_they_pin(recorded_index: str, tmp_path: Path, requirement: str,
                                                        torch: str, extra: dict[str, str]) -> None:
    family, others = split_requirements([requirement])
    packages = SourcePackages(IndexClient(cache_dir=tmp_path), [recorded_index], [], "x86_64")
    plan = resolve([h100()], Request(requirements=family, project=ProjectSpec(others)), load_matrix(None), packages)
    assert plan.torch == torch, plan.reasons
    for name, version in extra.items():
        assert getattr(plan, name) == version and name in plan.packages
    assert plan.variant.startswith("cu"), plan.variant
    assert any(f"required by {requirement.replace('==', ' ')}" in r for r in plan.reasons) or not others


def test_versions_and_metadata_are_read_from_the_pages(recorded_index: str, tmp_path: Path) -> None:
    packages = SourcePackages(IndexClient(cache_dir=tmp_path), [recorded_index], [], "x86_64")
    assert packages.versions("vllm") == [Version(v) for v in ("0.33.0", "0.22.1", "0.22.0", "0.13.0", "0.10.1.1")]
    meta = packages.metadata("vllm", Version("0.10.1.1"))
    assert meta is not None and meta.requires_python == "<3.13,>=3.9"
    assert any(r.startswith("torch==2.7.1") for r in meta.requires_dist)
    assert packages.versions("no-such-project") == []


def test_a_page_the_server_calls_fresh_is_not_asked_again(tmp_path: Path) -> None:
    """Cache-Control max-age (PyPI sends 600) is honoured by the project's reader, as pip and uv do."""
    def fresh_for_600_s(h: http.server.BaseHTTPRequestHandler) -> None:
        reply(h, 200, b'{"meta": {"api-version": "1.1"}, "name": "a", "files": []}',
              Content_Type="application/vnd.pypi.simple.v1+json", ETag='"v1"', Cache_Control="max-age=600, public")

    with http_server(fresh_for_600_s) as srv:
        url = f"{srv.url}/simple"
        fresh = IndexClient(cache_dir=tmp_path, honor_max_age=True)
        assert fresh.project_page(url, "a") is not None and fresh.project_page(url, "a") is not None
        assert len(srv.seen) == 1
        plain = IndexClient(cache_dir=tmp_path)  # matrix check: always revalidates
        assert plain.project_page(url, "a") is not None and len(srv.seen) == 2


def _hostile_metadata_index(root: Path, lines: int) -> tuple[Path, bytes]:
    """An index whose bigmeta 1.0 wheel is honest (no torch) and whose PEP 658 `.metadata`
    for it is `lines` Requires-Dist lines (issue 25: 12 MB of them made resolve run past 40 s)."""
    from tests.support.wheels import make_wheel, write_index_with_metadata

    body = ("Metadata-Version: 2.1\nName: bigmeta\nVersion: 1.0\nRequires-Dist: torch==9.9\n"
            + "".join(f"Requires-Dist: filelock>=1 ; extra == 'x{i}'\n" for i in range(lines))).encode()
    return write_index_with_metadata(root, make_wheel(root / "w", "bigmeta", "1.0"), body), body


def test_a_pep658_metadata_past_the_cap_is_not_read(tmp_path: Path) -> None:
    from tests.support.wheels import serve_dir
    from torchfit.index.project import MAX_METADATA_BYTES

    _, body = _hostile_metadata_index(tmp_path / "idx", 300_000)
    assert len(body) > 3 * MAX_METADATA_BYTES  # 14 MB
    with serve_dir(tmp_path / "idx") as url:
        packages = SourcePackages(IndexClient(cache_dir=tmp_path / "cache", allow_insecure=True),
                                  [f"{url}/simple"], [])
        meta = packages.metadata("bigmeta", Version("1.0"))
    # Not the 14 MB file: the wheel's own METADATA (this server ignores Range, so none) instead.
    assert meta is None or len(meta.requires_dist) < 10, meta and len(meta.requires_dist)


def test_the_family_lines_of_a_huge_metadata_are_found_once_and_fast() -> None:
    import time

    from torchfit.compat.project import MAX_FAMILY_LINES, PackageMeta

    lines = ("torch==2.8.0", *(f"filelock>=1 ; extra == 'x{i}'" for i in range(100_000)),
             *(f"torch>=1 ; extra == 'y{i}'" for i in range(1000)))
    start = time.monotonic()
    meta = PackageMeta("bigmeta", Version("1.0"), lines)
    env = {"python_version": "3.12", "sys_platform": "linux", "platform_machine": "x86_64"}
    for _ in range(50):  # the resolver asks once per build it weighs
        pins = meta.family_requirements(env)
    assert [str(p) for p in pins] == ["torch==2.8.0"]
    assert len(meta.family_dist) == MAX_FAMILY_LINES
    assert time.monotonic() - start < 5
