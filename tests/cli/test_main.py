"""cli.main, the one boundary: a full disk on stdout is one line and exit 2, a closed pipe exit 0
(defect #23 of the 2026-11 attack, issue 13)."""

from __future__ import annotations

import pytest

from tests.support.cli import clean_env, run_cli, start_cli


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["detect", "--json"],
                                  ["matrix", "show", "--json"], ["matrix", "show"]])
def test_full_disk_on_stdout_is_not_a_bug(args: list[str]) -> None:
    """Defect #23 of the 2026-11 attack (issue 13)."""
    with open("/dev/full", "w") as full:
        proc = run_cli(*args, stdout=full, base_env=clean_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr


@pytest.mark.parametrize("args", [["resolve", "--assume", "gpu=none"], ["matrix", "show"], ["detect"]])
def test_a_closed_pipe_on_stdout_exits_0(args: list[str]) -> None:
    """Defect #23 of the 2026-11 attack (issue 13)."""
    proc = start_cli(*args, base_env=clean_env(), text=False)
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"Exception ignored" not in err



def test_requirements_come_anywhere_among_the_options() -> None:
    """Issue 25: `resolve torch --variant cpu numpy` was "unrecognized arguments: numpy"."""
    from torchfit.cli.options import build_parser

    for argv in (["resolve", "torch", "--variant", "cpu", "numpy"], ["install", "--variant", "cpu", "torch", "-r",
                                                                    "r.txt", "numpy", "--prefix", "p"],
                 ["export", "torch", "--format", "requirements", "numpy"]):
        args = build_parser(argv).parse_args(argv)
        assert args.requirements == ["torch", "numpy"] and args.variant in ("cpu", None), args
    argv = ["add", "--env", "e", "numpy", "--json", "scipy"]
    assert build_parser(argv).parse_args(argv).packages == ["numpy", "scipy"]
    out = run_cli("resolve", "--bogus", "torch", "numpy")
    assert out.returncode == 2 and "unrecognized arguments: --bogus" in out.stderr, out.stderr


def test_an_option_value_is_still_its_options() -> None:
    from torchfit.cli.options import build_parser

    argv = ["resolve", "--python", "3.12", "torch", "--assume", "gpu=none", "numpy", "--facts", "f.json"]
    args = build_parser(argv).parse_args(argv)
    assert (args.requirements, args.python, args.assume, args.facts) == (["torch", "numpy"], "3.12", ["gpu=none"],
                                                                         ["f.json"])
