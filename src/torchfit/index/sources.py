"""Where packages come from, and how each installer step is told.

Two kinds of source, never mixed:

- the *torch index*: the variant's own index (`https://download.pytorch.org/whl/cu130`,
  or the user's `--torch-index-url` mirror). It is the only source of torch,
  torchvision and torchaudio: no extra index and no find-links directory is ever
  consulted for them, because that is how a CPU build (or PyPI's default CUDA
  build) silently replaces the one the plan chose;
- the *dependency sources*: PyPI or the user's index, extra indexes and find-links,
  taken from the user's pip configuration plus `--index-url`, `--extra-index-url`,
  `--find-links`, with pip's own precedence.

pip reads its configuration itself, uv does not. So torchfit reads pip's
configuration once (`load_pip_config`: the files and `PIP_*` variables pip reads,
in pip's order, pip/_internal/configuration.py) and hands both installers the same
view through environment variables, with the configuration files switched off
(`PIP_CONFIG_FILE=/dev/null`, `uv --no-config`): one source of truth, and index
URLs (which may hold credentials) travel in the environment, not on a command line
that `ps` shows to every user.
"""

from __future__ import annotations

import configparser
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

from torchfit._backports import FROZEN
from torchfit.compat.matrix import PYPI_SIMPLE
from torchfit.errors import BadInput
from torchfit.redact import redact

if TYPE_CHECKING:
    from torchfit.compat.project import ProjectReq

PYPI = PYPI_SIMPLE

# pip options whose value is a whitespace-separated list (optparse "append").
LIST_KEYS = ("extra-index-url", "find-links", "trusted-host", "constraint", "requirement")
# Keys torchfit decides itself for every step; everything else in the user's pip
# configuration is passed through to pip unchanged.
INDEX_KEYS = ("index-url", "extra-index-url", "find-links", "no-index", "trusted-host", "config-file")
# pip's keys that choose between wheels and builds (replaced by --no-build)
BUILD_KEYS = ("only-binary", "no-binary")
_TRUE = {"1", "true", "yes", "on", "y", "t"}


# --- pip's configuration -----------------------------------------------------------


@dataclass(**FROZEN)
class PipConfig:
    """pip's merged configuration for `pip install`: key -> value, and where each came from."""

    values: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def get_list(self, key: str) -> list[str]:
        return (self.values.get(key) or "").split()

    def get_bool(self, key: str) -> bool:
        return (self.values.get(key) or "").strip().lower() in _TRUE


def _normalize(key: str) -> str:
    key = key.strip().lower().replace("_", "-")
    return key[2:] if key.startswith("--") else key


def find_pip_config_files(environ: Mapping[str, str], home: str) -> list[tuple[str, str]]:
    """pip's configuration files in load order, as (kind, path); missing files included.

    Order (pip/_internal/configuration.py, `iter_config_files` + `OVERRIDE_ORDER`):
    global (each XDG_CONFIG_DIRS entry's pip/pip.conf, then /etc/pip.conf), user
    (~/.pip/pip.conf, then $XDG_CONFIG_HOME/pip/pip.conf; skipped when
    PIP_CONFIG_FILE names an existing file), then the PIP_CONFIG_FILE file. The
    site file (sys.prefix/pip.conf) belongs to the fresh env torchfit creates and
    does not exist. PIP_CONFIG_FILE=/dev/null switches every file off.
    """
    env_file = environ.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    xdg_dirs = [d for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]
    files = [("global", os.path.join(d, "pip", "pip.conf")) for d in xdg_dirs]
    files.append(("global", "/etc/pip.conf"))
    if not (env_file and os.path.exists(env_file)):
        config_home = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
        files.append(("user", os.path.join(home, ".pip", "pip.conf")))
        files.append(("user", os.path.join(config_home, "pip", "pip.conf")))
    if env_file:
        files.append(("env", env_file))
    return files


