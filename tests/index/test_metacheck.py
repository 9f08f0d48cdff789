"""A PEP 658 `.metadata` that disagrees with its wheel is refused by the plan (issue 34, R3).

The install side (tests/installer/test_project_install.py, the pep658 test) refuses after
installing; here `resolve` itself refuses, before it promises the set, where the wheel is a
local file: liar 1.0's wheel says torch==2.13.0, the `.metadata` beside it says
torch==2.12.0. Real uv, offline, a file:// index and a find-links directory built here; and a
remote wheel, its `.metadata` advertised by a real index on 127.0.0.1 that honours Range (or not).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cli import run_clean
from tests.support.wheels import make_wheel, write_index, write_index_with_metadata

LIE = b"Metadata-Version: 2.1\nName: liar\nVersion: 1.0\nRequires-Dist: torch==2.12.0\n\n"


def test_the_fields_a_resolution_reads_are_compared_normalized() -> None:
    from torchfit.index.metacheck import compare_metadata

    wheel = "Metadata-Version: 2.1\nName: Liar\nVersion: 1.0\nRequires-Dist: torch==2.13.0\nRequires-Python: >=3.9\n"
    same = "Metadata-Version: 2.1\nName: liar\nVersion: 1.0.0\nRequires-Dist: torch ==2.13.0\nRequires-Python: >= 3.9\n"
    assert compare_metadata(wheel, same) == []
    assert compare_metadata(wheel, LIE.decode()) == [
        "Requires-Dist: the wheel says torch==2.13.0, the .metadata says torch==2.12.0",
        "Requires-Python: the wheel says >=3.9, the .metadata says nothing"]


def test_a_local_wheel_whose_pep658_metadata_disagrees_is_refused_by_the_plan_naming_the_file(tmp_path: Path) -> None:
    torch = make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu", tag="cp312-cp312-manylinux_2_28_x86_64")
    torch_index = write_index(tmp_path / "cpu", [torch]).as_uri()
    wheel = make_wheel(tmp_path / "w", "liar", "1.0", ["torch==2.13.0"])
    index = write_index_with_metadata(tmp_path / "idx", wheel, LIE)
    links = tmp_path / "links"
    links.mkdir()
    shutil.copy(wheel, links / wheel.name)
    (links / (wheel.name + ".metadata")).write_bytes(LIE)
    common = ("resolve", "liar", "torch==2.13.0", "--variant", "cpu", "--python", "3.12", "--offline",
              "--torch-index-url", torch_index, "--json")
    for where in (("--index-url", index.as_uri()), ("--find-links", str(links))):
        proc = run_clean(*common, *where, timeout=240)
        assert proc.returncode == 1, (where, proc.stdout[-2000:], proc.stderr[-2000:])
        err = json.loads(proc.stdout)
        assert err["reference"] == "metadata-mismatch", err
        line = err["error"]
        assert "\n" not in line and line.endswith(wheel.name + ": the index's metadata for it (PEP 658 "
                                                  f"{wheel.name}.metadata) disagrees with the wheel's own METADATA, "
                                                  "so the plan would promise what the wheel does not install: "
                                                  "Requires-Dist: the wheel says torch==2.13.0, the .metadata says "
                                                  "torch==2.12.0"), line
    # the same wheel without the lying file: planned
    (links / (wheel.name + ".metadata")).unlink()
    proc = run_clean(*common, "--find-links", str(links), timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["resolved"]["liar"] == "1.0"


def _index_answer(root: Path, *, ranges: bool):  # type: ignore[no-untyped-def]
    """An `http_server` answer over a write_index tree: a project page (…/NAME/) as text/html, every
    other file by RangeFiles (206 for a Range unless `ranges` is False: then the whole file, 200)."""
    from tests.support.servers import RangeFiles, reply

    files = RangeFiles(root, ranges=ranges)

    def answer(request):  # type: ignore[no-untyped-def]
        path = request.path.split("?")[0]
        if path.endswith("/"):
            page = root / path.strip("/") / "index.html"
            return reply(request, 200, page.read_bytes(), Content_Type="text/html") if page.is_file() \
                else reply(request, 404)
        return files(request)

    return answer, files


@pytest.mark.slow
def test_a_remote_wheel_whose_pep658_metadata_disagrees_is_refused_by_the_plan(tmp_path: Path) -> None:
    """Issue 34, R3 over HTTP: an index on 127.0.0.1 serves liar 1.0's wheel (torch==2.12.0) and,
    advertised on its page, a `.metadata` saying torch==2.13.0. uv plans from the `.metadata`;
    resolve reads the wheel's own METADATA with range requests (the wheel is never fetched whole)
    and refuses in one line naming the package, the index (credentials redacted) and what differs.
    An honest `.metadata` plans (exit 0); a server that ignores Range is said, not downloaded."""
    from tests.support.servers import http_server

    torch = make_wheel(tmp_path / "wheels", "torch", "2.13.0+cpu", tag="cp312-cp312-manylinux_2_28_x86_64")
    torch_index = write_index(tmp_path / "cpu", [torch]).as_uri()
    # the wheel needs torch 2.12; the .metadata uv plans from says 2.13 (the plan would hold both)
    wheel = make_wheel(tmp_path / "w", "liar", "1.0", ["torch==2.12.0"])
    lying = tmp_path / "lying"
    write_index_with_metadata(lying, wheel, LIE.replace(b"2.12.0", b"2.13.0"))
    honest = tmp_path / "honest"
    write_index(honest, [make_wheel(tmp_path / "h", "liar", "1.0", ["torch==2.13.0"])])
    common = ("resolve", "liar", "torch==2.13.0", "--variant", "cpu", "--python", "3.12", "--torch-index-url",
              torch_index, "--allow-insecure-index", "--json")
    answer, _ = _index_answer(lying, ranges=True)
    with http_server(answer) as server:
        where = server.url.replace("http://", "http://user:s3cret@") + "/simple"
        proc = run_clean(*common, "--index-url", where, timeout=240)
        seen = list(zip(server.seen, server.headers))
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-2000:])
    err = json.loads(proc.stdout)
    assert err["reference"] == "metadata-mismatch", err
    assert err["error"] == (
        f"liar ({wheel.name}): the index http://user:***@{server.url[7:]}/simple serves a .metadata (PEP 658) for it "
        "that disagrees with the wheel's own METADATA (read by HTTP range requests), so the plan would promise "
        "what the wheel does not install: Requires-Dist: the wheel says torch==2.12.0, the .metadata says "
        "torch==2.13.0"), err["error"]
    assert "s3cret" not in proc.stdout + proc.stderr
    wheel_gets = [h for path, h in seen if path.endswith(".whl")]
    assert wheel_gets and all(h.get("Range") for h in wheel_gets), seen  # ranges only, never the whole file

    answer, _ = _index_answer(honest, ranges=True)
    with http_server(answer) as server:
        proc = run_clean(*common, "--index-url", server.url + "/simple", timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert json.loads(proc.stdout)["resolved"]["liar"] == "1.0"

    answer, _ = _index_answer(lying, ranges=False)
    with http_server(answer) as server:
        proc = run_clean(*common, "--index-url", server.url + "/simple", timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (f"{wheel.name}: its .metadata was not compared with the wheel: the server does not honour HTTP range "
            f"requests at {server.url}/simple") in proc.stderr, proc.stderr


def test_find_remote_disagreement_reads_only_advertised_wheels_by_ranges(tmp_path: Path) -> None:
    """index.metacheck.find_remote_disagreement against a real index on 127.0.0.1: the wheel whose
    page advertises a lying `.metadata` is found (its METADATA read by Range requests only); an honest
    one and one whose page advertises none pass, the latter's wheel never asked for; a server that
    ignores Range is noted once for its index (its whole-file answer is not read)."""
    from tests.support.servers import http_server
    from torchfit.index.client import IndexClient
    from torchfit.index.metacheck import find_remote_disagreement

    liar = make_wheel(tmp_path / "w", "liar", "1.0", ["torch==2.12.0"])
    fair = make_wheel(tmp_path / "w", "fair", "1.0", ["torch==2.13.0"])
    plain = make_wheel(tmp_path / "w", "plain", "1.0", ["torch==2.13.0"])
    root = tmp_path / "idx"
    write_index_with_metadata(root, liar, LIE.replace(b"2.12.0", b"2.13.0"))
    write_index(root, [fair])
    write_index(root, [plain], pep658=False)
    for ranges in (True, False):
        answer, _ = _index_answer(root, ranges=ranges)
        with http_server(answer) as server:
            wheels = [(w.name.split("-")[0], f"{server.url}/files/{w.name}") for w in (liar, fair, plain)]
            notes: list[str] = []
            found = find_remote_disagreement(IndexClient(use_cache=False, timeout=10, retries=0), wheels,
                                             ["file:///nowhere", server.url + "/simple"], notes.append)
            asked = [(path, h.get("Range")) for path, h in zip(server.seen, server.headers) if path.endswith(".whl")]
        if ranges:
            assert sorted(p for p, _ in asked) == [f"/files/{fair.name}", f"/files/{liar.name}"], asked
            assert found is not None and (found.name, found.filename, found.index) == (
                "liar", liar.name, server.url + "/simple"), found
            assert found.diff == ("Requires-Dist: the wheel says torch==2.12.0, the .metadata says torch==2.13.0",)
            assert notes == [] and all(r == "bytes=-65536" for _, r in asked), (notes, asked)
        else:  # the first wheel came whole: the server is not asked about the others, one note for it
            assert [p for p, _ in asked] == [f"/files/{liar.name}"], asked
            assert found is None and notes == [
                f"3 wheels' .metadata were not compared with the wheels ({fair.name}, {liar.name}, {plain.name}; "
                f"where their index serves one): the server does not honour HTTP range requests at {server.url} "
                "(the wheels are not downloaded whole to plan; install checks the wheels it downloads)"], notes


def test_an_agreeing_pair_is_not_asked_again_a_changed_metadata_is(tmp_path: Path) -> None:
    """issue 37: the check of a plan's remote wheels ran on every resolve. A wheel and a `.metadata`
    that agreed, both named by the sha256 their page gives, are not asked for again (a real
    server on 127.0.0.1, a real disk cache); a `.metadata` whose bytes (and advertised sha256)
    change afterwards is compared again, and its lie found."""
    from tests.support.servers import http_server
    from torchfit.index.client import IndexClient
    from torchfit.index.metacheck import find_remote_disagreement

    fair = make_wheel(tmp_path / "w", "fair", "1.0", ["torch==2.13.0"])
    root = tmp_path / "idx"
    write_index(root, [fair])
    cache = tmp_path / "cache"

    def check() -> tuple[object, list[str]]:
        answer, _ = _index_answer(root, ranges=True)
        with http_server(answer) as server:
            wheels = [("fair", f"{server.url}/files/{fair.name}")]
            found = find_remote_disagreement(IndexClient(cache_dir=cache, timeout=10, retries=0), wheels,
                                             [server.url + "/simple"], lambda _: None)
            return found, [p for p in server.seen if not p.endswith("/")]

    found, asked = check()
    assert found is None and any(p.endswith(".whl") for p in asked) and any(p.endswith(".metadata") for p in asked)
    found, asked = check()
    assert found is None and asked == [], asked  # the page only: the pair was compared and agreed
    write_index_with_metadata(root, fair, (root / "fair" / f"{fair.name}.metadata").read_bytes().replace(
        b"torch==2.13.0", b"torch==2.12.0") if (root / "fair" / f"{fair.name}.metadata").exists() else LIE)
    found, asked = check()
    assert found is not None and found.name == "fair", (found, asked)


def test_pypis_own_wheels_are_not_read_again() -> None:
    """PyPI writes a wheel's .metadata from the wheel itself (docs/architecture.md, Contracts): its
    files (https://files.pythonhosted.org) are not compared; the same path elsewhere, or over http, is."""
    from torchfit.index.metacheck import _pypis_own

    path = "/packages/ab/cd/transformers-4.56.1-py3-none-any.whl"
    assert _pypis_own("https://files.pythonhosted.org" + path)
    assert _pypis_own("https://Files.PythonHosted.org" + path)
    assert not _pypis_own("http://files.pythonhosted.org" + path)
    assert not _pypis_own("https://mirror.example.org" + path)
    assert not _pypis_own("https://files.pythonhosted.org.evil.example" + path)
