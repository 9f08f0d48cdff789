"""PEP 751 in lock/: one model, a lenient and a strict reader, one renderer, the accessors."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchfit.errors import BadInput
from torchfit.lock.model import Artifact, Lock, LockedDist
from torchfit.lock.pylock import (
    load_expected,
    parse_lock,
    parse_pylock,
    render_lock,
    requirements_text,
)
from torchfit.lock.toml import Inline
from torchfit.lock.tool import ToolTable


def _dist(name: str, version: str, url: str) -> LockedDist:
    return LockedDist(name, version, (Artifact("wheel", "a" * 64, url, None, unquote(url.rsplit("/", 1)[-1]), 123),))


def test_lock_round_trip_and_no_credentials() -> None:
    lock = Lock(
        packages=(_dist("torch", "2.13.0+cpu", "https://user:tok3n@mirror.example/files/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl"),
                  _dist("sympy", "1.14.0", "file:///opt/pypi/files/sympy-1.14.0-py3-none-any.whl")),
        tool=ToolTable.from_toml({"schema": 1, "torch-index-url": "https://user:tok3n@mirror.example/simple",
                                  "plan": {"torch": "2.13.0"}, "note": None,
                                  "nested": {"list": [1, 2], "inline": Inline(a="b")}}, "test"),
        requires_python="==3.11.*",
    )
    text = render_lock(lock)
    assert "tok3n" not in text
    again = parse_lock(text, "pylock.toml")
    assert [d.name for d in again.packages] == ["torch", "sympy"]
    assert again.packages[0].artifacts[0].url == "https://mirror.example/files/torch-2.13.0%2Bcpu-cp311-cp311-linux_x86_64.whl"
    assert again.tool.torch_index_url == "https://user:***@mirror.example/simple"
    assert again.tool.extra == {"nested": {"list": [1, 2], "inline": {"a": "b"}}}  # an unknown key kept
    assert requirements_text(again.packages[:1]) == f"torch==2.13.0+cpu --hash=sha256:{'a' * 64}\n"


@pytest.mark.parametrize("text,expect", [
    ('lock-version = "2.0"', "lock-version"),
    ('lock-version = "1.0"\n[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\ntorch = "2"\n', "no [[packages]]"),
    ('lock-version = "1.0"\n[[packages]]\nname = "x"\nversion = "1"\n[[packages.wheels]]\nurl = "u"\n'
     'hashes = { sha256 = "zz" }\n[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\ntorch = "2"\n', "sha256"),
])
def test_bad_locks(text: str, expect: str) -> None:
    with pytest.raises(BadInput, match=expect.replace("[", r"\[")):
        parse_lock(text, "pylock.toml")


UV_STYLE = """lock-version = "1.0"
requires-python = "==3.11.*"
[[packages]]
name = "Torch"
version = "2.13.0+cpu"
wheels = [{ url = "https://h/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl", hashes = { sha256 = "A64", blake2b = "CAFE128" } }]
[[packages]]
name = "local-thing"
archive = { path = "dist/local_thing-1.0.tar.gz", hashes = { sha256 = "B64" } }
""".replace("A64", "a" * 64).replace("B64", "b" * 64).replace("CAFE128", "CAFE" * 32)


def test_the_lenient_reader_takes_any_pep751_lock_and_keeps_every_hash() -> None:
    lock = parse_pylock(UV_STYLE, "uv output")
    torch, thing = lock.packages
    assert torch.name == "torch" and torch.version == "2.13.0+cpu" and thing.version is None
    assert torch.artifacts[0].all_hashes() == {"sha256": "a" * 64, "blake2b": "cafe" * 32}
    assert thing.artifacts[0].kind == "sdist" and thing.artifacts[0].path == "dist/local_thing-1.0.tar.gz"
    assert lock.tool == ToolTable() and lock.plan() == {} and lock.expected() == {}
    # The strict reader (install --lock) refuses what is not a torchfit lock.
    with pytest.raises(BadInput, match=r"no \[tool.torchfit\] table"):
        parse_lock(UV_STYLE, "uv output")


def test_load_expected_is_tolerant(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert load_expected(str(tmp_path / "none.toml")) == (None, None)
    bad = tmp_path / "bad.toml"
    bad.write_text("[tool.torchfit]\nexpected = 5\n")
    assert load_expected(str(bad))[0] is None and "not a table" in str(load_expected(str(bad))[1])


def test_replace_lock_is_atomic(tmp_path: Path) -> None:
    """The new lock replaces the old one whole, with its mode; a write that fails (here the
    file-size limit, as a full disk would) leaves the old lock byte for byte and no temp file."""
    import os
    import stat
    import subprocess
    import sys

    from torchfit.lock.model import Artifact, Lock, LockedDist
    from torchfit.lock.pylock import load_pylock, replace_lock

    def lock(n: int) -> Lock:
        pkgs = tuple(LockedDist(f"pkg-{i}", "1.0", (Artifact("wheel", "a" * 64, f"file:///w/pkg_{i}-1.0-py3-none-any.whl"),))
                     for i in range(n))
        return Lock(packages=pkgs, tool=ToolTable(schema=1))

    path = tmp_path / "pylock.toml"
    replace_lock(str(path), lock(1))
    path.chmod(0o640)
    replace_lock(str(path), lock(3))
    assert [d.name for d in load_pylock(str(path)).packages] == ["pkg-0", "pkg-1", "pkg-2"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    before = path.read_bytes()
    code = (
        "import resource, signal, sys\n"
        "from torchfit.lock.pylock import Artifact, Lock, LockedDist, replace_lock\n"
        "from torchfit.lock.tool import ToolTable\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before)}, {len(before)}))\n"
        "pkgs = tuple(LockedDist(f'pkg-{i}', '1.0', (Artifact('wheel', 'a' * 64, f'file:///w/{i}.whl'),))"
        " for i in range(50))\n"
        "try:\n"
        f"    replace_lock({str(path)!r}, Lock(packages=pkgs, tool=ToolTable(schema=1)))\n"
        "except OSError as exc:\n"
        "    print('failed', exc.errno)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "src"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert res.stdout.startswith("failed"), res.stdout + res.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pylock.toml"]


# --- attack round 3 (issue 21): a tampered lock must not inject installer options ------------

_GOOD = {"name": "mpmath", "version": "1.3.0", "url": "https://files.example/mpmath-1.3.0-py3-none-any.whl",
         "sha256": "a" * 64, "index": "https://pypi.example/simple", "marker": "python_version >= '3.8'",
         "filename": "mpmath-1.3.0-py3-none-any.whl"}
_INJECTIONS = ("\n--extra-index-url http://127.0.0.1:9/simple", "\n-r /etc/shadow", "\r\n--index-url http://x/",
               " --hash=sha256:" + "b" * 64 + "\n-c /etc/passwd", "\x00", "\x1b[2J", "\u2028-e .", "\t-r x",
               "\n", " ")


def _lock_text(**fields: object) -> str:
    """A torchfit lock of one package, `fields` replacing the good ones (raw TOML values)."""
    from torchfit.lock.toml import dumps_toml

    f = {**_GOOD, **fields}
    wheel = {"name": f["filename"], "url": f["url"], "hashes": Inline(sha256=f["sha256"])}
    pkg = {"name": f["name"], "version": f["version"], "marker": f["marker"], "index": f["index"], "wheels": [wheel]}
    return dumps_toml({"lock-version": "1.0", "packages": [pkg],
                       "tool": {"torchfit": {"schema": 1, "plan": {"torch": "2.13.0"}}}})


_LINE = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?==[0-9A-Za-z.+!_-]+( --hash=sha256:[0-9a-f]{64})+")


@pytest.mark.parametrize(("field", "injected"), [
    (f, i) for f in sorted(_GOOD) for i in _INJECTIONS
    if not (i == " " and f in ("marker", "filename"))  # a space belongs in a marker, and may in a file name
])
def test_attack3_lock_fields_carrying_options_are_refused(field: str, injected: str) -> None:
    """Every field that can reach an installer is refused when it carries more than its
    own form: BadInput naming the entry, one line, the value escaped."""
    text = _lock_text(**{field: str(_GOOD[field]) + injected})
    with pytest.raises(BadInput) as info:
        parse_lock(text, "pylock.toml")
    assert "packages[0]" in info.value.message and "\n" not in info.value.message
    assert "\x1b" not in info.value.message and "\x00" not in info.value.message


def test_attack3_a_good_lock_still_reads() -> None:
    lock = parse_lock(_lock_text(), "pylock.toml")
    assert requirements_text(lock.packages) == f"mpmath==1.3.0 --hash=sha256:{'a' * 64}\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(_GOOD)), value=st.text(max_size=60), where=st.sampled_from(["pre", "post", "all"]))
def test_attack3_any_field_value_gives_badinput_or_one_clean_line_per_package(field: str, value: str,
                                                                              where: str) -> None:
    """Whatever text a field holds, the reader answers BadInput, or the requirements file
    has exactly one `name==version --hash=...` line per package and nothing else."""
    good = str(_GOOD[field])
    raw = {"pre": value + good, "post": good + value, "all": value}[where]
    try:
        lock = parse_lock(_lock_text(**{field: raw}), "pylock.toml")
    except BadInput as exc:
        assert "\n" not in exc.message
        return
    text = requirements_text(lock.packages)
    lines = text.splitlines()
    assert len(lines) == 1 and text.endswith("\n") and text.count("\n") == 1, text
    assert _LINE.fullmatch(lines[0]), lines[0]
    assert "--" not in lines[0].replace(" --hash=sha256:", "")


@settings(max_examples=200, deadline=None)
@given(name=st.text(max_size=30), version=st.text(max_size=30))
def test_attack3_requirements_text_checks_its_parts_itself(name: str, version: str) -> None:
    """A LockedDist built by other code (not the reader) cannot inject either."""
    d = LockedDist(name, version, (Artifact("wheel", "c" * 64, "https://h/x.whl"),))
    try:
        text = requirements_text([d])
    except BadInput:
        return
    assert text.count("\n") == 1 and _LINE.fullmatch(text.rstrip("\n")), text


@pytest.mark.parametrize(
    "text", ["not toml [[[", "[tool]\ntorchfit = 3\n", "[tool.torchfit]\nexpected = 5\n", ""]
)
def test_lock_is_read_tolerantly(tmp_path: Path, text: str) -> None:
    lock = tmp_path / "pylock.toml"
    lock.write_text(text)
    expected, err = load_expected(str(lock))
    assert (expected is None) == (err is not None) or expected == {}
    assert load_expected(str(tmp_path / "none.toml")) == (None, None)


GOOD_LOCK = ('lock-version = "{version}"\n[[packages]]\nname = "x"\nversion = "1"\n[[packages.wheels]]\n'
             'url = "https://h/x-1-py3-none-any.whl"\nhashes = {{ sha256 = "' + "a" * 64 + '" }}\n'
             '[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\n{plan}\n')


@pytest.mark.parametrize(("version", "plan", "expect"), [
    ("1.0\\nrm -rf /", 'torch = "2.13.0"', "lock-version"),
    ("1.0 garbage", 'torch = "2.13.0"', "lock-version"),
    ("1", 'torch = "2.13.0"', "lock-version"),
    ("1.0", 'torch = "2.13.0; echo pwned"', r"torch '2.13.0; echo pwned' is not a version"),
    ("1.0", 'torch = "2.13.0\\necho pwned"', "torch must be one line"),
    ("1.0", "torch = 5", "torch must be one line of text"),
    ("1.0", 'torch = "2.13.0"\nvariant = "cu128 && id"', "is not a torch variant"),
    ("1.0", 'torch = "2.13.0"\ntorchvision = "$(id)"', "torchvision '$(id)' is not a version"),
    ("1.0", 'torch = "2.13.0"\nproject = ["numpy; rm -rf"]', "project holds"),
    ("1.0", 'torch = "2.13.0"\nproject = "numpy"', "project must be a list of strings"),
    ("1.0", 'torch = "2.13.0"\npython = "3.11; id"', "is not a Python version"),
])
def test_the_plan_table_and_lock_version_of_a_lock_are_checked(version: str, plan: str, expect: str) -> None:
    """Issue 25: a lock's [tool.torchfit.plan] is input (shell text in torch was an internal error at
    install), and lock-version is PEP 751's MAJOR.MINOR with major 1 (a newline in it was accepted)."""
    with pytest.raises(BadInput, match=re.escape(expect) if "'" in expect else expect):
        parse_lock(GOOD_LOCK.format(version=version, plan=plan), "pylock.toml")


