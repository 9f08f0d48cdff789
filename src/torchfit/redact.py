"""Hide credentials that URLs carry, in any text torchfit prints, logs or raises.

Index URLs often hold a token (`https://user:TOKEN@pypi.example/simple`,
`https://TOKEN@host/...`); pip and uv echo them back in their errors. Every
message from the runner and the presenter passes through `redact` so that no
secret reaches a terminal, a log or a bug report. Pure: text in, text out.
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

MASK = "***"


def _mask(m: re.Match[str]) -> str:
    user, colon, _secret = m.group("userinfo").partition(":")
    if colon:
        # `user:pass@`: the user name helps debugging and is not the secret.
        return f"{m.group('scheme')}{user}:{MASK}@"
    # `token@` alone: the whole userinfo is the credential (GitHub, GitLab tokens).
    return f"{m.group('scheme')}{MASK}@"


def redact(text: str) -> str:
    """Replace the credentials of every URL in `text` with `***`.

    `https://user:pass@host/x` -> `https://user:***@host/x`;
    `https://token@host/x` -> `https://***@host/x`. Idempotent.
    """
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(_mask, text)


def strip_credentials(url: str) -> str:
    """The URL without its userinfo (`https://u:p@host/x` -> `https://host/x`).

    `redact` masks a secret in text meant for people; this drops it from a URL
    meant to be written down (a lock file, a cache record, an export) so any user
    can share it.
    """
    from urllib.parse import urlsplit, urlunsplit  # here: ~3 ms that every start-up would pay

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
