"""`torchfit doctor --fix [--dry-run]` and `doctor --list`: the glue of installer.repair.

`--list` names every check with its id, area and the repair `--fix` has for it.
`--fix` refuses an env torchfit did not build before anything runs (installer.repair.
load_built_env), runs the checks, plans the repairs from their verdicts, and with
`--dry-run` only shows them (each names what it will install, replace or edit); otherwise it
applies them (a reinstall from the lock, the line of the env script that sets the variable
removed, or the locked packages missing from the env installed into it: never the env
replaced whole), then runs every check again: the report shown, and the exit code, are the
repaired env's. A repair that fails is the install's error (exit 1, `install-failed`), an
interruption exits 130, a process using the env refuses a reinstall (`env-in-use`, exit 1)
unless --allow-in-use: the same check `torchfit add` makes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from torchfit.errors import BadInput
from torchfit.jsontypes import JsonObject

if TYPE_CHECKING:
    from torchfit.checks import Check
    from torchfit.doctor.context import Context
    from torchfit.installer.repair import RepairPlan
    from torchfit.lock.model import Lock


def list_checks(as_json: bool) -> int:
    """`doctor --list`: every check, in the order doctor runs them, with the repair --fix has."""
    from torchfit.cli.ui.doctor import render_check_list
    from torchfit.doctor.model import load_all
    from torchfit.installer.repair import FIXES, KIND_TEXT

    rows: list[JsonObject] = [{"id": s.id, "area": s.area, "title": s.title, "needs_log": s.needs_log,
             "fix": FIXES.get(s.id), "fix_does": KIND_TEXT.get(FIXES.get(s.id, ""))} for s in load_all()]
    if as_json:
        from torchfit.cli.ui.jsonout import json_text

        print(json_text("doctor-list", {"ok": True, "checks": rows}))
    else:
        render_check_list(rows)
    return 0


def fix_target(prefix: str | None, source: str) -> tuple[str, Lock]:
    """The env --fix may repair, and its lock; BadInput (nothing run, nothing changed) otherwise."""
    from torchfit.installer.repair import load_built_env

    if prefix is None:
        raise BadInput(f"--fix repairs an env torchfit built: give --env PREFIX (the interpreter is {source}, "
                       "not an env's); nothing was changed")
    return prefix, load_built_env(prefix)


def plan_for(prefix: str, lock: Lock, checks: Sequence[Check], environ: dict[str, str]) -> RepairPlan:
    from torchfit.doctor.model import status_word
    from torchfit.installer.repair import plan_repairs, read_env_script, read_installed

    script, refused = read_env_script(prefix)
    return plan_repairs(prefix, lock, {c.name: status_word(c.status) for c in checks}, environ, script, refused,
                        read_installed(prefix))


def apply(plan: RepairPlan, lock: Lock, args: argparse.Namespace) -> list[str]:
    """Apply every repair of `plan`, in order; what each did (one line each). Errors are the
    install's own (InstallFailed exit 1, KeyboardInterrupt 130), never bad input."""
    from torchfit.cli.ui.progress import install_progress
    from torchfit.installer.flow import locked_torch_index
    from torchfit.installer.prefix import check_in_use
    from torchfit.installer.repair import apply_env_script, apply_reinstall

    observer = install_progress()  # the reinstall's progress as install shows it
    # Before anything changes: a reinstall replaces files under the env's running processes
    # (add's rule); installing what is missing does not disturb them.
    reinstalled = {n for r in plan.repairs if r.kind == "reinstall" for n in r.packages}
    replaced = [f"{d.name} {d.version}" for d in lock.packages if d.name in reinstalled]
    if any(r.kind in ("reinstall", "rebuild") for r in plan.repairs):
        check_in_use(plan.prefix, ", ".join(replaced) or None, allow=args.allow_in_use, wait=0.0,
                     command="torchfit doctor --fix", fix="end those processes, or pass --allow-in-use",
                     info=observer.info, warn=observer.warn)
    done: list[str] = []
    for r in plan.repairs:
        observer.info(f"fix ({r.check}): {r.what}")
        if r.kind in ("reinstall", "rebuild"):
            from torchfit.cli.settings import sources_for

            sources = sources_for(_no_source_flags(), os.environ, project=None,
                                  variant=str(lock.plan().get("variant") or ""), fallback=locked_torch_index(lock))
            log = apply_reinstall(plan.prefix, lock, r.packages, sources, observer, timeout=3600.0,
                                  replace=r.kind == "reinstall")
            did = "reinstalled" if r.kind == "reinstall" else "installed"
            into = "" if r.kind == "reinstall" else f" into {plan.prefix}"
            done.append(f"{r.check}: {did} {', '.join(r.packages)}{into} from the lock" + (f" (log {log})" if log else ""))
        elif r.kind == "env-script":
            path = apply_env_script(plan.prefix, r.variables)
            done.append(f"{r.check}: removed the line setting {', '.join(r.variables)} from {path} "
                        "(start a new shell or re-activate the env: this one still has the old value)")
    return done


