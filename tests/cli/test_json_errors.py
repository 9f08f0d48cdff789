"""One `--json` error object, one shape, for every command (issue 10; docs/architecture.md, Contracts: keys may
be added, never renamed). Real subprocesses: the boundary in cli/ prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_facts
from tests.support.cli import run_cli
from torchfit.compat.facts import facts_to_json

SHAPE = {"ok", "error", "reference", "hint"}


def _facts(tmp_path: Path, **kw: object) -> str:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(facts_to_json(make_facts(**kw))))  # type: ignore[arg-type]
    return str(path)


def _error_object(out: str) -> dict[str, object]:
    data = json.loads(out)
    assert isinstance(data, dict) and SHAPE <= set(data), data
    assert data["ok"] is False and isinstance(data["error"], str) and data["error"]
    return data


def test_resolve_conflict_keeps_its_keys_and_gains_the_common_ones(tmp_path: Path) -> None:
    out = run_cli("resolve", "--facts", _facts(tmp_path, driver="470.82.01", gpus=["sm_90"]), "--json",
                  "torch>=2.7")
    assert out.returncode == 1, out.stderr
    data = _error_object(out.stdout)
    assert data["reference"] == "no-compatible-set"
    assert data["conflicts"] and data["hints"] and data["hint"] == data["hints"][0]  # type: ignore[index]
    assert str(data["error"]).startswith("no compatible set: ")


@pytest.mark.parametrize(
    "argv, reference",
    [
        (["resolve", "--json", "--python", "two"], "bad-input"),
        (["install", "--json", "--prefix", " "], "bad-input"),
        (["verify", "--json", "--env", "/nonexistent/env"], "bad-input"),
        (["doctor", "--json", "--env", "/nonexistent/prefix"], "bad-input"),
        (["matrix", "check", "--json", "--torch", "1.0"], "bad-input"),
        (["resolve", "--json", "--facts", "/nonexistent/node.json"], "bad-input"),
    ],
)
def test_every_command_fails_with_the_same_object(argv: list[str], reference: str) -> None:
    out = run_cli(*argv)
    assert out.returncode == 2, (out.stdout, out.stderr)
    data = _error_object(out.stdout)
    assert data["reference"] == reference
    # stderr still has the one human line, saying the same thing.
    assert out.stderr.strip().splitlines()[0].startswith(f"torchfit: error: {data['error']}")
    assert "Traceback" not in out.stderr


def test_without_json_stdout_stays_empty() -> None:
    out = run_cli("doctor", "--env", "/nonexistent/prefix")
    assert out.returncode == 2 and out.stdout == ""
