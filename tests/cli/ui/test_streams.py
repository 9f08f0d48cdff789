"""Terminals and pipes (issue 21, class 6): closed descriptors, narrow encodings, NO_COLOR and
TERM=dumb, `--json` on every failure, nothing cut through a pipe or at 40 columns.

Real processes throughout: `python -m torchfit` with a descriptor closed before it starts
(preexec), with PYTHONIOENCODING / a C locale, on a real pty of a given width
(tests/support/cli.run_cli_pty), and against a real HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_facts
from tests.support.cli import run_cli, run_cli_pty
from tests.support.servers import http_server, reply
from torchfit.compat.facts import facts_to_json

ESC = "\x1b["
# A C locale whose streams are ASCII: Python's own coercion and UTF-8 mode switched off.
C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}


@pytest.fixture
def facts(tmp_path: Path) -> str:
    """A GPU host on an older driver: the plan has reasons (•), a warning and ruled-out builds (✗)."""
    path = tmp_path / "gpu-host.json"
    path.write_text(json.dumps(facts_to_json(make_facts(driver="550.54.15", gpus=["sm_89"]))))
    return str(path)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


# --- closed descriptors -----------------------------------------------------------------


@pytest.mark.parametrize("argv", [["detect"], ["detect", "--json"], ["matrix", "show", "--torch", "2.13"]])
def test_attack3_a_closed_stdout_is_one_line_and_exit_2(argv: list[str]) -> None:
    out = run_cli(*argv, stdout=None, preexec_fn=lambda: os.close(1))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "stdout is closed" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_attack3_a_closed_stderr_or_stdin_still_answers(facts: str) -> None:
    def close(*fds: int) -> None:
        for fd in fds:
            os.close(fd)

    out = run_cli("resolve", "--facts", facts, "--json", stderr=None, preexec_fn=lambda: close(0, 2))
    assert out.returncode == 0
    assert json.loads(out.stdout)["torch"]
    # Bad input with stderr closed: the exit code still says it, nothing crashes.
    out = run_cli("resolve", "--facts", facts, "--python", "two", stderr=None, preexec_fn=lambda: close(2))
    assert out.returncode == 2 and out.stdout == ""


# --- encodings --------------------------------------------------------------------------


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, C_LOCALE, {"PYTHONIOENCODING": "latin-1"}],
                         ids=["ascii", "C-locale", "latin-1"])
def test_attack3_a_narrow_encoding_gets_ascii_fallbacks(env: dict[str, str], facts: str) -> None:
    out = run_cli("resolve", "--facts", facts, "--explain", env=env)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "UnicodeEncodeError" not in out.stderr
    assert "\n* torch " in out.stdout and "\n  x torch " in out.stdout  # • and ✗, in ASCII
    if env.get("PYTHONIOENCODING") != "latin-1":
        assert out.stdout.isascii() and out.stderr.isascii()


def test_attack3_a_terminal_with_an_ascii_encoding_gets_ascii_tables() -> None:
    for argv in (["detect"], ["matrix", "show", "--unknown"]):
        code, text = run_cli_pty(*argv, env={"PYTHONIOENCODING": "ascii"})
        assert code == 0, text
        assert "Traceback" not in text and text.isascii(), text[:500]


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30))
def test_attack3_any_host_name_reaches_an_ascii_stream(tmp_path: Path, name: str) -> None:
    path = tmp_path / "host.json"
    path.write_text(json.dumps(facts_to_json(make_facts(driver="550.54.15", gpus=["sm_89"], name=name))))
    out = run_cli("resolve", "--facts", str(path), env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and out.stdout.isascii()


@given(text=st.text(max_size=200), encoding=st.sampled_from(["ascii", "latin-1", "cp1252", "iso8859-15"]))
def test_attack3_the_fallback_handler_encodes_any_text(text: str, encoding: str) -> None:
    from torchfit.cli.ui.streams import ASCII_FALLBACKS, ERRORS

    data = text.encode(encoding, errors=ERRORS)  # never raises
    for ch in set(text) & set(ASCII_FALLBACKS):
        try:
            ch.encode(encoding)
        except UnicodeEncodeError:
            assert ASCII_FALLBACKS[ch].encode() in data


# --- NO_COLOR, TERM=dumb ----------------------------------------------------------------


@pytest.mark.slow
def test_attack3_no_escape_sequences_with_no_color_or_a_dumb_terminal(facts: str) -> None:
    for env in ({"NO_COLOR": "1", "TERM": "xterm-256color"}, {"TERM": "dumb"}):
        for argv in (["resolve", "--facts", facts, "--explain"], ["detect"]):
            code, text = run_cli_pty(*argv, env=env)
            assert code == 0, text
            assert ESC not in text, (env, text[:400])
    # The control: the same terminal without them gets styles, so the check can fail.
    code, text = run_cli_pty("resolve", "--facts", facts, env={"TERM": "xterm-256color", "NO_COLOR": ""})
    assert code == 0 and ESC in text


def test_attack3_the_progress_ticker_sends_no_escapes_to_a_dumb_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import pty

    from torchfit.progress import StderrProgress

    master, slave = pty.openpty()
    try:
        with open(slave, "w", closefd=False) as stream:
            monkeypatch.setenv("TERM", "xterm")
            assert StderrProgress(stream).tty
            monkeypatch.setenv("TERM", "dumb")
            assert not StderrProgress(stream).tty
    finally:
        os.close(master)
        os.close(slave)


# --- --json on every failure ------------------------------------------------------------


def _json_commands() -> list[list[str]]:
    """Every command path whose parser takes --json, from the parser itself."""
    from torchfit.cli.options import build_parser

    found: list[list[str]] = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        if getattr(p, "takes_json", False):
            found.append(path)
        for name, sub in getattr(p, "commands", {}).items():
            walk(sub, [*path, name])

    walk(build_parser(), [])
    return found


def _one_error_object(stdout: str) -> dict[str, object]:
    data = json.loads(stdout)  # exactly one JSON document
    assert isinstance(data, dict) and data["ok"] is False and data["error"] and data["reference"], data
    return data


def test_attack3_every_json_command_is_found() -> None:
    assert len(_json_commands()) >= 9


@pytest.mark.parametrize("path", _json_commands(), ids=" ".join)
def test_attack3_a_usage_error_under_json_is_one_object(path: list[str]) -> None:
    out = run_cli(*path, "--json", "--no-such-option")
    assert out.returncode == 2
    _one_error_object(out.stdout)


@pytest.mark.parametrize("argv", [
    ["detect", "--timeout", "0", "--json"],
    ["verify", "--slurm", "--time", "abc", "--json"],
    ["doctor", "--json", "--timeout", "-1"],
    ["matrix", "show", "--json", "--torch"],
])
def test_attack3_a_bad_value_under_json_is_one_object(argv: list[str]) -> None:
    out = run_cli(*argv)
    assert out.returncode == 2, out.stderr
    _one_error_object(out.stdout)
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("status", [404, 500])
def test_attack3_a_probe_that_reads_nothing_is_one_error_object(status: int) -> None:
    with http_server(lambda h: reply(h, status)) as srv:
        out = run_cli("matrix", "probe", "--torch", "2.13.0", "--variant", "cpu", "--index-url", srv.url,
                      "--json", "--no-cache", "--backoff", "0", "--timeout", "5")
    assert out.returncode in (1, 2), (out.stdout, out.stderr)
    data = _one_error_object(out.stdout)
    assert data["reference"] != "internal-error"


# --- nothing cut --------------------------------------------------------------------------


@pytest.mark.slow
def test_attack3_doctor_through_a_pipe_keeps_every_fact() -> None:
    as_json = json.loads(run_cli("doctor", "--json").stdout)
    out = run_cli("doctor")
    assert "\u2026" not in out.stdout
    text = _squash(out.stdout)
    for check in as_json["checks"]:
        assert _squash(check["evidence"].replace("\n", " ")) in text, check["id"]
        if check["status"] != "ok" and check["fix"]:
            assert _squash(check["fix"].replace("\n", " ")) in text, check["id"]


def _cells(text: str, column: int) -> str:
    """The text of one column of a rich table (box drawn in Unicode or ASCII), joined."""
    out = []
    for line in text.splitlines():
        parts = re.split(r"[\u2502|]", line)
        if len(parts) > column + 1:
            out.append(parts[column].strip())
    return "".join(out).replace(" ", "")


@pytest.mark.slow
def test_attack3_at_40_columns_text_wraps_and_tables_fold(facts: str) -> None:
    plan = json.loads(run_cli("resolve", "--facts", facts, "--json").stdout)
    code, text = run_cli_pty("resolve", "--facts", facts, "--explain", cols=40,
                             env={"COLUMNS": "40", "NO_COLOR": "1"})
    assert code == 0 and "\u2026" not in text, text
    flat = _squash(text)
    shown = ("python", "torch", "variant", "cuda", "cudnn", "nccl", "torchvision", "torchaudio", "index_url")
    for line in [*plan["reasons"], *plan["warnings"], *(plan["why"][k] for k in shown if k in plan["why"])]:
        assert _squash(line) in flat, line
    unknown = json.loads(run_cli("matrix", "show", "--unknown", "--json").stdout)
    code, text = run_cli_pty("matrix", "show", "--unknown", cols=40, env={"COLUMNS": "40", "NO_COLOR": "1"})
    assert code == 0 and "\u2026" not in text
    flat = _squash(text)
    for row in unknown:
        assert _squash(row["reason"]) in flat and _squash(row["blocks"]) in flat
    facts = json.loads(run_cli("detect", "--json").stdout)
    code, text = run_cli_pty("detect", cols=40, env={"COLUMNS": "40", "NO_COLOR": "1"})
    assert code == 0 and "\u2026" not in text
    values = _cells(text, 2)
    for reason in facts["reasons"].values():
        assert reason.replace(" ", "") in values, reason


@pytest.mark.slow
def test_attack3_doctor_at_40_columns_wraps_and_cuts_nothing() -> None:
    as_json = json.loads(run_cli("doctor", "--json").stdout)
    code, text = run_cli_pty("doctor", cols=40, env={"COLUMNS": "40", "TERM": "dumb"})
    assert code in (0, 1) and "\u2026" not in text
    flat = _squash(text)
    for check in as_json["checks"]:
        assert _squash(check["evidence"]) in flat, check["id"]
