"""Fuzzing every numeric flag and every file input (issue 13 point 5): garbage in gives
exit 2 with one line, never a traceback, never an "internal error".

In-process through `torchfit.cli.main` (the one boundary) so hypothesis can try many
values quickly; a handful of end-to-end subprocess runs at the bottom prove the same
through the real entry point. Bounded in time: every test has a deadline-free but
small example budget.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT
from tests.support.cli import run_cli
from torchfit.cli.main import main
from torchfit.cli.options import build_parser
from torchfit.errors import BadInput

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Every numeric flag: (argv before the value, flag, lower bound, inclusive?, upper bound).
NUMERIC_FLAGS = [
    (["detect"], "--timeout", 0.0, False, 7 * 24 * 3600.0),
    (["doctor"], "--timeout", 0.0, False, 7 * 24 * 3600.0),
    (["install"], "--timeout", 0.0, False, 7 * 24 * 3600.0),
    (["install"], "--wait", 0.0, True, 7 * 24 * 3600.0),
    (["matrix", "check"], "--timeout", 0.0, False, 7 * 24 * 3600.0),
    (["verify"], "--timeout", 0.0, False, 7 * 24 * 3600.0),
    (["verify"], "--rdzv-timeout", 0.0, False, 7 * 24 * 3600.0),
    (["verify"], "--nproc", 1, True, 1024),
    (["verify"], "--iters", 1, True, 1_000_000),
    (["verify"], "--warmup", 0, True, 1_000_000),
    (["verify"], "--nnodes", 1, True, 65536),
    (["verify"], "--node-rank", 0, True, 65535),
    (["verify"], "--master-port", 1, True, 65535),
    (["verify"], "--nodes", 1, True, 65536),
    (["verify"], "--gpus-per-node", 1, True, 1024),
]

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(["nan", "-nan", "inf", "-inf", "1e309", "-0", "0x10", "1_0", "", " ", "\u0665", "٣", "1e-400"]),
    st.text(max_size=12),
)


@pytest.mark.parametrize(("prefix", "flag", "low", "inclusive", "high"), NUMERIC_FLAGS,
                         ids=[f"{' '.join(p)} {f}" for p, f, *_ in NUMERIC_FLAGS])
@FAST
@given(value=numbers)
def test_numeric_flag_is_finite_and_in_range_or_bad_input(prefix: list[str], flag: str, low: float,
                                                          inclusive: bool, high: float, value: str) -> None:
    parser = build_parser()
    try:
        args = parser.parse_args([*prefix, f"{flag}={value}"])
    except BadInput as exc:
        assert "\n" not in exc.message
        return
    got = getattr(args, flag.lstrip("-").replace("-", "_"))
    assert isinstance(got, (int, float)) and math.isfinite(got)
    assert (got >= low if inclusive else got > low) and got <= high


def _one_line_or_answer(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("torchfit: error:"), err


json_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)
facts_keys = st.sampled_from(["driver_version", "gpus", "topology", "glibc", "os", "wsl", "arch", "pythons",
                              "pyenv", "rocm_version", "reasons", "nvidia_failure"])
facts_like = st.dictionaries(facts_keys, json_like, max_size=6)


@FAST
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode),
                         facts_like.map(lambda d: __import__("json").dumps(d).encode())))
def test_facts_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    path = tmp_path / "facts.json"
    path.write_bytes(content)
    code = main(["resolve", "--facts", str(path), "--json"])
    _one_line_or_answer(code, capsys.readouterr().err)


toml_like = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.lists(st.tuples(st.sampled_from(["lock-version", "packages", "tool", "requires-python", "x"]),
                       st.sampled_from(['"1.0"', "[]", "[[1]]", "{ a = 1 }", '"==3.9.*"', "1", "[" * 40 + "]" * 40])),
             max_size=5).map(lambda kv: "\n".join(f"{k} = {v}" for k, v in kv).encode()),
)


@FAST
@given(content=toml_like)
def test_lock_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    """--lock for export (its reader), install's reader and verify's reader."""
    from torchfit.lock.pylock import load_expected as load_lock_expected
    from torchfit.lock.pylock import load_lock

    path = tmp_path / "pylock.toml"
    path.write_bytes(content)
    code = main(["export", "--format", "requirements", "--lock", str(path)])
    _one_line_or_answer(code, capsys.readouterr().err)
    try:
        load_lock(str(path))
    except BadInput as exc:
        assert "\n" not in exc.message
    expected, why = load_lock_expected(str(path))
    assert expected is None or isinstance(expected, dict)
    assert why is None or "\n" not in why


@FAST
@given(content=st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)))
def test_log_garbage(tmp_path: Path, content: bytes) -> None:
    from torchfit.doctor.logs import explain_text, parse_log
    from torchfit.inputs import MAX_LOG_BYTES, read_text_file

    path = tmp_path / "train.log"
    path.write_bytes(content)
    text = read_text_file(str(path), "--log", limit=MAX_LOG_BYTES, tail=True)
    assert isinstance(text, str)
    parse_log(text)
    explain_text(text)


@FAST
@given(content=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_matrix_file_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes) -> None:
    path = tmp_path / "matrix.toml"
    path.write_bytes(content)
    code = main(["matrix", "show", "--matrix", str(path)])
    _one_line_or_answer(code, capsys.readouterr().err)


# --- end to end: the real entry point --------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["detect", "--timeout", "nan"],
        ["verify", "--sizes", "1e20"],
        ["resolve", "--facts", "/dev/urandom"],
        ["export", "--format", "uv", "--lock", "/dev/zero"],
        ["doctor", "--log", "/nonexistent/log"],
        ["matrix", "show", "--matrix", "/dev/zero"],
    ],
    ids=lambda a: "-".join(a)[:40],
)
def test_garbage_end_to_end(args: list[str]) -> None:
    proc = run_cli(*args, timeout=60, cwd=ROOT,
                   base_env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")})
    _one_line_or_answer(proc.returncode, proc.stderr)
    assert proc.returncode == 2
