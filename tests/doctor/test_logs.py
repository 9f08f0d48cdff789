"""`--log FILE`: verbatim error messages from upstream issues (tests/data/doctor/logs, each citing
its source) mapped to their cause."""

from __future__ import annotations

import pytest

from tests.doctor.conftest import Host, fixture
from torchfit.doctor.logs import PATTERNS, explain_text, parse_log

LOG_CHECKS = {p.id for p in PATTERNS}

CASES = [
    # fixture, the check that fails, words of the evidence, words of the fix
    ("cudnn-found-runtime.txt", "log-cudnn-mismatch", ["built against cuDNN 8.3.2", "found runtime version 8.0.3"],
     ["cudnn-shadowed", "LD_LIBRARY_PATH"]),
    ("cudnn-linked-against.txt", "log-cudnn-mismatch", ["8.3.2", "linked against 8.0.3"], ["cudnn-shadowed"]),
    ("cudnn-v7-integers.txt", "log-cudnn-mismatch", ["cuDNN 7.1.2", "7.6.0"], ["cudnn-shadowed"]),
    ("nccl-commregister.txt", "log-nccl-undefined-symbol", ["lacks ncclCommRegister", "older than NCCL 2.19"],
     ["nccl-shadowed", "pytorch/pytorch#119072"]),
    ("nccl-commresume.txt", "log-nccl-undefined-symbol", ["lacks ncclCommResume", "older than NCCL 2.29.7"],
     ["nccl-cu12-and-cu13", "pytorch/pytorch#186591"]),
    ("driver-too-old-11040.txt", "log-driver-too-old", ["found version 11040 is CUDA 11.4", "1000*major + 10*minor"],
     ["torchfit resolve", "CUDA 11.x"]),
    ("sm120-not-compatible.txt", "log-arch-not-covered", ["no kernels for sm_120"], ["arch-not-covered"]),
    ("no-kernel-image.txt", "log-arch-not-covered", ["no kernel image is available"], ["arch-not-covered"]),
    ("torch-not-compiled-cuda.txt", "log-torch-cpu-build", ["CPU-only build"], ["torch-cpu-build"]),
    ("nvml-mismatch.txt", "log-nvml-mismatch", ["userspace libraries were updated"], ["nvml-mismatch"]),
    ("glibc-2.27.txt", "log-glibc-too-old", ["needs glibc 2.27", "libcurand.so.10"], ["glibc-too-old"]),
    ("nccl-no-socket-interface.txt", "log-nccl-no-socket-interface", ["NCCL_SOCKET_IFNAME"], ["nccl-socket-ifname"]),
    ("nccl-shm.txt", "log-nccl-shm", ["/dev/shm is too small"], ["--shm-size"]),
    ("nvidia-smi-no-driver.txt", "log-nvidia-smi-no-driver", ["cannot reach the kernel module"], ["driver-loaded"]),
]


@pytest.mark.parametrize(("name", "check_id", "evidence", "fix"), CASES, ids=[c[0] for c in CASES])
def test_log_message_maps_to_its_cause(h200: Host, name: str, check_id: str, evidence: list[str], fix: list[str]) -> None:
    log = h200.tmp / name
    log.write_text(fixture(f"logs/{name}"))
    r = h200.doctor("--log", str(log))
    assert r.rc == 1
    c = r.check(check_id)
    assert c["status"] == "fail", c
    assert c["evidence"].startswith(f"{log}:")
    for words in evidence:
        assert words in c["evidence"], (words, c["evidence"])
    for words in fix:
        assert words in c["fix"], (words, c["fix"])
    others = [x["id"] for x in r.data["checks"] if x["area"] == "log" and x["id"] != check_id and x["status"] != "ok"]
    assert others == []


def test_every_log_check_has_a_verbatim_case() -> None:
    assert {c[1] for c in CASES} == LOG_CHECKS


