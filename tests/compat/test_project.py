"""compat/project.py: requirements files and pyproject.toml as values (issue 25: bounds, duplicates,
`${VAR}` never echoed expanded, a linked file never quoted, pyproject's types checked)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchfit.compat.project import (
    MAX_REQUIREMENT_FILES,
    MAX_REQUIREMENT_LINES,
    SourceFile,
    parse_pyproject,
    parse_requirements_file,
)
from torchfit.errors import BadInput


def _reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    reads: list[str] = []

    def read(path: str) -> str:
        reads.append(os.path.normpath(path))
        return files[os.path.normpath(path)]

    return read, reads


def test_a_fan_out_of_includes_reads_each_file_once_and_ends() -> None:
    """17 files each naming the next four: 2,500+ paths through them, 17 reads."""
    files = {f"r{i}.txt": "".join(f"-r r{j}.txt\n" for j in range(i + 1, min(i + 5, 17))) + f"pkg{i}==1.0\n"
             for i in range(17)}
    read, reads = _reader(files)
    start = time.monotonic()
    spec = parse_requirements_file(files["r0.txt"], "r0.txt", read, {})
    assert time.monotonic() - start < 2
    assert sorted(reads) == sorted(f"r{i}.txt" for i in range(1, 17))
    assert [r.text for r in spec.requirements] == [f"pkg{i}==1.0" for i in range(16, -1, -1)][::-1] or \
        sorted(r.text for r in spec.requirements) == sorted(f"pkg{i}==1.0" for i in range(17))
    assert len(spec.requirements) == 17


def test_a_cycle_is_still_named() -> None:
    read, _ = _reader({"a.txt": "-r b.txt\n", "b.txt": "-r a.txt\n"})
    with pytest.raises(BadInput, match=r"b\.txt:1: '-r a\.txt' includes a file that includes it \(a cycle\)"):
        parse_requirements_file("-r b.txt\n", "a.txt", read, {})


def test_too_many_files_is_one_line() -> None:
    n = MAX_REQUIREMENT_FILES + 5
    files = {f"r{i}.txt": f"-r r{i + 1}.txt\n" if i % 10 else "" for i in range(n + 1)}
    top = "".join(f"-r r{i}.txt\n" for i in range(n))
    read, _ = _reader(files)
    with pytest.raises(BadInput, match=f"more than {MAX_REQUIREMENT_FILES} files"):
        parse_requirements_file(top, "top.txt", read, {})


def test_too_many_lines_is_one_line() -> None:
    text = "".join(f"pkg{i}\n" for i in range(MAX_REQUIREMENT_LINES + 1))
    with pytest.raises(BadInput, match="more than 50,000 lines in all"):
        parse_requirements_file(text, "big.txt", _reader({})[0], {})


def test_duplicates_are_kept_once_with_their_first_place() -> None:
    read, _ = _reader({"b.txt": "numpy==2.0\nrequests\n"})
    spec = parse_requirements_file("numpy==2.0\n-r b.txt\nnumpy==2.0\n-c b.txt\n", "a.txt", read, {})
    assert [(r.text, r.origin) for r in spec.requirements] == [("numpy==2.0", "a.txt:1"), ("requests", "b.txt:2")]


def test_an_expanded_variable_is_never_echoed() -> None:
    env = {"TOKEN": "s3cr3t-value"}
    for text in ("foo==${TOKEN}bad\n", "-e ${TOKEN}\n", "--bogus ${TOKEN}\n", "./${TOKEN}\n",
                 "torch @ https://${TOKEN}@host/torch.whl\n", "torch[${TOKEN}]\n", "pkg ${TOKEN}\n",
                 "--index-url ${TOKEN} extra\n"):
        with pytest.raises(BadInput) as err:
            parse_requirements_file(text, "r.txt", _reader({})[0], env)
        assert "s3cr3t" not in str(err.value), (text, str(err.value))
        if text.startswith(("foo", "-e", "--bogus", "./", "pkg")):
            assert "${TOKEN}" in str(err.value), (text, str(err.value))  # the line as written


def test_the_lines_of_a_linked_file_are_not_quoted() -> None:
    with pytest.raises(BadInput) as err:
        parse_requirements_file(SourceFile("hunter2 is my password\n", quotable=False), "link.txt", _reader({})[0], {})
    assert "hunter2" not in str(err.value) and "link.txt:1" in str(err.value)

    def linked(path: str) -> SourceFile:
        return SourceFile("machine x login me password hunter2\n", quotable=False)

    with pytest.raises(BadInput) as err:
        parse_requirements_file("-r creds\n", "r.txt", linked, {})
    assert "hunter2" not in str(err.value) and "creds:1" in str(err.value)


@pytest.mark.parametrize(
    ("project", "key"),
    [
        ({"name": "a", "dynamic": 5}, "[project].dynamic"),
        ({"name": "a", "dynamic": [5]}, "[project].dynamic"),
        ({"name": ["a"], "dependencies": ["numpy"]}, "[project].name"),
        ({"name": "a", "dependencies": [5]}, "[project].dependencies[0]"),
        ({"name": "a", "dependencies": ["numpy", ["x"]]}, "[project].dependencies[1]"),
        ({"name": "a", "dependencies": "numpy"}, "[project].dependencies"),
        ({"name": "a", "optional-dependencies": {"gpu": [1.5]}}, "[project.optional-dependencies].gpu[0]"),
        ({"name": "a", "optional-dependencies": {"Gpu": ["numpy"], "gpu": ["scipy"]}}, "'Gpu' and 'gpu'"),
        ({"name": "a", "optional-dependencies": {"a.b": ["numpy"], "a_b": ["scipy"]}}, "'a.b' and 'a_b'"),
    ],
)
def test_pyproject_values_of_the_wrong_type_are_named(project: dict[str, object], key: str) -> None:
    with pytest.raises(BadInput) as err:
        parse_pyproject({"project": project}, "pyproject.toml", ["gpu"] if "optional-dependencies" in project else [])
    assert key in str(err.value), str(err.value)


def test_pyproject_groups_still_resolve_by_normalized_name() -> None:
    spec = parse_pyproject({"project": {"name": "My_App", "dependencies": ["my-app[GPU]"],
                                        "optional-dependencies": {"GPU": ["numpy"]}}}, "pyproject.toml", ["gpu"])
    assert [r.text for r in spec.requirements] == ["numpy"]

_toml_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                                      st.text(max_size=20)),
                            lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                            max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["name", "dynamic", "dependencies", "optional-dependencies"]), _toml_values),
       st.lists(st.text(max_size=6), max_size=2))
def test_garbage_in_pyproject_is_bad_input_or_a_spec(project: dict[str, object], extras: list[str]) -> None:
    try:
        parse_pyproject({"project": project}, "pyproject.toml", extras)
    except BadInput:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=<>!~.,;[]@ #-\\\n${}XYrce/:'\"0123456789")), max_size=80))
def test_garbage_in_a_requirements_file_is_bad_input_or_a_spec(text: str) -> None:
    def read(path: str) -> str:
        return text

    try:
        parse_requirements_file(text, "r.txt", read, {"X": "1"})
    except BadInput:
        pass


def test_a_nested_file_named_by_a_variable_is_refused_without_its_value(tmp_path: Path) -> None:
    """Issue 34, R1: `-r ${TOKEN}.txt` that does not exist is refused naming the line as written,
    never the path with the variable's value in it."""
    from tests.support.cli import run_cli

    req = tmp_path / "requirements.txt"
    req.write_text("-r ${TOKEN}.txt\n")
    proc = run_cli("resolve", "-r", str(req), "--assume", "gpu=none", env={"TOKEN": "s3cr3t-value"})
    assert proc.returncode == 2, proc.stderr
    assert "s3cr3t" not in proc.stderr and "${TOKEN}.txt" in proc.stderr and "no such file" in proc.stderr, proc.stderr


def test_an_index_line_of_a_requirements_file_is_refused_naming_its_file_and_line(tmp_path: Path) -> None:
    """Issue 34, R2: `--extra-index-url http://...` inside a requirements file was refused as if it
    were the command-line flag, naming neither the file nor the line."""
    from tests.support.cli import run_cli

    req = tmp_path / "requirements.txt"
    req.write_text("six\n--extra-index-url http://127.0.0.1:9/simple\n")
    proc = run_cli("resolve", "-r", str(req), "--assume", "gpu=none")
    assert proc.returncode == 2, proc.stderr
    assert f"{req}:2: --extra-index-url http://127.0.0.1:9/simple: plain http://" in proc.stderr, proc.stderr
