"""Round 4 repros, "Fleets" (issue 25): hostile or cloned nodes under `detect --slurm` on a real
Slurm (tests/support/slurm.py: slurmctld and six slurmds on 127.0.0.1, started once for the
cases that need it and stopped at exit), sinfo's text on the terminal, and fleet files that cost
or mean too much. A node misbehaves through a sitecustomize.py on the tasks' PYTHONPATH (srun
hands it to every task; only the node it names acts)."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import Box, Case

ROOT = Path(__file__).resolve().parents[2]
_cluster: list[Any] = []


def cluster() -> Any:
    """The one test Slurm of this run (its own ports and state directory)."""
    if not _cluster:
        sys.path.insert(0, str(ROOT))
        from tests.support.slurm import SlurmCluster, find_slurm

        tools = find_slurm()
        if tools is None:
            raise RuntimeError("no Slurm here: apt-get install slurmctld slurmd")
        base = Path(tempfile.mkdtemp(prefix="attack4-slurm-"))
        c = SlurmCluster(base, tools)
        c.write()
        c.start()

        def stop() -> None:
            c.stop()
            shutil.rmtree(base, ignore_errors=True)

        atexit.register(stop)
        _cluster.append(c)
    return _cluster[0]


def detect(box: Box, *args: str, site: str | None = None) -> Any:
    """`detect --slurm ARGS` of the checkout under test, a sitecustomize `site` on the tasks' path."""
    c = cluster()
    env = {k: v for k, v in c.client_env().items() if k in ("SLURM_CONF", "PATH")}
    path = str(box.src)
    if site is not None:
        (box.work / "site").mkdir(exist_ok=True)
        (box.work / "site" / "sitecustomize.py").write_text(site)
        path = f"{box.work / 'site'}{os.pathsep}{box.src}"
    env["PYTHONPATH"] = path
    return box.tf("detect", "--slurm", "--timeout", "2", *args, env=env, timeout=120)


def forge(node: str, record: str) -> str:
    sys.path.insert(0, str(ROOT))
    from tests.support.slurm import forged_answer

    return str(forged_answer(node, record))


H100 = {"driver_version": "580.65.06", "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0", "memory_mib": 81559}], "glibc": "2.35", "os": "ubuntu:22.04",
        "arch": "x86_64", "pythons": [{"version": "3.12.3", "path": "/usr/bin/python3.12", "source": "path"}]}


def _groups(res: Any) -> dict[str, str]:
    try:
        data = json.loads(res.out)
    except ValueError:
        return {}
    return {g["nodes"]: g["signature"] for g in data.get("groups", [])}


def rename(box: Box) -> str | None:
    res = detect(box, "--nodelist", "n[1-3]", "--json",
                 site=forge("n2", json.dumps({"node": "n1", "host": "n1", "data": H100})))
    groups = _groups(res)
    if "H100" in json.dumps(groups):
        return f"n2's answer, naming n1, was taken: groups {groups}"
    if "refused" not in res.out or "names node n1" not in res.out:
        try:
            said = json.loads(res.out).get("missing")
        except ValueError:
            said = res.err.strip()[-160:]
        return f"n2 answered as n1 and nothing names it (exit {res.code}; missing: {said})"
    return None


def unasked(box: Box) -> str | None:
    res = detect(box, "--nodelist", "n[1-2]", "--json",
                 site=forge("n2", json.dumps({"node": "gpu99", "host": "gpu99", "data": H100})))
    if "gpu99" in json.dumps(_groups(res)):
        return "a node nobody asked (gpu99, named by n2's answer) is in the fleet file"
    if "names node gpu99" not in res.out:
        return f"n2's answer naming gpu99 is not refused by name: {res.out[-300:]!r}"
    return None


def clones(box: Box) -> str | None:
    # Every node of the test cluster is this machine: one hostname; a task that cannot say
    # Slurm's name for its node must still be its node's (srun placed it).
    res = detect(box, "--nodelist", "n[1-3]", site="import os\nos.environ.pop('SLURMD_NODENAME', None)\n")
    if "no answer" in res.out or not res.out.startswith("fleet: 3 node(s)"):
        return f"nodes with one hostname reported without facts: {res.out.splitlines()[:3]}"
    if "cloned images" not in res.out:
        return "nodes share one hostname and nothing says so"
    return None


def deep(box: Box) -> str | None:
    record = '{"node":"n2","host":"n2","data":' + "[" * 100_000 + "]" * 100_000 + "}"
    res = detect(box, "--nodelist", "n[1-3]", "--json", site=forge("n2", record))
    if res.traceback or "RecursionError" in res.text or "internal error" in res.text:
        return f"one node's 100,000-deep answer ends the gather: exit {res.code}, {res.err.strip()[-160:]!r}"
    if sorted(_groups(res)) != ["n1", "n3"]:
        return f"the other nodes' answers were lost: {res.out[-200:]!r}"
    return None


def sinfo_escapes(box: Box) -> str | None:
    c = cluster()
    c.run(c.tools["scontrol"], "update", "NodeName=n5", "State=DRAIN",
          "Reason=\x1b]0;owned\x07\x1b[2Jfan \x1b[31mfailed")
    try:
        res = detect(box, "--nodelist", "n[4-5]")
    finally:
        c.run(c.tools["scontrol"], "update", "NodeName=n5", "State=RESUME", check=False)
        c.wait_idle(("n5",), 30)
    if "\x1b" in res.text or "\x07" in res.text:
        return "sinfo's drain reason reaches the terminal with its escape sequences"
    return None


def distinct_groups(box: Box) -> str | None:
    sys.path.insert(0, str(ROOT))
    from tests.support.fleets import distinct_fleet_data

    path = box.work / "fleet.json"
    path.write_text(json.dumps(distinct_fleet_data(2000)))
    res = box.tf("resolve", "--json", "--facts", str(path), timeout=60)
    if res.timed_out:
        return "2,000 distinct groups: no plan within 60 s"
    if res.code != 0:
        return f"2,000 distinct groups: exit {res.code}: {res.err.strip()[-160:]!r}"
    if res.seconds > 15:
        return f"2,000 distinct groups took {res.seconds:.0f} s"
    return None


def empty_nodes(box: Box) -> str | None:
    data = {"torchfit_fleet": 1, "groups": [{"nodes": "n1", "facts": H100}, {"nodes": "", "facts": H100}]}
    path = box.work / "fleet.json"
    path.write_text(json.dumps(data))
    res = box.tf("resolve", "--facts", str(path), timeout=60)
    if res.code != 2:
        return f"a group with empty 'nodes' resolves: exit {res.code}"
    return None


CASES = [
    Case("fl-rename", 6, "a node's answer naming another node is taken as that node's", rename),
    Case("fl-unasked", 6, "a node's answer naming an unasked node adds it to the fleet file", unasked),
    Case("fl-clones", 5, "nodes sharing one hostname (cloned images) are reported 'no answer'", clones),
    Case("fl-deep", 3, "one node's 100,000-deep JSON answer kills the gather (RecursionError)", deep),
    Case("fl-sinfo-esc", 5, "escape sequences in sinfo's drain reason reach the terminal", sinfo_escapes),
    Case("fl-2000-groups", 1, "fleet resolve of 2,000 distinct groups takes minutes (cubic)", distinct_groups),
    Case("fl-empty-nodes", 4, "a fleet group with empty 'nodes' is resolved", empty_nodes),
]