def parse_pip_config(
    files: Iterable[tuple[str, str]], environ: Mapping[str, str], command: str = "install"
) -> PipConfig:
    """Merge pip configuration texts and `PIP_*` variables as pip does for `command`.

    `files` are (path, text) in load order; a later file overrides an earlier one.
    Then, as pip's `_get_ordered_configuration_items` does, every `[global]` key is
    applied, then every `[install]` key, then the environment: so an `[install]`
    key in /etc/pip.conf beats a `[global]` key in the user's file. Empty values are
    ignored (pip ignores them too). Unreadable text raises BadInput naming the file.
    """
    merged: dict[str, tuple[str, str]] = {}
    for path, text in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(text, source=path)
        except configparser.Error as exc:
            raise BadInput(f"pip configuration {path}: not readable ({str(exc).splitlines()[0]})") from None
        for section in parser.sections():
            for key, val in parser.items(section):
                merged[f"{section.lower()}.{_normalize(key)}"] = (val, path)
    values: dict[str, str] = {}
    origins: dict[str, str] = {}
    for section in ("global", command):
        for skey, (val, path) in merged.items():
            sec, _, key = skey.partition(".")
            if sec == section and val.strip():
                values[key] = val
                origins[key] = f"pip config {path} [{section}]"
    for name, val in environ.items():
        if not name.startswith("PIP_") or name == "PIP_CONFIG_FILE":
            continue
        key = _normalize(name[4:])
        if key in ("version", "help") or not val.strip():
            continue
        values[key] = val
        origins[key] = f"environment {name}"
    return PipConfig(values, origins)


def load_pip_config(environ: Mapping[str, str] | None = None) -> PipConfig:
    """Read the user's pip configuration from disk and the environment."""
    env = dict(os.environ if environ is None else environ)
    home = env.get("HOME") or os.path.expanduser("~")
    texts = []
    for _kind, path in find_pip_config_files(env, home):
        try:
            with open(path, encoding="utf-8") as fh:
                texts.append((path, fh.read()))
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"pip configuration {path}: cannot read ({exc})") from None
    return parse_pip_config(texts, env)


# --- URLs ---------------------------------------------------------------------------


def is_local(location: str) -> bool:
    """A file:// URL or a plain path (find-links directories are often paths)."""
    scheme = urlsplit(location).scheme.lower()
    return scheme in ("", "file") or len(scheme) == 1  # "c:" would be a Windows drive


def is_insecure(location: str) -> bool:
    return urlsplit(location).scheme.lower() == "http"


def host_of(url: str) -> str:
    """host[:port] without credentials, as pip's --trusted-host wants it."""
    netloc = urlsplit(url).netloc
    return netloc.rpartition("@")[2]


def torch_index_for(template: str, variant: str) -> str:
    """`{variant}` substituted: `https://mirror/whl/{variant}` -> `https://mirror/whl/cu130`."""
    return template.replace("{variant}", variant)


# --- the sources of one install -----------------------------------------------------