def test_a_good_plan_table_still_reads() -> None:
    lock = parse_lock(GOOD_LOCK.format(version="1.0", plan='torch = "2.13.0"\nvariant = "cu128"\npython = "3.14t"\n'
                                       'project = ["numpy>=2; python_version >= \'3.10\'"]'), "pylock.toml")
    assert lock.plan()["variant"] == "cu128"


# --- PEP 751's own rules, through packaging.pylock, for a lock install --lock rebuilds (issue 28, item 11)

_ONE = ('lock-version = "1.0"\ncreated-by = "x"\n[[packages]]\nname = "sympy"\nversion = "1.14.0"\n{extra}'
        'wheels = [{{ url = "https://e.org/sympy-1.14.0-py3-none-any.whl", hashes = {{ sha256 = "' + "a" * 64
        + '" }}{wheel} }}]\n[tool.torchfit]\nschema = 1\n[tool.torchfit.plan]\ntorch = "2.13.0"\n')


@pytest.mark.parametrize(("extra", "wheel", "said"), [
    ('dependencies = "numpy"\n', "", "expected Sequence) in 'packages[0].dependencies'"),
    ("", ', upload-time = "yesterday"', "expected datetime) in 'packages[0].wheels[0].upload-time'"),
    ('vcs = { type = "git", url = "https://e.org/x.git", commit-id = "abc" }\n', "",
     "None of vcs, directory, archive must be set if sdist or wheels are set in 'packages[0]'"),
])
def test_what_pep_751_forbids_is_refused_through_packaging(extra: str, wheel: str, said: str) -> None:
    text = _ONE.format(extra=extra, wheel=wheel)
    with pytest.raises(BadInput) as err:
        parse_lock(text, "pylock.toml")
    assert str(err.value).startswith("pylock.toml: not a valid PEP 751 lock: ") and said in str(err.value)
    assert "\n" not in str(err.value)
    assert parse_pylock(text, "pylock.toml").packages  # the lenient reader (uv's answer, export --lock) reads it


def test_a_lock_without_created_by_is_still_read() -> None:
    lock = parse_lock(_ONE.format(extra="", wheel="").replace('created-by = "x"\n', ""), "pylock.toml")
    assert [d.name for d in lock.packages] == ["sympy"]
