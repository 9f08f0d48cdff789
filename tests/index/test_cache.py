"""index/cache.py under attack (issue 21, class 0c): the HTTP cache never writes through a link
planted in it, never reads a FIFO (or waits on one), and is not used at all in a directory
another user owns or can write. A real second user plants the files."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.support.mounts import as_user, second_user, shared_dir
from torchfit.index.cache import DiskCache

KEY = DiskCache.key("https://example.invalid/simple/torch/", "text/html")


def test_attack3_store_never_writes_through_planted_symlinks(tmp_path: Path) -> None:
    """82c371b opened `KEY.body.tmpPID` with O_TRUNC and no O_NOFOLLOW: a symlink there (or at
    the record's own name) made it overwrite the link's target."""
    root = tmp_path / "http"
    root.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for suffix in (".body", ".json"):
        os.symlink(victim, root / f"{KEY}{suffix}.tmp{os.getpid()}")
    os.symlink(victim, root / f"{KEY}.body")
    cache = DiskCache(root)
    cache.store(KEY, {"url": "https://example.invalid/simple/torch/", "etag": "x"}, b"<html>fresh</html>")
    assert victim.read_text() == "precious\n"
    meta_body = cache.load(KEY)
    assert meta_body is not None and meta_body[1] == b"<html>fresh</html>"
    assert not (root / f"{KEY}.body").is_symlink()


def test_attack3_a_fifo_or_link_in_the_cache_is_a_miss_at_once(tmp_path: Path) -> None:
    root = tmp_path / "http"
    root.mkdir(mode=0o700)
    cache = DiskCache(root)
    cache.store(KEY, {"url": "u"}, b"body")
    os.unlink(root / f"{KEY}.body")
    os.mkfifo(root / f"{KEY}.body")
    start = time.monotonic()
    assert cache.load(KEY) is None
    assert time.monotonic() - start < 2


def test_attack3_a_cache_directory_of_another_user_is_not_used(tmp_path: Path) -> None:
    attacker = second_user()
    with shared_dir() as shared:
        root = shared / "http"
        as_user(attacker, "mkdir", "-m", "0777", str(root))
        cache = DiskCache(root)
        cache.store(KEY, {"url": "u"}, b"body")
        assert list(root.iterdir()) == []  # nothing written into their directory
        # A record they planted there is never believed.
        as_user(attacker, "sh", "-c", f"printf body > {root}/{KEY}.body; "
                f"printf '{{\"sha256\": \"230d8358dc8e8890b4c58deeb62912ee2f20357ae92a5cc861b98e68fe31acb5\"}}' "
                f"> {root}/{KEY}.json")
        assert cache.load(KEY) is None
