"""Hide credentials that URLs carry, in any text torchfit prints, logs, raises or writes.

Index URLs often hold a secret, in one of two places:

- the userinfo: `https://user:TOKEN@pypi.example/simple`, `https://TOKEN@host/...`;
- the query (or fragment): `?token=…`, `?private_token=…` (GitLab), `?access_token=…`,
  `?api_key=…`, a signed URL's `X-Amz-Signature=…`/`X-Goog-Credential=…`, Azure's `sig=…`.

This module is the one rule for both: `is_secret_param` says which query parameters
are secrets, `redact` masks every secret in text meant for people (messages, progress
lines, the install log, --json), `strip_credentials` drops them from a URL written to
disk, and `has_credentials` tells the callers that must keep a URL out of a child's
argv or environment. pip and uv echo URLs back in their errors, so everything from the
runner and the presenter passes through `redact`. Pure: text in, text out.
"""

from __future__ import annotations

import re

# RFC 3986 section 3.2: authority = [ userinfo "@" ] host [ ":" port ]; the
# authority ends at the first "/", "?" or "#". The userinfo match is greedy, so a
# sloppy URL with an unescaped "@" in the password (`u:p@ss@host`) is hidden up to
# its last "@". Quotes, angle brackets and whitespace end a URL in prose and logs.
_URL_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/?#@\s\"'<>]*(?:@[^/?#@\s\"'<>]*)*)@"
)

# One `name=value` of a query (after "?", "&" or ";") or a fragment ("#"). The value
# ends where the parameter does, or where a URL ends in prose, a log, a TOML or JSON
# string, a shell-quoted argv or a Markdown code span.
_PARAM = re.compile(r"(?P<lead>[?&;#])(?P<name>[A-Za-z0-9_.~%+\-]+)=(?P<value>[^&;#\s\"'<>`\\)\]]*)")

# The last word of a parameter's name (`access_token` -> token, `apiKey` -> key,
# `client_secret` -> secret) that makes it a secret. Masking one too many is harmless
# in a message; these are the names the services that host package indexes use
# (GitLab private_token/job_token, GitHub/Bitbucket access_token, Artifactory and
# Nexus api keys, AWS/GCS/Azure signed URLs).
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "pwd", "passphrase", "key", "apikey",
                    "sig", "signature", "credential", "credentials", "auth", "authorization",
                    "session", "sessionid", "jwt", "accesskeyid", "otp")
# Whole families of signing parameters: AWS SigV4 (X-Amz-Credential, -Signature,
# -Security-Token), Google Cloud Storage (X-Goog-*), Azure (x-ms-*).
_SECRET_PREFIXES = ("x-amz-", "x-goog-", "x-ms-")

MASK = "***"


def is_secret_param(name: str) -> bool:
    """Is `name` (a URL query parameter, as written) one that carries a secret?"""
    if "%" in name:
        from urllib.parse import unquote

        name = unquote(name)
    n = name.lower().replace("_", "-")
    if n.startswith(_SECRET_PREFIXES):
        return True
    return n.replace("-", "").endswith(_SECRET_SUFFIXES)


def _mask_userinfo(m: re.Match[str]) -> str:
    user, colon, _secret = m.group("userinfo").partition(":")
    if colon:
        # `user:pass@`: the user name helps debugging and is not the secret.
        return f"{m.group('scheme')}{user}:{MASK}@"
    # `token@` alone: the whole userinfo is the credential (GitHub, GitLab tokens).
    return f"{m.group('scheme')}{MASK}@"


def _mask_param(m: re.Match[str]) -> str:
    value = m.group("value")
    if not value or not is_secret_param(m.group("name")):
        return m.group(0)
    # A URL at the end of a clause (`…?token=abc: refused`): the punctuation stays.
    tail = value[len(value.rstrip(":,.")):] if value.rstrip(":,.") else ""
    return f"{m.group('lead')}{m.group('name')}={MASK}{tail}"


def redact(text: str) -> str:
    """Replace every credential a URL in `text` carries with `***`.

    `https://user:pass@host/x` -> `https://user:***@host/x`;
    `https://token@host/x` -> `https://***@host/x`;
    `https://host/x?private_token=abc&page=2` -> `https://host/x?private_token=***&page=2`.
    Idempotent.
    """
    if "@" in text:
        text = _URL_USERINFO.sub(_mask_userinfo, text)
    if "=" in text:
        text = _PARAM.sub(_mask_param, text)
    return text


def has_credentials(text: str) -> bool:
    """Does `text` (a URL, a list of them, an argv word) carry a credential `redact` would hide?"""
    return redact(text) != text


def strip_credentials(url: str) -> str:
    """The URL without its userinfo and its secret query parameters.

    `https://u:p@host/x?token=t&page=2` -> `https://host/x?page=2`. `redact` masks a
    secret in text meant for people; this drops it from a URL meant to be written
    down (a lock file, a cache record, an export) so any user can share it. The
    fragment (`#sha256=…`) is kept.
    """
    if "@" not in url and "=" not in url:
        return url
    from urllib.parse import urlsplit, urlunsplit  # here: ~3 ms that every start-up would pay

    parts = urlsplit(url)
    if "@" in parts.netloc:
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    if parts.query:
        kept = [p for p in re.split(r"[&;]", parts.query) if not (
            "=" in p and p.partition("=")[2] and is_secret_param(p.partition("=")[0]))]
        parts = parts._replace(query="&".join(kept))
    if parts.fragment and "=" in parts.fragment:
        kept = [p for p in parts.fragment.split("&") if not ("=" in p and is_secret_param(p.partition("=")[0]))]
        parts = parts._replace(fragment="&".join(kept))
    return urlunsplit(parts)
