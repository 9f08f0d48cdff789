"""The start-up cache (torchfit.cache): the matrix through it is the matrix, and a bad cache is only a miss.

Every test has its own $XDG_CACHE_HOME (tests/conftest.py).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pickle
import stat
from pathlib import Path

import pytest

import torchfit.cache
from tests.conftest import ROOT
from tests.support.cli import run_cli
from torchfit import cache
from torchfit.compat.matrix import (
    load_matrix,
    matrix_from_data,
    matrix_to_data,
    parse_matrix,
    read_matrix_text,
)
from torchfit.errors import MatrixError


def _records(name_prefix: str = "matrix-") -> list[Path]:
    d = Path(cache.cache_dir())
    return sorted(d.glob(f"{name_prefix}*.json")) if d.is_dir() else []


def _same(a: object, b: object) -> None:
    """Field by field, types included (a Version stays a Version, a tuple a tuple)."""
    assert type(a) is type(b)
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)  # type: ignore[arg-type]
        for x, y in zip(a, b):  # type: ignore[call-overload]
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)  # type: ignore[call-overload]
        for k in a:
            _same(a[k], b[k])  # type: ignore[index]
    else:
        assert a == b


def test_the_codec_gives_back_the_same_matrix() -> None:
    m = load_matrix()
    data = json.loads(json.dumps(matrix_to_data(m)))  # through JSON text, as on disk
    _same(m, matrix_from_data(data))
    assert len(m.builds) > 100


def test_data_of_another_shape_is_refused() -> None:
    data = matrix_to_data(load_matrix())
    data["builds"][0]["new_field"] = 1
    with pytest.raises(ValueError):
        matrix_from_data(data)
    with pytest.raises(ValueError):
        matrix_from_data({"builds": []})


def test_the_second_load_reads_the_record() -> None:
    first = cache.load_matrix()
    (record,) = _records()
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE(record.parent.stat().st_mode) == 0o700
    # A record written under the same key with one fact changed: what the next load
    # returns shows that it came from the record, not from a parse.
    header = json.loads(record.read_text().splitlines()[0])
    data = matrix_to_data(first)
    data["builds"][0]["cudnn"] = "0.0.0-from-the-cache"
    assert cache.write_record(record.stem, header["key"], data)
    assert cache.load_matrix().builds[0].cudnn == "0.0.0-from-the-cache"


def test_an_edit_of_the_matrix_invalidates_the_record(tmp_path: Path) -> None:
    text, _ = read_matrix_text()
    path = tmp_path / "matrix.toml"
    path.write_text(text)
    before = cache.load_matrix(str(path))
    assert cache.load_matrix(str(path)).builds[0].torch == before.builds[0].torch
    newest = str(before.builds[0].torch)
    # The same file, one release renamed: the next load parses again and sees it.
    edited = text.replace(f'"{newest}"', '"9.9.9"', 1)
    assert edited != text
    path.write_text(edited)
    after = cache.load_matrix(str(path))
    assert str(after.builds[0].torch) == "9.9.9"
    _same(after, parse_matrix(edited, str(path)))
    assert len(_records()) == 1  # one slot per matrix name: the edit replaced its record


def test_a_bad_matrix_is_the_same_error_and_is_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("schema = 1\n[sources]\n")
    with pytest.raises(MatrixError) as direct:
        load_matrix(str(path))
    with pytest.raises(MatrixError) as cached:
        cache.load_matrix(str(path))
    assert str(cached.value) == str(direct.value)
    assert _records() == []


@pytest.mark.parametrize(
    "damage",
    [
        "truncated", "not json", "empty", "body edited", "header of another format",
        "a pickle that would run code", "binary", "a directory",
    ],
)
def test_a_damaged_record_is_a_miss_and_is_rewritten(damage: str, tmp_path: Path) -> None:
    good = cache.load_matrix()
    (record,) = _records()
    raw = record.read_bytes()
    marker = tmp_path / "pickle-ran"
    if damage == "truncated":
        record.write_bytes(raw[: len(raw) // 2])
    elif damage == "not json":
        record.write_text("{{{ not json\n[[[")
    elif damage == "empty":
        record.write_bytes(b"")
    elif damage == "body edited":
        record.write_bytes(raw.replace(b'"cudnn":"9', b'"cudnn":"8', 1))
    elif damage == "header of another format":
        head, body = raw.split(b"\n", 1)
        h = json.loads(head)
        h["format"] = -1
        record.write_bytes(json.dumps(h).encode() + b"\n" + body)
    elif damage == "a pickle that would run code":
        record.write_bytes(pickle.dumps(_MakesMarker(str(marker))))
    elif damage == "binary":
        record.write_bytes(bytes(range(256)) * 8)
    elif damage == "a directory":
        record.unlink()
        record.mkdir()
    loaded = cache.load_matrix()
    _same(good, loaded)
    assert not marker.exists()
    if damage != "a directory":  # a directory in its place cannot be replaced by a file
        assert record.read_bytes() == raw  # rewritten whole
        assert cache.load_matrix().builds[0].cudnn == good.builds[0].cudnn


class _MakesMarker:
    """Unpickling this would create a file: a cache that unpickled would run code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.mkdir, (self.path,))


