"""The pure parts of verify: parsers, decoders, coverage, the judges. Data in, checks out."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import torchfit.host.links as hlinks
import torchfit.lock.pylock as pylock
import torchfit.verify.bandwidth as vbw
import torchfit.verify.ddp as vddp
import torchfit.verify.inspection as vinsp
import torchfit.verify.model as vmodel
import torchfit.verify.peers as vpeers
import torchfit.verify.sizes as vsizes
import torchfit.verify.slurm as vslurm
import torchfit.verify.watch as vwatch
from torchfit.compat.tags import parse_arch_list
from torchfit.compat.versions import Arch
from torchfit.errors import BadInput
from torchfit.workers import MARKER, WORKERS_DIR, read_records
from torchfit.workers import torchfit_runtime as rt

DATA = Path(__file__).resolve().parents[1] / "data" / "verify"
# The H200 captures live once, in tests/data/h200-x2 (PROVENANCE.md there).
H200 = Path(__file__).resolve().parents[1] / "data" / "h200-x2"
H200_ARCHS = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # data/torch-info.txt


# --- sizes, codes, versions ------------------------------------------------------------


@pytest.mark.parametrize(
    "text, want",
    [
        ("1M", 1 << 20),
        ("1MiB", 1 << 20),
        ("512k", 512 << 10),
        ("1G", 1 << 30),
        ("8GiB", 8 << 30),
        ("65536", 65536),
    ],
)
def test_parse_size(text: str, want: int) -> None:
    assert vsizes.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "1X", "-1M", "3", "1.1", "M"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(BadInput):
        vsizes.parse_size(text)


def test_parse_sizes_accepts_words_and_commas() -> None:
    assert vsizes.parse_sizes(["1G,1M", "4M", "1M"]) == (1 << 20, 4 << 20, 1 << 30)


@given(st.text(max_size=30))
def test_parse_size_fuzz(text: str) -> None:
    try:
        assert vsizes.parse_size(text) > 0
    except BadInput:
        pass


def test_default_sweep_is_1mib_to_1gib_and_cheap() -> None:
    assert (
        vsizes.DEFAULT_SIZES[0] == 1 << 20
        and vsizes.DEFAULT_SIZES[-1] == 1 << 30
        and len(vsizes.DEFAULT_SIZES) == 11
    )
    plan = vsizes.iteration_plan(vsizes.DEFAULT_SIZES)
    # Bytes moved by the whole default sweep at the measured 2x H200 busbw (~330 GB/s,
    # algbw = busbw for 2 ranks): far below a second, so the 30 s budget is start-up.
    total_bytes = sum(n * (w + i) for n, (w, i) in plan.items())
    assert total_bytes / 330e9 < 1.0
    assert vsizes.iteration_plan([1 << 20], iters=3, warmup=1) == {1 << 20: (1, 3)}


@pytest.mark.parametrize(
    "code, want",
    [
        (22809, "2.28.9"),
        (22803, "2.28.3"),
        (23007, "2.30.7"),
        (2708, "2.7.8"),
        (8902, "8.9.2"),
        (91002, "9.10.2"),
    ],
)
def test_decode_version_code(code: int, want: str) -> None:
    assert vinsp.code_text(code) == want


def test_decode_cuda_code_and_compiled() -> None:
    assert vinsp.cuda_code_text(13000) == "13.0" and vinsp.cuda_code_text(12080) == "12.8"
    assert vinsp.format_compiled([2, 28, 9]) == "2.28.9" and vinsp.format_compiled(2708) == "2.7.8"
    assert vinsp.format_compiled(None) is None


def test_same_release_is_what_verify_compares() -> None:
    from torchfit.compat.versions import same_release

    assert same_release("9.10.2.21", "9.10.2", 3)  # a lock's cuDNN wheel against the runtime's
    assert same_release("12.8", "12.8", 3)
    assert not same_release("2.28.9", "2.28.3", 3)
    assert not same_release("2.28.9", None, 3)


# --- arch coverage (compat.versions.coverage on the worker's raw list) -----------------


@pytest.mark.parametrize(
    "cc, archs, kind",
    [
        ("9.0", H200_ARCHS, "native"),  # the H200 and its torch 2.11.0+cu130
        ("8.9", H200_ARCHS, "native"),  # sm_86 SASS runs on 8.9 (same major)
        ("12.1", H200_ARCHS, "native"),
        ("10.3", ["sm_80", "sm_90", "compute_90"], "ptx"),  # 9.0 PTX JIT-compiles forward to 10.3
        ("7.0", H200_ARCHS, "none"),  # V100 is gone from this build
        ("9.0", ["sm_90a"], "native"),
        ("9.1", ["sm_90a"], "none"),
    ],
)
def test_arch_coverage(cc: str, archs: list[str], kind: str) -> None:
    assert vinsp.arch_coverage(cc, archs)[0] == kind


def test_ptx_only_entry_is_not_native() -> None:
    assert parse_arch_list(["compute_90"]) == ((), (Arch(9, 0, ""),))
    assert vinsp.arch_coverage("9.0", ["compute_90"]) == ("ptx", "compute_90")
    assert vinsp.arch_coverage("9.0", ["sm_90", "compute_90"])[0] == "native"


# --- bandwidth promise ------------------------------------------------------------------


def test_nvlink_status_of_the_h200_fixture() -> None:
    links = hlinks.parse_nvlink_status((H200 / "nvlink-s.txt").read_text())
    assert sorted(links) == [0, 1] and links[0] == [26.562] * 18


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


@given(st.text(max_size=400))
def test_link_parsers_never_raise(text: str) -> None:
    hlinks.parse_nvlink_status(text)
    hlinks.parse_pcie_query(text)
    vddp.parse_torchrun_exitcodes(text)
    rt.parse_maps(text)


ROWS_P2P_OFF = [{"bytes": 1 << 30, "busbw": 27.0}, {"bytes": 1 << 20, "busbw": 9.0}]  # DESIGN.md


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


# --- inspection judges --------------------------------------------------------------------


def cuda_facts(**over: Any) -> dict[str, Any]:
    """Inspection facts shaped like the 2x H200 (torch 2.11.0+cu130, fixtures/h200-x2)."""
    facts: dict[str, Any] = {
        "python": {
            "version": "3.12.3",
            "executable": "/usr/bin/python3",
            "prefix": "/opt/torch/.venv",
        },
        "env": {},
        "torch": {
            "version": "2.11.0+cu130",
            "file": "/opt/torch/.venv/lib/python3.12/site-packages/torch/__init__.py",
            "cuda": "13.0",
            "hip": None,
            "nccl_compiled": [2, 28, 9],
            "cudnn_compiled": [9, 19, 0],
        },
        "arch_list": H200_ARCHS,
        "devices": {
            "count": 2,
            "gpus": [
                {"index": 0, "name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771},
                {"index": 1, "name": "NVIDIA H200", "capability": "9.0", "memory_mib": 143771},
            ],
        },
        "libs": {
            "nccl": {
                "code": 22809,
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                "paths": [],
            },
            "cudnn": 91900,
            "cudnn_lib": {
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
            },
            "cudart": {
                "code": 13000,
                "path": "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
            },
        },
        "kernels": [{"index": 0, "ok": True, "ms": 80.0}, {"index": 1, "ok": True, "ms": 12.0}],
        "conv": {"ok": True},
    }
    facts.update(over)
    return facts


def by_name(checks: list[vmodel.Check]) -> dict[str, vmodel.Check]:
    return {c.name: c for c in checks}


def test_healthy_h200_passes_every_inspection_check() -> None:
    checks = by_name(vinsp.judge_inspection(cuda_facts(), None, None, None))
    assert {n: c.status for n, c in checks.items()} == {
        "python": "pass",
        "torch": "pass",
        "gpus": "pass",
        "arch-coverage": "pass",
        "kernels": "pass",
        "nccl": "pass",
        "cudnn": "pass",
    }


def test_ld_preload_of_the_system_nccl_warns_and_names_the_file() -> None:
    # The H200 measurement: LD_PRELOAD of /lib/x86_64-linux-gnu/libnccl.so.2 (2.28.3).
    # Another patch release of the NCCL line torch was built with: a warning, the verdict
    # doctor's nccl-shadowed gives the same file (compat.judgements.judge_runtime_library).
    libs = dict(cuda_facts()["libs"])
    libs["nccl"] = {
        "code": 22803,
        "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3",
        "paths": [],
    }
    facts = cuda_facts(libs=libs, env={"LD_PRELOAD": "/lib/x86_64-linux-gnu/libnccl.so.2"})
    nccl = by_name(vinsp.judge_inspection(facts, None, None, None))["nccl"]
    assert nccl.status == "warn"
    assert (
        nccl.summary
        == "runtime NCCL 2.28.3 from /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3, torch compiled against 2.28.9"
    )
    assert nccl.hint and "LD_PRELOAD" in nccl.hint
    older = dict(libs, nccl={"code": 22703, "path": "/usr/lib/libnccl.so.2.27.3", "paths": []})
    assert by_name(vinsp.judge_inspection(cuda_facts(libs=older), None, None, None))["nccl"].status == "fail"


def test_cpu_torch_has_no_nccl_but_a_preloaded_one_is_mentioned() -> None:
    torch = {"version": "2.13.0+cpu", "cuda": None, "hip": None}
    check = vinsp.judge_nccl(torch, {"nccl": {"code": 23007, "path": "/x/libnccl.so.2"}}, {})
    assert (
        check.status == "skip" and "2.30.7" in check.summary and "/x/libnccl.so.2" in check.summary
    )
    assert vinsp.judge_nccl(torch, {"nccl": {}}, {}).summary == "CPU build of torch: no NCCL"


def test_cuda_visible_devices_with_an_invalid_entry_fails() -> None:
    facts = cuda_facts(env={"CUDA_VISIBLE_DEVICES": "0,7"})
    facts["devices"] = {"count": 1, "gpus": facts["devices"]["gpus"][:1]}
    gpus = by_name(vinsp.judge_inspection(facts, None, None, None))["gpus"]
    assert gpus.status == "fail" and "lists 2 devices but torch sees 1" in gpus.summary


def test_cuda_visible_devices_hiding_every_gpu_fails() -> None:
    facts = cuda_facts(env={"CUDA_VISIBLE_DEVICES": ""}, devices={"count": 0, "gpus": []})
    gpus = by_name(vinsp.judge_inspection(facts, None, None, None))["gpus"]
    assert gpus.status == "fail" and "hides every GPU" in gpus.summary


def test_uncovered_gpu_fails_arch_coverage() -> None:
    facts = cuda_facts(arch_list=["sm_80", "sm_86"])
    cov = by_name(vinsp.judge_inspection(facts, None, None, None))["arch-coverage"]
    assert cov.status == "fail" and "NOT covered" in cov.detail[0]


def test_missing_torch_is_one_clear_failure() -> None:
    facts = {
        "python": {"version": "3.11.7", "prefix": "/e"},
        "torch_error": "ModuleNotFoundError: No module named 'torch'",
    }
    checks = by_name(vinsp.judge_inspection(facts, None, None, None))
    assert (
        checks["torch"].status == "fail"
        and checks["torch"].summary == "torch is not installed in /e"
    )


# --- the lock ---------------------------------------------------------------------------


def test_lock_mismatch_names_the_file_that_runs(tmp_path: Path) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(
        'lock-version = "1.0"\n[tool.torchfit]\nexpected = {torch = "2.11.0", cuda = "13.0", '
        'cudnn = "9.19.0.56", nccl = "2.28.9", other = "x"}\n'
    )
    expected, err = pylock.load_expected(str(lock))
    assert err is None and expected == {
        "torch": "2.11.0",
        "cuda": "13.0",
        "cudnn": "9.19.0.56",
        "nccl": "2.28.9",
    }
    assert (
        vinsp.judge_lock(expected, vinsp.runtime_versions(cuda_facts()), str(lock)).status == "pass"
    )
    libs = dict(cuda_facts()["libs"])
    libs["nccl"] = {"code": 22803, "path": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"}
    check = vinsp.judge_lock(expected, vinsp.runtime_versions(cuda_facts(libs=libs)), str(lock))
    assert check.status == "fail"
    assert (
        check.summary
        == "nccl: lock expects 2.28.9, runs 2.28.3 (runs: /usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3)"
    )


@pytest.mark.parametrize(
    "text", ["not toml [[[", "[tool]\ntorchfit = 3\n", "[tool.torchfit]\nexpected = 5\n", ""]
)
def test_lock_is_read_tolerantly(tmp_path: Path, text: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(text)
    expected, err = pylock.load_expected(str(lock))
    assert (expected is None) == (err is not None) or expected == {}
    assert pylock.load_expected(str(tmp_path / "none.toml")) == (None, None)


# --- DDP judging --------------------------------------------------------------------------


def rank(r: int, *lines: dict[str, Any]) -> vwatch.RankState:
    records = [
        {"kind": "start", "rank": r, "world_size": 2, "local_rank": r, "group_rank": 0},
        *lines,
    ]
    return vwatch.RankState(r, records, "/nonexistent.log")


def stage(name: str, step: str | None = None, t: float = 1.0) -> dict[str, Any]:
    return {"kind": "stage", "stage": name, "step": step, "t": t}


def test_torchrun_exit_codes_from_its_summary() -> None:
    codes = vddp.parse_torchrun_exitcodes((DATA / "torchrun-childfailed-abort.txt").read_text())
    assert codes == {1: -6, 0: 1}


def test_a_peer_reset_is_a_victim_not_the_culprit() -> None:
    victim = rank(
        0,
        stage("allreduce", "collective"),
        {
            "kind": "error",
            "stage": "allreduce",
            "step": "collective",
            "type": "RuntimeError",
            "message": "Connection reset by peer",
            "t": 2.0,
        },
    )
    dead = rank(1, stage("allreduce"))
    checks, _ = vddp.judge_ddp([victim, dead], 2, None, 1, [], 10, False)
    assert checks[0].status == "fail"
    assert checks[0].summary.startswith("rank 1 died at stage 'allreduce' without a Python error")


def test_an_own_error_beats_a_victim() -> None:
    victim = rank(
        0,
        {
            "kind": "error",
            "stage": "allreduce",
            "step": "collective",
            "type": "RuntimeError",
            "message": "reset",
            "t": 2.0,
            "traceback": "x",
        },
    )
    culprit = rank(
        1,
        {
            "kind": "error",
            "stage": "allreduce",
            "step": None,
            "type": "RuntimeError",
            "message": "injected",
            "t": 1.5,
            "traceback": "Traceback...\nRuntimeError: injected",
        },
    )
    checks, _ = vddp.judge_ddp([victim, culprit], 2, None, 1, [], 10, False)
    assert checks[0].summary == "rank 1 failed at stage 'allreduce': RuntimeError: injected"
    assert "RuntimeError: injected" in checks[0].detail


def test_teardown_crash_after_done_is_a_note_not_a_failure() -> None:
    ok = {"kind": "check", "name": "allreduce", "ok": True}
    ranks = [rank(0, ok, {"kind": "done"}), rank(1, ok, {"kind": "done"})]
    tail = (DATA / "torchrun-childfailed-abort.txt").read_text().splitlines()
    checks, notes = vddp.judge_ddp(ranks, 2, None, 1, tail, 10, False)
    assert [c.status for c in checks] == ["pass", "pass"]
    assert any("teardown crash" in n for n in notes)


def test_teardown_crash_does_not_hide_a_failed_check() -> None:
    bad = {
        "kind": "check",
        "name": "allreduce",
        "ok": False,
        "expected": 3.0,
        "got": 1003.0,
        "wrong_elements": 1024,
    }
    ranks = [rank(0, bad, {"kind": "done"}), rank(1, bad, {"kind": "done"})]
    checks, _ = vddp.judge_ddp(ranks, 2, None, -6, [], 10, False)
    assert by_name(checks)["allreduce"].status == "fail"


def test_a_stall_names_the_rank_that_never_joined() -> None:
    waiting = rank(0, stage("allreduce"), stage("allreduce", "collective"))
    stuck = rank(1, stage("allreduce"))
    checks, _ = vddp.judge_ddp(
        [waiting, stuck], 2, {"stage": None, "age": 12.0}, None, [], 10, False
    )
    assert checks[0].summary.startswith(
        "rank 1 stalled at stage 'allreduce' before joining the collective"
    )
    assert "rank 0: waiting inside the 'allreduce' collective" in checks[0].detail


def test_no_rank_started() -> None:
    checks, _ = vddp.judge_ddp([], 2, None, 1, ["ValueError: bad"], 10, False)
    assert checks[0].summary == "torchrun exited 1 before any rank started"


def test_nodes_that_disagree_are_flagged() -> None:
    base = {
        "hostname": "a",
        "nvrm": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build",
        "torch": "2.11.0+cu130",
        "cuda": "13.0",
        "cudnn": 91900,
        "nccl_code": 22809,
        "nccl_path": "/n/libnccl.so.2",
    }
    peers = [
        dict(base, rank=0, group_rank=0, node_rank=0),
        dict(base, rank=1, group_rank=0, node_rank=0),
        dict(
            base,
            rank=2,
            group_rank=1,
            node_rank=1,
            hostname="b",
            nccl_code=22803,
            nccl_path="/usr/lib/libnccl.so.2",
        ),
    ]
    nodes, node_diffs, rank_diffs = vpeers.compare_peers(peers)
    assert [n["ranks"] for n in nodes] == [[0, 1], [2]] and nodes[0]["driver"] == "580.159.04"
    assert node_diffs == ["nccl: node 0 (a) 2.28.9, node 1 (b) 2.28.3"] and rank_diffs == []


# --- the worker's own helpers -----------------------------------------------------------


def test_mapped_libnccl_from_real_maps() -> None:
    regions = rt.parse_maps((DATA / "proc-maps-nccl-preload.txt").read_text())
    assert rt.mapped("nccl", regions) == ["/tmp/tfx/nccl/nvidia/nccl/lib/libnccl.so.2"]
    assert rt.mapped("cudnn", regions) == []
    assert rt.owner_of(0x7F2AF8400010, regions) == "/tmp/tfx/nccl/nvidia/nccl/lib/libnccl.so.2"


def test_slurm_script_is_valid_bash() -> None:
    text = vslurm.format_slurm_script(
        4,
        8,
        "/opt/env/bin/python",
        ["/usr/bin/python3", "-m", "torchfit"],
        partition="gpu",
        extra=["--timeout", "60"],
    )
    assert (
        "#SBATCH --nodes=4" in text
        and "#SBATCH --gpus-per-node=8" in text
        and "#SBATCH --partition=gpu" in text
    )
    assert '--rdzv-endpoint "$TORCHFIT_VERIFY_ENDPOINT"' in text and "srun" in text
    assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0


# --- the nvidia-smi probes, through a fake nvidia-smi replaying the H200 ----------------


def fake_nvidia_smi(tmp_path: Path) -> dict[str, str]:
    """A `nvidia-smi` on PATH that prints what the 2x H200 printed (DESIGN.md: tests
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


def test_torchrun_argv_single_and_several_nodes() -> None:
    one = vwatch.torchrun_argv(
        "/e/bin/python", vmodel.Options(python="/e/bin/python"), 2, "/w/config.json"
    )
    assert one[:8] == [
        "/e/bin/python",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "0",
        "--standalone",
    ]
    assert one[-1] == "/w/config.json" and one[-2].endswith("workers/ddp_worker.py")
    opts = vmodel.Options(
        python="p", nnodes=2, node_rank=1, rdzv_endpoint="node1:29400", rdzv_id="job7"
    )
    many = vwatch.torchrun_argv("p", opts, 8, "c")
    assert (
        many[many.index("--rdzv-backend") + 1] == "c10d"
        and many[many.index("--rdzv-id") + 1] == "job7"
    )
    assert many[many.index("--rdzv-conf") + 1] == "join_timeout=300"
    # On loopback every agent would race to host the store: node rank 0 hosts.
    local = vmodel.Options(python="p", nnodes=2, node_rank=1, rdzv_endpoint="127.0.0.1:29400")
    assert vwatch.rdzv_conf(local) == "join_timeout=300,is_host=0"
    static = vwatch.torchrun_argv(
        "p",
        vmodel.Options(python="p", nnodes=2, node_rank=1, master_addr="h", master_port=5),
        1,
        "c",
    )
    assert "--standalone" not in static and static[static.index("--master-addr") + 1] == "h"


def test_workers_import_nothing_but_stdlib_torch_and_each_other() -> None:
    """They run in the TARGET env, which need not have torchfit (or anything else)."""
    import ast
    import sys as _sys

    if not hasattr(_sys, "stdlib_module_names"):  # Python < 3.10
        pytest.skip("needs sys.stdlib_module_names")
    workers = Path(WORKERS_DIR)
    # importlib_metadata: doctor_worker's guarded fallback for Pythons older than 3.8.
    allowed = {"torch", "torchfit_runtime", "importlib_metadata"} | set(_sys.stdlib_module_names)
    targets = [*sorted(workers.glob("*_worker.py")), workers / "torchfit_runtime.py"]
    # Everything but __init__.py (host side) runs in the target interpreter.
    assert sorted(workers.glob("*.py")) == sorted([*targets, workers / "__init__.py"])
    for path in targets:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_one_record_protocol_on_stdout_and_in_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every worker writes torchfit_runtime records; the host reads them back the same way."""
    assert rt.MARKER == MARKER
    rep = rt.Reporter(None, who="x")
    print("noise from a library")
    rep.stage("import-torch")
    rep.line("fact", key="k", value=[1, 2])
    rep.error(RuntimeError("boom"))
    records = read_records(capsys.readouterr().out)
    assert [r["kind"] for r in records] == ["stage", "fact", "error"]
    assert all(r["who"] == "x" and isinstance(r["t"], float) for r in records)
    assert records[2]["stage"] == "import-torch" and records[2]["message"] == "boom"
    out = tmp_path / "w.jsonl"
    rep = rt.Reporter(str(out), rank=3)
    rep.line("done")
    tail = vwatch.JsonlTail(str(out))
    assert [(r["kind"], r["rank"]) for r in tail.poll()] == [("done", 3)]


def test_lib_kind_is_written_once() -> None:
    from torchfit.doctor import context, shadowing

    # doctor's readers use the worker's function itself, not a copy.
    assert shadowing.lib_kind is rt.lib_kind and context.lib_kind is rt.lib_kind
    assert [
        rt.lib_kind(p)
        for p in (
            "/a/libnccl.so.2",
            "libcudnn.so.9",
            "libcudart.so.13",
            "libcuda.so.1",
            "libc.so.6",
        )
    ] == ["nccl", "cudnn", "cudart", "cuda", None]
