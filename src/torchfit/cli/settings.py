"""The command line's settings, resolved once, as values for the layers below (issues 24
and 28), and the site configuration files (issue 26).

One precedence rule, for every setting, stated here only (docs/install.md repeats it):

    flag > environment > $TORCHFIT_CONFIG file > user file > system files > pip's configuration > default

- the environment: `TORCHFIT_TORCH_INDEX_URL` (the torch source), `TORCHFIT_STALL_TIMEOUT`,
  `TORCHFIT_PREFIX_ROOT` (install's env without --prefix goes to ROOT/.venv);
  pip's own `PIP_*` variables are part of pip's configuration (their place in pip's order);
- the files (TOML, `SITE_KEYS` below): the one `$TORCHFIT_CONFIG` names, the user's
  `$XDG_CONFIG_HOME/torchfit/config.toml` (`~/.config/...`), then the system's: each
  `$XDG_CONFIG_DIRS` entry's `torchfit/config.toml` (default `/etc/xdg`), then
  `/etc/torchfit/config.toml`. A site sets its mirror there once; every command reads it;
- lists (`extra-index-url`, `find-links`) add up across the levels, flags first, as pip's do;
  the index lines of a project's requirements files rank with its flags;
- for `add` and `install --lock`, the lock's recorded torch index comes after the files and
  before the default (the files are the site's mirror; the lock says where it was built).

The torch source's template has `{variant}` substituted per variant. Nothing below `cli/`
reads `args` or the environment for these.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torchfit.errors import BadInput

if TYPE_CHECKING:
    from torchfit.compat.facts import HostFacts
    from torchfit.compat.matrix import Matrix
    from torchfit.compat.project import ProjectSpec
    from torchfit.compat.request import AnyRequirement, Request
    from torchfit.index.client import IndexClient
    from torchfit.index.sources import Sources
    from torchfit.planning import PlanSettings


# Keys a configuration file may set: key -> (kind, what it sets).
SITE_KEYS: dict[str, tuple[str, str]] = {
    "torch-index-url": ("str", "the torch source (index, mirror or directory of wheels), {variant} substituted"),
    "index-url": ("str", "the index for everything else (replaces pip's index-url)"),
    "extra-index-url": ("list", "more indexes for everything else (added to pip's)"),
    "find-links": ("list", "directories or pages of wheels for everything else (added to pip's)"),
    "installer": ("str", "install's and add's installer: auto, uv or pip"),
    "stall-timeout": ("float", "seconds without progress before a step is killed (TORCHFIT_STALL_TIMEOUT)"),
    "prefix-root": ("str", "where install puts an env given no --prefix: ROOT/.venv (TORCHFIT_PREFIX_ROOT)"),
}
CONFIG_ENV = "TORCHFIT_CONFIG"
PREFIX_ROOT_ENV = "TORCHFIT_PREFIX_ROOT"
DEFAULT_PREFIX = ".venv"  # install's env without --prefix: in the current directory, or under prefix-root
MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class SiteConfig:
    """The configuration files' values (the highest file's for a scalar; all of them, in order, for a
    list) and where each came from; `files`: every file looked at, and whether it was there."""

    values: Mapping[str, Any] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)
    files: tuple[tuple[str, str, bool], ...] = ()  # (kind, path, found)
    unreadable: Mapping[str, str] = field(default_factory=dict)  # path -> why this user may not read it
    item_origins: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # a list's: each item's file

    def get(self, key: str) -> Any:
        return self.values.get(key)


def config_files(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """(kind, path) of the configuration files, highest precedence first (the module's rule)."""
    home = environ.get("HOME") or os.path.expanduser("~")
    out: list[tuple[str, str]] = []
    if environ.get(CONFIG_ENV):
        out.append((CONFIG_ENV, environ[CONFIG_ENV]))
    out.append(("user", os.path.join(environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                                     "torchfit", "config.toml")))
    for d in [d for d in (environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(os.pathsep) if d]:
        out.append(("system", os.path.join(d, "torchfit", "config.toml")))
    out.append(("system", "/etc/torchfit/config.toml"))
    return out


def load_site_config(environ: Mapping[str, str]) -> SiteConfig:
    """The configuration files merged by the precedence rule; BadInput (`FILE: key ...`, exit 2)
    for a file that is not TOML, an unknown key or a value of the wrong kind. A file named by
    $TORCHFIT_CONFIG must exist and be readable; the others are optional, and one this user may
    not read (a system file of mode 0600 keeping the mirror's token from users) is left out,
    with why, in `unreadable`: its owner's settings are not this user's, and refusing would stop
    every command of every other user (`site_config` says it once)."""
    from torchfit.errors import BadInput
    from torchfit.inputs import loads_toml, read_text_file
    from torchfit.runner import STALL_MAX, parse_stall

    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    item_origins: dict[str, tuple[str, ...]] = {}
    unreadable: dict[str, str] = {}
    seen: list[tuple[str, str, bool]] = []
    for kind, path in config_files(environ):
        if kind != CONFIG_ENV and not os.path.isfile(path):
            seen.append((kind, path, False))
            continue
        if kind != CONFIG_ENV and not os.access(path, os.R_OK):  # the kernel's answer for this user
            from torchfit.access import find_denied

            denied = find_denied(path)
            unreadable[path] = denied.sentence() if denied else "permission denied"
            seen.append((kind, path, True))
            continue
        data = loads_toml(read_text_file(path, CONFIG_ENV if kind == CONFIG_ENV else "configuration file",
                                         limit=MAX_CONFIG_BYTES), path)
        seen.append((kind, path, True))
        for key, value in data.items():
            if key not in SITE_KEYS:
                raise BadInput(f"{path}: unknown key {key!r} (known: {', '.join(SITE_KEYS)})")
            want = SITE_KEYS[key][0]
            if want == "list":
                if isinstance(value, str):
                    value = [value]
                if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                    raise BadInput(f"{path}: {key} must be a string or a list of strings")
                values[key] = [*values.get(key, []), *value]  # lower files after higher ones
                item_origins[key] = (*item_origins.get(key, ()), *(path for _ in value))
                origins[key] = f"{origins[key]}, {path}" if key in origins else path
                continue
            if want == "float" and (not isinstance(value, (int, float)) or parse_stall(value) is None):
                raise BadInput(f"{path}: {key} must be a number of seconds > 0 and < {STALL_MAX:,.0f}")
            if want == "str" and (not isinstance(value, str) or not value):
                raise BadInput(f"{path}: {key} must be a non-empty string")
            if key == "installer" and value not in ("auto", "uv", "pip"):
                raise BadInput(f"{path}: installer must be auto, uv or pip, not {value!r}")
            if key not in values:  # the highest file wins
                values[key] = float(value) if want == "float" else value
                origins[key] = path
    return SiteConfig(values, origins, tuple(seen), item_origins=item_origins, unreadable=unreadable)


_SITE: dict[int, SiteConfig] = {}


_WARNED: set[str] = set()


def site_config(environ: Mapping[str, str]) -> SiteConfig:
    """`load_site_config` once per process for os.environ (commands ask several times); a file
    this user may not read is said once per process, on stderr."""
    if environ is not os.environ:
        config = load_site_config(environ)
    else:
        if 0 not in _SITE:
            _SITE[0] = load_site_config(environ)
        config = _SITE[0]
    for path, why in config.unreadable.items():
        if path not in _WARNED:
            _WARNED.add(path)
            from torchfit.inputs import shown
            from torchfit.progress import StderrProgress

            StderrProgress().warn(f"configuration file {shown(path)} left out: {why}; its settings do not "
                                  "apply (`torchfit config` shows what does)")
    return config


def stall_setting(environ: Mapping[str, str]) -> tuple[float, str]:
    """(the stall limit in force, where it came from): environment > files > default, each read
    by `runner.parse_stall`. BadInput (exit 2) for an environment value it does not take: the
    runner would otherwise use another limit than the one the user set (and `config` shows)."""
    from torchfit.inputs import shown
    from torchfit.runner import STALL_ENV, STALL_MAX, STALL_S, parse_stall

    raw = environ.get(STALL_ENV)
    if raw:
        value = parse_stall(raw)
        if value is None:
            raise BadInput(f"environment {STALL_ENV}={shown(raw[:60])}: give a number of seconds > 0 and < "
                           f"{STALL_MAX:,.0f} (or unset it: the configuration files' value, else {STALL_S:g})")
        return value, f"environment {STALL_ENV}"
    config = site_config(environ)
    if config.get("stall-timeout") is not None:
        return float(config.get("stall-timeout")), str(config.origins["stall-timeout"])
    return STALL_S, "default"


def apply_site_config(environ: dict[str, str] | Any) -> None:
    """Settings read where the layers below take them from the environment (the stall limit,
    `runner.stall_timeout`): the one in force (environment > files), checked (`stall_setting`)."""
    from torchfit.runner import STALL_ENV

    stall, origin = stall_setting(environ)
    if origin != "default" and not environ.get(STALL_ENV):
        environ[STALL_ENV] = f"{stall:g}"


def installer_choice(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """install's and add's installer: --installer > the files' `installer` > auto."""
    return getattr(args, "installer", None) or site_config(environ).get("installer") or "auto"


def install_prefix(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str]:
    """(install's env, where it came from): --prefix > $TORCHFIT_PREFIX_ROOT/.venv > the files'
    `prefix-root`/.venv > .venv (in the current directory)."""
    if getattr(args, "prefix", None) is not None:
        return args.prefix, "--prefix"
    root = environ.get(PREFIX_ROOT_ENV)
    origin = f"environment {PREFIX_ROOT_ENV}"
    if not root:
        root = site_config(environ).get("prefix-root")
        origin = f"prefix-root in {site_config(environ).origins.get('prefix-root')}"
    if not root:
        return DEFAULT_PREFIX, "the default"
    return os.path.join(os.path.expanduser(root), DEFAULT_PREFIX), origin


def torch_setting(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The torch source the user or the site named, by the one precedence rule (flag > environment
    > files), as given: (value, where it came from: `--torch-index-url`, `TORCHFIT_TORCH_INDEX_URL`
    or the file's path, its key in that file or ""); None for no one. `torch_template` (the run)
    and `source_settings` (the checks) both take their answer from here."""
    from torchfit.compat.matrix import TORCH_INDEX_ENV

    if getattr(args, "torch_index_url", None):
        return args.torch_index_url, "--torch-index-url", ""
    if environ.get(TORCH_INDEX_ENV):
        return environ[TORCH_INDEX_ENV], TORCH_INDEX_ENV, ""
    config = site_config(environ)
    if config.get("torch-index-url"):
        return config.get("torch-index-url"), config.origins["torch-index-url"], "torch-index-url"
    return None


def torch_template(args: argparse.Namespace, environ: Mapping[str, str],
                   fallback: str | None = None) -> tuple[str, str, bool]:
    """(template, the flag or file to blame, whether the user or the site named it) of the torch source."""
    from torchfit.compat.matrix import DEFAULT_INDEX

    given = torch_setting(args, environ)
    if given is not None:
        value, origin, key = given
        return as_url(value), f"{key} in {origin}" if key else origin, True
    if fallback:
        return fallback, "the lock's torch index", True
    return DEFAULT_INDEX, "the torch index", False


def source_settings(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[
        tuple[str, str] | None, list[tuple[str, str, str]]]:
    """The package sources the user or the site gave, as given, each with where it came from
    (a flag, `TORCHFIT_TORCH_INDEX_URL`, `FILE: key`): (the torch source in force, or None for
    the default; [(key, value, where)] of index-url, extra-index-url and find-links in force, the
    files' lists after the flags'), for options.check_source_options to hold each to its flag's rule."""
    config = site_config(environ)

    def origin(key: str, path: str | None = None) -> str:
        return f"{path or config.origins[key]}: {key}"  # as the files' other errors say it

    given = torch_setting(args, environ)  # the run's own answer (torch_template's)
    torch = None if given is None else (given[0], origin(given[2], given[1]) if given[2] else given[1])
    others: list[tuple[str, str, str]] = []
    if getattr(args, "index_url", None):
        others.append(("index-url", args.index_url, "--index-url"))
    elif config.get("index-url"):
        others.append(("index-url", config.get("index-url"), origin("index-url")))
    for key, flag in (("extra-index-url", "--extra-index-url"), ("find-links", "--find-links")):
        others += [(key, v, flag) for v in getattr(args, key.replace("-", "_"), None) or []]
        others += [(key, v, origin(key, path))
                   for v, path in zip(config.get(key) or [], config.item_origins.get(key, ()), strict=True)]
    return torch, others


def as_url(location: str) -> str:
    """A torch source given as a path (a directory of wheels, a PEP 503 tree) as a file:// URL."""
    if "://" in location:
        return location
    from urllib.parse import quote

    # `{variant}` stays a placeholder (quoted, `/srv/mirror/{variant}` would never be substituted)
    return "file://" + quote(os.path.abspath(os.path.expanduser(location))).replace("%7Bvariant%7D", "{variant}")


def sources_for(args: argparse.Namespace, environ: Mapping[str, str], *, project: ProjectSpec | None,
                variant: str, fallback: str | None = None) -> Sources:
    """install's sources for `variant`: the torch source above, the dependency sources with
    the project files' index lines added."""
    from torchfit.index.sources import load_pip_config, make_sources, torch_index_for

    template, flag, _ = torch_template(args, environ, fallback)
    config = site_config(environ)
    if project is not None:  # a requirements file's index line is refused naming its file and line
        from torchfit.index.sources import check_url

        for url, where in project.origins:
            if "://" in url:
                check_url(url, where, args.allow_insecure_index)
    return make_sources(
        torch_index=torch_index_for(template, variant),
        index_url=args.index_url or (project.index_url if project is not None else None) or config.get("index-url"),
        extra_index_urls=[*args.extra_index_url, *(project.extra_index_urls if project is not None else ()),
                          *(config.get("extra-index-url") or ())],
        find_links=[*args.find_links, *(project.find_links if project is not None else ()),
                    *(config.get("find-links") or ())],
        offline=args.offline, allow_insecure=args.allow_insecure_index, pip=load_pip_config(dict(environ)),
        torch_index_flag=flag, no_build=bool(getattr(args, "no_build", False)),  # every step: wheels only
    )


def plan_settings(args: argparse.Namespace, project: ProjectSpec | None, *, environ: Mapping[str, str] | None = None,
                  fallback: str | None = None) -> PlanSettings:
    """The planning step's settings (`planning.PlanSettings`) from the command line."""
    from torchfit.planning import PlanSettings

    env = dict(os.environ if environ is None else environ)
    _, _, given = torch_template(args, env, fallback)
    cache: dict[str, Sources] = {}

    def sources(variant: str) -> Sources:
        if variant not in cache:
            cache[variant] = sources_for(args, env, project=project, variant=variant, fallback=fallback)
        return cache[variant]

    builder: Callable[[str], Sources] = sources
    return PlanSettings(sources=builder, torch_given=given,
                        allow_insecure=bool(getattr(args, "allow_insecure_index", False)),
                        timeout=float(getattr(args, "timeout", 600.0) or 600.0),
                        explain=bool(getattr(args, "explain", False)),
                        no_build=bool(getattr(args, "no_build", False)))


def describe_sources(args: argparse.Namespace) -> list[str]:
    """The source options as given on the command line (credentials stripped), for a rebuild command."""
    from torchfit.redact import strip_credentials

    out: list[str] = []
    if getattr(args, "torch_index_url", None):
        out += ["--torch-index-url", strip_credentials(args.torch_index_url)]
    if getattr(args, "index_url", None):
        out += ["--index-url", strip_credentials(args.index_url)]
    for url in getattr(args, "extra_index_url", None) or []:
        out += ["--extra-index-url", strip_credentials(url)]
    for url in getattr(args, "find_links", None) or []:
        out += ["--find-links", strip_credentials(url)]
    if getattr(args, "offline", False):
        out.append("--offline")
    if getattr(args, "allow_insecure_index", False):
        out.append("--allow-insecure-index")
    return out


def matrix_indexes(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """`matrix check|update`'s indexes by the one precedence rule, as the other commands read them:
    (the variant indexes: --index-url > TORCHFIT_TORCH_INDEX_URL > the files' torch-index-url, a
    path as file://; the PyPI index of --pypi: --pypi-url > the files' index-url); None: the default."""
    given = torch_setting(argparse.Namespace(torch_index_url=args.index_url), environ)
    base = as_url(given[0]) if given is not None else None
    pypi = args.pypi_url or (site_config(environ).get("index-url") if args.pypi else None)
    return base, as_url(pypi) if pypi else None


def index_client(args: argparse.Namespace, *, read_local: bool = False) -> IndexClient:
    """The index client of `matrix check|update|probe`, from --timeout, --backoff, --no-cache,
    --allow-insecure-index and -v (progress on a terminal or with -v); `read_local`: the index
    read is a file:// tree (`matrix_indexes`), whose pages and files are read from disk."""
    import sys

    from torchfit.errors import BadInput
    from torchfit.index.client import IndexClient, LocalIndexClient
    from torchfit.progress import StderrProgress

    if not args.timeout > 0:
        raise BadInput(f"--timeout {args.timeout:g}: must be a positive number of seconds")
    verbose = getattr(args, "verbose", False)
    return (LocalIndexClient if read_local else IndexClient)(
        timeout=args.timeout,
        backoff=max(0.0, args.backoff),
        use_cache=not args.no_cache,
        progress=StderrProgress() if verbose or sys.stderr.isatty() else None,
        allow_insecure=bool(getattr(args, "allow_insecure_index", False)),
    )


# --- what the command asks about: hosts, the project, the request ------------------------------


def load_hosts(args: argparse.Namespace) -> list[HostFacts]:
    """Host facts: from --facts files, else probed here; then --assume applied to each."""
    from torchfit.compat.facts import apply_assumptions, facts_from_json
    from torchfit.compat.gpunames import load_gpu_names
    from torchfit.inputs import MAX_FACTS_BYTES, loads_json, read_text_file, shown

    hosts: list[HostFacts] = []
    exclude = getattr(args, "exclude", None) or []
    fleets = 0
    if args.facts:
        for path in args.facts:
            # The one reader of facts files: bounded in size and depth (inputs.py).
            text = read_text_file(path, "--facts", limit=MAX_FACTS_BYTES)
            name = "stdin" if path == "-" else shown(path)
            data = loads_json(text, name)
            group_hosts = load_facts_file(data, name, exclude)  # a fleet file: one host per group
            fleets += group_hosts is not None
            hosts += group_hosts if group_hosts is not None else [facts_from_json(data, name)]
    else:
        from torchfit.host import probe_host
        from torchfit.lock.uvbin import find_uv
        from torchfit.runner import Runner

        runner = Runner()
        hosts.append(probe_host(runner, uv=find_uv(runner)))
    if exclude and not fleets:
        raise BadInput("--exclude needs a fleet file (--facts FLEET.json from `torchfit detect --slurm`)")
    names = load_gpu_names() if any(a.lower().startswith("gpu=") for a in args.assume) else {}
    return [apply_assumptions(h, args.assume, names) for h in hosts]


def load_project(args: argparse.Namespace) -> tuple[tuple[AnyRequirement, ...], ProjectSpec]:
    """The project of REQ, -r FILE and --project DIR [--extra NAME] (`compat.project.ProjectSpec`)."""
    from torchfit.compat.project import ProjectSpec
    from torchfit.compat.request import split_requirements

    family, others = split_requirements(args.requirements)
    return family, load_project_files(args, ProjectSpec(others))


def load_project_files(args: argparse.Namespace, spec: ProjectSpec | None = None) -> ProjectSpec:
    """`spec` (default: empty) with the requirements, constraints and index lines of -r FILE and
    --project DIR [--extra NAME] added, each kept once; BadInput (one line) for a bad file."""
    from dataclasses import replace

    from torchfit.compat.project import (
        ProjectSpec,
        SourceFile,
        dedupe,
        parse_pyproject,
        parse_requirements_file,
    )
    from torchfit.inputs import MAX_REQUIREMENTS_BYTES, loads_toml, read_text_file, shown

    spec = ProjectSpec() if spec is None else spec

    def read(path: str) -> SourceFile:
        # A file reached through a link may be any file (a checkout's requirements.txt -> ~/.netrc):
        # its lines are never quoted in an error (compat.project.SourceFile).
        return SourceFile(read_text_file(path, "-r", limit=MAX_REQUIREMENTS_BYTES), quotable=not os.path.islink(path))

    for path in args.requirement:
        spec = spec + parse_requirements_file(read(path), path, read, os.environ)
    if args.extra and not args.project:
        raise BadInput("--extra names an optional-dependencies group of --project DIR; give --project")
    if args.project:
        path = os.path.join(os.path.expanduser(args.project), "pyproject.toml")
        if not os.path.exists(path):
            raise BadInput(f"--project {shown(args.project)}: no pyproject.toml in it")
        text = read_text_file(path, "--project", limit=MAX_REQUIREMENTS_BYTES)
        spec = spec + parse_pyproject(loads_toml(text, shown(path)), shown(path), args.extra)
    spec = replace(spec, requirements=dedupe(spec.requirements), constraints=dedupe(spec.constraints))
    if any(r.requirement.url for r in (*spec.requirements, *spec.constraints)):
        from torchfit.index.sources import check_direct_urls

        check_direct_urls((*spec.requirements, *spec.constraints), bool(getattr(args, "allow_insecure_index", False)))
    for r in spec.family:
        if r.requirement.marker is not None:
            raise BadInput(f"{r.origin}: {r.text!r}: environment markers on the torch family are not evaluated; "
                           "give the requirement without one, and --python/--assume for the target")
    return spec


# The options that resolve a new plan (resolve's), as a message lists them: beside `--lock`, which
# takes the lock as it is, each is refused (`lock_conflicts`).
RESOLVING_OPTIONS: tuple[tuple[str, str], ...] = (
    ("REQ", "requirements"), ("-r", "requirement"), ("--project", "project"), ("--python", "python"),
    ("--cuda", "cuda"), ("--variant", "variant"), ("--facts", "facts"), ("--assume", "assume"),
    ("--strict-driver", "strict_driver"),
)


def lock_conflicts(args: argparse.Namespace, allowed: Collection[str] = (), verb: str | None = None) -> list[str]:
    """The resolving options given beside `--lock` but not in `allowed` (install's `--facts` and
    `--assume` name the host a lock is checked against). With `verb` ("exports", "packs"), any is
    refused here: BadInput, one line."""
    given = [opt for opt, dest in RESOLVING_OPTIONS if opt not in allowed and getattr(args, dest, None)]
    if given and verb is not None:
        raise BadInput(f"--lock {verb} the lock as it is; drop {', '.join(given)}")
    return given


def make_request(args: argparse.Namespace, matrix: Matrix) -> Request:
    """The resolver's `Request` from the shared resolve options, checked against `matrix`."""
    from dataclasses import replace

    from torchfit.compat.request import Request, parse_python_spec, parse_spec, split_local_labels

    if args.variant and args.variant not in {b.variant for b in matrix.builds}:
        raise BadInput(f"--variant {args.variant}: no such variant in the matrix (e.g. cu128, rocm6.4, cpu)")
    family, project = load_project(args)
    python, free_threaded = parse_python_spec(args.python) if args.python else (None, None)
    # `torch==2.7.1+cu126`, as PyTorch's install pages write it: the label is the variant
    requirements, constraints, variant = split_local_labels(
        (*family, *(r.requirement for r in project.family)), project.constraints, args.variant,
        {b.variant for b in matrix.builds})
    return Request(
        requirements=requirements,
        project=replace(project, requirements=project.others, constraints=constraints),
        python=python,
        cuda=parse_spec(args.cuda, "--cuda") if args.cuda else None,
        variant=variant,
        strict_driver=args.strict_driver,
        free_threaded=free_threaded,
    )


def load_facts_file(data: object, name: str, exclude: list[str]) -> list[HostFacts] | None:
    """A fleet file given to --facts -> one HostFacts per group (None: not a fleet file)."""
    from torchfit.fleet.model import exclude_nodes, fleet_from_json, fleet_hosts, is_fleet_json

    if not is_fleet_json(data):
        return None
    fleet = fleet_from_json(data, name)
    if exclude:
        fleet = exclude_nodes(fleet, exclude)
    return fleet_hosts(fleet, name)