@dataclass(**FROZEN)
class Sources:
    """Every place packages may come from, already checked (http://, --offline)."""

    torch_index: str
    index_url: str | None  # None: pip's and uv's default, PyPI
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]
    no_index: bool
    trusted_hosts: tuple[str, ...]
    constraints: tuple[str, ...]
    offline: bool
    pip: PipConfig
    notes: tuple[str, ...] = ()
    # `--no-build`: wheels only in every step (uv's --no-build, pip's --only-binary :all:),
    # in place of the configured only-binary/no-binary (uv refuses --no-build beside them)
    no_build: bool = False
    # uv's per-request timeout when the environment sets none (export's own locks: "30"); it
    # takes the place of pip's configured timeout
    http_timeout: str | None = None
    # `--allow-insecure-index`: the sources were accepted with it, and the fetch step follows an
    # https file's redirect to plain http (installer/backends.StepContext.check_fetch)
    allow_insecure: bool = False

    def describe(self) -> list[str]:
        """Lines for the log and --json: every source, redacted."""
        out = [f"torch family: {redact(self.torch_index)} (only this index)"]
        if self.no_index:
            out.append("dependencies: no index (find-links only)")
        else:
            out.append(f"dependencies: index {redact(self.index_url or PYPI)}")
        out += [f"dependencies: extra index {redact(u)}" for u in self.extra_index_urls]
        out += [f"dependencies: find-links {redact(u)}" for u in self.find_links]
        out += [f"constraints: {c}" for c in self.constraints]
        return out + list(self.notes)

    # -- pip ---------------------------------------------------------------------------
    def pip_env(self, base: Mapping[str, str], family: bool) -> dict[str, str]:
        """The environment of a pip step: the user's configuration as PIP_* variables.

        Configuration files are off (PIP_CONFIG_FILE=/dev/null) and every key the
        user configured is passed as its PIP_* variable, so pip behaves as the user
        set it up, except for the index keys, which torchfit sets: for the family
        step the torch index alone (no extra index, no find-links); for the
        dependency step the merged dependency sources.
        """
        env = {k: v for k, v in base.items() if not k.startswith("PIP_") and k not in OTHER_INSTALLERS_SOURCES}
        env["PIP_CONFIG_FILE"] = os.devnull
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        env["PIP_NO_INPUT"] = "1"
        for key, val in self.pip.values.items():
            if key in INDEX_KEYS or (self.no_build and key in BUILD_KEYS):
                continue
            env["PIP_" + key.upper().replace("-", "_")] = val
        if self.no_build:
            env["PIP_ONLY_BINARY"] = ":all:"
        trusted = list(self.trusted_hosts)
        if family:
            env["PIP_INDEX_URL"] = self.torch_index
            if is_insecure(self.torch_index):
                trusted.append(host_of(self.torch_index))
        else:
            if self.no_index:
                env["PIP_NO_INDEX"] = "1"
            if self.index_url:
                env["PIP_INDEX_URL"] = self.index_url
            if self.extra_index_urls:
                env["PIP_EXTRA_INDEX_URL"] = " ".join(self.extra_index_urls)
            if self.find_links:
                env["PIP_FIND_LINKS"] = " ".join(self.find_links)
            trusted += [host_of(u) for u in self._dep_urls() if is_insecure(u)]
        if trusted:
            env["PIP_TRUSTED_HOST"] = " ".join(dict.fromkeys(trusted))
        return env

    # -- uv ----------------------------------------------------------------------------
    def uv_args(self, family: bool, *, resolving: bool = True, no_build: bool = False,
                build_only: Sequence[str] = ()) -> list[str]:
        """Options of a `uv pip` family or dependency step: no URL here (argv is public, in
        `ps`); the indexes and the find-links locations travel in `uv_env`.

        `resolving`: the step chooses versions, so the user's constraint files apply.
        `no_build` (or the sources' own): `--no-build`, instead of pip's only-binary/no-binary;
        with `build_only` (never under the sources' own): wheels only but for those packages,
        which come from their source distributions (`--only-binary :all: --no-binary NAME`:
        uv refuses `--no-build` beside `--no-binary`, and lets a package's `--no-binary`
        lift `--only-binary :all:` for it; uv 0.13.10, measured).
        """
        args = ["--no-config"]
        if self.offline:
            args.append("--offline")
        for host in self.trusted_hosts:
            args += ["--allow-insecure-host", host]
        only_binary = self.pip.get("only-binary")
        no_binary = self.pip.get("no-binary")
        if build_only and no_build and not self.no_build:
            args += ["--only-binary", ":all:", *(a for n in build_only for a in ("--no-binary", n))]
        elif no_build or self.no_build:
            args.append("--no-build")
        else:
            if only_binary:
                args += ["--only-binary", only_binary]
            if no_binary:
                args += ["--no-binary", no_binary]
        if self.pip.get_bool("pre"):
            args += ["--prerelease", "allow"]
        if resolving:
            for path in self.constraints:
                args += ["-c", path]
        if family:
            return args
        # pip picks the best version across all its indexes; uv's default
        # (first-index) would not. Same behaviour under both installers.
        args += ["--index-strategy", "unsafe-best-match"]
        if self.no_index:
            args.append("--no-index")
        return args

    def uv_env(self, base: Mapping[str, str], family: bool, *, find_links: bool = False) -> dict[str, str]:
        """uv's environment: its own index variables replaced by torchfit's sources.

        `find_links`: a dependency step that reads the find-links locations gets them
        here, as UV_FIND_LINKS, never as `--find-links` on argv, which every user of
        the machine reads in `ps` (a find-links page often carries a token).
        """
        drop = ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS",
                "UV_NO_INDEX", "UV_INDEX_STRATEGY", "UV_CONSTRAINT", "UV_OVERRIDE", "UV_CONFIG_FILE")
        # pip's index settings (and torchfit's) mean nothing to uv: they stay out of its
        # environment and of the interpreters it starts.
        env = {k: v for k, v in base.items() if k not in drop and k not in PIP_SOURCES
               and k not in OTHER_INSTALLERS_SOURCES}
        if family:
            env["UV_DEFAULT_INDEX"] = self.torch_index
        else:
            env["UV_DEFAULT_INDEX"] = self.index_url or PYPI
            if self.extra_index_urls:
                env["UV_INDEX"] = " ".join(self.extra_index_urls)
            if find_links and self.find_links:
                env["UV_FIND_LINKS"] = uv_find_links(self.find_links)
        cert = self.pip.get("cert")
        if cert and "SSL_CERT_FILE" not in env:
            env["SSL_CERT_FILE"] = cert
        client_cert = self.pip.get("client-cert")
        if client_cert and "SSL_CLIENT_CERT" not in env:
            env["SSL_CLIENT_CERT"] = client_cert
        proxy = self.pip.get("proxy")
        if proxy:
            env.setdefault("HTTPS_PROXY", proxy)
            env.setdefault("HTTP_PROXY", proxy)
        timeout = self.pip.get("timeout") or self.pip.get("default-timeout")
        if timeout and "UV_HTTP_TIMEOUT" not in env:
            env["UV_HTTP_TIMEOUT"] = timeout.split(".")[0] or "30"
        if self.http_timeout:
            env["UV_HTTP_TIMEOUT"] = base.get("UV_HTTP_TIMEOUT", self.http_timeout)
        return env

    def uv_compile(self, base: Mapping[str, str], work: str, *, no_build: bool = False,
                   build_only: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
        """(options, environment) of a `uv pip compile` over these sources (`no_build`: wheels
        only, `build_only` excepted: `uv_args`).

        No `--no-index` here: uv's `--no-index` drops every index, the explicit torch
        index too (uv 0.13.9, measured), so an offline or find-links-only resolution
        could never reach a `file://` torch tree. Instead the default index is an empty
        local directory (`work/no-index`), which has no page for any package: only the
        torch index and the find-links locations answer.
        """
        args = [a for a in self.uv_args(family=False, no_build=no_build, build_only=build_only) if a != "--no-index"]
        env = self.uv_env(base, family=False, find_links=True)
        if self.no_index:
            empty = os.path.join(work, "no-index")
            os.makedirs(empty, mode=0o700, exist_ok=True)
            env["UV_DEFAULT_INDEX"] = "file://" + quote(empty)
        return args, env

    def _dep_urls(self) -> list[str]:
        out = [] if self.no_index else [self.index_url or PYPI, *self.extra_index_urls]
        return out + list(self.find_links)


# The variables that name sources for one installer only (or for torchfit): the other
# installer's steps do not inherit them (they would not read them, but its children would).
PIP_SOURCES = frozenset({"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST", "PIP_NO_INDEX"})
OTHER_INSTALLERS_SOURCES = frozenset({"TORCHFIT_TORCH_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL",
                                      "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"})


def uv_find_links(links: Sequence[str]) -> str:
    """UV_FIND_LINKS's value: uv splits it at commas, so a comma inside one location is
    written %2C (a URL) or the path becomes a file:// URL (where a comma is %2C too)."""
    out = []
    for link in links:
        if "," in link:
            link = link.replace(",", "%2C") if "://" in link else "file://" + quote(os.path.abspath(link))
        out.append(link)
    return ",".join(out)


def one_index(index_url: str, torch_index: str = "", *, http_timeout: str | None = None) -> Sources:
    """Sources of one index and no pip configuration: what a lock of export's own reads
    (`--no-config`: no user setting adds an index)."""
    return Sources(torch_index=torch_index, index_url=index_url, extra_index_urls=(), find_links=(),
                   no_index=False, trusted_hosts=(), constraints=(), offline=False, pip=PipConfig(),
                   http_timeout=http_timeout)


def make_sources(
    *,
    torch_index: str,
    index_url: str | None,
    extra_index_urls: Sequence[str],
    find_links: Sequence[str],
    offline: bool,
    allow_insecure: bool,
    pip: PipConfig,
    torch_index_flag: str = "--torch-index-url",
    no_build: bool = False,
) -> Sources:
    """Merge torchfit's flags with the user's pip configuration; BadInput for unsafe input.

    pip's own semantics: `--index-url` replaces the configured index, extra indexes
    and find-links from the flags are added to the configured ones. Refused: an
    `http://` location without `--allow-insecure-index` (packages and credentials
    would travel in clear), and under `--offline` a remote torch index.
    Under `--offline` remote dependency sources are dropped (noted), local ones kept.
    """
    notes: list[str] = []
    cfg_index = pip.get("index-url")
    idx = index_url or cfg_index
    idx_origin = "--index-url" if index_url else pip.origins.get("index-url", "pip config")
    extras = [(u, pip.origins.get("extra-index-url", "pip config")) for u in pip.get_list("extra-index-url")]
    extras += [(u, "--extra-index-url") for u in extra_index_urls]
    links = [(u, pip.origins.get("find-links", "pip config")) for u in pip.get_list("find-links")]
    links += [(u, "--find-links") for u in find_links]
    for url, what in [(torch_index, torch_index_flag), *([(idx, idx_origin)] if idx else []), *extras, *links]:
        check_url(url, what, allow_insecure)
    no_index = pip.get_bool("no-index")
    if offline:
        if not is_local(torch_index):
            raise BadInput(
                f"--offline: the torch index {redact(torch_index)} is remote; give a local mirror "
                "with --torch-index-url file:///path/to/simple"
            )
        kept_extras = [(u, w) for u, w in extras if is_local(u)]
        dropped = [u for u, _ in extras if not is_local(u)] + [u for u, _ in links if not is_local(u)]
        if idx and not is_local(idx):
            dropped.insert(0, idx)
            idx = None
        if idx is None and not no_index:
            if kept_extras:
                # The first local extra index becomes the index, so that neither pip
                # nor uv falls back to PyPI.
                idx = kept_extras.pop(0)[0]
            else:
                no_index = True
        extras = kept_extras
        links = [(u, w) for u, w in links if is_local(u)]
        if dropped:
            notes.append("--offline: remote sources left out: " + ", ".join(redact(u) for u in dropped))
    trusted = pip.get_list("trusted-host")
    constraints = pip.get_list("constraint")
    return Sources(
        torch_index=torch_index,
        index_url=idx,
        extra_index_urls=tuple(dict.fromkeys(u for u, _ in extras if u != idx)),
        find_links=tuple(dict.fromkeys(u for u, _ in links)),
        no_index=no_index,
        trusted_hosts=tuple(dict.fromkeys(trusted)),
        constraints=tuple(constraints),
        offline=offline,
        pip=pip,
        notes=tuple(notes),
        no_build=no_build,
        allow_insecure=allow_insecure,
    )


_SCHEMES = ("http", "https", "file")


def check_direct_urls(reqs: Iterable[ProjectReq], allow_insecure: bool) -> None:
    """A project's `name @ URL` requirements and constraints travel like an index's files: plain
    http:// is refused unless --allow-insecure-index (`refuse_insecure`, the same rule)."""
    for r in reqs:
        url = r.requirement.url
        if url:
            refuse_insecure(url, f"{r.origin}: {r.name} @", allow_insecure)


def check_url(url: str, what: str, allow_insecure: bool) -> None:
    if not url or re.search(r"\s", url):
        raise BadInput(f"{what} {redact(url)!r}: not a URL")
    scheme = urlsplit(url).scheme.lower()
    if scheme and len(scheme) > 1 and scheme not in _SCHEMES:
        raise BadInput(f"{what} {redact(url)}: unsupported scheme {scheme}:// (use https://, http:// or file://)")
    if scheme in ("http", "https") and not urlsplit(url).hostname:
        raise BadInput(f"{what} {redact(url)}: no host in the URL")
    refuse_insecure(url, what, allow_insecure)


def refuse_insecure(url: str, what: str, allow_insecure: bool) -> None:
    """The one rule for plain http:// in every command (install, export, matrix check/update, a
    project's `name @ URL`, `git+http://` too): refused unless --allow-insecure-index, since
    packages and credentials would travel in clear."""
    if urlsplit(url).scheme.lower().rpartition("+")[2] == "http" and not allow_insecure:
        raise BadInput(
            f"{what} {redact(url)}: plain http:// sends packages and credentials unencrypted; "
            "use https://, or pass --allow-insecure-index"
        )
