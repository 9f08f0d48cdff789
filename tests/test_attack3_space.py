"""torchfit.space (issue 21, class 1): a child's "no space" line gives the path that ran out,
whatever the path holds (hypothesis over paths, in uv's and pip's wordings); an OSError with a
relative file name (opened beside a directory descriptor) is placed in its directory."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from torchfit.space import Place, from_oserror, space_error_in

SEGMENT = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="/`'\"\n"),
                  min_size=1, max_size=12)
PATHS = st.lists(SEGMENT, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(path=PATHS, quota=st.booleans())
def test_attack3_a_childs_no_space_line_names_its_path(path: str, quota: bool) -> None:
    why = "Disk quota exceeded (os error 122)" if quota else "No space left on device (os error 28)"
    lines = [
        f"error: Failed to install: torch\n  cause: failed to write to file `{path}`: {why}",
        f"ERROR: Could not install packages due to an OSError: [Errno {122 if quota else 28}] "
        f"{why.split(' (')[0]}: '{path}'",
    ]
    if not any(ch.isspace() for ch in path):  # uv's bare form: a path ends at a space
        lines.append(f"  cause: failed to copy file from /cache/a to {path}: {why}")
    for text in lines:
        assert space_error_in("Prepared 10 packages\n" + text + "\n") == (path, quota), text


def test_attack3_no_space_line_means_none() -> None:
    assert space_error_in("error: Failed to download torch: HTTP 404\n/tmp/x") is None


def test_attack3_a_relative_file_name_is_placed_in_its_directory(tmp_path: Path) -> None:
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), ".torchfit-owner")
    err = from_oserror(exc, "verify: its work directory", [Place("TMPDIR", str(tmp_path), "fix")], path=str(tmp_path))
    assert err.path == str(tmp_path / ".torchfit-owner") and err.role == "TMPDIR" and err.exit_code == 1
    assert err.to_json()["reference"] == "disk-full"
