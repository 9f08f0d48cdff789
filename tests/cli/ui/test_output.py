"""cli/ui/output.write_output under attack (issue 21, class 0b): `-o FILE` on a full disk
leaves the FILE that was there whole (82c371b truncated it, wrote the first block and said
"bad input", exit 2). Real: a tmpfs filled to its last byte, the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.installer.conftest import CPU_WHEEL
from tests.support.cli import run_cli
from tests.support.mounts import fill, tmpfs

OLD = "the previous probe records, still needed\n"


@pytest.mark.slow
def test_attack3_probe_output_on_a_full_disk_keeps_the_old_file(tmp_path: Path) -> None:
    if not CPU_WHEEL.is_file():
        pytest.skip(f"{CPU_WHEEL} is not on this machine")
    with tmpfs(tmp_path / "fs", "64k") as fs:
        target = fs / "probe.json"
        target.write_text(OLD)
        target.chmod(0o640)
        fill(fs)
        # Six records: about 7 KB, more than the block the old file frees.
        res = run_cli("matrix", "probe", *[str(CPU_WHEEL)] * 6, "--output", str(target), "--json",
                      env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
        assert res.returncode == 1, res.stderr
        assert "[disk-full]" in res.stderr and "the file there is unchanged" in res.stderr
        assert str(target) in res.stderr and "Traceback" not in res.stderr
        assert target.read_text() == OLD and (target.stat().st_mode & 0o777) == 0o640
        assert sorted(p.name for p in fs.iterdir()) == ["fill", "fill2", "probe.json"]
        assert json.loads(res.stdout)["reference"] == "disk-full"  # --json: one error object
    # With room, the file is replaced whole, keeping its mode.
    res = run_cli("matrix", "probe", str(CPU_WHEEL), "--output", str(tmp_path / "ok.json"),
                  env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=120)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "ok.json").read_text())[0]["version"] == "2.13.0+cpu"
