"""verify with real processes: CPU torch 2.13.0, gloo, torchrun, faults injected.

Each test runs `python -m torchfit verify` as its own process and then asserts
that nothing it started is still alive (every child inherits TORCHFIT_TEST_TAG).
Faults come from tests/support/faults (conftest.faults(spec)): a sitecustomize on
PYTHONPATH that wraps the workers' stage heartbeat; the product knows nothing of it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.support.cli import torchfit_argv
from tests.verify.conftest import Result, Verify, assert_no_orphans, faults, finish

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gloo_smoke_test_passes_with_real_torchrun(verify: Verify, cpu_torch_env: Path) -> None:
    res = verify.run(
        "--env",
        str(cpu_torch_env),
        "--backend",
        "gloo",
        "--nproc",
        "2",
        "--bandwidth",
        "--sizes",
        "1M,2M",
        "--json",
    )
    assert res.code == 0, res
    report = res.json
    assert report["ok"] and report["verdict"] == "PASS"
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses == {
        "environment": "pass",  # doctor's judgement of the ranks' environment (verify.environment)
        "python": "pass",
        "torch": "pass",
        "gpus": "skip",
        "nccl": "skip",
        "ddp": "pass",
        "allreduce": "pass",
        "params": "pass",
        "ranks-agree": "pass",
        "bandwidth": "pass",
    }
    assert [r["rank"] for r in report["ddp"]["ranks"]] == [0, 1] and all(
        r["done"] for r in report["ddp"]["ranks"]
    )
    # torchrun's own main (workers/launch_worker.py), the ranks forked from a fork server that
    # imported torch: every rank found it there.
    assert report["ddp"]["argv"][1].endswith("launch_worker.py")
    assert report["ddp"]["argv"][2:5] == ["--start-method", "forkserver", "--nproc-per-node"]
    assert [r["torch_inherited"] for r in report["ddp"]["ranks"]] == [True, True]
    # and the compiler stack DDP's constructor imports: the fork server found launch_worker.py
    assert [r["dynamo_inherited"] for r in report["ddp"]["ranks"]] == [True, True]
    # found through PYTHONPATH, which the fork server gives back: the ranks see the user's own
    given = verify.env()[0]["PYTHONPATH"]
    assert [r["env"].get("PYTHONPATH") for r in report["ddp"]["ranks"]] == [given, given]
    rows = report["bandwidth"]["rows"]
    assert [r["bytes"] for r in rows] == [1 << 20, 2 << 20] and all(r["busbw"] > 0 for r in rows)
    # busbw = algbw * 2(n-1)/n: for two ranks the two are equal
    assert all(r["busbw"] == pytest.approx(r["algbw"], rel=1e-3) for r in rows)
    assert report["timings"]["inspect"] > 0 and report["timings"]["ddp"] > 0
    assert report["work_dir"] is None  # removed after a pass
    assert_no_orphans(res.tag)


def test_human_report_shows_checks_and_bars(verify: Verify, cpu_torch_env: Path) -> None:
    res = verify.run("--python", str(cpu_torch_env / "bin" / "python"), "--bandwidth", "--sizes", "1M")
    assert res.code == 0, res
    assert "verify: PASS" in res.out and "all-reduce bus bandwidth" in res.out and "█" in res.out
    assert "DDP smoke test: 2 rank(s) per node, gloo" in res.err
    assert_no_orphans(res.tag)


def two_nodes(
    verify: Verify, env: Path, node1_via: list[str] | None = None
) -> tuple[Result, Result]:
    endpoint = f"127.0.0.1:{free_port()}"
    common = [
        "--env",
        str(env),
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        endpoint,
        "--nproc",
        "1",
        "--timeout",
        "60",
        "--rdzv-timeout",
        "60",
        "--json",
    ]
    p0, t0 = verify.start(*common, "--node-rank", "0")
    p1, t1 = verify.start(*common, "--node-rank", "1", via=node1_via)
    r0, r1 = finish(p0, t0, 240), finish(p1, t1, 240)
    assert_no_orphans(t0)
    assert_no_orphans(t1)
    return r0, r1


def test_two_node_agents_on_localhost_agree(verify: Verify, cpu_torch_env: Path) -> None:
    r0, r1 = two_nodes(verify, cpu_torch_env)
    for res in (r0, r1):
        assert res.code == 0, res
        report = res.json
        assert {c["name"]: c["status"] for c in report["checks"]}["nodes-agree"] == "pass"
        assert sorted(n["node"] for n in report["nodes"]) == [0, 1]
        assert report["ddp"]["ranks"][0]["done"]


def test_node_running_another_nccl_is_flagged(
    verify: Verify, cpu_torch_env: Path, other_nccl: Path, nccl_pin_env: Path
) -> None:
    # Node 1 runs under `torchfit run` with a pinned libnccl (a real NCCL 2.30.7,
    # preloaded by bin/torchfit-env); node 0 runs the CPU build's none. Both node
    # agents must say so, side by side.
    via = torchfit_argv("run", "--env", str(nccl_pin_env), "--")
    r0, r1 = two_nodes(verify, cpu_torch_env, via)
    for res in (r0, r1):
        assert res.code == 1, res
        report = res.json
        assert report["failed"] == ["nodes-agree"], res
        hosts = [n["host"] for n in report["nodes"]]
        # The NCCL that runs, and the LD_PRELOAD that makes it so (issue 19: the environment
        # that must agree across nodes is compared too).
        assert report["node_disagreements"] == [
            f"nccl: node 0 ({hosts[0]}) none, node 1 ({hosts[1]}) 2.30.7",
            f"LD_PRELOAD: node 0 ({hosts[0]}) unset, node 1 ({hosts[1]}) {str(other_nccl)!r}",
        ]
        by_node = {n["node"]: n for n in report["nodes"]}
        assert by_node[1]["nccl_path"] == str(other_nccl) and by_node[0]["nccl_path"] == "None"
    # The preloaded node also says, in its own inspection, what is mapped but unused.
    assert "2.30.7" in r1.check("nccl")["summary"]


def run_verify(verify: Verify, env: Path, timeout: float | None, fault: str) -> Result:
    """`verify --env ENV --json [--timeout TIMEOUT]` with FAULT injected (conftest.faults)."""
    limit = ["--timeout", f"{timeout:g}"] if timeout is not None else []
    return verify.run("--env", str(env), "--json", *limit, env=faults(fault))


def test_crashing_rank_is_named_with_its_traceback(verify: Verify, cpu_torch_env: Path) -> None:
    res = run_verify(verify, cpu_torch_env, 60, "crash:1")
    assert res.code == 1, res
    ddp = res.check("ddp")
    assert ddp["summary"].startswith(
        "rank 1 failed at stage 'allreduce': RuntimeError: injected fault"
    ), ddp
    assert any("Traceback" in line for line in ddp["detail"])
    assert any(
        line.startswith("rank 0 failed too, in a collective")
        or line.startswith("rank 0 was stopped")
        for line in ddp["detail"]
    )
    assert res.json["work_dir"] and Path(res.json["work_dir"], "ddp", "rank-1.jsonl").exists()
    assert_no_orphans(res.tag)


@pytest.mark.parametrize(
    "fault, timeout, summary, detail",
    [
        pytest.param(
            "abort:1", 60,
            "rank 1 died at stage 'allreduce' without a Python error (exit -6, SIGABRT)", None,
            id="killed-by-a-signal",
        ),
        pytest.param(
            "hang:1", 8,
            "rank 1 stalled at stage 'allreduce' before joining the collective",
            "rank 0: waiting inside the 'allreduce' collective",
            id="never-joins",
        ),
    ],
)
def test_a_rank_that_dies_or_never_joins_is_named(
    verify: Verify, cpu_torch_env: Path, fault: str, timeout: float, summary: str, detail: str | None
) -> None:
    """A rank killed by a signal, or one that never joins (killed at --timeout), is named
    with its stage, within the timeout and a margin."""
    res = run_verify(verify, cpu_torch_env, timeout, fault)
    assert res.code == 1, res
    ddp = res.check("ddp")
    # The signal from torchrun's summary, or, where torchrun's summary named only the other
    # rank (ranks forked as functions: one failure each), from the rank's own log.
    assert ddp["summary"].startswith(summary) or ddp["summary"].startswith(
        summary.replace("(exit -6, SIGABRT)", "(SIGABRT: its log says 'Fatal Python error: Aborted')")), ddp
    assert detail is None or detail in ddp["detail"], ddp
    assert res.seconds < timeout + 30
    assert_no_orphans(res.tag)


@pytest.mark.parametrize(
    "fault, code, failed",
    [("teardown:1", 0, []), ("teardown:1,wrong:0", 1, ["allreduce"])],
    ids=["alone", "beside-a-wrong-answer"],
)
def test_teardown_crash_neither_fails_nor_hides_a_failure(
    verify: Verify, cpu_torch_env: Path, fault: str, code: int, failed: list[str]
) -> None:
    res = run_verify(verify, cpu_torch_env, None, fault)
    assert res.code == code, res
    assert res.json["failed"] == failed, res
    assert any("teardown crash" in n for n in res.json["ddp"]["notes"]), res
    assert_no_orphans(res.tag)


def test_stalled_inspection_is_killed(verify: Verify, cpu_torch_env: Path) -> None:
    res = run_verify(verify, cpu_torch_env, 3, "hang:inspect:import-torch")
    assert res.code == 1, res
    assert (
        res.check("inspect")["summary"]
        == "the inspection stalled at stage 'import-torch' for 3 s and was killed"
    )
    assert res.check("ddp")["status"] == "skip"
    assert_no_orphans(res.tag)


def test_bad_cuda_visible_devices_gives_a_clear_verdict(verify: Verify, cpu_torch_env: Path) -> None:
    res = verify.run(
        "--env",
        str(cpu_torch_env),
        "--backend",
        "nccl",
        "--json",
        env={"CUDA_VISIBLE_DEVICES": "GPU-00000000-bogus"},
    )
    assert res.code == 1, res
    gpus = res.check("gpus")
    assert (
        gpus["status"] == "fail" and "CUDA_VISIBLE_DEVICES='GPU-00000000-bogus'" in gpus["summary"]
    )
    assert res.check("ddp")["summary"] == "not run: --backend nccl needs GPUs and torch sees none"
    assert_no_orphans(res.tag)


def test_env_without_torch(verify: Verify, empty_env: Path) -> None:
    res = verify.run("--env", str(empty_env), "--json")
    assert res.code == 1, res
    assert res.json["failed"] == ["torch"]
    assert res.check("torch")["summary"] == f"torch is not installed in {empty_env}"
    human = verify.run("--env", str(empty_env))
    assert (
        human.code == 1
        and f"verify: FAIL torch: torch is not installed in {empty_env}"
        in " ".join(human.out.split())
    )
    assert_no_orphans(res.tag)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--env", "/nonexistent/env"], "torchfit: error: --env /nonexistent/env: not a directory"),
        (
            ["--python", "no-such-python-3x"],
            "torchfit: error: --python no-such-python-3x: not found on PATH",
        ),
        (
            ["--python", "/nonexistent/python"],
            "torchfit: error: --python /nonexistent/python: not found",
        ),
        (["--nnodes", "2"], "torchfit: error: --nnodes > 1 needs --rdzv-endpoint HOST:PORT"),
        (["--sizes", "1X"], "torchfit: error: --sizes: '1X' is not a size"),
        (["--slurm"], "torchfit: error: --slurm needs --nodes N or --nodelist LIST"),
        (["--slurm", "--print-script"],
         "torchfit: error: --slurm --print-script needs --nodes N and --gpus-per-node G"),
        (["--slurm", "--nodelist", "n[1-"], "torchfit: error: hostlist 'n[1-': '[' without ']'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(verify: Verify, args: list[str], message: str) -> None:
    res = verify.run(*args)
    assert res.code == 2, res
    assert res.err.startswith(message) and "Traceback" not in res.err and res.out == ""


def test_slurm_prints_an_sbatch_script(verify: Verify) -> None:
    res = verify.run(
        "--slurm", "--print-script", "--nodes", "2", "--gpus-per-node", "8", "--python", "/opt/env/bin/python"
    )
    assert res.code == 0, res
    assert res.out.startswith("#!/bin/bash\n") and "#SBATCH --nodes=2" in res.out
    assert "TORCHFIT_VERIFY_PYTHON=/opt/env/bin/python" in res.out and "srun" in res.out


SERVER = "multiprocessing.forkserver import main"  # the fork server's command line, and its children's


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def test_torchfit_killed_with_sigkill_leaves_nothing_behind(
    verify: Verify, cpu_torch_env: Path
) -> None:
    # torchrun runs in its own session and its workers in theirs: a SIGKILLed
    # torchfit cannot clean up, so the workers' watchdogs (owner pid) must.
    import signal
    import time

    proc, tag = verify.start(
        "--env",
        str(cpu_torch_env),
        "--json",
        "--timeout",
        "120",
        env=faults("hang:1"),
    )
    from tests.verify.conftest import scan_tagged

    def workers() -> list[int]:
        """The ranks: children of torchrun's fork server (workers/launch_worker.py)."""
        tagged = dict(scan_tagged(tag))
        return [
            p for p, cmd in tagged.items()
            if SERVER in cmd and SERVER in tagged.get(parent(p), "")
        ]

    end = time.monotonic() + 60
    while time.monotonic() < end and len(workers()) < 2:
        time.sleep(0.2)
    assert len(workers()) == 2, "the workers never started"
    time.sleep(4)  # past import: rank 1 hangs, rank 0 waits in the collective
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert_no_orphans(tag, grace=20)