def test_an_unwritable_cache_dir_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # $XDG_CACHE_HOME a file: no directory can be made under it (root ignores modes, a file does not).
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    _same(cache.load_matrix(), load_matrix())
    assert cache.write_record("x", "k", {"a": 1}) is False
    assert cache.read_record("x", "k") is None
    # And the CLI: the answer as always, nothing on stderr.
    out = run_cli("resolve", "torch==2.13.0", "--variant", "cpu", "--assume", "python=3.11", "--json",
                  cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["torch"] == "2.13.0"
    assert out.stderr == ""


def test_a_cache_dir_others_can_write_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.write_record("x", "k", {"a": 1})
    assert cache.read_record("x", "k") == {"a": 1}
    os.chmod(cache.cache_dir(), 0o777)
    assert cache.read_record("x", "k") is None
    assert cache.write_record("x", "k", {"a": 2}) is False


def test_the_default_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/some/where")
    assert cache.cache_dir() == "/some/where/torchfit"
    for relative_or_unset in ("relative/dir", ""):
        monkeypatch.setenv("XDG_CACHE_HOME", relative_or_unset)
        assert cache.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "torchfit")


def test_records_are_json_and_nothing_unpickles() -> None:
    cache.load_matrix()
    (record,) = _records()
    head, body = record.read_text().split("\n", 1)
    assert set(json.loads(head)) == {"format", "key", "sha256"}
    assert isinstance(json.loads(body), dict)
    # Neither the cache nor its users import a deserializer that can run code.
    for path in (Path(torchfit.cache.__file__), ROOT / "src" / "torchfit" / "host" / "pythons.py"):
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not names & {"pickle", "marshal", "shelve", "dill", "cloudpickle"}, path


# --- data/companions.toml through the cache (issue 18) ------------------------------------


def test_the_companions_codec_gives_back_the_same_values() -> None:
    from torchfit.compat.companions import companions_from_data, companions_to_data, load_companions

    c = load_companions()
    data = json.loads(json.dumps(companions_to_data(c)))
    _same(companions_from_data(data), c)
    data["packages"][0]["releases"][0]["extra"] = 1
    with pytest.raises(ValueError):
        companions_from_data(data)
    with pytest.raises(ValueError):
        companions_from_data({"path": "x"})


def test_companions_second_load_reads_the_record_and_an_edit_parses_again(tmp_path: Path) -> None:
    from torchfit.compat.companions import (
        companions_to_data,
        parse_companions,
        read_companions_text,
    )

    first = cache.load_companions()
    (record,) = _records("companions-")
    header = json.loads(record.read_text().splitlines()[0])
    data = companions_to_data(first)
    data["packages"][0]["releases"][0]["build_needs"] = "from-the-cache"
    assert cache.write_record(record.stem, header["key"], data)
    assert cache.load_companions().packages["xformers"].releases[0].build_needs == "from-the-cache"
    # a file given in its place, then edited: parsed again
    text, _ = read_companions_text()
    path = tmp_path / "companions.toml"
    path.write_text(text)
    _same(cache.load_companions(str(path)), parse_companions(text, str(path)))
    edited = text.replace('version = "0.0.35"', 'version = "0.0.99"', 1)
    path.write_text(edited)
    assert str(cache.load_companions(str(path)).packages["xformers"].releases[0].version) == "0.0.99"


def test_a_bad_companions_file_is_the_same_error_and_is_not_stored(tmp_path: Path) -> None:
    from torchfit.compat.companions import load_companions
    from torchfit.errors import CompanionsError

    path = tmp_path / "bad.toml"
    path.write_text("schema = 1\n[sources]\n")
    with pytest.raises(CompanionsError) as direct:
        load_companions(str(path))
    with pytest.raises(CompanionsError) as cached:
        cache.load_companions(str(path))
    assert str(cached.value) == str(direct.value) == f"{path}: no [[package]] entries"
    assert _records("companions-") == []
    with pytest.raises(CompanionsError, match=r"missing\.toml: cannot read"):
        cache.load_companions(str(tmp_path / "missing.toml"))


