"""Attack round 3 (issue 21, class 3): hostile archives and the probe's parsers.

A zip bomb (a member that inflates far past the size it declares), a central directory
with too many members, member names and contents crafted against the regular
expressions: bounded memory and linear time, a WheelFormatError (one line) otherwise.
"""

from __future__ import annotations

import io
import json
import os
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import run_cli
from torchfit.errors import WheelFormatError
from torchfit.index.wheelmeta import MAX_MEMBERS, FileSource, WheelArchive, parse_central_directory
from torchfit.matrixcheck.probe import (
    _CUDA_TOKEN,
    _GFX_TOKEN,
    ARCH_MEMBERS,
    find_arch_strings,
    iter_elf_members,
    parse_version_py,
)

ROOT = Path(__file__).resolve().parents[2]
METADATA = b"Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n"


def _bomb(path: Path, inflated: int, declared: int, member: str = "torch-2.13.0.dist-info/METADATA") -> None:
    """A wheel whose `member` is `inflated` zero bytes but declares `declared` in both headers."""
    info = zipfile.ZipInfo(member)
    info.compress_type = zipfile.ZIP_DEFLATED  # a real bomb: 512 MiB of zeros is 0.5 MB on disk
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open(info, "w") as fh:
            block = b"\0" * (1 << 20)
            for _ in range(inflated >> 20):
                fh.write(block)
        zf.writestr("torch/__init__.py", b"")
    data = bytearray(path.read_bytes())
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # local header, central entry: uncompressed size
        pos = data.find(sig)
        data[pos + at:pos + at + 4] = struct.pack("<I", declared)
    path.write_bytes(bytes(data))


def _child(code: str, timeout: float = 120) -> dict[str, object]:
    wrapper = ("import json\n"
               "def _hwm_kib():  # this process image's own peak RSS (VmHWM); ru_maxrss keeps the forking parent's\n"
               "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
               "result = None\n" + code + "\nprint(json.dumps({'result': result, "
               "'peak_mib': _hwm_kib() / 1024}))\n")
    res = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
def test_attack3_a_zip_bomb_member_stops_at_its_declared_size(tmp_path: Path) -> None:
    """512 MiB of zeros declared as 1,000 bytes: refused after ~1 MiB, never held."""
    whl = tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    _bomb(whl, 512 << 20, 1000)
    got = _child(
        "from torchfit.index.wheelmeta import FileSource, WheelArchive\n"
        "from torchfit.errors import WheelFormatError\n"
        f"a = WheelArchive(FileSource({str(whl)!r}))\n"
        "try:\n"
        "    a.read('torch-2.13.0.dist-info/METADATA')\n"
        "    result = 'read'\n"
        "except WheelFormatError as exc:\n"
        "    result = exc.message\n")
    assert "inflates past the 1000 bytes it declares" in str(got["result"]), got
    assert float(got["peak_mib"]) < 150, got  # type: ignore[arg-type]
    # And the CLI: one line, exit 2 (a local file that is no readable wheel), no traceback.
    res = run_cli("matrix", "probe", str(whl), cwd=ROOT, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr and "inflates past" in res.stderr, res.stderr


def test_attack3_a_member_that_declares_too_much_is_refused_before_it_is_read(tmp_path: Path) -> None:
    whl = tmp_path / "t.whl"
    _bomb(whl, 1 << 20, 0xFFFFFFF0)
    archive = WheelArchive(FileSource(whl))
    with pytest.raises(WheelFormatError, match="declares 4294967280 bytes"):
        archive.read("torch-2.13.0.dist-info/METADATA")
    assert archive.source.bytes_read < 70_000  # the tail and the local header: nothing inflated


@pytest.mark.slow
def test_attack3_a_central_directory_of_too_many_members_is_refused() -> None:
    entry = b"PK\x01\x02" + b"\0" * 24 + struct.pack("<HHH", 1, 0, 0) + b"\0" * 12 + b"a"
    with pytest.raises(WheelFormatError, match=f"more than {MAX_MEMBERS} members"):
        parse_central_directory(entry * (MAX_MEMBERS + 1))
    assert len(parse_central_directory(entry * 1000)) == 1000


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300), min_size=1,
                max_size=8, unique=True))
def test_attack3_any_member_names_are_read_in_linear_time(names: list[str]) -> None:
    """Member names are data: the archive reads them, the probe's patterns scan them."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for n in names:
            zf.writestr(zipfile.ZipInfo(n), b"x")
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"names-{os.getpid()}.whl"
    path.write_bytes(buf.getvalue())
    try:
        archive = WheelArchive(FileSource(path))
        for pattern in (r"^[^/]+\.dist-info/METADATA$", r"^torch/version\.py$", *ARCH_MEMBERS):
            archive.find(pattern)
        list(iter_elf_members(archive))
    except WheelFormatError:
        pass
    finally:
        path.unlink()


_OLD_CUDA = re.compile(rb"(" + _CUDA_TOKEN + rb"(?: " + _CUDA_TOKEN + rb")*)\x00")
_OLD_GFX = re.compile(rb"(" + _GFX_TOKEN + rb"(?:[ ;]" + _GFX_TOKEN + rb")*)\x00")


def _reference(data: bytes) -> list[str]:
    """What the old (quadratic) regular expressions found: the answer must not change."""
    found: dict[str, None] = {}
    for rx in (_OLD_CUDA, _OLD_GFX):
        for m in rx.finditer(data):
            found[m.group(1).decode("ascii")] = None
    return sorted(found, key=lambda s: (-len(s.split()), -len(s)))


_PIECES = [b"sm_", b"compute_", b"9", b"0", b"12", b"a", b"f", b" ", b";", b"\x00", b"gfx", b"90a", b"942",
           b":xnack", b"+", b"-", b"x", b"ipc_h"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=24).map(b"".join))
def test_attack3_the_linear_arch_string_scan_finds_what_the_regex_found(data: bytes) -> None:
    assert find_arch_strings(data) == _reference(data)


@pytest.mark.parametrize("motif", [b"sm_90 ", b"gfx90a;", b"gfx90a:xnack+", b"compute_120a "])
def test_attack3_a_crafted_library_is_scanned_in_linear_time(motif: bytes) -> None:
    """2 MB of arch tokens without a NUL: the regex took 13 s for 60 KB (quadratic), so
    hours here. A child with a 20 s limit."""
    code = (f"from torchfit.matrixcheck.probe import find_arch_strings\n"
            f"result = len(find_arch_strings({motif!r} * (2_000_000 // {len(motif)}) + b'x\\x00'))\n")
    assert isinstance(_child(code, timeout=20)["result"], int)  # subprocess.TimeoutExpired otherwise
    small = b"\x00" + motif * 3 + b"x\x00" + motif * 2 + b"\x00"
    assert find_arch_strings(small) == _reference(small)


def test_attack3_a_crafted_version_py_is_parsed_in_linear_time() -> None:
    """8,000 lines "cuda:" took 14 s (the annotation's [^=]* spanned lines); 200,000 now."""
    code = ("from torchfit.matrixcheck.probe import parse_version_py\n"
            "result = parse_version_py('cuda:\\n' * 200_000 + \"cuda = '12.8'\\n\")\n")
    assert _child(code)["result"] == {"__version__": None, "cuda": "12.8", "hip": None}
    assert parse_version_py("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip = None\n") == \
        {"__version__": "2.13.0+cpu", "cuda": None, "hip": None}
