"""`torchfit matrix probe`: facts read from wheels, locally and over real HTTP range requests.

The CUDA facts come from PyPI's torch 2.14.1 wheel where this machine has a copy
(the local PyPI mirror, `pip config list`); the ROCm path from a wheel built here
around a small ELF compiled with gcc, holding a real gfx arch string and a clang
offload bundle. The HTTP tests run a real server on 127.0.0.1 that honours (or
ignores) `Range` and counts every body byte it sends.
"""

from __future__ import annotations

import email.parser
import io
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cli import clean_env, run_clean, run_cli, start_cli
from tests.support.servers import Answer, RangeFiles, http_server, reply
from tests.support.wheels import metadata_bomb, sha256_file
from torchfit.errors import WheelFormatError
from torchfit.index.wheelmeta import FileSource, WheelArchive, parse_central_directory, parse_eocd
from torchfit.matrixcheck.probe import (
    cuda_arch_to_matrix,
    elf_glibc_needs,
    find_arch_strings,
    parse_fatbin,
    parse_offload_bundles,
    probe_file,
)

WHEEL_NAME = "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"


def _find_wheel() -> Path | None:
    for d in ("/opt/pypi-more/files", "/opt/pypi/files", "/opt/wheels"):
        p = Path(d) / WHEEL_NAME
        if p.is_file():
            return p
    return None


LOCAL_WHEEL = _find_wheel()
needs_wheel = pytest.mark.skipif(LOCAL_WHEEL is None, reason=f"{WHEEL_NAME} is not in the local mirrors")


def _metadata_by_stdlib(path: Path) -> email.message.Message:
    """METADATA read with zipfile (not torchfit's reader), to compare against."""
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.HeaderParser().parsestr(zf.read(name).decode())


# ---------------------------------------------------------------------------
# The local CUDA wheel
# ---------------------------------------------------------------------------


@needs_wheel
def test_probe_reads_the_local_cuda_wheel() -> None:
    assert LOCAL_WHEEL is not None
    f = probe_file(str(LOCAL_WHEEL), hash_file=False)
    # The arch list as torch.cuda.get_arch_list() would split it, from libtorch_python.so.
    assert f.arch_member == "torch/lib/libtorch_python.so"
    assert f.arch == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert f.arch_matrix == "7.5;8.0;8.6;9.0;10.0;12.0"
    # The pins the issue names, and the same pins as the stdlib's zip reader sees.
    assert f.pins["cudnn"] == "9.24.0.43" and f.pins["nccl"] == "2.30.7"
    requires = " ".join(_metadata_by_stdlib(LOCAL_WHEEL).get_all("Requires-Dist") or [])
    assert f"nvidia-cudnn-cu13=={f.pins['cudnn']}" in requires
    assert f"nvidia-nccl-cu13=={f.pins['nccl']}" in requires
    # Python: the classifiers say 3.10-3.14, Requires-Python >=3.10; this one file is cp311.
    assert f.python_classifiers == ["3.10", "3.11", "3.12", "3.13", "3.14"]
    assert f.requires_python == ">=3.10" and f.python_tags == ["cp311"]
    assert (f.platform, f.manylinux_glibc) == ("x86_64", "2.28")
    assert (f.variant, f.cuda) == ("cu130", "13.0")
    # Read from the file: the central directory and a few members, not the 550 MB.
    assert f.bytes_read < 0.05 * f.size


@needs_wheel
def test_probe_cli_table_and_json() -> None:
    assert LOCAL_WHEEL is not None
    table = run_cli("matrix", "probe", str(LOCAL_WHEEL))
    assert table.returncode == 0, table.stderr
    for text in ("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120", "9.24.0.43", "2.30.7", "3.10-3.14",
                 "glibc 2.28", "torch/lib/libtorch_python.so"):
        assert text in table.stdout
    js = run_cli("matrix", "probe", str(LOCAL_WHEEL), "--json")
    (rec,) = json.loads(js.stdout)
    assert rec["sha256"] == sha256_file(LOCAL_WHEEL)
    assert rec["sha256_from"] == "file"



