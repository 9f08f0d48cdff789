"""workers/build_worker.py, run by a real interpreter: what it reads without importlib.metadata
must be what importlib.metadata says, and its record must be one the host side reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from torchfit.installer.buildcheck import parse_probe, probe_argv
from torchfit.workers import script

METADATA_DISTS = r"""
import json
from importlib import metadata
seen = {}
for d in metadata.distributions():
    name = d.metadata["Name"]
    if name and name not in seen:
        seen[name] = d.version
print(json.dumps(seen))
"""


def _fake_torch_env(tmp_path: Path) -> Path:
    """A venv whose site-packages holds a torch/version.py and two dist-info directories."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise ImportError('never imported by the check')\n")
    (site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\nhip = None\n")
    for name, version, extra in (("torch", "2.13.0+cpu", "Summary: x\n"), ("Jinja2", "3.1.6", "")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        # headers end at the first blank line; a Version: in the body is not a header
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra}\n"
                                       "Version: 9.9 (body text)\n")
    return env


def test_the_check_reads_what_importlib_metadata_reads(tmp_path: Path) -> None:
    env = _fake_torch_env(tmp_path)
    python = str(env / "bin" / "python")
    res = subprocess.run(probe_argv(python, "", False), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    probe = parse_probe(res.stdout)
    want = json.loads(subprocess.run([python, "-c", METADATA_DISTS], capture_output=True, text=True,
                                     timeout=120).stdout)
    assert probe["dists"] == want and want["torch"] == "2.13.0+cpu" and want["Jinja2"] == "3.1.6"
    assert probe["torch"]["__version__"] == "2.13.0+cpu" and probe["torch"]["cuda"] is None
    assert probe["python"] == "{}.{}.{}".format(*sys.version_info[:3]) and "nccl" not in probe


def test_no_torch_is_reported_not_raised(tmp_path: Path) -> None:
    env = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    res = subprocess.run(probe_argv(str(env / "bin" / "python"), "", False), capture_output=True, text=True,
                         timeout=120)
    probe = parse_probe(res.stdout)
    assert res.returncode == 0 and probe["torch_error"] == "torch is not installed in this env"


def test_the_record_marker_is_the_runtime_protocols() -> None:
    text = Path(script("build")).read_text()
    runtime = Path(script("build")).with_name("torchfit_runtime.py").read_text()
    marker = next(ln for ln in runtime.splitlines() if ln.startswith("MARKER = "))
    assert marker in text.splitlines()
