"""The fleet on a real Slurm (tests/support/slurm.py: slurmctld and six slurmds on
127.0.0.1, each node's GPUs from its own replayed nvidia-smi): gather through one srun,
resolve the gathered fleet, bounds on silent nodes, and the node check draining a node."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.slurm import SlurmCluster
from torchfit.errors import BadInput
from torchfit.fleet.gather import gather
from torchfit.fleet.hostlist import compress_hostlist, expand_hostlist
from torchfit.runner import Runner

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]


def torchfit(cluster: SlurmCluster, *args: str, env: dict[str, str] | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, base_env=cluster.client_env(env), timeout=timeout)


def allocations(cluster: SlurmCluster) -> list[str]:
    log = (cluster.base / "log" / "slurmctld.log").read_text()
    return re.findall(r"_slurm_rpc_allocate_resources JobId=\d+ NodeList=(\S+)", log)


def test_hostlist_notation_is_slurms(slurm: SlurmCluster) -> None:
    for names in (["gpu01", "gpu02", "gpu03", "gpu05", "gpu10"], ["n3", "n1", "n2"], ["b1", "a2", "a1"],
                  ["gpu001", "gpu002", "gpu099", "gpu100", "gpu1000"], ["n9", "n10", "n11"], ["login", "x7"]):
        ours = compress_hostlist(names)
        theirs = slurm.run(slurm.tools["scontrol"], "show", "hostlistsorted", ",".join(names)).stdout.strip()
        assert ours == theirs, names
        listed = slurm.run(slurm.tools["scontrol"], "show", "hostnames", ours).stdout.split()
        assert expand_hostlist(ours) == listed
    # several bracket groups per name, as sites write them (rack and slot): scontrol's expansion
    for text in ("rack[1-2]-gpu[01-03]", "n[1-2]x[3]", "r[1,3]n[008-010],login", "a[9-11]b[1-2]"):
        listed = slurm.run(slurm.tools["scontrol"], "show", "hostnames", text).stdout.split()
        assert expand_hostlist(text) == listed, text
    for text in ("gpu[1-2]z", "a[9-11]b[1-2]c"):  # text after the last bracket: invalid to both
        res = slurm.run(slurm.tools["scontrol"], "show", "hostnames", text)
        assert res.stdout.split() == [] and "Invalid hostlist" in res.stderr, res
        with pytest.raises(BadInput):
            expand_hostlist(text)


@pytest.fixture(scope="module")
def gathered(slurm: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("gather") / "fleet.json"
    before = len(allocations(slurm))
    t0 = time.monotonic()
    res = torchfit(slurm, "detect", "--slurm", "--timeout", "2", "-o", str(out))
    return {"res": res, "seconds": time.monotonic() - t0, "path": out,
            "new_allocations": allocations(slurm)[before:]}


def test_detect_slurm_gathers_every_node_in_one_srun(gathered: dict[str, Any]) -> None:
    res = gathered["res"]
    assert res.returncode == 0, res.stderr
    assert gathered["new_allocations"] == ["n[1-6]"]  # one allocation, one step, every node
    lines = res.stdout.splitlines()
    assert lines[0].startswith("fleet: 6 node(s) in 5 group(s); one srun")
    rows = {ln.split()[0]: ln for ln in lines[1:]}
    assert set(rows) == {"n[1,6]", "n2", "n3", "n4", "n5"}  # one line per group
    assert "2\u00d7 NVIDIA H200 (sm_90), driver 580.159.04" in rows["n[1,6]"]
    assert "4\u00d7 NVIDIA A100-SXM4-80GB (sm_80), driver 535.183.01" in rows["n2"]
    assert "TITAN V (sm_70), driver 580.159.04" in rows["n3"]
    # The hung nvidia-smi is cut off on the node and reported, not waited for.
    assert "GPUs unknown (nvidia-smi timed out after 2 s)" in rows["n4"]
    assert gathered["seconds"] < 30
    assert "Driver/library version mismatch" in rows["n5"]
    data = json.loads(gathered["path"].read_text())
    assert data["torchfit_fleet"] == 1 and data["groups"][0]["nodes"] == "n[1,6]"


def test_the_gathered_fleet_resolves_with_the_binding_groups_named(slurm: SlurmCluster,
                                                                  gathered: dict[str, Any]) -> None:
    path = str(gathered["path"])
    refused = torchfit(slurm, "resolve", "--facts", path)
    assert refused.returncode == 1 and "n4 has an NVIDIA driver, but its GPUs could not be read" in refused.stderr
    res = torchfit(slurm, "resolve", "--facts", path, "--exclude", "n[4-5]", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["hosts"] == ["n[1,6]", "n2", "n3"]
    binding = [r for r in plan["reasons"] if " rules out " in r]
    assert any(r.startswith("n2 (4\u00d7 NVIDIA A100-SXM4-80GB (sm_80), driver 535.183.01) rules out cu13")
               and "n2 has 535.183.01" in r for r in binding), binding
    assert any(r.startswith("n3 (TITAN V (sm_70)") and "no sm_70 code" in r for r in binding), binding
    assert any("n2: cu12" in w and "minor-version compatibility" in w for w in plan["warnings"])


def test_a_node_that_never_answers_is_listed_and_nothing_is_left_running(slurm: SlurmCluster,
                                                                          tmp_path: Path) -> None:
    # Every python started on n3 hangs before torchfit runs (a hung shared file system).
    (tmp_path / "sitecustomize.py").write_text(
        "import os, time\nif os.environ.get('SLURMD_NODENAME') == 'n3':\n    time.sleep(600)\n")
    t0 = time.monotonic()
    res = torchfit(slurm, "detect", "--slurm", "--nodelist", "n[1-3]", "--timeout", "2", "--deadline", "20",
                   "--json", env={"PYTHONPATH": str(tmp_path)})
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert [g["nodes"] for g in data["groups"]] == ["n1", "n2"], res.stdout
    assert data["missing"] == [{"nodes": "n3", "why": "no answer within 20 s (srun stopped; Slurm cancelled the step)"}]
    assert took < 40
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (slurm.leftovers() or slurm.run(
            slurm.tools["squeue"], "--noheader").stdout.strip()):
        time.sleep(0.5)
    left = slurm.leftovers()
    shown = subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-p", ",".join(map(str, left))],
                           capture_output=True, text=True).stdout if left else ""
    assert left == [], shown
    assert slurm.run(slurm.tools["squeue"], "--noheader").stdout.strip() == ""


def test_a_node_that_cannot_run_this_torchfit_says_why(slurm: SlurmCluster) -> None:
    fleet = gather(Runner(slurm.client_env()), nodelist="n[1-2]", timeout=2, python="/nonexistent/bin/python")
    assert fleet.groups == ()
    (m,) = fleet.missing
    assert m.hostlist == "n[1-2]"
    assert "execve(): /nonexistent/bin/python: No such file or directory" in m.why and "shared storage" in m.why


def wrapper_from_docs(cluster: SlurmCluster, roots: Path, name: str = "torchfit-node-check") -> Path:
    """docs/cluster.md's drain wrapper (or its Prolog form, `name`), its site settings set for this cluster."""
    doc = (ROOT / "docs" / "cluster.md").read_text()
    script = re.search(rf"```sh\n(#!/bin/sh\n# {name}.*?)```", doc, re.S)
    assert script, f"docs/cluster.md has no {name}"
    text = script.group(1)
    site = re.compile(r"# --- site settings ---\n.*?# --- end of site settings ---\n", re.S)
    assert site.search(text)
    mine = (
        "# --- site settings ---\n"
        f'TORCHFIT="{sys.executable} -m torchfit"\n'
        f'OPTIONS="--timeout 2 --root {roots}/$SLURMD_NODENAME"\n'
        f"export PATH={cluster.env['PATH']}\n"
        f"export SLURM_CONF={cluster.conf} PYTHONPATH={ROOT / 'src'}\n"
        "# --- end of site settings ---\n"
    )
    path = cluster.base / name
    path.write_text(site.sub(lambda _m: mine, text))
    path.chmod(0o755)
    return path


