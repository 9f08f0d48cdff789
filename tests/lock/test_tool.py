"""lock/tool.py: `[tool.torchfit]` read in every shape torchfit has written (locks on disk outlive
the code that wrote them), written in one, and built the same way by install, adopt, add and
export."""

from __future__ import annotations

import pytest

from torchfit._backports import tomllib
from torchfit.compat.facts import HostFacts
from torchfit.errors import BadInput
from torchfit.lock.model import Artifact, Lock, LockedDist, NcclPin
from torchfit.lock.pylock import parse_lock, parse_pylock, render_lock
from torchfit.lock.tool import ToolTable

SHA = "a" * 64
PACKAGE = f"""lock-version = "1.0"
[[packages]]
name = "torch"
version = "2.13.0+cpu"
wheels = [{{ url = "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl", hashes = {{ sha256 = "{SHA}" }} }}]
"""

# Each shape as its writer wrote it (git history of installer/flow.py, export/pylock.py,
# verify/adopt.py, installer/add.py, cli/commands/pack.py).
INSTALL = PACKAGE + """
[tool.torchfit]
schema = 1
torchfit-version = "0.9.0"
created = "2026-12-01T10:00:00Z"
installer = "uv"
python-version = "3.11.9"
torch-index-url = "https://user:***@mirror.example/whl/cpu"
family = ["torch"]
sources = ["torch: https://mirror.example/whl/cpu"]
rebuilt-from = "/old/pylock.toml"
[tool.torchfit.request]
args = ["torch==2.13.0"]
strict-driver = false
[tool.torchfit.nccl]
mechanism = "none"
[tool.torchfit.expected]
torch = "2.13.0+cpu"
[tool.torchfit.plan]
ok = true
python = "3.11"
python_version = "3.11.9"
torch = "2.13.0"
variant = "cpu"
[[tool.torchfit.hosts]]
name = "node1"
"""

# `export --format pylock` before [tool.torchfit] had a schema: the stack's own keys.
OLD_EXPORT = PACKAGE + """
[tool.torchfit]
torch = "2.13.0"
variant = "cpu"
python = "3.11"
index-url = "https://download.pytorch.org/whl/cpu"
project = ["pure-pkg"]
constraints = ["helper<2"]
"""

# a pack's group lock before: that export's keys and install's side by side
OLD_PACK = PACKAGE + """
[tool.torchfit]
torch = "2.13.0"
variant = "cpu"
python = "3.11"
index-url = "https://download.pytorch.org/whl/cpu"
schema = 1
torch-index-url = "https://download.pytorch.org/whl/cpu"
[tool.torchfit.nccl]
mechanism = "none"
[tool.torchfit.plan]
ok = true
python = "3.11"
python_version = "3.11.9"
torch = "2.13.0"
variant = "cpu"
"""

# the accessor's older single host table
OLD_HOST = PACKAGE + """
[tool.torchfit]
schema = 1
[tool.torchfit.plan]
torch = "2.13.0"
[tool.torchfit.host]
name = "only"
"""

# an adopted env that add grew, and a key a newer torchfit wrote
ADOPTED_AND_ADDED = PACKAGE + """
[tool.torchfit]
schema = 1
installer = "adopted"
family = ["torch"]
future-key = "kept"
[tool.torchfit.base]
label = "nv25.08"
[tool.torchfit.base.family]
torch = "2.8.0a0+5228986c39.nv25.08"
[tool.torchfit.plan]
torch = "2.8.0"
[[tool.torchfit.added]]
at = "2026-12-01T10:00:00Z"
requirements = ["pkg-b"]
accepted-base-label = ["pkg-b 1.0: torch==2.8.0"]
"""


def test_an_install_lock_reads_key_by_key() -> None:
    lock = parse_lock(INSTALL, "pylock.toml")
    tool = lock.tool
    assert tool.schema == 1 and tool.installer == "uv" and tool.python_version == "3.11.9"
    assert lock.torch_index_url() == "https://user:***@mirror.example/whl/cpu"
    assert tool.family == ("torch",) and tool.rebuilt_from == "/old/pylock.toml"
    assert lock.request()["args"] == ["torch==2.13.0"] and lock.pin() == {"mechanism": "none"}
    assert lock.plan()["variant"] == "cpu" and lock.hosts() == [{"name": "node1"}]
    assert lock.expected() == {"torch": "2.13.0+cpu"} and tool.extra == {}


def test_an_install_lock_is_written_back_with_the_same_keys() -> None:
    lock = parse_lock(INSTALL, "pylock.toml")
    before = tomllib.loads(INSTALL)["tool"]["torchfit"]
    assert tomllib.loads(render_lock(lock))["tool"]["torchfit"] == before