def _no_source_flags() -> argparse.Namespace:
    """The source options of install at their defaults: the lock's torch index, pip's configuration."""
    return argparse.Namespace(torch_index_url=None, index_url=None, extra_index_url=[], find_links=[],
                              offline=False, allow_insecure_index=False)


def _without_uv(plan: RepairPlan) -> str | None:
    """Why no repair that installs can run (no uv to run it: installer.repair.fix_uv), its
    repairs moved to `plan.refused`; None when uv is there or none installs. Asked before
    anything changes (issue 34: the env-script repair was made, then the rebuild failed)."""
    from torchfit.installer.repair import fix_uv
    from torchfit.runner import Runner

    installs = [r for r in plan.repairs if r.kind in ("reinstall", "rebuild")]
    found = fix_uv(Runner()) if installs else None
    if not isinstance(found, str):
        return None
    plan.repairs = [r for r in plan.repairs if r not in installs]
    plan.refused += [f"{r.check}: {found}" for r in installs]
    return found


def run_fix(args: argparse.Namespace, prefix: str, lock: Lock, checks: list[Check], ctx: Context,
            diagnose_again: Callable[[], tuple[list[Check], Context]],
            report_json: Callable[[Sequence[Check], Context], JsonObject]) -> int:
    """`--fix [--dry-run]` after the checks ran: plan, show or apply, run the checks again."""
    from torchfit.cli.ui.doctor import render_repairs, render_report

    plan = plan_for(prefix, lock, checks, ctx.environ)
    no_uv = _without_uv(plan)
    if no_uv is not None and not args.dry_run:
        raise BadInput(f"{no_uv}; nothing was changed")
    if args.dry_run and not args.allow_in_use and any(r.kind == "reinstall" for r in plan.repairs):
        from torchfit.host.procs import find_users

        users = find_users(prefix)  # what the fix itself would refuse on (apply's check_in_use), said now
        if users.procs:
            plan.refused.append(f"{len(users.procs)} process(es) use {prefix} ("
                                + "; ".join(u.describe() for u in users.procs[:3])
                                + "): --fix refuses to reinstall under them until they end (or --allow-in-use)")
    done: list[str] = []
    if not args.dry_run and plan.repairs:
        done = apply(plan, lock, args)
        checks, ctx = diagnose_again()
    failed = any(c.status == "fail" for c in checks)
    if args.json:
        from torchfit.cli.ui.jsonout import json_text

        data = report_json(checks, ctx)
        data["fixes"] = [{"check": r.check, "kind": r.kind, "what": r.what, "done": not args.dry_run}
                         for r in plan.repairs]
        data["not_fixed"] = plan.refused
        print(json_text("doctor", data))
    else:
        render_report(checks, ctx)
        render_repairs(plan, done, args.dry_run)
    return 1 if failed else 0

