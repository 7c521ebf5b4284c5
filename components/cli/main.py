"""Offline tools: `python -m components validate|render ...` (see --help)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.checks.crd_schema import cached_crds, schema_problems
from components.checks.immutable import change_problems
from components.checks.load import load_stack
from components.cli.render import RenderDirError, diff_fleets, write_render
from components.model.problems import FleetConfigError, errors, format_report
from components.model.stack_file import stack_path


class CliError(Exception):
    """A command cannot go on: the message says why and what to do (no traceback)."""


def _shown(path: Path) -> str:
    """Paths as a person would type them: relative to here when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _locations(args: argparse.Namespace) -> list[str]:
    if getattr(args, "all", False):
        folder = Path(args.stacks_dir) if args.stacks_dir else stack_path("*").parent
        return [_shown(p) for p in sorted(folder.glob("Pulumi.*.yaml"))]
    return [s if s.endswith(".yaml") else _shown(stack_path(s)) for s in args.stack]


def _load_or_report(location: str) -> tuple[Any, list[Any]] | None:
    """The stack's spec and problems, or None after printing why it cannot be read."""
    try:
        spec, problems = load_stack(location)
        # Offline, and only once a deploy has cached the pinned Kueue release: every object
        # checked against the real CRDs before `pulumi up` would meet them.
        problems = problems + schema_problems(spec, cached_crds(spec))
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    except Exception as exc:  # one stack's failure must not hide the others' reports
        if "--debug" in sys.argv:
            raise
        print(f"{location}: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    if errors(problems):
        print(format_report(problems, location), file=sys.stderr)
        return None
    return spec, problems


def cmd_validate(args: argparse.Namespace) -> int:
    from components.checks.validate import validate_together

    loaded = []
    failed = False
    locations = _locations(args)
    if not locations:
        print("error: no stack files (Pulumi.*.yaml) to validate", file=sys.stderr)
        return 1
    for location in locations:
        one = _load_or_report(location)
        if one is None:
            failed = True
            continue
        spec, problems = one
        print(format_report(problems, location))
        loaded.append((location, spec))
    shared = validate_together(loaded)
    for problem in shared:
        print(problem, file=sys.stderr)
    return 1 if failed or shared else 0


def cmd_render(args: argparse.Namespace) -> int:
    if args.diff:
        return _render_diff(args)
    if len(args.stack) != 1 or not args.out:
        print("render needs one --stack and --out DIR (or --diff)", file=sys.stderr)
        return 2
    location = _locations(args)[0]
    loaded = _load_or_report(location)
    if loaded is None:
        return 1
    spec, problems = loaded
    try:
        written = write_render(spec, Path(args.out), problems)
    except RenderDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(format_report(problems, location))
    print(f"wrote {len(written)} files for {len(spec.clusters)} clusters under {args.out}")
    return 0


def _render_diff(args: argparse.Namespace) -> int:
    if args.old and args.new:
        old, new = args.old, args.new
    elif len(args.stack) == 1:
        new = _locations(args)[0]
        checkout = stack_path("x").parent.parent
        try:
            relative = Path(new).resolve().relative_to(checkout)
        except ValueError:
            raise CliError(
                f"{new} is not inside this checkout, so it has no git history to diff "
                "against: use --old A --new B (each a path or REV:path)"
            ) from None
        old = f"{args.base}:{relative.as_posix()}"
    else:
        print(
            "render --diff needs --stack NAME [--base REV], or --old A --new B "
            "(each a path or REV:path)",
            file=sys.stderr,
        )
        return 2
    try:
        new_spec, _ = load_stack(new)
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        old_spec, _ = load_stack(old)
    except FleetConfigError as exc:
        if not _not_in_revision(old):
            print(exc, file=sys.stderr)
            return 1
        old_spec = None  # a stack added since: everything in it is new
        print(f"{old} does not exist: the whole stack is added", file=sys.stderr)
    # Immutable fields: what is replaced, and what cannot change (components/checks/immutable.py).
    changes = change_problems(old_spec, new_spec) if old_spec is not None else []
    lines = diff_fleets(old_spec, new_spec, old, new) + [str(p) for p in changes]
    print("\n".join(lines) if lines else f"no changes between {old} and {new}")
    return 1 if errors(changes) or (lines and args.exit_code) else 0


def _not_in_revision(location: str) -> bool:
    from components.model.stack_file import NotInRevision, read_text

    try:
        read_text(location)
    except NotInRevision:
        return True
    except (OSError, ValueError):
        return False
    return False


def _driver(args: argparse.Namespace) -> Any:
    from components.cli.automation import Driver, Options

    options = Options(
        base=args.base,
        name=args.name,
        out=Path(args.out),
        up_timeout=args.timeout,
        ready_timeout=args.ready_timeout,
    )
    return Driver(options)


def _guarded(action: Callable[[], int]) -> int:
    from components.cli.automation import DriverError

    try:
        return action()
    except (DriverError, FleetConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        # An interrupted run exits as the driver says (124 after --timeout, 130, 143).
        return getattr(exc, "code", 1)


def cmd_up(args: argparse.Namespace) -> int:
    return _guarded(lambda: (_driver(args).up(), 0)[1])


def cmd_down(args: argparse.Namespace) -> int:
    if not args.name:
        print("down needs --name (the stack `up` printed)", file=sys.stderr)
        return 2
    return _guarded(lambda: (_driver(args).down(args.name), 0)[1])


def cmd_preview(args: argparse.Namespace) -> int:
    name = args.name or args.base
    return _guarded(lambda: (_driver(args).preview(name), 0)[1])


def cmd_run(args: argparse.Namespace) -> int:
    command = [c for c in args.command if c != "--"]
    if not command:
        print("run needs a command after --", file=sys.stderr)
        return 2
    return _guarded(lambda: _driver(args).run(command))


def cmd_status(args: argparse.Namespace) -> int:
    import asyncio
    import json

    import yaml

    from components.cli.status import collect, wait_ready

    folder = Path(args.dir)
    summary_file = folder / "summary.json"
    if not summary_file.is_file():
        raise CliError(
            f"{summary_file} not found: `python -m components up` (or `run`) writes it "
            "there; give --dir the directory it wrote"
        )
    try:
        summary = json.loads(summary_file.read_text())
        clusters = summary["clusters"]
        kubeconfigs = {
            c["name"]: yaml.safe_load((folder / c["kubeconfig"]).read_text()) for c in clusters
        }
        roles = {c["name"]: c["role"] for c in clusters}
        for name, kubeconfig in kubeconfigs.items():
            if not isinstance(kubeconfig, dict):
                raise ValueError(f"the kubeconfig of {name} is not a kubeconfig")
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError) as exc:
        raise CliError(
            f"{summary_file} or a kubeconfig it names cannot be read ({type(exc).__name__}: "
            f"{exc}): run `python -m components up` again to rewrite them"
        ) from None
    if args.wait:
        status = asyncio.run(wait_ready(kubeconfigs, roles, args.wait))
    else:
        status = asyncio.run(collect(kubeconfigs, roles))
    print(status.as_json() if args.json else status.table())
    return 0 if status.ready else 1


def cmd_schema(args: argparse.Namespace) -> int:
    from components.cli.schema import SCHEMA_PATH, schema_text

    out = Path(args.out) if args.out else SCHEMA_PATH
    text = schema_text()
    if args.check:
        current = out.read_text() if out.is_file() else ""
        if current != text:
            print(
                f"error: {_shown(out)} is not the schema of the current model: run "
                "`python -m components schema` and commit it",
                file=sys.stderr,
            )
            return 1
        print(f"{_shown(out)} is up to date")
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {_shown(out)}")
    return 0


READER_STEPS = """\
# The dispatcher's read-only identity for worker {cluster} (fleet {fleet}).
# 1. Apply this on the worker:
#      python -m components reader-access --stack {stack} --cluster {cluster} \\
#        | kubectl --context WORKER apply -f -
# 2. Hand its token to the dispatcher, on the manager (the API server and CA come from
#    the worker's ClusterProfile, so the token is all the Secret holds):
#      TOKEN=$(kubectl --context WORKER -n {ns} get secret {token} \\
#        -o jsonpath='{{.data.token}}' | base64 -d)
#      kubectl --context MANAGER -n {ns} create secret generic {cluster}-reader-token \\
#        --from-literal=token="$TOKEN"
#      kubectl --context MANAGER -n {ns} label secret {cluster}-reader-token {label}={cluster}
"""


def cmd_reader_access(args: argparse.Namespace) -> int:
    import yaml

    from components.model.spec import DNS_LABEL
    from components.objects.dispatcher import WORKER_LABEL
    from components.objects.labels import FLEET_NAMESPACE, with_fleet_labels
    from components.objects.worker_access import READER_TOKEN, reader_access_objects

    if len(args.cluster) > 63 or not DNS_LABEL.match(args.cluster):
        print(
            f"--cluster '{args.cluster}' is not a valid DNS label: use the name of the "
            "worker's MultiKueueCluster (its ClusterProfile's name for inventory clusters)",
            file=sys.stderr,
        )
        return 2
    loaded = _load_or_report(_locations(args)[0])
    if loaded is None:
        return 1
    spec, _ = loaded
    steps = READER_STEPS.format(
        cluster=args.cluster,
        fleet=spec.fleet_name,
        stack=args.stack[0],
        ns=FLEET_NAMESPACE,
        token=READER_TOKEN,
        label=WORKER_LABEL,
    )
    print(
        steps
        + "---\n"
        + yaml.safe_dump_all(with_fleet_labels(spec, reader_access_objects()), sort_keys=False)
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components",
        description="Check and view a fleet offline. --debug (anywhere) shows the traceback "
        "of an unexpected error.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check stack files; exit 1 on any error")
    v.add_argument(
        "--stack",
        action="append",
        default=[],
        help="stack name (stacks/Pulumi.<name>.yaml) or a path; repeatable",
    )
    v.add_argument("--all", action="store_true", help="every stack in stacks/, checked together")
    v.add_argument("--stacks-dir", help="with --all: the folder of stack files (default: stacks/)")
    v.set_defaults(func=cmd_validate)
    r = sub.add_parser("render", help="write every cluster's objects as YAML, or diff two stacks")
    r.add_argument("--stack", action="append", default=[], help="stack name or path")
    r.add_argument(
        "--out",
        help="directory to write: a new or empty one, or a previous render (whose files "
        "are replaced); anything else is refused",
    )
    r.add_argument("--diff", action="store_true", help="show changes instead of writing")
    r.add_argument(
        "--base",
        default="HEAD",
        help="with --diff --stack: git revision to compare against (default HEAD)",
    )
    r.add_argument("--old", help="with --diff: a stack file path or REV:path")
    r.add_argument("--new", help="with --diff: a stack file path or REV:path")
    r.add_argument("--exit-code", action="store_true", help="with --diff: exit 1 when it differs")
    r.set_defaults(func=cmd_render)
    for name, func, text in (
        ("up", cmd_up, "create a uniquely named fleet from a base stack, wait until ready"),
        ("down", cmd_down, "destroy a fleet made by up and remove its stack (safe twice)"),
        ("preview", cmd_preview, "pulumi preview --diff of a stack"),
        ("run", cmd_run, "up, run a command with KUBECONFIG set to the manager, down"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--base", default="ci", help="stack file the fleet is made from")
        p.add_argument("--name", help="stack name (default: <base>-<run id>)")
        p.add_argument("--out", default=".fleet", help="where kubeconfigs and summary.json go")
        p.add_argument("--timeout", type=float, default=3600, help="seconds for up/destroy")
        p.add_argument(
            "--ready-timeout",
            type=float,
            default=900,
            help="seconds to wait until the fleet is ready",
        )
        if name == "run":
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS]")
        p.set_defaults(func=func)
    ra = sub.add_parser(
        "reader-access",
        help="the dispatcher's read-only identity for a worker the stack does not manage",
    )
    ra.add_argument("--stack", action="append", default=[], help="stack name or path")
    ra.add_argument("--cluster", required=True, help="the worker's MultiKueueCluster name")
    ra.set_defaults(func=cmd_reader_access)
    sc = sub.add_parser("schema", help="write the stack files' JSON Schema (from the model)")
    sc.add_argument("--out", help="where to write it (default: schema/stack.schema.json)")
    sc.add_argument("--check", action="store_true", help="exit 1 if the written one is stale")
    sc.set_defaults(func=cmd_schema)
    st = sub.add_parser("status", help="is the fleet ready? (exit 1 when not)")
    st.add_argument("--dir", default=".fleet", help="the directory `up` wrote")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.add_argument("--wait", type=float, default=0, help="seconds to wait until ready")
    st.set_defaults(func=cmd_status)
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug anywhere before a `--` shows the traceback of an unexpected error.
    end = argv.index("--") if "--" in argv else len(argv)
    debug = "--debug" in argv[:end]
    if debug:
        argv = [a for i, a in enumerate(argv) if a != "--debug" or i >= end]
    args = parser.parse_args(argv)
    if args.command == "validate" and not args.stack and not args.all:
        parser.error("validate needs --stack NAME or --all")
    if args.command == "reader-access" and len(args.stack) != 1:
        parser.error("reader-access needs one --stack NAME")
    try:
        return int(args.func(args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the one place every other error ends: one line, no traceback
        if debug:
            raise
        print(
            f"error: {args.command} failed: {type(exc).__name__}: {exc} "
            "(run it again with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
