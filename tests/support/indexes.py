"""Recorded package-index pages (tests/data/indexes/, PROVENANCE.md there) served by `responses`.

Shared by the index, matrixcheck and export tests. The fixtures `private_cache` and
`rsps` are imported by those packages' conftest.py files."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "indexes"
SMALL_MATRIX = DATA / "matrix-small.toml"
PT = "https://download.pytorch.org/whl"
PYPI = "https://pypi.org/simple"
HTML = "text/html"
JSON = "application/vnd.pypi.simple.v1+json"
CU128_META = "torch-2.8.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"


def body(name: str) -> str:
    return (DATA / name).read_text("utf-8")


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test gets its own $XDG_CACHE_HOME: no test sees another's cached pages."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def rsps() -> Iterator[object]:
    responses = pytest.importorskip("responses")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        yield mock


PageEdit = Callable[[str], str]


def serve_pytorch(
    rsps: object, *, base: str = PT, edit: dict[str, PageEdit] | None = None, skip: tuple[str, ...] = (),
) -> None:
    """Register the recorded download.pytorch.org pages under `base` (a mirror URL may hold userinfo).

    `edit` maps a page key (cu128-torch, cpu-torchvision, torch, ...) to a function of its
    body; `skip` leaves pages unregistered (for a test to register its own answer).
    """
    edit = edit or {}
    pages = {
        "cu128-torch": ("cu128/torch/", "download.pytorch.org/cu128-torch.html", HTML),
        "cu128-torchvision": ("cu128/torchvision/", "download.pytorch.org/cu128-torchvision.html", HTML),
        "cu128-torchaudio": ("cu128/torchaudio/", "download.pytorch.org/cu128-torchaudio.html", HTML),
        "cpu-torch": ("cpu/torch/", "download.pytorch.org/cpu-torch.json", JSON),
        "cpu-torchvision": ("cpu/torchvision/", "download.pytorch.org/cpu-torchvision.json", JSON),
        "cpu-torchaudio": ("cpu/torchaudio/", "download.pytorch.org/cpu-torchaudio.json", JSON),
        "torch": ("torch/", "download.pytorch.org/torch.html", HTML),
    }
    host = re.match(r"^(https?://[^/]+)", base)
    assert host
    for key, (path, fname, ctype) in pages.items():
        if key in skip:
            continue
        text = edit.get(key, lambda t: t)(body(fname))
        # The pages' hrefs are absolute paths (/whl/...): on a mirror they live under its prefix.
        prefix = base[len(host.group(1)):]
        if prefix != "/whl":
            text = text.replace('"/whl/', f'"{prefix}/')
        rsps.add("GET", f"{base}/{path}", body=text, content_type=ctype)  # type: ignore[attr-defined]
    meta = body(f"download.pytorch.org/{CU128_META}")
    prefix = base[len(host.group(1)):]
    rsps.add("GET", f"{host.group(1)}{prefix}/cu128/{CU128_META.replace('+', '%2B')}",  # type: ignore[attr-defined]
             body=meta, content_type="application/octet-stream")


def serve_pypi(rsps: object) -> None:
    import json

    for project in ("torch", "torchvision", "torchaudio"):
        rsps.add("GET", f"{PYPI}/{project}/", body=body(f"pypi.org/{project}.json"), content_type=JSON)  # type: ignore[attr-defined]
    doc = json.loads(body("pypi.org/torch.json"))
    wheel = next(f for f in doc["files"] if f["filename"] == "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    rsps.add("GET", wheel["url"] + ".metadata",  # type: ignore[attr-defined]
             body=body("pypi.org/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata"))


def write_pytorch_tree(root: Path, *, edit: dict[str, PageEdit] | None = None) -> str:
    """The recorded download.pytorch.org pages as a PEP 503 tree on disk (a site's `file://`
    mirror): ROOT/{cu128,cpu}/PROJECT/index.html, the combined ROOT/torch/index.html, and
    cu128's PEP 658 METADATA file beside where its wheel would be. The PEP 691 JSON pages
    are written as the HTML a mirror would serve; every link is made relative to the tree.
    `edit` as serve_pytorch's. Returns the `{variant}` template of the tree's URL."""
    import html
    import json

    edit = edit or {}
    pages = {
        "cu128-torch": "cu128-torch.html", "cu128-torchvision": "cu128-torchvision.html",
        "cu128-torchaudio": "cu128-torchaudio.html", "cpu-torch": "cpu-torch.json",
        "cpu-torchvision": "cpu-torchvision.json", "cpu-torchaudio": "cpu-torchaudio.json", "torch": "torch.html",
    }
    for key, fname in pages.items():
        text = body(f"download.pytorch.org/{fname}")
        if fname.endswith(".json"):
            anchors = "".join(
                f'<a href="{html.escape(f["url"])}#sha256={f["hashes"]["sha256"]}">{html.escape(f["filename"])}</a><br/>\n'
                for f in json.loads(text)["files"])
            text = f"<!DOCTYPE html>\n<html>\n  <body>\n{anchors}  </body>\n</html>\n"
        text = edit.get(key, lambda t: t)(text)
        variant, _, project = key.rpartition("-")
        up = "../../" if variant else "../"
        page = root / variant / project / "index.html" if variant else root / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text.replace('"/whl/', f'"{up}'), "utf-8")
    (root / "cu128" / CU128_META).write_text(body(f"download.pytorch.org/{CU128_META}"), "utf-8")
    return f"file://{root}/{{variant}}"


def write_pypi_tree(root: Path) -> str:
    """The recorded pypi.org pages of torch, torchvision and torchaudio as a PEP 503 tree on disk
    (ROOT/PROJECT/index.html, the files linked as ROOT/files/NAME, torch 2.8.0's cp311 x86_64
    METADATA beside where its wheel would be): a site's PyPI mirror. Returns its file:// URL."""
    import html
    import json

    name = "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    for project in ("torch", "torchvision", "torchaudio"):
        files = json.loads(body(f"pypi.org/{project}.json"))["files"]
        anchors = "".join(f'<a href="../files/{html.escape(f["filename"])}#sha256={f["hashes"]["sha256"]}">'
                          f'{html.escape(f["filename"])}</a><br/>\n' for f in files)
        page = root / project / "index.html"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!DOCTYPE html>\n<html>\n  <body>\n{anchors}  </body>\n</html>\n", "utf-8")
    (root / "files").mkdir(exist_ok=True)
    (root / "files" / f"{name}.metadata").write_text(body(f"pypi.org/{name}.metadata"), "utf-8")
    return f"file://{root}"
