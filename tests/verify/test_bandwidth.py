"""verify/bandwidth.py: the bandwidth promise of the links (host.links) and the sweep judged against it."""

from __future__ import annotations

from pathlib import Path

import pytest

import torchfit.host.links as hlinks
import torchfit.verify.bandwidth as vbw
from tests.verify.conftest import H200


def test_promise_nv18_on_h200() -> None:
    from torchfit.host.nvidia import parse_topology

    topo = parse_topology((H200 / "topo-m.txt").read_text())
    nvlink = hlinks.parse_nvlink_status((H200 / "nvlink-s.txt").read_text())
    gbps, why = vbw.link_promise((0, 1), topo, nvlink, {})
    assert gbps == pytest.approx(18 * 26.562) and "NV18" in why


def test_promise_pcie_uses_the_max_link() -> None:
    pcie = hlinks.parse_pcie_query("0, 5, 16\n1, 4, 16\n")
    gbps, why = vbw.link_promise((0, 1), {"0-1": "SYS"}, {}, pcie)
    assert gbps == pytest.approx(1.969 * 16) and "gen4 x16" in why


ROWS_P2P_OFF = [{"bytes": 1 << 30, "busbw": 27.0}, {"bytes": 1 << 20, "busbw": 9.0}]  # docs/architecture.md, Contracts


def test_low_bandwidth_warns_and_names_p2p_disable() -> None:
    causes = vbw.bandwidth_causes({"NCCL_P2P_DISABLE": "1"}, {"0-1": "NV18"}, [(0, 1)])
    check = vbw.judge_bandwidth(ROWS_P2P_OFF, 478.1, "NV18 x 26.562 GB/s per link", causes)
    assert check.status == "warn"
    assert "6%" in check.summary and any("NCCL_P2P_DISABLE=1" in d for d in check.detail)


def test_healthy_bandwidth_passes_and_small_sweeps_are_not_judged() -> None:
    assert (
        vbw.judge_bandwidth([{"bytes": 1 << 30, "busbw": 322.0}], 478.1, "NV18", []).status
        == "pass"
    )
    small = vbw.judge_bandwidth([{"bytes": 1 << 20, "busbw": 22.0}], 478.1, "NV18", [])
    assert small.status == "pass" and "not judged" in small.summary


def test_one_rank_sweep_is_skipped_not_passed() -> None:
    """Seen on the H200 with CUDA_VISIBLE_DEVICES=0,7: one rank, busbw 0.0 everywhere."""
    rows = [{"bytes": 1 << 20, "busbw": 0.0}, {"bytes": 1 << 30, "busbw": 0.0}]
    check = vbw.judge_bandwidth(rows, None, "topology unknown", [])
    assert check.status == "skip" and "one rank" in check.summary


def test_topology_without_nvlink_is_named() -> None:
    causes = vbw.bandwidth_causes({}, {"0-1": "SYS"}, [(0, 1)])
    assert causes and "SYS" in causes[0]
    check = vbw.judge_bandwidth([{"bytes": 1 << 30, "busbw": 2.0}], 31.5, "SYS: PCIe gen4 x16", [])
    assert check.status == "warn" and "NCCL_DEBUG=INFO" in check.detail[0]


def fake_nvidia_smi(tmp_path: Path) -> dict[str, str]:
    """A `nvidia-smi` on PATH that prints what the 2x H200 printed (docs/architecture.md, Contracts: tests
    replay real outputs through real subprocesses)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f'case "$*" in\n'
        f'  "topo -m") cat {H200 / "topo-m.txt"} ;;\n'
        f'  "nvlink -s") cat {H200 / "nvlink-s.txt"} ;;\n'
        '  *pcie.link.gen.max*) printf "0, 5, 16\\n1, 5, 16\\n" ;;\n'
        '  *index,uuid*) printf "0, GPU-f8bc9204-0d7a-9f0a-4df6-141201a3d983\\n'
        '1, GPU-8be0f050-085f-9b7e-21da-1855ef30ef36\\n" ;;\n'
        "  *) exit 9 ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    import os

    return {"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_probe_links_and_the_promise_from_a_replayed_h200(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, val in fake_nvidia_smi(tmp_path).items():
        monkeypatch.setenv(k, val)
    links = hlinks.probe_links(timeout=10)
    assert links["topology"] == {"0-1": "NV18"} and links["reason"] is None
    assert links["nvlink"][1] == [26.562] * 18 and links["pcie"] == {0: (5, 16), 1: (5, 16)}
    # torch reports the UUID without the "GPU-" prefix
    gpus = [
        {"index": 0, "uuid": "8be0f050-085f-9b7e-21da-1855ef30ef36"},
        {"index": 1, "uuid": "f8bc9204-0d7a-9f0a-4df6-141201a3d983"},
    ]
    used = vbw.smi_indices(gpus, links["uuids"], "1,0")
    assert used == [1, 0]
    rows = [{"bytes": 1 << 30, "busbw": 322.0, "algbw": 322.0}]
    data, check = vbw.bandwidth_report(rows, links, used, {}, multi=False, backend="nccl")
    assert data["promise_gbps"] == pytest.approx(478.1, abs=0.1) and data[
        "fraction"
    ] == pytest.approx(0.673, abs=0.001)
    assert check.status == "pass" and "NV18 x 26.562 GB/s per link" in check.summary
    _, slow = vbw.bandwidth_report(
        [{"bytes": 1 << 30, "busbw": 27.0}], links, used, {"NCCL_P2P_DISABLE": "1"}, False, "nccl"
    )
    assert slow.status == "warn" and "NCCL_P2P_DISABLE=1" in slow.detail[0]

