"""`detect --slurm` on the real test Slurm (tests/support/slurm.py) when nodes are hostile or
cloned (issue 25, "Fleets"): whose answer is whose, cloned hostnames, a node's 100,000-deep
answer, sinfo's text on the terminal. A node misbehaves through a sitecustomize.py on the
tasks' PYTHONPATH: srun hands the variable to every task, and only the node it names acts."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli
from tests.support.fleets import node_facts
from tests.support.slurm import SlurmCluster, forged_answer

pytestmark = pytest.mark.slurm

FACTS = node_facts("NVIDIA H100 80GB HBM3", "9.0", 8, "580.65.06")


def detect(slurm: SlurmCluster, *args: str, hostile: str | None = None,
           tmp_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {}
    if hostile is not None and tmp_path is not None:
        (tmp_path / "sitecustomize.py").write_text(hostile)
        env["PYTHONPATH"] = str(tmp_path)
    # --timeout: what a node's answer may take; none of these tests waits it out, and on a loaded
    # 2-core CI machine 2 s was once too short for three tasks (the 100,000-deep answer's run, exit 1)
    return run_cli("detect", "--slurm", "--timeout", "10", *args, base_env=slurm.client_env(env), timeout=180)


def test_a_node_cannot_answer_for_another_node(slurm: SlurmCluster, tmp_path: Path) -> None:
    # n2 answers as n1, with another GPU: n1 keeps its own answer, n2's is refused and named.
    record = json.dumps({"node": "n1", "host": "n1", "data": FACTS})
    res = detect(slurm, "--nodelist", "n[1-3]", "--json", hostile=forged_answer("n2", record), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    groups = {g["nodes"]: g["signature"] for g in data["groups"]}
    assert set(groups) == {"n1", "n3"}, groups
    assert "H200" in groups["n1"] and "H100" not in json.dumps(data["groups"])
    assert data["missing"] == [{"nodes": "n2", "why": "refused: the answer of task 1, which srun ran on n2, "
                                                      "names node n1"}]


def test_a_node_cannot_add_a_node_nobody_asked(slurm: SlurmCluster, tmp_path: Path) -> None:
    record = json.dumps({"node": "gpu99", "host": "gpu99", "data": FACTS})
    res = detect(slurm, "--nodelist", "n[1-2]", "--json", hostile=forged_answer("n2", record), tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert "gpu99" not in json.dumps(data["groups"]) and [g["nodes"] for g in data["groups"]] == ["n1"]
    assert data["missing"][0]["nodes"] == "n2" and "names node gpu99" in data["missing"][0]["why"]


def test_cloned_hostnames_are_told_apart_by_slurms_node_names(slurm: SlurmCluster, tmp_path: Path) -> None:
    # Every node of the test cluster is this machine: one hostname. A task that cannot say
    # Slurm's name for its node (SLURMD_NODENAME gone) is still its node's, by srun's placement.
    hostile = "import os\nos.environ.pop('SLURMD_NODENAME', None)\n"
    res = detect(slurm, "--nodelist", "n[1-3]", hostile=hostile, tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    # (the fake nvidia-smi answers by SLURMD_NODENAME too: without it, one "GPUs unknown" group)
    assert first.startswith("fleet: 3 node(s) in 1 group(s)"), res.stdout
    assert f"n[1-3] all say hostname {socket.gethostname()!r} (cloned images?)" in first, first
    assert "no answer" not in res.stdout


def test_a_node_answering_100000_deep_json_is_that_nodes_bad_answer(slurm: SlurmCluster, tmp_path: Path) -> None:
    deep = '{"node":"n2","host":"n2","data":' + "[" * 100_000 + "]" * 100_000 + "}"
    # n2 answers last: a 200 KB line breaks srun's I/O from that task ("_server_read: ... unexpected
    # eof reading message body") and srun then ends the whole step, so the other nodes' answers must
    # be in by then (under load they were not: n1 CANCELLED, n3 Killed; srun's doing, not a parse)
    res = detect(slurm, "--nodelist", "n[1-3]", "--json", hostile=forged_answer("n2", deep, after=6),
                 tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr + res.stdout
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stderr + res.stdout
    data = json.loads(res.stdout)
    assert [g["nodes"] for g in data["groups"]] == ["n1", "n3"]
    assert data["missing"] == [{"nodes": "n2", "why": "its answer is not valid JSON (nested deeper than 32 levels)"}]


def test_sinfo_reasons_reach_the_terminal_without_escape_sequences(slurm: SlurmCluster) -> None:
    reason = "\x1b]0;owned\x07\x1b[2Jfan \x1b[31mfailed"
    slurm.run(slurm.tools["scontrol"], "update", "NodeName=n5", "State=DRAIN", f"Reason={reason}")
    try:
        res = detect(slurm, "--nodelist", "n[4-5]")
        assert res.returncode == 0, res.stderr
        line = next(ln for ln in res.stdout.splitlines() if ln.strip().startswith("n5"))
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout
        assert "reason: fan failed" in line, line
    finally:
        slurm.run(slurm.tools["scontrol"], "update", "NodeName=n5", "State=RESUME", check=False)
        slurm.wait_idle(("n5",), 30)


def test_detect_slurm_says_what_it_waits_for_as_it_happens(slurm: SlurmCluster) -> None:
    # n4's nvidia-smi hangs until --timeout (3 s): the other nodes' answers come seconds earlier.
    from tests.support.cli import start_cli, timed_stderr

    proc = start_cli("detect", "--slurm", "--nodelist", "n[1-4]", "--timeout", "3", "--json",
                     base_env=slurm.client_env())
    got, ended, stdout = timed_stderr(proc, timeout=120)
    assert proc.returncode == 0, got
    texts = [t for _, t in got]
    starts = [i for i, t in enumerate(texts) if "detect --slurm: one srun on n[1-4]" in t]
    allocated = [i for i, t in enumerate(texts) if "detect --slurm: allocated n[1-4]" in t]
    answers = [i for i, t in enumerate(texts) if " answered (" in t]
    # One line per node whose answer the report holds (on a loaded machine a node may miss the
    # step's deadline: it is then in "missing", and no "answered" line may name it).
    from torchfit.fleet.hostlist import expand_hostlist

    report = json.loads(stdout)
    answered = sorted(n for g in report["groups"] for n in expand_hostlist(g["nodes"]))
    assert starts and allocated and len(answers) == len(answered) >= 3, (texts, report.get("missing"))
    assert starts[0] < allocated[0] < answers[0], texts
    assert texts[answers[-1]].endswith(f"answered ({len(answered)} of 4)"), texts
    assert sorted(texts[i].split("detect --slurm: ")[1].split()[0] for i in answers) == answered
    # as they happen, not all at the end: the first answer a second or more before torchfit ends
    assert ended - got[answers[0]][0] > 1.0, [(round(ended - t, 2), x) for t, x in got]
    assert json.loads(stdout)["groups"]  # stdout stays the report