# --- attack round 3 (issue 21, class 2): a cache opens regular files only, never blocking ------


def _plant(path: Path, kind: str, tmp_path: Path) -> None:
    """Replace `path` with a non-regular file: what a user or another program may leave there."""
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "fifo via symlink":
        os.mkfifo(tmp_path / f"elsewhere-{path.name}", 0o600)
        path.symlink_to(tmp_path / f"elsewhere-{path.name}")
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "char device":  # /dev/zero's own numbers; needs root (CAP_MKNOD)
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    elif kind == "socket":
        import socket

        sock, cwd = socket.socket(socket.AF_UNIX), os.getcwd()
        os.chdir(path.parent)  # a relative name: AF_UNIX paths are limited to 107 bytes
        try:
            sock.bind(path.name)
        finally:
            os.chdir(cwd)
            sock.close()


_KINDS = ["fifo", "fifo via symlink", "symlink to /dev/zero", "char device", "socket"]


def test_attack3_a_fifo_in_the_start_up_cache_never_blocks(tmp_path: Path) -> None:
    """Every record of the start-up cache replaced by a FIFO: a real `torchfit resolve`
    answers as always (a miss, then the record rewritten), where it hung in open()."""
    args = ("resolve", "torch==2.13.0", "--variant", "cpu", "--assume", "python=3.11", "--json")
    first = run_cli(*args, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    records = sorted(Path(cache.cache_dir()).glob("*.json"))
    assert records, "resolve wrote no start-up record"
    for record in records:
        _plant(record, "fifo", tmp_path)
    again = run_cli(*args, cwd=ROOT, timeout=60)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert json.loads(again.stdout)["torch"] == json.loads(first.stdout)["torch"]
    assert all(r.is_file() and not r.is_symlink() for r in records)  # rewritten as regular files


@pytest.mark.parametrize("kind", _KINDS)
def test_attack3_a_record_that_is_not_a_regular_file_is_a_miss_at_once(kind: str, tmp_path: Path) -> None:
    import time

    if kind == "char device" and os.geteuid() != 0:
        pytest.skip("mknod needs root")
    assert cache.write_record("probe", "k", {"a": 1})
    assert cache.read_record("probe", "k") == {"a": 1}
    _plant(Path(cache.cache_dir()) / "probe.json", kind, tmp_path)
    start = time.monotonic()
    assert cache.read_record("probe", "k") is None
    assert time.monotonic() - start < 5
    assert cache.write_record("probe", "k", {"a": 2}) and cache.read_record("probe", "k") == {"a": 2}


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero"])
def test_attack3_read_regular_refuses_what_is_not_a_regular_file_at_once(kind: str, tmp_path: Path) -> None:
    import time

    target = tmp_path / "r.json"
    target.write_text("x")
    _plant(target, kind, tmp_path)
    start = time.monotonic()
    with pytest.raises(OSError):
        cache.read_regular(str(target), 1 << 20)
    assert time.monotonic() - start < 5


def test_attack3_read_regular_stops_at_its_limit(tmp_path: Path) -> None:
    big = tmp_path / "big"
    with open(big, "wb") as fh:
        fh.truncate(cache.MAX_RECORD_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(OSError, match="larger than"):
        cache.read_regular(str(big), cache.MAX_RECORD_BYTES)
    assert cache.read_regular(str(big), cache.MAX_RECORD_BYTES + 1) == b"\0" * (cache.MAX_RECORD_BYTES + 1)


def test_a_record_nested_past_the_interpreters_depth_is_a_miss_not_a_crash() -> None:
    """A record's body is parsed by json.loads alone (it is this user's, its sha256 in the
    header): one nested deeper than the interpreter recurses is read as absent, never raised."""
    from torchfit.cache import FORMAT, _record_path, cache_dir, sha256_hex, write_record

    assert write_record("deep", "k", [1])
    body = "[" * 100_000 + "]" * 100_000
    header = json.dumps({"format": FORMAT, "key": "k", "sha256": sha256_hex(body.encode())})
    with open(_record_path(cache_dir(), "deep"), "w", encoding="utf-8") as fh:
        fh.write(f"{header}\n{body}")
    assert cache.read_record("deep", "k") is None
    assert write_record("deep", "k", [[1]]) and cache.read_record("deep", "k") == [[1]]
