"""inputs.py: untrusted input at the edge, through the real CLI: numbers finite and in range (#14), files
bounded in size and depth (#15, #29), URLs and lenient values refused (#26, #27), control sequences never
reaching the terminal (#30); defect numbers of the 2026-11 attack (issue 13)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.support.cli import bad_input, clean_env, run_clean


@pytest.mark.parametrize(
    "args",
    [
        ["detect", "--timeout", "nan"], ["detect", "--timeout", "inf"], ["detect", "--timeout", "-1"],
        ["detect", "--timeout", "0"], ["detect", "--timeout", "1e309"],
        ["install", "--timeout", "nan"], ["install", "--timeout", "inf"], ["install", "--wait", "nan"],
        ["verify", "--timeout", "nan"], ["verify", "--sizes", "100000000000000000000"],
        ["verify", "--master-port", "99999"], ["verify", "--rdzv-timeout", "-1"],
        ["verify", "--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:99999"],
        ["doctor", "--timeout", "nan"], ["matrix", "check", "--timeout", "inf"],
    ],
    ids=lambda a: "-".join(a),
)
def test_numeric_flags_are_finite_and_in_range(args: list[str]) -> None:
    """Defect #14 of the 2026-11 attack (issue 13)."""
    line = bad_input(run_clean(*args))
    assert "--" in line


def test_deep_and_endless_facts_and_locks_are_bad_input(tmp_path: Path) -> None:
    """Defect #15 of the 2026-11 attack (issue 13)."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested" in bad_input(run_clean("resolve", "--facts", str(deep)))
    start = time.monotonic()
    assert "not a regular file (a character device)" in bad_input(run_clean("resolve", "--facts", "/dev/zero"))
    line = bad_input(run_clean("export", "--format", "requirements", "--lock", "/dev/zero"))
    assert "not a regular file (a character device)" in line
    assert time.monotonic() - start < 30
    deep_toml = tmp_path / "deep.toml"
    deep_toml.write_text("a = " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert "nested" in bad_input(run_clean("install", "--lock", str(deep_toml), "--prefix", str(tmp_path / "e")))


def test_huge_facts_refused_fast(tmp_path: Path) -> None:
    """Defect #29 of the 2026-11 attack (issue 13)."""
    gpu = {"index": 0, "name": "NVIDIA H100", "compute_capability": "9.0"}
    facts = tmp_path / "huge.json"
    facts.write_text(json.dumps({"driver_version": "580.65.06", "gpus": [gpu] * 200_000}))
    start = time.monotonic()
    line = bad_input(run_clean("resolve", "--facts", str(facts)))
    assert time.monotonic() - start < 20 and len(line) < 300


def test_invalid_ipv6_url_is_bad_input() -> None:
    """Defect #26 of the 2026-11 attack (issue 13)."""
    assert "IPv6" in bad_input(run_clean("matrix", "check", "--index-url", "https://[::1/whl"))


@pytest.mark.parametrize(
    "args",
    [
        ["resolve", "--assume", "gpu=gfxZZZ"],
        ["resolve", "--assume", "driver=\uff15\uff18\uff10.\uff11"],  # full-width digits
        ["install", "--torch-index-url", "notaurl", "--prefix", "/tmp/torchfit-d27-never"],
        ["install", "--torch-index-url", "https://m/{varient}", "--prefix", "/tmp/torchfit-d27-never"],
        ["install", "--index-url", "notaurl", "--prefix", "/tmp/torchfit-d27-never"],
    ],
    ids=["gfx-garbage", "fullwidth-driver", "index-notaurl", "bad-placeholder", "pip-index-notaurl"],
)
def test_lenient_values_are_bad_input(args: list[str]) -> None:
    """Defect #27 of the 2026-11 attack (issue 13)."""
    bad_input(run_clean(*args))
    assert not Path("/tmp/torchfit-d27-never").exists()


def _facts(tmp_path: Path, data: dict[str, object]) -> str:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_ansi_in_facts_does_not_reach_the_terminal(tmp_path: Path) -> None:
    """Defect #30 of the 2026-11 attack (issue 13)."""
    path = _facts(tmp_path, {"driver_version": "418.87.01", "glibc": "2.39", "arch": "x86_64",
                             "pythons": [{"version": "3.12.3"}],
                             "gpus": [{"name": "Evil\x1b[2J\x1b]0;pwned\x07GPU\x9b31m", "compute_capability": "9.0"}]})
    for extra in ([], ["--json"]):
        proc = run_clean("resolve", "--facts", path, *extra, env=clean_env(COLUMNS="80"))
        assert proc.returncode == 1, proc.stderr
        assert "\x1b" not in proc.stderr and "\x07" not in proc.stderr and "\x9b" not in proc.stderr
        assert "EvilGPU" in proc.stderr or "EvilGPU" in proc.stdout


def test_terminal_text_strips_every_control() -> None:
    """Defect #30 of the 2026-11 attack (issue 13)."""
    from torchfit.inputs import terminal_text

    assert terminal_text("a\x1b[31mb\x1b]8;;http://x\x1b\\c\x07d\re\tf\n") == "abcde\tf\n"



