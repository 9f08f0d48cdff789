"""progress.py, the one progress protocol, as StderrProgress writes it off a terminal: the
packages and the percent of a step, the heartbeat of a wait (the bytes it moved, how long
nothing moved), every line redacted and free of control sequences."""

from __future__ import annotations

import pytest

from torchfit.progress import FileItem, StderrProgress


def test_plain_lines_say_the_total_the_percent_and_the_package_awaited() -> None:
    import io

    out = io.StringIO()
    p = StderrProgress(out)
    p.files("install", [FileItem("torch 2.13.0+cpu", 191_794_682), FileItem("sympy 1.14.0", 6_300_000),
                        FileItem("mpmath 1.3.0", 536_000), FileItem("six 1.0", 11_000)])
    p.advance("install", ["sympy 1.14.0", "mpmath 1.3.0"], 6_836_000, 198_641_682, "torch 2.13.0+cpu")
    lines = out.getvalue().splitlines()
    assert lines[0] == ("torchfit: [install] 4 packages, 198.6 MB in all: torch 2.13.0+cpu (191.8 MB), "
                        "sympy 1.14.0 (6.3 MB), mpmath 1.3.0 (536.0 KB) and 1 more")
    assert lines[1] == ("torchfit: [install] 3% (6.8 MB of 198.6 MB): sympy 1.14.0, mpmath 1.3.0 ready; "
                        "now torch 2.13.0+cpu")


def test_a_wait_off_a_terminal_says_what_it_awaits_and_what_moved() -> None:
    import io

    out = io.StringIO()
    on_wait = StderrProgress(out).waiting("install", "the torch index")
    assert on_wait is not None
    # (seconds waited, bytes the awaited group moved so far): the first count is the baseline
    for elapsed, moved in ((0, 1000), (9, 2000), (10, 2000), (30, 5_002_000), (39, 5_002_000), (40, 5_002_000),
                           (95, 5_002_000), (125, 6_000_000)):
        on_wait(elapsed, moved)
    lines = [line.split(" since ", 1)[1].split(" ", 1)[1] for line in out.getvalue().splitlines()]
    assert out.getvalue().startswith("torchfit: [install] still waiting for the torch index since ")
    # a line at 10 s, then every 30 s; "nothing for" once the bytes stopped for 5 s or more
    assert lines == ["(10 s; 1.0 KB transferred)", "(40 s; 5.0 MB transferred; nothing for 10 s)",
                     "(95 s; 5.0 MB transferred; nothing for 65 s)", "(125 s; 6.0 MB transferred)"]


def test_a_wait_on_a_terminal_leaves_the_lines_to_the_ticker(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setenv("TERM", "xterm-256color")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    progress = StderrProgress(out)
    assert progress.tty
    on_wait = progress.waiting("install", "the torch index")
    assert on_wait is not None
    on_wait(0, 0)
    on_wait(100, 1 << 20)
    assert out.getvalue() == ""


def test_every_line_is_redacted_and_shows_no_control_sequence() -> None:
    import io

    out = io.StringIO()
    progress = StderrProgress(out)
    progress.step("fetch", "https://bob:hunter2@mirror.example/simple \x1b[31mred\x1b[0m")
    progress.warn("token in https://h/simple?token=s3cr3t")
    text = out.getvalue()
    assert "hunter2" not in text and "s3cr3t" not in text and "\x1b" not in text
    assert text.splitlines()[0] == "torchfit: [fetch] https://bob:***@mirror.example/simple red"