def test_node_check_drains_a_node_whose_nvidia_smi_is_broken(slurm: SlurmCluster, tmp_path: Path) -> None:
    roots = tmp_path / "roots"
    # What a node with the driver loaded has in /dev. Every node gets its tree: slurmd may run
    # the health check on `scontrol reconfigure` too, on every node.
    for node, gpus in (("n1", 2), ("n2", 4), ("n3", 1), ("n4", 1), ("n5", 4), ("n6", 2)):
        dev = roots / node / "dev"
        dev.mkdir(parents=True)
        for name in ["nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(gpus))]:
            (dev / name).write_text("")
    wrapper = wrapper_from_docs(slurm, roots)
    original = slurm.conf.read_text()
    try:
        # slurmd runs HealthCheckProgram when it starts (and every HealthCheckInterval).
        slurm.reconfigure([f"HealthCheckProgram={wrapper}", "HealthCheckInterval=3600"])
        for node in ("n1", "n5"):
            slurm.stop_node(node)
            slurm.start_node(node)
        deadline = time.monotonic() + 30
        info = ""
        while time.monotonic() < deadline:
            info = slurm.node_info("n5")
            if "DRAIN" in info and "Reason=" in info:
                break
            time.sleep(0.3)
        assert "DRAIN" in info, info
        reason = re.search(r"Reason=(.*)", info)
        assert reason and reason.group(1).startswith(
            "torchfit node-check: nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"
        ), info
        slurm.wait_idle(("n1",), 15)  # the healthy node ran the same check and stays in service
        assert "Reason=" not in slurm.node_info("n1")
    finally:
        slurm.conf.write_text(original)
        slurm.run(slurm.tools["scontrol"], "reconfigure", check=False)
        # n5 for certain, n4 (its nvidia-smi hangs) if a reconfigure ran the check there too.
        slurm.run(slurm.tools["scontrol"], "update", f"nodename=n[1-{len(slurm.NODES)}]", "state=resume",
                  check=False)


def _node_roots(roots: Path) -> None:
    """What a node with the driver loaded has in /dev, for every node of the test cluster."""
    for node, gpus in (("n1", 2), ("n2", 4), ("n3", 1), ("n4", 1), ("n5", 4), ("n6", 2)):
        dev = roots / node / "dev"
        dev.mkdir(parents=True, exist_ok=True)
        for name in ["nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(gpus))]:
            (dev / name).write_text("")


def test_the_prolog_form_fails_the_job_and_slurm_drains_the_node_itself(slurm: SlurmCluster, tmp_path: Path) -> None:
    """docs/cluster.md's Prolog form (issue 26, item 4): it calls no Slurm command; Slurm drains
    n5 ("Prolog error" in sinfo -R) and slurmd's log keeps torchfit's reason; n1 runs the job."""
    roots = tmp_path / "roots"
    _node_roots(roots)
    prolog = wrapper_from_docs(slurm, roots, "torchfit-prolog")
    assert "scontrol" not in prolog.read_text().split("# --- end of site settings ---")[1]
    original = slurm.conf.read_text()
    try:
        slurm.reconfigure([f"Prolog={prolog}"])
        ok = slurm.run(slurm.tools["srun"], "-w", "n1", "-N1", "--immediate=20", "true", check=False, timeout=120)
        assert ok.returncode == 0, ok.stderr  # a healthy node: the prolog passes, the job runs
        bad = slurm.run(slurm.tools["srun"], "-w", "n5", "-N1", "--immediate=20", "true", check=False, timeout=120)
        # srun says it one of two ways, by when the prolog ran (allocation or step launch)
        assert bad.returncode != 0 and re.search(r"Prolog failure on node n5|on node n5: Job prolog failed",
                                                 bad.stderr), bad.stderr
        deadline = time.monotonic() + 30
        reasons = ""
        while time.monotonic() < deadline and "n5" not in reasons:
            reasons = slurm.run(slurm.tools["sinfo"], "-R", "--noheader", check=False).stdout
            time.sleep(0.3)
        assert re.search(r"Prolog error\s+root\s+\S+\s+n5", reasons), reasons
        log = (slurm.base / "log" / "slurmd-n5.log").read_text()
        assert re.search(r"prolog failed: rc:1 output:torchfit node-check: nvidia-smi: Failed to initialize NVML", log), \
            [ln for ln in log.splitlines() if "prolog" in ln][-3:]
    finally:
        slurm.conf.write_text(original)
        slurm.run(slurm.tools["scontrol"], "reconfigure", check=False)
        slurm.run(slurm.tools["scontrol"], "update", f"nodename=n[1-{len(slurm.NODES)}]", "state=resume",
                  check=False)
        no_jobs = time.monotonic() + 30
        while time.monotonic() < no_jobs and slurm.run(slurm.tools["squeue"], "--noheader", check=False).stdout.strip():
            slurm.run(slurm.tools["scancel"], "--user", str(os.getuid()), check=False)
            time.sleep(0.5)


def test_the_nhc_check_calls_die_with_the_reason(slurm: SlurmCluster, tmp_path: Path) -> None:
    """docs/cluster.md's NHC check, sourced in bash beside a stand-in of NHC's `die` (Debian ships
    no NHC), the way NHC's runner calls a check: n5's broken driver is a `die 1 REASON`."""
    roots = tmp_path / "roots"
    _node_roots(roots)
    doc = (ROOT / "docs" / "cluster.md").read_text()
    check = re.search(r"```sh\n(# torchfit\.nhc.*?)```", doc, re.S)
    assert check, "docs/cluster.md has no NHC check"
    (tmp_path / "torchfit.nhc").write_text(check.group(1))
    stand_in = 'die() { echo "DIE $1: $2"; }\n'
    for node, expect in (("n5", ["DIE 1: torchfit node-check: nvidia-smi: Failed to initialize NVML", "RC 1"]),
                         ("n1", ["RC 0"])):
        env = {**slurm.client_env(), "SLURMD_NODENAME": node, "PYTHONPATH": str(ROOT / "src"),
               "TORCHFIT": f"{sys.executable} -m torchfit",
               "TORCHFIT_OPTIONS": f"--timeout 2 --root {roots}/{node}"}
        script = f"{stand_in}. {tmp_path}/torchfit.nhc\ncheck_torchfit_node; echo \"RC $?\"\n"
        res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120)
        assert all(e in res.stdout for e in expect), (node, res.stdout, res.stderr)
        assert node == "n5" or "DIE" not in res.stdout, res.stdout
