"""redact.py: one rule for the credentials a URL carries (userinfo and secret query
parameters), tried over generated URLs with the token in every position (issue 21, class 5)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.cli import clean_env, run_clean
from torchfit.redact import has_credentials, is_secret_param, redact, strip_credentials
from torchfit.runner import index_variables, without_index_variables

# Names real package hosts and signed URLs use for a secret, in the spellings seen.
SECRET_NAMES = ["token", "private_token", "job_token", "access_token", "api_key", "apikey", "apiKey", "key",
                "secret", "client_secret", "password", "passwd", "sig", "signature", "Signature",
                "X-Amz-Signature", "X-Amz-Credential", "X-Amz-Security-Token", "X-Goog-Signature",
                "AWSAccessKeyId", "auth", "PRIVATE-TOKEN", "private%5Ftoken"]
PLAIN_NAMES = ["page", "format", "per_page", "sha256", "project", "version"]

tokens = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~", min_size=6,
                 max_size=40).map(lambda s: "SEK" + s)
schemes = st.sampled_from(["https", "http", "file", "git+https"])
hosts = st.sampled_from(["pypi.example", "127.0.0.1:8443", "gitlab.example.com", "[::1]:3128"])
paths = st.sampled_from(["", "/", "/simple", "/simple/torch/", "/api/v4/projects/7/packages/pypi/simple",
                         "/files/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl"])


@st.composite
def secret_urls(draw: st.DrawFn) -> tuple[str, str]:
    """A URL with `token` in one of the places a credential goes; (url, token)."""
    token = draw(tokens)
    where = draw(st.sampled_from(["user", "password", "query-first", "query-middle", "query-last", "fragment",
                                  "query-and-userinfo"]))
    user = ""
    plain = [f"{n}={draw(st.integers(0, 99))}" for n in draw(st.lists(st.sampled_from(PLAIN_NAMES), max_size=3))]
    secret = f"{draw(st.sampled_from(SECRET_NAMES))}={token}"
    query: list[str] = list(plain)
    fragment = ""
    if where == "user":
        user = f"{token}@"
    elif where == "password":
        user = f"{draw(st.sampled_from(['__token__', 'oauth2accesstoken', 'ci', 'a.b']))}:{token}@"
    elif where == "query-first":
        query = [secret, *plain]
    elif where == "query-middle":
        query = [*plain[:1], secret, *plain[1:]]
    elif where in ("query-last", "query-and-userinfo"):
        query = [*plain, secret]
        if where == "query-and-userinfo":
            user = f"u:{token}x@"
    else:
        fragment = "#" + secret
    sep = draw(st.sampled_from(["&", ";"])) if where != "query-and-userinfo" else "&"
    url = f"{draw(schemes)}://{user}{draw(hosts)}{draw(paths)}" + (f"?{sep.join(query)}" if query else "") + fragment
    return url, token


# The ways a URL reaches a message: bare, quoted (TOML, JSON, shell), in a code span, in
# parentheses, after a colon, inside uv's and pip's error texts.
wrappers = st.sampled_from(["{}", "'{}'", '"{}"', "`{}`", "({})", "Looking in indexes: {}, https://pypi.org/simple",
                            "error: Failed to fetch: `{}`\n  Caused by: HTTP status client error (401)",
                            "url = \"{}\"\nnext = 1", "--find-links {} --no-index", "[{}]", "<{}>"])


@settings(max_examples=400, deadline=None)
@given(secret_urls(), wrappers)
def test_attack3_redact_hides_a_token_in_every_position(case: tuple[str, str], wrapper: str) -> None:
    url, token = case
    text = wrapper.format(url)
    out = redact(text)
    assert token not in out, (text, out)
    assert redact(out) == out  # idempotent
    assert has_credentials(text) and not has_credentials(out)
    # what is not a secret stays, so the message still says which index it was
    for piece in re.findall(r"[?&;](?:{})=\d+(?=[&;#]|$)".format("|".join(PLAIN_NAMES)), url):
        assert piece in out, (piece, out)


@settings(max_examples=300, deadline=None)
@given(secret_urls())
def test_attack3_strip_credentials_drops_a_token_in_every_position(case: tuple[str, str]) -> None:
    url, token = case
    out = strip_credentials(url)
    assert token not in out, (url, out)
    assert strip_credentials(out) == out and not has_credentials(out)
    # the URL still names the same place: scheme, host and port, path
    before, after = urlsplit(url), urlsplit(out)
    assert (after.scheme, after.netloc, after.path) == (before.scheme, before.netloc.rpartition("@")[2], before.path)


def test_attack3_plain_urls_and_text_pass_unchanged() -> None:
    for text in ["https://download.pytorch.org/whl/cu128", "torch==2.13.0+cpu; python_version >= '3.10'",
                 "https://h.example/simple/?page=2&per_page=100",
                 "https://h.example/f.whl#sha256=6746dbcbeb526eb61330b76b41ff1b4eb848951103a892eeb080dfa2b264667b",
                 "LS_COLORS=rs=0:di=01;34:ln=01;36", "a=b c=d"]:
        assert redact(text) == text and not has_credentials(text)
        if "://" in text:
            assert strip_credentials(text) == text
    assert redact("https://h/s?token=") == "https://h/s?token="  # an empty value hides nothing
    assert is_secret_param("X-Amz-Date") and is_secret_param("private%5Ftoken") and not is_secret_param("page")


def test_attack3_children_lose_index_variables_and_credentialed_urls() -> None:
    environ = {
        "PATH": "/usr/bin", "HOME": "/root", "HF_HOME": "/data/hf", "CUDA_VISIBLE_DEVICES": "0,1",
        "TORCHFIT_TORCH_INDEX_URL": "https://download.pytorch.org/whl/{variant}",
        "PIP_EXTRA_INDEX_URL": "https://u:SEKa@mirror/simple", "PIP_FIND_LINKS": "/opt/wheels",
        "PIP_INDEX_URL": "https://mirror/simple", "UV_INDEX_URL": "https://x", "UV_EXTRA_INDEX_URL": "https://y",
        "UV_INDEX_INTERNAL_PASSWORD": "SEKb", "HTTPS_PROXY": "http://me:SEKc@proxy:3128",
        "SOME_URL": "https://h/x?private_token=SEKd",
    }
    dropped = set(index_variables(environ))
    assert dropped == set(environ) - {"PATH", "HOME", "HF_HOME", "CUDA_VISIBLE_DEVICES"}
    assert "SEK" not in repr(without_index_variables(environ))


# --- examples and fuzzing ----------------------------------------------------------------

FUZZ = settings(max_examples=200, deadline=None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pass@host/simple", "https://user:***@host/simple"),
        (
            "pip install --index-url https://ghp_abc123@host/x torch",
            "pip install --index-url https://***@host/x torch",
        ),
        ("git+ssh://git@github.com/o/r.git", "git+ssh://***@github.com/o/r.git"),
        (
            "a https://u:p@h1 and http://v:q@h2:8080/?x=@y",
            "a https://u:***@h1 and http://v:***@h2:8080/?x=@y",
        ),
        ("https://u:p@ss@host/x", "https://u:***@host/x"),
        ("'https://u:p@h/x'", "'https://u:***@h/x'"),
        ("mail me at someone@example.com", "mail me at someone@example.com"),
        ("https://host/path@v1", "https://host/path@v1"),
        ("no urls here", "no urls here"),
    ],
)
def test_redact_examples(text: str, expected: str) -> None:
    assert redact(text) == expected


USERINFO = st.text(
    st.characters(blacklist_characters="/?#@\"'<>", blacklist_categories=("Zs", "Cc", "Zl", "Zp")),
    min_size=1,
)


@FUZZ
@given(USERINFO, USERINFO)
def test_fuzz_redact_hides_passwords(user: str, secret: str) -> None:
    user = user.replace(":", "")
    if not user:
        user = "u"
    out = redact(f"see https://{user}:{secret}@index.example/simple for details")
    assert out == f"see https://{user}:***@index.example/simple for details"


@FUZZ
@given(st.text())
def test_fuzz_redact_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once



def test_strip_credentials() -> None:
    assert strip_credentials("https://u:p@h.example:8443/a?b") == "https://h.example:8443/a?b"
    assert strip_credentials("file:///x") == "file:///x"


def test_an_install_error_under_json_keeps_a_private_token_out(tmp_path: Path) -> None:
    """install --json against a mirror that refuses the connection, its URL carrying
    ?private_token=: the JSON error names the mirror, never the token (issue 21, class 5)."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    proc = run_clean("install", "torch==2.13.0", "--variant", "cpu", "--python", python, "--prefix",
                     str(tmp_path / "env"), "--allow-insecure-index", "--json", "--torch-index-url",
                     "http://127.0.0.1:9/simple?private_token=SEKRET2",
                     env=clean_env(XDG_STATE_HOME=str(tmp_path / "state")), timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-800:]
    assert "SEKRET2" not in proc.stdout + proc.stderr
    error = json.loads(proc.stdout)
    assert "127.0.0.1:9" in json.dumps(error) and "private_token=***" in json.dumps(error), error