def test_an_export_written_before_the_schema_reads_as_a_plan() -> None:
    lock = parse_pylock(OLD_EXPORT, "export.toml")
    assert lock.torch_index_url() == "https://download.pytorch.org/whl/cpu"  # its index-url
    assert dict(lock.plan()) == {"torch": "2.13.0", "variant": "cpu", "python": "3.11", "project": ["pure-pkg"],
                                 "constraints": ["helper<2"]}
    # still no lock install --lock rebuilds from (it never was)
    with pytest.raises(BadInput, match="schema None"):
        parse_lock(OLD_EXPORT, "export.toml")


def test_a_pack_group_lock_written_before_reads_with_its_plan_first() -> None:
    lock = parse_lock(OLD_PACK, "group.toml")
    assert lock.torch_index_url() == "https://download.pytorch.org/whl/cpu"
    assert lock.plan()["python_version"] == "3.11.9" and lock.plan()["variant"] == "cpu"
    written = tomllib.loads(render_lock(lock))["tool"]["torchfit"]
    assert "index-url" not in written and written["torch-index-url"] == "https://download.pytorch.org/whl/cpu"


def test_the_older_single_host_table_is_read_and_kept() -> None:
    lock = parse_lock(OLD_HOST, "pylock.toml")
    assert lock.hosts() == [{"name": "only"}]
    assert tomllib.loads(render_lock(lock))["tool"]["torchfit"]["host"] == {"name": "only"}


def test_an_adopted_and_grown_lock_keeps_its_history_and_unknown_keys() -> None:
    lock = parse_pylock(ADOPTED_AND_ADDED, "pylock.toml")
    assert [d.version for d in lock.family()] == ["2.8.0a0+5228986c39.nv25.08"]
    assert lock.tool.accepted_base_labels() == ["pkg-b 1.0: torch==2.8.0"]
    grown = lock.tool.with_added({"torch": "2.8.0", "project": ["pkg-c"]}, ["pkg-c"], ["torch: x"])
    written = tomllib.loads(render_lock(Lock(packages=lock.packages, tool=grown)))["tool"]["torchfit"]
    assert written["future-key"] == "kept" and written["base"]["label"] == "nv25.08"
    assert [h["requirements"] for h in written["added"]] == [["pkg-b"], ["pkg-c"]]
    assert written["plan"]["project"] == ["pkg-c"] and written["added"][1]["at"].endswith("Z")


def test_wrong_types_read_as_missing_and_a_bad_index_url_is_refused() -> None:
    tool = ToolTable.from_toml({"plan": "text", "hosts": "x", "family": 3, "expected": []}, "here")
    assert tool.plan is None and tool.hosts is None and tool.family is None and tool.expected is None
    bad = PACKAGE + '[tool.torchfit]\nschema = 1\nindex-url = "ftp://x"\n[tool.torchfit.plan]\ntorch = "2"\n'
    with pytest.raises(BadInput, match="index-url"):
        parse_pylock(bad, "pylock.toml")


def test_the_builders_write_one_schema() -> None:
    from torchfit.compat.plan import Plan

    plan = Plan(python="3.11", python_version="3.11.9", python_source="installed", python_path=None,
                torch="2.13.0", variant="cpu", cuda=None, rocm=None, cudnn=None, nccl=None, torchvision=None,
                torchaudio=None, index_url="https://download.pytorch.org/whl/cpu", packages=("torch",), reasons=(),
                warnings=())
    pin = NcclPin("none")
    installed = ToolTable.for_install(plan, pin, "https://u:secret@mirror/whl/cpu", [HostFacts(arch="x86_64")],
                                      installer="uv", python_version="3.11.9", family=["torch"], args=["torch"],
                                      strict_driver=False, rebuilt_from=None, sources=["s"], expected={"torch": "2"})
    exported = ToolTable.for_export(torch="2.13.0", variant="cpu", python="3.11",
                                    torch_index="https://download.pytorch.org/whl/cpu", project=["p"], constraints=[])
    packed = exported.installable(plan, pin, exported.torch_index_url, [HostFacts(arch="x86_64")])
    for table in (installed, exported, packed):
        assert table.schema == 1 and table.plan is not None and "index-url" not in table.to_toml()
    assert installed.torch_index_url == "https://u:***@mirror/whl/cpu" and installed.hosts
    assert exported.hosts is None and exported.plan == {"torch": "2.13.0", "variant": "cpu", "python": "3.11",
                                                         "project": ["p"], "constraints": None}
    assert packed.plan is not None and packed.plan["python_version"] == "3.11.9" and packed.hosts
    adopted = ToolTable.for_adopt(python="3.11.9", torch="2.8.0", variant="cu128", family={"torch": "2.8.0a0"},
                                  installed={"torch": "2.8.0a0"}, base={"family": {"torch": "2.8.0a0"}},
                                  expected={"torch": "2.8.0a0"}, created="2026-12-01T10:00:00Z")
    lock = Lock(packages=(LockedDist("x", "1", (Artifact("wheel", SHA, "https://h/x-1-py3-none-any.whl"),)),),
                tool=adopted)
    assert parse_pylock(render_lock(lock), "p").tool == adopted
