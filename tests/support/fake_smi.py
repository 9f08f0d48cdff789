"""Fake `nvidia-smi` scripts shared by the tests and scripts/gen_screens.py (one copy each).

Each is a POSIX sh script that answers the queries torchfit makes the way a real
nvidia-smi does on that host; `install_fake_smi` writes one into a directory that a test
puts first on PATH. Pure data plus one writer: importable from scripts/ without pytest.
"""

from __future__ import annotations

from pathlib import Path

# 8x H100 on a driver too old for any CUDA build torchfit knows (418): the conflict screen.
EIGHT_H100 = """#!/bin/sh
case "$*" in
  *--query-gpu=*)
    i=0
    while [ $i -lt 8 ]; do
      printf '%d, NVIDIA H100 80GB HBM3, 9.0, 81559, GPU-%d, 00000000:%02d:00.0, 418.87.01\\n' $i $i $((i+16))
      i=$((i+1))
    done ;;
  *) exit 3 ;;
esac
"""

# The state after a driver upgrade without a reboot (exit 18 is NVML's "version mismatch").
NVML_MISMATCH = """#!/bin/sh
echo "Failed to initialize NVML: Driver/library version mismatch"
echo "NVML library version: 580.95"
exit 18
"""

# A GPU that fell off the bus: nvidia-smi never returns.
HANGS = "#!/bin/sh\nexec sleep 600\n"


def install_fake_smi(directory: Path, script: str) -> Path:
    """Write `script` as DIRECTORY/nvidia-smi (executable); return DIRECTORY (for PATH)."""
    directory.mkdir(parents=True, exist_ok=True)
    smi = directory / "nvidia-smi"
    smi.write_text(script)
    smi.chmod(0o755)
    return directory


def fake_smi_env(tmp_path: Path, script: str) -> dict[str, str]:
    """A clean environment (tests.support.cli.clean_env) whose PATH starts with a directory
    holding `nvidia-smi` = script."""
    import os

    from tests.support.cli import clean_env

    d = install_fake_smi(tmp_path / "bin", script)
    env = clean_env()
    env["PATH"] = f"{d}{os.pathsep}{env['PATH']}"
    return env