def test_a_healthy_log_passes_every_log_check(h200: Host) -> None:
    log = h200.tmp / "train.log"
    log.write_text(fixture("logs/healthy-training.txt"))
    r = h200.doctor("--log", str(log))
    got = {c["id"]: c["status"] for c in r.data["checks"] if c["area"] == "log"}
    assert got == dict.fromkeys([*LOG_CHECKS, "log-unrecognised"], "ok")
    assert r.rc == 0


def test_without_log_no_log_checks_run(h200: Host) -> None:
    r = h200.doctor()
    assert not [c for c in r.data["checks"] if c["area"] == "log"]


def test_parse_log_line_numbers_and_multiple_hits() -> None:
    text = "ok\n" + fixture("logs/nccl-commregister.txt") + fixture("logs/cudnn-v7-integers.txt")
    hits = parse_log(text)
    assert [(h.pattern, h.line_no) for h in hits] == [("log-cudnn-mismatch", 8), ("log-nccl-undefined-symbol", 7)]


def test_explain_text_for_an_import_error() -> None:
    msg = "/x/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister"
    assert "NCCL 2.19" in (explain_text(msg) or "")
    assert explain_text("all good") is None


def test_error_lines_no_check_knows_are_counted_and_shown(h200: Host) -> None:
    """Issue 28, item 1: three NCCL error lines, one known (no socket interface): the two others
    are said, not passed over in silence."""
    log = h200.tmp / "nccl.log"
    known = fixture("logs/nccl-no-socket-interface.txt").strip().splitlines()
    log.write_text("\n".join([
        "step 10 loss 1.234",
        "gpu07:1234:1290 [0] include/alloc.h:48 NCCL WARN Cuda failure 2 'out of memory'",
        *known,
        "RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: unhandled cuda error",
        "RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: unhandled cuda error",
    ]) + "\n")
    r = h200.doctor("--log", str(log))
    assert r.check("log-nccl-no-socket-interface")["status"] == "fail"
    c = r.check("log-unrecognised")
    assert c["status"] == "warn", c
    assert c["evidence"].startswith("2 error lines not recognised"), c  # the repeated line counted once
    assert f"{log}:2: gpu07:1234:1290 [0] include/alloc.h:48 NCCL WARN Cuda failure" in c["evidence"], c
    assert "NCCL communicator was aborted" in c["evidence"] and "troubleshooting" in c["fix"], c


def test_a_log_line_is_shown_as_written_not_as_emoji(h200: Host) -> None:
    """Tried as a user: rich drew `node1:1234:1290` of an NCCL line as `node1🔢1290` (its emoji
    code `:1234:`) in the text report; every renderer shows the text as it is."""
    log = h200.tmp / "nccl.log"
    log.write_text("node1:1234:1290 [0] NCCL WARN something entirely new :smile: happened\n")
    r = h200.doctor("--log", str(log), json_out=False)
    shown = " ".join(r.stdout.split())  # the report wraps at 120 columns, where a long tmp path pushes it
    assert "node1:1234:1290 [0] NCCL WARN something entirely new :smile: happened" in shown, r.stdout
    assert "\U0001f522" not in r.stdout and "\U0001f604" not in r.stdout


def test_a_credential_in_a_log_line_is_never_echoed(h200: Host) -> None:
    """Issue 34, T2: a log line holding a mirror's credentials (`user:SECRET@`, `?token=`) is shown
    redacted, by the unrecognised-lines check and by a known pattern's evidence alike."""
    log = h200.tmp / "pip.log"
    log.write_text("ERROR: Could not fetch https://alice:S3CRET@mirror.example/simple/torch/ (failed)\n"
                   "RuntimeError: download failed for https://mirror.example/x.whl?token=T0KEN\n")
    r = h200.doctor("--log", str(log))
    assert "S3CRET" not in r.stdout and "T0KEN" not in r.stdout, r.stdout
    c = r.check("log-unrecognised")
    assert "https://alice:***@mirror.example" in c["evidence"] and "token=***" in c["evidence"], c