# --- the bounded JSON reader (issue 25: one node's 100,000-deep answer killed a gather) ----


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,  # valid JSON, too deep
    "[" * 100_000,  # not even closed
    '{"a":' * 50_000 + "1" + "}" * 50_000,
])
def test_decode_json_refuses_deep_nesting_with_a_value_error_at_once(text: str) -> None:
    from torchfit.inputs import TooDeep, decode_json

    start = time.process_time()
    with pytest.raises(TooDeep, match="nested deeper than 32 levels"):
        decode_json(text)
    with pytest.raises(TooDeep):
        decode_json(text.encode())
    assert time.process_time() - start < 2


def test_decode_json_reads_ordinary_json_and_counts_no_bracket_inside_a_string() -> None:
    from torchfit.inputs import decode_json

    assert decode_json('{"gpus": [{"name": "[[[[ \\"{{{{"}], "n": 1}') == {"gpus": [{"name": '[[[[ "{{{{'}], "n": 1}
    assert decode_json("[" * 32 + "]" * 32) is not None  # 32 levels: the bound itself
    with pytest.raises(ValueError, match="NaN is not JSON"):
        decode_json('{"x": NaN}')


@pytest.mark.parametrize("source", ["index page", "node answer"])
def test_every_reader_of_foreign_json_is_bounded(source: str) -> None:
    """The readers of JSON others write go through decode_json: a PEP 691 page of a
    hostile index and a node's srun answer, 100,000 deep, are their caller's one error."""
    deep = "[" * 100_000 + "]" * 100_000
    if source == "index page":
        from torchfit.errors import IndexMalformed
        from torchfit.index.pages import parse_project_json

        with pytest.raises(IndexMalformed, match="nested deeper"):
            parse_project_json(deep, "https://example.invalid/simple/torch/")
    else:
        from torchfit.fleet.srun import parse_framed

        out = parse_framed(f"0: torchfit-fleet-node\n0: {deep}\n0: torchfit-fleet-end\n")
        assert out[0].bad == "its answer is not valid JSON (nested deeper than 32 levels)"


def test_decode_json_never_raises_anything_but_value_error() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from torchfit.inputs import decode_json

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet='[]{}",:0123456789 \\truefalsn', max_size=200))
    def check(text: str) -> None:
        try:
            decode_json(text)
        except ValueError:
            pass

    check()


# --- issue 25: every user-named input file is a regular file, opened without blocking ----------


@pytest.mark.parametrize(
    "args",
    [
        ["resolve", "-r", "{fifo}"],
        ["resolve", "--facts", "{fifo}"],
        ["resolve", "--project", "{dir}"],
        ["install", "--lock", "{fifo}", "--prefix", "{dir}/env"],
        ["doctor", "--log", "{fifo}"],
        ["export", "--format", "requirements", "--lock", "{fifo}"],
    ],
    ids=lambda a: "-".join(w for w in a if not w.startswith("{"))[:40],
)
def test_a_fifo_named_as_an_input_file_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    os.mkfifo(tmp_path / "pyproject.toml")  # --project DIR: its pyproject.toml is a FIFO
    start = time.monotonic()
    line = bad_input(run_clean(*[a.format(fifo=fifo, dir=tmp_path) for a in args], timeout=20))
    assert time.monotonic() - start < 15
    assert "not a regular file (a FIFO)" in line, line


def test_read_regular_follows_a_link_for_user_files_but_not_for_caches(tmp_path: Path) -> None:
    import os

    from torchfit.inputs import read_regular

    (tmp_path / "real.txt").write_text("numpy\n")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    assert read_regular(str(tmp_path / "link.txt"), 100) == b"numpy\n"
    with pytest.raises(OSError):
        read_regular(str(tmp_path / "link.txt"), 100, follow_links=False)
    with pytest.raises(OSError, match="larger than"):
        read_regular(str(tmp_path / "real.txt"), 3)


def test_iter_regular_bounds_a_file_as_it_reads(tmp_path: Path) -> None:
    """A wheel a lock names, read in blocks: a FIFO refused at once, a file whose size is past
    the limit refused before a byte, and one that grows past it while read cut there."""
    import errno

    from torchfit.inputs import iter_regular

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO"):
        next(iter_regular(str(fifo), 10))
    (tmp_path / "big").write_bytes(b"x" * 11)
    with pytest.raises(OSError) as big:
        next(iter_regular(str(tmp_path / "big"), 10))
    assert big.value.errno == errno.EFBIG and "11 bytes, more than 10" in str(big.value)
    grows = tmp_path / "grows"
    grows.write_bytes(b"a" * 8)
    blocks = iter_regular(str(grows), 10, block=4)
    assert next(blocks) == b"aaaa"
    with open(grows, "ab") as fh:
        fh.write(b"b" * 10)
    with pytest.raises(OSError, match="grew while read"):
        list(blocks)
    assert b"".join(iter_regular(str(tmp_path / "big"), 11)) == b"x" * 11
