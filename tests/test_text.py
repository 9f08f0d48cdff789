"""torchfit.text: the text helpers every layer shares, each defined once (issue 28, item 7):
two size formats with different units, the tail and first line of a child's output,
the terminal escapes."""

from __future__ import annotations

from torchfit.text import first_line, format_bytes, format_bytes_iec, strip_ansi, tail


def test_decimal_and_binary_sizes_are_two_names() -> None:
    assert format_bytes(999) == "999 B"
    assert format_bytes(1_500_000) == "1.5 MB"
    assert format_bytes(3 * 10**12) == "3000.0 GB"
    assert format_bytes_iec(1 << 20) == "1 MiB"
    assert format_bytes_iec(4 << 30) == "4 GiB"
    assert format_bytes_iec(1000) == "1000 B"  # not a binary multiple: said exactly


def test_tail_keeps_the_last_non_blank_lines_redacted() -> None:
    text = "\n".join(f"line {i}" for i in range(50)) + "\n\n  \nfrom https://user:tok3n@example.org/simple\n"
    got = tail(text, 3).splitlines()
    assert got[:2] == ["line 48", "line 49"]
    assert "tok3n" not in got[2] and "example.org" in got[2]


def test_first_line_skips_blank_lines_and_the_loaders_preload_complaint() -> None:
    noise = "ERROR: ld.so: object '/x/libfoo.so' from LD_PRELOAD cannot be preloaded (cannot open): ignored."
    assert first_line(f"\n{noise}\n  NVIDIA-SMI has failed  \nmore") == "NVIDIA-SMI has failed"
    assert first_line("x" * 500, 10) == "x" * 10
    assert first_line(" \n") == ""


def test_strip_ansi_removes_the_underline_nvidia_smi_prints() -> None:
    assert strip_ansi("\x1b[4mGPU0\x1b[0m\tGPU1\x1b[?25l") == "GPU0\tGPU1"

