"""runner.py: argv without a shell, timeouts that kill the process group, redacted errors."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.support.fakehost import (
    FakeHost,
    alive,
)
from torchfit.errors import ProbeFailed, ToolMissing, ToolTimeout
from torchfit.runner import Runner, RunResult


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_runner_runs_argv_without_a_shell(tmp_path: Path) -> None:
    runner = Runner(env_overrides={"TF_A": "runner", "TF_B": "runner"})
    code = (
        "import os, sys; print(sys.argv[1]); print(os.getcwd()); print(sys.stdin.read());"
        " print(os.environ['TF_A'], os.environ['TF_B'])"
    )
    res = runner.run(
        [*_py(code), "$(echo hi); rm -rf x"],
        timeout=30,
        cwd=tmp_path,
        input="from stdin",
        env={"TF_B": "call"},
    )
    assert isinstance(res, RunResult) and res.ok
    assert res.stdout.splitlines() == [
        "$(echo hi); rm -rf x",
        str(tmp_path),
        "from stdin",
        "runner call",
    ]
    assert res.argv[0] == sys.executable and res.duration_s > 0


def test_runner_nonzero_exit_is_a_result() -> None:
    res = Runner().run(_py("import sys; sys.stderr.write('boom'); sys.exit(3)"), timeout=30)
    assert (res.returncode, res.stderr, res.ok) == (3, "boom", False)
    with pytest.raises(ProbeFailed) as err:
        res.check()
    assert err.value.code == 3


def test_runner_missing_tool_uses_the_runners_path(host: FakeHost) -> None:
    with pytest.raises(ToolMissing) as err:
        Runner().run(["torchfit-no-such-tool"], timeout=5)
    assert isinstance(err.value, ProbeFailed)
    assert err.value.message == "torchfit-no-such-tool not found on PATH"
    host.script("torchfit-no-such-tool", "print('here')")
    res = Runner(env_overrides={"PATH": str(host.bin)}).run(["torchfit-no-such-tool"], timeout=30)
    assert res.stdout == "here\n"
    assert Runner(env_overrides={"PATH": str(host.bin)}).which("torchfit-no-such-tool")


def test_runner_timeout_kills_the_process_group(host: FakeHost) -> None:
    host.tool("wedged", hang=True)
    runner = Runner(env_overrides={"PATH": str(host.bin)})
    secret_arg = "--index-url=https://user:s3cret@pypi.example/simple"
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        runner.run(["wedged", secret_arg], timeout=0.5)
    assert time.monotonic() - start < 3.0
    assert isinstance(err.value, ProbeFailed)
    assert "s3cret" not in str(err.value)
    assert (
        str(err.value)
        == "wedged --index-url=https://user:***@pypi.example/simple timed out after 0.5 s"
    )
    grandchild = int((host.tmp / "wedged.grandchild").read_text())
    deadline = time.monotonic() + 2
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def test_runner_bad_path_and_bad_cwd(tmp_path: Path) -> None:
    with pytest.raises(ToolMissing) as err:
        Runner().run([str(tmp_path / "nope")], timeout=5)
    assert err.value.message == f"{tmp_path / 'nope'} not found"
    with pytest.raises(ProbeFailed) as err2:
        Runner().run(_py("pass"), timeout=5, cwd=tmp_path / "gone")
    assert not isinstance(err2.value, ToolMissing)
    assert "working directory" in err2.value.message


def test_runner_demands_a_timeout() -> None:
    for bad in (0, -1, None):
        with pytest.raises(ValueError):
            Runner().run(_py("pass"), timeout=bad)  # type: ignore[arg-type]


def test_runner_escalates_to_sigkill() -> None:
    code = (
        "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        " print('ready', flush=True); time.sleep(1000)"
    )
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as err:
        Runner(kill_grace=0.3).run(_py(code), timeout=0.5)
    assert time.monotonic() - start < 3.0
    assert err.value.stdout == "ready\n"


def test_a_stalled_child_is_stopped_with_the_daemon_it_left_in_a_session_of_its_own(tmp_path: Path) -> None:
    """Issue 25: a build backend's grandchild that setsid()s and double-forks, holding the pipes,
    left torchfit's process group: killing the group spared it, and it outlived torchfit."""
    from torchfit.errors import ToolStalled

    pidfile = tmp_path / "daemon.pid"
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n"
    )
    with pytest.raises(ToolStalled):
        Runner(kill_grace=0.5).run(_py(code), timeout=60, stall=2)
    pid = int(pidfile.read_text())
    end = time.monotonic() + 5
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    try:
        assert not alive(pid), "the daemon outlived the stalled child"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_runner_check_redacts() -> None:
    res = Runner().run(
        _py(
            "import sys; sys.stderr.write("
            "'401 from https://__token__:pypi-AgEIcHlw@upload.example/x'); sys.exit(1)"
        ),
        timeout=30,
    )
    with pytest.raises(ProbeFailed) as err:
        res.check()
    assert "pypi-AgEIcHlw" not in str(
        err.value
    ) and "https://__token__:***@upload.example/x" in str(err.value)



