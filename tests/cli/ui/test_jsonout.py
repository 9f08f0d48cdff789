"""Every `--json` object names its schema, and real outputs validate against the JSON Schemas
published in docs/schemas/ (cli/ui/jsonout.py; issue 28, item 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.conftest import ROOT
from tests.support.cli import run_cli
from tests.support.fleets import fleet_file

SCHEMAS = ROOT / "docs" / "schemas"


def kinds_in_source() -> set[str]:
    """The kinds the CLI prints: every json_text("KIND", ...) call in src/."""
    found: set[str] = set()
    for path in (ROOT / "src" / "torchfit").rglob("*.py"):
        found |= set(re.findall(r"json_text\(\s*\"([a-z-]+)\"", path.read_text(encoding="utf-8")))
    return found


def validate(data: dict[str, Any]) -> str:
    """Validate `data` against the schema its "schema" key names; the kind."""
    m = re.fullmatch(r"torchfit\.([a-z-]+)/1", str(data.get("schema")))
    assert m, f"no schema key: {list(data)[:5]}"
    schema = json.loads((SCHEMAS / f"{m.group(1)}.schema.json").read_text())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]
    assert not errors, errors
    return m.group(1)


def output(*args: str, rc: int | tuple[int, ...] = 0) -> dict[str, Any]:
    proc = run_cli(*args, timeout=300)
    assert proc.returncode in ((rc,) if isinstance(rc, int) else rc), (proc.returncode, proc.stderr[-2000:])
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_every_kind_has_a_valid_published_schema() -> None:
    kinds = kinds_in_source()
    assert {"error", "detect", "resolve", "install", "add", "verify", "doctor", "config"} <= kinds, kinds
    published = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert kinds == published, (kinds ^ published)
    for kind in kinds:
        schema = json.loads((SCHEMAS / f"{kind}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["schema"] == {"const": f"torchfit.{kind}/1"}
        assert "schema" in schema["required"]


def test_a_schema_rejects_what_it_should() -> None:
    """The schemas are not vacuous: a doctor object without its checks, or with a bad status, fails."""
    data = output("doctor", "--list", "--json")
    assert validate(data) == "doctor-list"
    with pytest.raises(AssertionError):
        validate({**data, "checks": [{"id": "x"}]})
    with pytest.raises(AssertionError):
        validate({**data, "schema": "torchfit.doctor-list/0"})


def test_real_outputs_validate(tmp_path: Path) -> None:
    seen = {
        validate(output("detect", "--json")),
        validate(output("config", "--json")),
        validate(output("resolve", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--json")),
        validate(output("doctor", "--json", rc=(0, 1))),
        validate(output("resolve", "--bogus", "--json", rc=2)),
        validate(output("resolve", "torch==2.13.0", "--facts", str(fleet_file(tmp_path, 4, 2)), "--each-group",
                        "--json", rc=(0, 1))),
    }
    assert seen == {"detect", "config", "resolve", "doctor", "error", "resolve-groups"}


def test_a_fleet_file_with_its_schema_key_is_read_back(tmp_path: Path) -> None:
    """The objects torchfit reads back (--facts: a host's facts, a fleet file) accept their schema key."""
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(output("detect", "--json")))
    validate(output("resolve", "torch==2.13.0", "--variant", "cpu", "--python", "3.11", "--facts", str(facts),
                    "--json"))
    fleet = tmp_path / "fleet.json"
    data = json.loads(fleet_file(tmp_path, 4, 2).read_text())
    fleet.write_text(json.dumps({"schema": "torchfit.fleet/1", **data}))
    validate({"schema": "torchfit.fleet/1", **data})
    validate(output("resolve", "torch==2.13.0", "--facts", str(fleet), "--each-group", "--json", rc=(0, 1)))


@pytest.mark.slow
def test_install_add_and_verify_outputs_validate(tmp_path: Path) -> None:
    """A real CPU env from the local torch 2.13.0 wheel: install, add, verify and doctor --fix --json."""
    from tests.installer.conftest import CPU_ARGS, CPU_WHEEL, make_simple_index, run_tf

    if not CPU_WHEEL.is_file():
        pytest.skip(f"{CPU_WHEEL} is not on this machine")
    index = make_simple_index(tmp_path / "mirror", [CPU_WHEEL]).as_uri()
    prefix, state = tmp_path / "env", tmp_path / "state"

    def tf(*args: str, rc: tuple[int, ...] = (0,)) -> dict[str, Any]:
        proc = run_tf(*args, state=state)
        assert proc.returncode in rc, proc.stderr[-2000:]
        data: dict[str, Any] = json.loads(proc.stdout)
        return data

    assert validate(tf("install", *CPU_ARGS, "--torch-index-url", index, "--prefix", str(prefix), "--json")) \
        == "install"
    assert validate(tf("add", "torch", "--env", str(prefix), "--json")) == "add"
    assert validate(tf("verify", "--env", str(prefix), "--no-bandwidth", "--json", rc=(0, 1))) == "verify"
    assert validate(tf("doctor", "--env", str(prefix), "--fix", "--dry-run", "--json", rc=(0, 1))) == "doctor"