@pytest.mark.slow
@needs_wheel
def test_probe_glibc_floor_and_embedded_code() -> None:
    """The opt-in reads: every ELF file's GLIBC needs, and the .nv_fatbin of libtorch_cuda.so."""
    assert LOCAL_WHEEL is not None
    f = probe_file(str(LOCAL_WHEEL), hash_file=False, glibc=True, embedded=True)
    assert f.glibc_floor == "2.28" and f.elf_files and f.elf_files > 5
    assert f.embedded is not None and f.embedded["containers"] > 100
    assert f.embedded["ptx"] == {}  # the audit's finding: no PTX in the cu13x wheels
    assert f.embedded_agrees is True


# ---------------------------------------------------------------------------
# A real HTTP server that honours Range, counting bytes (tests/support/servers.RangeFiles)
# ---------------------------------------------------------------------------


@needs_wheel
def test_range_requests_read_under_5_percent(tmp_path: Path) -> None:
    assert LOCAL_WHEEL is not None
    (tmp_path / WHEEL_NAME).symlink_to(LOCAL_WHEEL)
    files = RangeFiles(tmp_path)
    with http_server(files) as srv:
        res = run_cli("matrix", "probe", f"{srv.url}/{WHEEL_NAME}", "--json", "--no-cache",
                      env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    assert res.returncode == 0, res.stderr
    (rec,) = json.loads(res.stdout)
    size = LOCAL_WHEEL.stat().st_size
    print(f"range test: server sent {files.total} of {size} bytes ({100 * files.total / size:.2f} %), "
          f"{len(srv.seen)} requests")
    assert files.total < 0.05 * size
    assert all(h["Range"].startswith("bytes=") for h in srv.headers if "Range" in h)
    assert rec["arch"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert rec["pins"]["cudnn"] == "9.24.0.43" and not rec["whole_file"]
    # The client's own count is the server's count.
    assert rec["bytes_read"] == files.total
    assert rec["size"] == size


def test_server_without_ranges_falls_back_to_the_whole_file(tmp_path: Path, rocm_wheel: Path) -> None:
    files = RangeFiles(rocm_wheel.parent, ranges=False)
    with http_server(files) as srv:
        res = run_cli("matrix", "probe", f"{srv.url}/{rocm_wheel.name}", "--json", "--no-cache",
                      env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    assert res.returncode == 0, res.stderr
    (rec,) = json.loads(res.stdout)
    assert rec["whole_file"] is True and files.total == rocm_wheel.stat().st_size
    assert "does not honour HTTP range requests" in " ".join(rec["notes"])
    assert rec["arch"] == ["gfx900", "gfx906", "gfx90a", "gfx942", "gfx1100"]


# ---------------------------------------------------------------------------
# A ROCm-shaped wheel built here
# ---------------------------------------------------------------------------

GFX = "gfx900 gfx906 gfx90a gfx942 gfx1100"


def _bundle(ids: list[str]) -> bytes:
    """A clang offload bundle: magic, count, then (offset, size, id length, id) per entry."""
    head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
    entries = b"".join(struct.pack("<QQQ", 0, 0, len(i)) + i.encode() for i in ids)
    return head + entries


def _compile_so(tmp: Path, name: str, c_source: str) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler to build the ROCm-shaped fixture")
    src = tmp / f"{name}.c"
    src.write_text(c_source)
    out = tmp / f"{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)], check=True, timeout=60)
    return out


def _c_bytes(data: bytes) -> str:
    return ", ".join(str(b) for b in data)


def _make_rocm_wheel(tmp: Path, version: str = "2.14.1") -> Path:
    # Module.cpp's CUDA_ARCH_FLAGS: one C string, as hipified torch builds it.
    python_so = _compile_so(tmp, "libtorch_python", f"""
        #include <stdio.h>
        static const char flags[] = "{GFX}";
        const char *arch_flags(void) {{ return flags; }}
        int say(void) {{ return puts("gfx-unrelated sm_80 text"); }}
    """)
    ids = ["host-x86_64-unknown-linux-gnu-"] + [f"hipv4-amdgcn-amd-amdhsa--{g}" for g in GFX.split()]
    ids[2] += ":xnack-"
    blob = _bundle(ids)
    hip_so = _compile_so(tmp, "libtorch_hip", f"""
        __attribute__((section(".hip_fatbin"), used))
        static const unsigned char fatbin[] = {{ {_c_bytes(blob)} }};
        const unsigned char *bundle(void) {{ return fatbin; }}
    """)
    v = f"{version}+rocm7.2"
    wheel = tmp / f"torch-{v}-cp311-cp311-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(f"torch-{v}.dist-info/METADATA",
                    f"Metadata-Version: 2.4\nName: torch\nVersion: {v}\nRequires-Python: >=3.10\n"
                    "Requires-Dist: filelock\nRequires-Dist: triton-rocm==3.8.0; platform_system == \"Linux\"\n")
        zf.writestr(f"torch-{v}.dist-info/WHEEL",
                    "Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n")
        zf.writestr("torch/version.py", f"__version__ = '{v}'\ncuda = None\nhip = '7.2.26015'\n")
        zf.write(python_so, "torch/lib/libtorch_python.so")
        zf.write(hip_so, "torch/lib/libtorch_hip.so")
    return wheel


@pytest.fixture(scope="module")
def rocm_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make_rocm_wheel(tmp_path_factory.mktemp("rocm"))


def test_rocm_fixture_gives_its_gfx_list(rocm_wheel: Path) -> None:
    res = run_cli("matrix", "probe", str(rocm_wheel), "--json", "--embedded", "--glibc")
    assert res.returncode == 0, res.stderr
    (rec,) = json.loads(res.stdout)
    assert rec["variant"] == "rocm7.2" and rec["hip"] == "7.2.26015"
    assert rec["arch"] == GFX.split()
    assert rec["arch_matrix"] == "gfx900;gfx906;gfx90a;gfx942;gfx1100"
    assert rec["arch_member"] == "torch/lib/libtorch_python.so"
    assert rec["embedded"]["targets"] == GFX.split() and rec["embedded_agrees"] is True
    # The fixture's own GLIBC needs, as the system's tools read them.
    assert rec["glibc_floor"] is not None and rec["elf_files"] == 2
    readelf = shutil.which("readelf")
    if readelf:
        with zipfile.ZipFile(rocm_wheel) as zf, open(rocm_wheel.parent / "p.so", "wb") as fh:
            fh.write(zf.read("torch/lib/libtorch_python.so"))
        out = subprocess.run([readelf, "-V", str(rocm_wheel.parent / "p.so")], capture_output=True, text=True).stdout
        versions = sorted({tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([\d.]+)", out)})
        assert rec["glibc_floor"] == ".".join(map(str, versions[-1]))


def test_update_from_probe_fills_the_entry(tmp_path: Path) -> None:
    """Probe records of both 2.14 patch releases become a diff that applies and loads."""
    from torchfit.compat.matrix import load_matrix

    recs = []
    for v in ("2.14.0", "2.14.1"):
        d = tmp_path / v
        d.mkdir()
        res = run_cli("matrix", "probe", str(_make_rocm_wheel(d, v)), "--json")
        assert res.returncode == 0, res.stderr
        recs += json.loads(res.stdout)
    one = tmp_path / "one.json"
    one.write_text(json.dumps(recs[1:]))
    both = tmp_path / "both.json"
    both.write_text(json.dumps(recs))
    # One release of two: a review comment, no value edit.
    res = run_cli("matrix", "update", "--from-probe", str(one))
    assert res.returncode == 1 and "not measured for 2.14.0" in res.stdout
    assert not [ln for ln in res.stdout.splitlines() if ln.startswith("+arch")]
    # Both: the arch list, its source and its evidence label.
    res = run_cli("matrix", "update", "--from-probe", str(both))
    assert res.returncode == 1, res.stderr
    assert '+arch = "gfx900;gfx906;gfx90a;gfx942;gfx1100"' in res.stdout
    shutil.copytree(Path(__file__).resolve().parents[2] / "src", tmp_path / "src")
    subprocess.run(["patch", "-p1", "-s"], input=res.stdout, text=True, cwd=tmp_path, check=True)
    m = load_matrix(str(tmp_path / "src/torchfit/data/matrix.toml"))
    b = next(b for b in m.builds if str(b.torch) == "2.14.0" and b.variant == "rocm7.2")
    assert b.gfx == tuple(GFX.split())
    keys = b.sources["arch"].split("; ")
    assert len(keys) == 2 and all(k.startswith("WHEEL torch-2.14.") and k in m.sources for k in keys)
    assert "sha256" in m.sources[keys[0]]
    text = (tmp_path / "src/torchfit/data/matrix.toml").read_text()
    assert 'arch = "measured"' in text
    # Applied, nothing more to propose.
    res = run_cli("matrix", "update", "--from-probe", str(both), "--matrix",
                  str(tmp_path / "src/torchfit/data/matrix.toml"))
    assert res.returncode == 0 and res.stdout == ""


def test_probe_bad_input_is_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"not a zip at all" * 10)
    res = run_cli("matrix", "probe", str(junk))
    assert res.returncode == 2 and "not a readable wheel" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("matrix", "probe", str(tmp_path / "absent.whl"))
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("matrix", "probe")
    assert res.returncode == 2 and "needs a wheel" in res.stderr
    bad = tmp_path / "bad.json"
    for doc in ("[1]", '[{"file": "x.whl", "size": 1, "pins": []}]', "{", '"x"'):
        bad.write_text(doc)
        res = run_cli("matrix", "update", "--from-probe", str(bad))
        assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, doc


# ---------------------------------------------------------------------------
# Pure parsers
# ---------------------------------------------------------------------------


def test_arch_strings_and_spelling() -> None:
    # The 2.8.0 wheel's string follows a char array without a NUL ("ipc_hsm_70 ...").
    data = b"\x00junk sm_80\x00std::string ipc_hsm_50 sm_60 sm_90 compute_90\x00gfx90a;gfx942\x00"
    assert find_arch_strings(data)[:2] == ["sm_50 sm_60 sm_90 compute_90", "gfx90a;gfx942"]
    assert cuda_arch_to_matrix("sm_50 sm_60 sm_90 compute_90".split()) == "5.0;6.0;9.0+PTX"
    assert cuda_arch_to_matrix(["sm_100", "sm_90a", "sm_120"]) == "9.0a;10.0;12.0"


def test_fatbin_walk() -> None:
    def entry(kind: int, sm: int, payload: int) -> bytes:
        head = struct.pack("<HHIQ", kind, 0, 64, payload) + b"\x00" * 12 + struct.pack("<I", sm)
        return head + b"\x00" * (64 - len(head)) + b"\x01" * payload

    body = entry(2, 80, 16) + entry(2, 90, 8) + entry(1, 90, 24)
    container = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    blob = b"\x00" * 8 + container + container
    got = parse_fatbin(io.BytesIO(blob), 8, len(blob) - 8)
    assert got == {"containers": 2, "sass": {"sm_80": 2, "sm_90": 2}, "ptx": {"compute_90": 2}}


def test_offload_bundle_ids() -> None:
    ids = ["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"]
    assert parse_offload_bundles(b"xx" + _bundle(ids) + b"yy") == dict.fromkeys(ids, 1)


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    return buf.getvalue()


def test_zip_reader_matches_zipfile(tmp_path: Path) -> None:
    blob = _zip({"a/METADATA": b"Name: a\n", "b.so": os.urandom(200_000), "c": b""})
    p = tmp_path / "x.whl"
    p.write_bytes(blob)
    arc = WheelArchive(FileSource(p))
    with zipfile.ZipFile(p) as zf:
        assert sorted(arc.members) == sorted(zf.namelist())
        for name in zf.namelist():
            assert arc.read(name) == zf.read(name)


# ---------------------------------------------------------------------------
# Fuzz: garbage raises only WheelFormatError
# ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=2048), st.integers(min_value=0, max_value=1 << 40))
def test_zip_parsers_garbage(data: bytes, total: int) -> None:
    try:
        parse_eocd(data, max(total, len(data)))
    except WheelFormatError:
        pass
    try:
        parse_central_directory(b"PK\x01\x02" + data)
    except WheelFormatError:
        pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_wheel_archive_on_damaged_zips(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    blob = bytearray(_zip({"t.dist-info/METADATA": b"Name: t\n" * 20, "torch/lib/x.so": b"\x7fELF" + b"\x00" * 300}))
    for _ in range(data.draw(st.integers(0, 6))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    p = tmp_path_factory.mktemp("fz") / "t.whl"
    p.write_bytes(bytes(blob[:cut] if data.draw(st.booleans()) else blob))
    try:
        arc = WheelArchive(FileSource(p))
        for m in list(arc.members.values()):
            arc.read(m)
    except WheelFormatError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_elf_and_gpu_code_parsers_garbage(data: bytes) -> None:
    for call in (lambda: elf_glibc_needs(io.BytesIO(b"\x7fELF" + data), "x.so"),
                 lambda: elf_glibc_needs(io.BytesIO(data), "x.so"),
                 lambda: parse_fatbin(io.BytesIO(data), 0, len(data)),
                 lambda: parse_offload_bundles(b"__CLANG_OFFLOAD_BUNDLE__" + data),
                 lambda: find_arch_strings(data)):
        try:
            call()
        except WheelFormatError:
            pass


# ---------------------------------------------------------------------------
# A METADATA that is a zip bomb declared honestly (issue 25, left from round 3)
# ---------------------------------------------------------------------------

BOMB_NAME = "torch-2.13.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_a_bombed_metadata_of_a_file_is_one_line_exit_2(tmp_path: Path, json_flag: list[str]) -> None:
    whl = tmp_path / BOMB_NAME
    metadata_bomb(whl, 64)
    res = run_cli("matrix", "probe", str(whl), *json_flag, env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert "METADATA: not a readable wheel: declares" in lines[0] and "at most 4194304" in lines[0], lines
    if json_flag:
        assert "at most 4194304" in json.loads(res.stdout)["failures"][0]["error"]


def test_a_bombed_metadata_over_http_is_refused_from_its_directory_entry(tmp_path: Path) -> None:
    """Over range requests: the central directory says how big METADATA is; nothing of it is read."""
    metadata_bomb(tmp_path / BOMB_NAME, 64)
    files = RangeFiles(tmp_path)
    with http_server(files) as srv:
        res = run_cli("matrix", "probe", f"{srv.url}/{BOMB_NAME}", "--no-cache",
                      env={"XDG_CACHE_HOME": str(tmp_path / "c")})
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 1, res.stderr  # a server's answer: a no, as for any unreadable wheel it serves
    assert len(lines) == 1 and "at most 4194304" in lines[0] and "Traceback" not in res.stderr, res.stderr
    assert files.total < 200_000, files.total  # the tail of the file and the local header at most


def _never_answers(request: object) -> None:
    time.sleep(30)


@pytest.mark.parametrize(("answer", "extra"), [
    pytest.param(lambda h: reply(h, 404), (), id="404"),
    pytest.param(lambda h: reply(h, 500), ("--timeout", "2"), id="500"),
    pytest.param(lambda h: reply(h, 302, Location=h.path), (), id="redirects-to-itself"),
    pytest.param(_never_answers, ("--timeout", "1"), id="never-answers"),
])
def test_a_probe_whose_index_fails_ends_with_exit_1_naming_it(answer: Answer, extra: tuple[str, ...]) -> None:
    """An index that answers 404 or 500, redirects to itself or never answers (`--timeout 1`):
    `matrix probe --torch` ends within a minute with exit 1, naming the index's host, and no
    traceback (issue 21, class 3; each was a hang, a traceback or another exit)."""
    with http_server(answer) as srv:
        start = time.monotonic()
        out = run_clean("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", srv.url,
                        "--no-cache", "--backoff", "0", *extra, timeout=60)
    assert out.returncode == 1 and "127.0.0.1" in out.stderr, (out.returncode, out.stdout[-300:], out.stderr[-800:])
    assert "Traceback" not in out.stderr and time.monotonic() - start < 60


@needs_wheel
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("moment", [0.5, 2.0])
def test_a_signal_during_a_probe_to_a_file_leaves_no_half_file(tmp_path: Path, sig: signal.Signals,
                                                                moment: float) -> None:
    """`matrix probe URL -o FILE` of a slow mirror, signalled at a moment of its run: never killed
    by the signal's default action, no traceback, exit 130 (or its own answer, when it was done
    first), and FILE either absent or whole; nothing of it in TMPDIR (issue 21, class 8)."""
    assert LOCAL_WHEEL is not None
    files = RangeFiles({LOCAL_WHEEL.name: LOCAL_WHEEL}, block=1 << 14, pause=0.05)
    out, tmp = tmp_path / "probe.json", tmp_path / "tmp"
    tmp.mkdir()
    with http_server(files) as srv:
        proc = start_cli("matrix", "probe", f"{srv.url}/{LOCAL_WHEEL.name}", "--allow-insecure-index", "--no-cache",
                         "--json", "-o", str(out), base_env=clean_env(TMPDIR=str(tmp)))
        time.sleep(moment)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 130), (proc.returncode, err[-800:])
    assert "Traceback" not in err, err[-800:]
    if out.exists():
        assert json.loads(out.read_text()), out.read_text()[-200:]
    assert [p.name for p in tmp.iterdir() if p.name.startswith("torchfit-")] == []

