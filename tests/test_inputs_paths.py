"""inputs.py on paths (issue 21, class 4): what no env could survive is refused up front, one
line, the path shown escaped; every path printed is escaped; hypothesis over path strings."""

from __future__ import annotations

import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchfit.errors import BadInput
from torchfit.inputs import check_prefix_text, shell_word, shown, terminal_text

# Path pieces an attacker (or a careless script) produces: letters of any script, spaces,
# quotes, shell metacharacters, C0/C1 controls, ANSI escapes, bidi overrides, raw bytes of a
# name that is not UTF-8 (surrogateescape), long runs.
pieces = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from(["\n", "\t", ":", "\x1b[31m", "\x1b]8;;http://x\x07", "\u202e", "\u2066", "\u200f", "\r",
                     "\x7f", "\x9b", "\udcff", "\udc80", " ", "'", '"', "$(id)", "`", "\\", "é", "日本", "~"]),
    st.builds(lambda n: "x" * n, st.integers(200, 300)),
)
paths = st.lists(pieces, min_size=1, max_size=6).map(lambda xs: "/tmp/" + "".join(xs).replace("\0", ""))

BIDI = set("\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")


def _safe_for_a_terminal(text: str) -> bool:
    """No character a terminal acts on or that hides the text: C0 (but tab, newline), DEL, C1,
    the bidi controls, a raw byte of a name that is not UTF-8."""
    return not any((ord(ch) < 0x20 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F or ch in BIDI
                   or 0xDC80 <= ord(ch) <= 0xDCFF for ch in text)


@settings(max_examples=500, deadline=None)
@given(paths)
def test_attack3_shown_escapes_every_character_a_terminal_acts_on(path: str) -> None:
    out = shown(path)
    assert out.isprintable() and _safe_for_a_terminal(out), (path, out)
    out.encode("utf-8")  # printable on any UTF-8 terminal, never a UnicodeEncodeError
    if path.isprintable():
        assert out == path  # a plain name is shown as it is


@settings(max_examples=500, deadline=None)
@given(paths)
def test_attack3_prefix_is_refused_exactly_when_no_env_could_work(path: str) -> None:
    cannot = (any(ch in path for ch in "\n\t:") or any("\udc80" <= ch <= "\udcff" for ch in path)
              or any(len(part.encode("utf-8", "surrogateescape")) > 255 - 32 for part in path.split("/")))
    try:
        check_prefix_text(path, "--prefix")
    except BadInput as exc:
        assert cannot, (path, exc.message)
        assert "\n" not in exc.message and exc.message.isprintable() and _safe_for_a_terminal(exc.message)
        assert exc.message.startswith("--prefix /tmp/")
        return
    assert not cannot, path


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_attack3_terminal_text_lets_no_control_through(text: str) -> None:
    out = terminal_text(text)
    assert _safe_for_a_terminal(out), (text, out)
    out.encode("utf-8")


@settings(max_examples=40, deadline=None)
@given(paths)
def test_attack3_shell_word_reads_back_as_the_same_bytes_in_bash(path: str) -> None:
    word = shell_word(path)
    assert word.isprintable() and _safe_for_a_terminal(word)
    res = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, timeout=30)
    assert res.returncode == 0 and res.stdout == os.fsencode(path), (path, word, res.stdout)


def test_attack3_plain_prefixes_pass() -> None:
    for path in ["/tmp/env", "/tmp/my env", "/tmp/it's", "/tmp/日本/é", "/tmp/" + "x" * 200, "/tmp/a$(id)b"]:
        check_prefix_text(path, "--prefix")
    with pytest.raises(BadInput, match=r"4[0-9]{3} bytes long"):
        check_prefix_text("/" + "a/" * 2000, "--prefix")


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--env", "{d}/no\x1b[31menv\n"],
        ["resolve", "-r", "{d}/r.txt"],
        ["resolve", "--project", "{d}"],
        ["install", "--lock", "{d}/r.txt", "--prefix", "/tmp/never-made-by-this-test"],
        ["export", "--format", "requirements", "--lock", "{d}/r.txt"],
        ["resolve", "--facts", "{d}/r.txt"],
    ],
    ids=["verify-env", "r", "project", "install-lock", "export-lock", "facts"],
)
def test_user_paths_in_messages_are_shown_escaped_not_stripped(tmp_path: os.PathLike[str], args: list[str]) -> None:
    """Issue 25 (round 3's partial): `verify --env`, `-r`, `--lock` paths lost their control characters
    (`/tmp/nored`): a different path from the one given. Now shown escaped, as `shown` writes them."""
    from tests.support.cli import run_clean

    d = os.path.join(str(tmp_path), "d\x1b[31mx")
    os.mkdir(d)
    with open(os.path.join(d, "r.txt"), "w") as fh:
        fh.write("foo==\n")
    with open(os.path.join(d, "pyproject.toml"), "w") as fh:
        fh.write("[project]\nname = 5\n")
    out = run_clean(*[a.replace("{d}", d) for a in args], timeout=60)
    assert out.returncode == 2, out.stderr
    assert "d\\x1b[31mx" in out.stderr or "no\\x1b[31menv\\n" in out.stderr, out.stderr
    assert "\x1b" not in out.stderr
