"""The command line's settings, resolved once, as values for the layers below (issue 24;
architecture-review-3, change 1).

The torch source, in one precedence, stated here only: `--torch-index-url`, else the
`TORCHFIT_TORCH_INDEX_URL` environment variable, else what the caller falls back to (a
lock's recorded index), else the public PyTorch index; `{variant}` is substituted per
variant. The dependency sources are install's (`index.sources.make_sources`): pip's
configuration, the flags, then the index lines of the project's requirements files.
Nothing below `cli/` reads `args` or the environment for these.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchfit.compat.project import ProjectSpec
    from torchfit.index.sources import Sources
    from torchfit.planning import PlanSettings


def torch_template(args: argparse.Namespace, environ: Mapping[str, str],
                   fallback: str | None = None) -> tuple[str, str, bool]:
    """(template, the flag to blame, whether the user named it) of the torch source."""
    from torchfit.compat.matrix import DEFAULT_INDEX, TORCH_INDEX_ENV

    flag_value = getattr(args, "torch_index_url", None)
    if flag_value:
        return as_url(flag_value), "--torch-index-url", True
    if environ.get(TORCH_INDEX_ENV):
        return as_url(environ[TORCH_INDEX_ENV]), TORCH_INDEX_ENV, True
    if fallback:
        return fallback, "the lock's torch index", True
    return DEFAULT_INDEX, "the torch index", False


def as_url(location: str) -> str:
    """A torch source given as a path (a directory of wheels, a PEP 503 tree) as a file:// URL."""
    if "://" in location:
        return location
    from urllib.parse import quote

    return "file://" + quote(os.path.abspath(os.path.expanduser(location)))


def sources_for(args: argparse.Namespace, environ: Mapping[str, str], *, project: ProjectSpec | None,
                variant: str, fallback: str | None = None) -> Sources:
    """install's sources for `variant`: the torch source above, the dependency sources with
    the project files' index lines added."""
    from torchfit.index.sources import load_pip_config, make_sources, torch_index_for

    template, flag, _ = torch_template(args, environ, fallback)
    return make_sources(
        torch_index=torch_index_for(template, variant),
        index_url=args.index_url or (project.index_url if project is not None else None),
        extra_index_urls=[*args.extra_index_url, *(project.extra_index_urls if project is not None else ())],
        find_links=[*args.find_links, *(project.find_links if project is not None else ())],
        offline=args.offline, allow_insecure=args.allow_insecure_index, pip=load_pip_config(dict(environ)),
        torch_index_flag=flag,
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
