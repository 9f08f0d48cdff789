"""`torchfit matrix check` against recorded index bodies (tests/data/indexes/, PROVENANCE.md)."""

from __future__ import annotations

import json
import re

import pytest
import requests

from tests.support.cli import run_main
from tests.support.indexes import PT, PYPI, SMALL_MATRIX, serve_pypi, serve_pytorch

CHECK = ("matrix", "check", "--matrix", str(SMALL_MATRIX), "--backoff", "0", "--timeout", "5")


def test_complete_index_is_no_drift(rsps, capsys) -> None:
    serve_pytorch(rsps)
    code, out, err = run_main(capsys, *CHECK)
    assert code == 0, out + err
    assert "ok: the matrix agrees with the index" in out
    assert "DRIFT" not in out and "ERROR" not in out


def test_complete_index_json(rsps, capsys) -> None:
    serve_pytorch(rsps)
    code, out, _ = run_main(capsys, *CHECK, "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["drift"] == 0 and data["builds_checked"] == 2
    # the pages read: both variant indexes (HTML and PEP 691 JSON) and the combined index
    assert f"{PT}/cu128/torch/" in data["pages"] and f"{PT}/cpu/torch/" in data["pages"]
    assert f"{PT}/torch/" in data["pages"]


def test_missing_wheel_is_drift(rsps, capsys) -> None:
    def drop_cp312(page: str) -> str:
        return "\n".join(line for line in page.splitlines()
                         if "torch-2.8.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64" not in line) + "\n"

    serve_pytorch(rsps, edit={"cu128-torch": drop_cp312})
    code, out, _ = run_main(capsys, *CHECK)
    assert code == 1
    assert re.search(r"DRIFT torch 2\.8\.0 cu128 \(matrix\.toml:\d+\): the matrix claims CPython 3\.12 on x86_64; "
                     r"the index has no such wheel", out), out
    assert "drift: 1 disagreement (" in out


def test_new_release_the_matrix_lacks(rsps, capsys) -> None:
    def add_290(page: str) -> str:
        extra = "".join(
            f'    <a href="/whl/cu128/torch-2.9.0%2Bcu128-cp{py}-cp{py}-manylinux_2_28_x86_64.whl#sha256={"0" * 64}">'
            f"torch-2.9.0+cu128-cp{py}-cp{py}-manylinux_2_28_x86_64.whl</a><br/>\n"
            for py in ("310", "311", "312", "313", "314")
        )
        return page.replace("  </body>", extra + "  </body>")

    serve_pytorch(rsps, edit={"cu128-torch": add_290, "torch": add_290})
    code, out, _ = run_main(capsys, *CHECK, "--json")
    assert code == 1
    data = json.loads(out)
    new = [f for f in data["findings"] if f["fact"] == "release"]
    assert len(new) == 1, data["findings"]
    assert new[0]["level"] == "drift" and new[0]["torch"] == "2.9.0" and new[0]["index"] == "cu128"
    assert "the index has torch 2.9.0 (cu128) that the matrix lacks" in new[0]["message"]


def test_new_variant_the_matrix_lacks(rsps, capsys) -> None:
    def add_cu129(page: str) -> str:
        line = (f'    <a href="/whl/cu129/torch-2.8.0%2Bcu129-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={"1" * 64}">'
                "torch-2.8.0+cu129-cp311-cp311-manylinux_2_28_x86_64.whl</a><br/>\n")
        return page.replace("  </body>", line + "  </body>")

    serve_pytorch(rsps, edit={"torch": add_cu129})
    code, out, _ = run_main(capsys, *CHECK)
    assert code == 1
    assert "the index has torch 2.8.0 for cu129, a variant the matrix lacks" in out
    assert "xpu" not in out  # labels torchfit does not track are not drift


def test_503_then_success_is_retried(rsps, capsys) -> None:
    rsps.add("GET", f"{PT}/cu128/torch/", status=503, body="Service Unavailable")
    rsps.add("GET", f"{PT}/cu128/torch/", status=502, body="Bad Gateway")
    serve_pytorch(rsps)  # registered after: served once the two failures are used up
    code, out, err = run_main(capsys, *CHECK, "-v")
    assert code == 0, out + err
    assert "HTTP 503 Service Unavailable; retry 1/3" in err
    assert "HTTP 502 Bad Gateway; retry 2/3" in err
    hits = [c for c in rsps.calls if c.request.url == f"{PT}/cu128/torch/"]
    assert len(hits) == 3


def test_timeout_is_a_clear_error(rsps, capsys) -> None:
    serve_pytorch(rsps, skip=("cu128-torch",))
    rsps.add("GET", f"{PT}/cu128/torch/", body=requests.exceptions.ReadTimeout("read timed out"))
    code, out, err = run_main(capsys, *CHECK)
    assert code == 1
    assert f"ERROR index: {PT}/cu128/torch/: timed out after 5 s (4 attempts)" in out
    assert "incomplete:" in out or "index errors" in out
    assert "Traceback" not in out + err
    # one dead page does not stop the rest: the cpu build was still checked
    assert f"{PT}/cpu/torch/" in rsps.calls[-1].request.url or any(
        c.request.url == f"{PT}/cpu/torch/" for c in rsps.calls)


def test_connection_refused_stops_hammering_the_host(rsps, capsys) -> None:
    rsps.add("GET", re.compile(r"https://download\.pytorch\.org/.*"),
             body=requests.exceptions.ConnectionError("[Errno 111] Connection refused"))
    code, out, _ = run_main(capsys, *CHECK)
    assert code == 1
    assert "connection refused (4 attempts)" in out
    assert re.search(r"\d+ more pages? not read: download\.pytorch\.org unreachable", out), out
    assert len(rsps.calls) == 4  # the first page's attempts; the other pages are skipped


@pytest.mark.parametrize(
    ("ctype", "page", "why"),
    [
        ("application/vnd.pypi.simple.v1+json", '{"meta": {"api-version": "1.1"}, "files": [', "not JSON"),
        ("application/vnd.pypi.simple.v1+json", '{"meta": {"api-version": "2.0"}, "files": []}', "is not 1.x"),
        ("application/vnd.pypi.simple.v1+json", '{"meta": {"api-version": "1.0"}, "files": "x"}', "must be a list"),
        ("text/html", "404 page not found, sorry", "not HTML"),
        ("image/png", "\x89PNG", "not a simple-repository page"),
    ],
)
def test_malformed_page(rsps, capsys, ctype: str, page: str, why: str) -> None:
    serve_pytorch(rsps, skip=("cu128-torch",))
    rsps.add("GET", f"{PT}/cu128/torch/", body=page, content_type=ctype)
    code, out, err = run_main(capsys, *CHECK)
    assert code == 1
    assert f"ERROR index: malformed index page {PT}/cu128/torch/: " in out and why in out, out
    assert "Traceback" not in out + err


MIRROR = "https://tf-user:s3cr3t-t0ken@mirror.example.com/pytorch/whl"


def test_redirect_to_a_mirror_with_credentials_is_redacted(rsps, capsys) -> None:
    # download.pytorch.org answers with a redirect to a mirror whose URL carries a token;
    # the mirror's copy lacks a wheel, so the finding and the page list name the mirror.
    for path in ("cu128/torch/", "cu128/torchvision/", "cu128/torchaudio/", "cpu/torch/",
                 "cpu/torchvision/", "cpu/torchaudio/", "torch/"):
        rsps.add("GET", f"{PT}/{path}", status=302, headers={"Location": f"{MIRROR}/{path}"})

    def drop_cp39(page: str) -> str:
        return "\n".join(line for line in page.splitlines() if "torchvision-0.23.0%2Bcu128-cp39-cp39-manylinux" not in line)

    serve_pytorch(rsps, base=MIRROR, edit={"cu128-torchvision": drop_cp39})
    outputs = []
    for extra in ((), ("--json",), ("-v",)):
        code, out, err = run_main(capsys, *CHECK, *extra)
        assert code == 1
        outputs.append(out + err)
    text = "\n".join(outputs)
    assert "torchvision 0.23.0 has no x86_64 wheel for CPython 3.9" in text
    finding = next(f for f in json.loads(outputs[1])["findings"]
                   if f["fact"] == "torchvision")
    assert finding["url"] == "https://tf-user:***@mirror.example.com/pytorch/whl/cu128/torchvision/"
    assert "https://tf-user:***@mirror.example.com/pytorch/whl/cu128/torchvision/" in text
    assert "s3cr3t" not in text
    # the metadata was fetched from the mirror with the credentials (they are used, just never shown)
    assert any("s3cr3t-t0ken@mirror.example.com" in c.request.url and c.request.url.endswith(".metadata")
               for c in rsps.calls)
    code, diff, err = run_main(capsys, "matrix", "update", "--matrix", str(SMALL_MATRIX), "--backoff", "0")
    assert code == 1 and "s3cr3t" not in diff + err and "CPython 3.9" in diff


def test_index_url_with_credentials_and_401(rsps, capsys) -> None:
    rsps.add("GET", re.compile(r"https://.*mirror\.example\.com/.*"), status=401)
    code, out, err = run_main(capsys, *CHECK, "--index-url", MIRROR)
    assert code == 1
    assert "HTTP 401: the index refused the request" in out
    assert "s3cr3t" not in out + err and "tf-user:***@mirror.example.com" in out


def test_index_url_template_appends_or_substitutes_the_variant(rsps, capsys) -> None:
    serve_pytorch(rsps, base="https://mirror.example.com/pt")
    for base in ("https://mirror.example.com/pt", "https://mirror.example.com/pt/{variant}"):
        code, out, _ = run_main(capsys, *CHECK, "--index-url", base, "--json")
        data = json.loads(out)
        assert code == 0, data["findings"]
        assert "https://mirror.example.com/pt/cu128/torch/" in data["pages"]
        assert "https://mirror.example.com/pt/torch/" in data["pages"]  # the combined index
        assert not any("download.pytorch.org" in c.request.url for c in rsps.calls)


def test_index_url_template_without_a_combined_index(rsps, capsys) -> None:
    from tests.support.indexes import CU128_META, HTML, JSON, body

    for variant, ext, ctype in (("cu128", "html", HTML), ("cpu", "json", JSON)):
        for project in ("torch", "torchvision", "torchaudio"):
            rsps.add("GET", f"https://mirror.example.com/{variant}/simple/{project}/",
                     body=body(f"download.pytorch.org/{variant}-{project}.{ext}"), content_type=ctype)
    rsps.add("GET", f"https://mirror.example.com/whl/cu128/{CU128_META.replace('+', '%2B')}",
             body=body(f"download.pytorch.org/{CU128_META}"))
    code, out, _ = run_main(capsys, *CHECK, "--index-url", "https://mirror.example.com/{variant}/simple")
    assert code == 0, out
    assert "no combined index can be derived" in out


def test_pypi_default_rows_against_recorded_pypi(rsps, capsys) -> None:
    serve_pypi(rsps)
    code, out, err = run_main(capsys, *CHECK, "--pypi", "--json")
    assert code == 0, out + err
    data = json.loads(out)
    assert data["builds_checked"] == 1 and data["target"].startswith(PYPI)
    # the METADATA was read (probed: PyPI's answer did not advertise it) and agreed
    assert any(c.request.url.endswith("manylinux_2_28_x86_64.whl.metadata") for c in rsps.calls)


def test_pypi_pin_drift(rsps, capsys, tmp_path) -> None:
    wrong = SMALL_MATRIX.read_text().replace('nccl = "2.27.3"', 'nccl = "2.26.2"')
    path = tmp_path / "m.toml"
    path.write_text(wrong)
    serve_pypi(rsps)
    code, out, _ = run_main(capsys, "matrix", "check", "--matrix", str(path), "--backoff", "0", "--pypi")
    assert code == 1
    assert "METADATA pins nvidia-nccl==2.27.3; the matrix says 2.26.2" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--variant", "cu999"), "no such variant"),
        (("--torch", "9.9"), "no matching release"),
        (("--index-url", "ftp://example.com/whl"), "not an http(s) or file:// URL"),
        (("--timeout", "0"), "--timeout"),
        (("--pypi", "--index-url", "https://example.com"), "--pypi-url"),
    ],
)
def test_bad_input_is_exit_2(capsys, args: tuple[str, ...], needle: str) -> None:
    code, _out, err = run_main(capsys, *CHECK, *args)
    assert code == 2 and needle in err and "Traceback" not in err


def test_matrix_without_action_is_exit_2(capsys) -> None:
    code, _, err = run_main(capsys, "matrix")
    assert code == 2 and "needs an action" in err
