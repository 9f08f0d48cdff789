"""`torchfit completion bash|zsh` (cli/commands/completion.py): generated from the parser by
shtab, and tried in a real bash: sourced, `complete -p torchfit`, then completions of
`torchfit ins<TAB>` and of an option, through COMP_WORDS/COMP_CWORD as bash calls them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import bad_input, run_cli

BASH = shutil.which("bash")


def complete(script: Path, *words: str) -> list[str]:
    """What the completion function answers for the command line `words` (the last one being typed)."""
    words_sh = " ".join(f"'{w}'" for w in words)
    program = f"""
        source '{script}' || exit 9
        spec=$(complete -p torchfit) || exit 8
        fn=${{spec##* -F }}; fn=${{fn%% *}}
        COMP_WORDS=({words_sh}); COMP_CWORD={len(words) - 1}
        COMP_LINE="${{COMP_WORDS[*]}}"; COMP_POINT=${{#COMP_LINE}}
        "$fn" torchfit "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
        printf '%s\\n' "${{COMPREPLY[@]}}"
    """
    proc = subprocess.run([BASH or "bash", "--norc", "--noprofile", "-c", program], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    proc = run_cli("completion", "bash")
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "torchfit.bash"
    script.write_text(proc.stdout)
    spec = subprocess.run([BASH or "bash", "--norc", "-c", f"source '{script}'; complete -p torchfit"],
                          capture_output=True, text=True, timeout=60)
    assert spec.returncode == 0 and spec.stdout.strip().endswith(" torchfit"), spec
    assert " -F " in spec.stdout
    assert complete(script, "torchfit", "ins") == ["install"]
    assert set(complete(script, "torchfit", "")) >= {"detect", "resolve", "install", "doctor", "completion", "docs"}
    assert complete(script, "torchfit", "doctor", "--fi") == ["--fix"]
    assert complete(script, "torchfit", "completion", "") == ["bash", "zsh"]
    # a directory option completes paths
    (tmp_path / "envs").mkdir()
    assert complete(script, "torchfit", "doctor", "--env", str(tmp_path / "en")) == [str(tmp_path / "envs")]


def test_zsh_script_is_a_compdef_of_every_command() -> None:
    proc = run_cli("completion", "zsh")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("#compdef torchfit")
    for command in ("install", "doctor", "completion", "docs"):
        assert f"{command}:" in proc.stdout or f"'{command}'" in proc.stdout, command
    if shutil.which("zsh"):  # a syntax check where zsh is installed
        check = subprocess.run(["zsh", "-n"], input=proc.stdout, capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stderr


def test_an_unknown_shell_is_one_line() -> None:
    line = bad_input(run_cli("completion", "fish"))
    assert "invalid choice: 'fish'" in line


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_each_option_completes_the_kind_of_word_it_takes(tmp_path: Path) -> None:
    """Issue 34, K1: `export -o FILE` offered directories only, `resolve --python SPEC` file names."""
    proc = run_cli("completion", "bash")
    script = tmp_path / "torchfit.bash"
    script.write_text(proc.stdout)
    (tmp_path / "plan.txt").write_text("x")
    (tmp_path / "packs").mkdir()
    assert str(tmp_path / "plan.txt") in complete(script, "torchfit", "export", "-o", str(tmp_path / "p"))
    assert complete(script, "torchfit", "pack", "-o", str(tmp_path / "p")) == [str(tmp_path / "packs")]
    assert complete(script, "torchfit", "resolve", "--python", str(tmp_path / "p")) == []
