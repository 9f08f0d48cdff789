"""verify/watch.py: the watched children (torchrun's argv, the records they write)."""

from __future__ import annotations

import torchfit.verify.model as vmodel
import torchfit.verify.watch as vwatch


def test_torchrun_argv_single_and_several_nodes() -> None:
    one = vwatch.torchrun_argv(
        "/e/bin/python", vmodel.Options(python="/e/bin/python"), 2, "/w/config.json"
    )
    assert one[1].endswith("workers/launch_worker.py")  # torchrun's own main, its ranks forked
    assert [one[0], *one[2:9]] == [
        "/e/bin/python",
        "--start-method",
        "forkserver",
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