def test_the_fork_servers_socket_under_a_long_tmpdir_goes_with_verify_however_torchrun_ends(
    verify: Verify, cpu_torch_env: Path
) -> None:
    """The fork server's Unix socket cannot live under the test's long TMPDIR (AF_UNIX: 108
    bytes): verify makes a short directory of its own for it and removes it, also when the
    launcher is SIGKILLed and its own clean-up never runs (each such run left a /tmp/pymp-*)."""
    import os
    import signal
    import time

    from tests.verify.conftest import scan_tagged
    from torchfit.owned import read_marker

    proc, tag = verify.start("--env", str(cpu_torch_env), "--json", "--timeout", "120", env=faults("hang:1"))
    assert len(str(verify.tmp)) > 64 - len("/torchfit-verify-XXXXXXXX/tmp")

    def sockets() -> list[str]:
        """verify's socket directories holding the fork server's pymp-* directory."""
        found = []
        for base in ("/tmp", "/var/tmp"):
            for name in os.listdir(base) if os.path.isdir(base) else []:
                path = os.path.join(base, name)
                if name.startswith("torchfit-verify-socket-") and (read_marker(path) or {}).get("pid") == proc.pid:
                    if any(n.startswith("pymp-") for n in os.listdir(path)):
                        found.append(path)
        return found

    end = time.monotonic() + 60
    seen: list[str] = []
    while time.monotonic() < end and not seen:
        seen = sockets()
        time.sleep(0.2)
    assert seen, "no socket directory of verify's own under /tmp"
    launcher = [p for p, cmd in scan_tagged(tag) if "launch_worker.py" in cmd and parent(p) == proc.pid]
    assert len(launcher) == 1, scan_tagged(tag)

    def ranks() -> list[int]:
        """The ranks: children of the fork server (a child of the launcher)."""
        tagged = dict(scan_tagged(tag))
        return [p for p, cmd in tagged.items() if SERVER in cmd and parent(parent(p)) == launcher[0]]

    end = time.monotonic() + 60
    while time.monotonic() < end and len(ranks()) < 2:
        time.sleep(0.1)
    assert len(ranks()) == 2, "the ranks never started"
    os.kill(launcher[0], signal.SIGKILL)  # rank 1 stalls in its all-reduce: the launcher is running
    res = finish(proc, tag, 60)
    # what this test is for is the clean-up; the verdict is the DDP phase's failure, unless the
    # ranks had reported done (once in a full slow run the stall was not injected: PASS)
    assert res.code in (0, 1) and (res.code == 0 or "ddp" in res.json["failed"]), (res, res.json)
    assert [p for p in seen if os.path.exists(p)] == []
    assert_no_orphans(res.tag)