@pytest.mark.slow
def test_attack3_a_stopped_child_is_not_a_stall() -> None:
    """SIGSTOP of the installer child (issue 21, class 8): a stopped process moves no byte,
    but it waits on whoever stopped it, not on an index. 82c371b killed it as stalled
    ("made no progress for 2 s") the moment the stall limit passed; the timeout still bounds it."""
    def resume_later(pid_file: Path) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not pid_file.exists():
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the shell has stopped itself
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                if fh.read().rpartition(")")[2].split()[0] == "T":
                    break
            time.sleep(0.05)
        time.sleep(4)  # twice the stall limit, stopped
        os.kill(pid, signal.SIGCONT)

    with tempfile.TemporaryDirectory() as tmp:
        pid_file = Path(tmp) / "pid"
        waker = threading.Thread(target=resume_later, args=(pid_file,), daemon=True)
        waker.start()
        script = f'echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && kill -STOP $$ && echo resumed'
        res = Runner().run(["sh", "-c", script], timeout=60, stall=2)
        waker.join(timeout=40)
    assert res.returncode == 0 and res.stdout.strip() == "resumed"


def test_on_line_hears_each_line_while_the_command_runs_and_the_rest_at_its_end() -> None:
    """verify/detect --slurm say what srun waits for as it happens (issue 26, item 5): the
    runner hands over each complete line within a fraction of a second, in order per stream."""
    seen: list[tuple[float, str, str]] = []
    start = time.monotonic()
    res = Runner().run(["sh", "-c", "echo one; sleep 1.5; echo two >&2; sleep 1.5; printf 'three'"],
                       timeout=30, on_line=lambda stream, line: seen.append((time.monotonic(), stream, line)))
    ended = time.monotonic()
    assert [(s, ln) for _, s, ln in seen] == [("stdout", "one"), ("stderr", "two"), ("stdout", "three")]
    assert seen[0][0] - start < 1.2 and ended - seen[0][0] > 2.0  # "one" long before the end
    assert seen[1][0] - start < 2.7
    assert res.stdout == "one\nthree" and res.stderr == "two\n"


def test_on_start_runs_once_while_the_child_runs(tmp_path: Path) -> None:
    """`on_start`: the caller's work beside the child (planning's page reads beside uv, issue 37),
    called once, after the child started and before it ended."""
    flag = tmp_path / "child-ended"
    seen: list[float] = []
    t0 = time.monotonic()
    res = Runner().run([sys.executable, "-c", f"import time; time.sleep(0.5); open({str(flag)!r}, 'w').close()"],
                       timeout=30, on_start=lambda: seen.append(time.monotonic() - t0))
    assert res.returncode == 0 and flag.exists()
    assert len(seen) == 1
    assert seen[0] < res.duration_s - 0.3  # while the child still ran (its sleep), not after it


def test_no_spawn_forks_while_a_thread_imports_a_module_with_fork_hooks() -> None:
    """A full test run showed a child's stderr begin "Exception ignored in: _releaseLock ...
    cannot release un-acquired lock": requests (and logging with it) imported in the page-reading
    thread while the main thread forked uv with a preexec_fn. The lazy import holds
    background.no_fork; runner.spawn waits for it (a real child, a real thread)."""
    import time

    from torchfit import background, runner

    spawned: list[float] = []

    def start() -> int:
        proc = runner.spawn(["true"])
        spawned.append(time.monotonic())
        code = proc.wait()
        runner.release(proc)
        return code

    with background.no_fork():
        held = time.monotonic()
        job = background.Background(start)
        time.sleep(0.5)
        assert spawned == []  # waiting for the import to end
    assert job.result() == 0 and spawned[0] - held >= 0.5
