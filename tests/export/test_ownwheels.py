"""export/ownwheels.py: the wheel of the running torchfit, for an image built without an index."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def test_torchfit_s_own_wheel_is_one_pip_installs(tmp_path: Path) -> None:
    """The wheel of the running torchfit, as the CLI runs it (PYTHONPATH=src, where `pip install -e`
    left an egg-info): its RECORD matches its files and pip reads its name and version."""
    import base64
    import hashlib
    import sys
    import zipfile

    from tests.installer.conftest import tf_env

    code = f"from torchfit.export.ownwheels import write_own_wheel; print(write_own_wheel({str(tmp_path)!r}))"
    made = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=tf_env(tmp_path))
    assert made.returncode == 0, made.stderr
    wheel = Path(made.stdout.strip())
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        for line in record.splitlines():
            arc, digest, _ = line.rsplit(",", 2)
            if digest:
                got = base64.urlsafe_b64encode(hashlib.sha256(zf.read(arc)).digest()).rstrip(b"=").decode()
                assert digest == f"sha256={got}", arc
    assert "torchfit/workers/build_worker.py" in names and "torchfit/data/matrix.toml" in names
    assert not any("__pycache__" in n for n in names)
    report = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
                             "--quiet", "--report", "-", str(wheel)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    meta = json.loads(report.stdout)["install"][0]["metadata"]
    assert meta["name"] == "torchfit" and wheel.name == f"torchfit-{meta['version']}-py3-none-any.whl"
