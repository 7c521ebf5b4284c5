"""Offline tools: `python -m components validate|render ...` (see --help)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.config_source import load_stack, stack_path
from components.problems import FleetConfigError, format_report
from components.render import diff_fleets, write_render


def _shown(path: Path) -> str:
    """Paths as a person would type them: relative to here when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _locations(args: argparse.Namespace) -> list[str]:
    if getattr(args, "all", False):
        return [_shown(p) for p in sorted(stack_path("*").parent.glob("Pulumi.*.yaml"))]
    return [s if s.endswith(".yaml") else _shown(stack_path(s)) for s in args.stack]


def cmd_validate(args: argparse.Namespace) -> int:
    from components.validate import validate_together

    loaded = []
    failed = False
    for location in _locations(args):
        try:
            spec, problems = load_stack(location)
        except FleetConfigError as exc:
            print(exc, file=sys.stderr)
            failed = True
            continue
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
    try:
        spec, problems = load_stack(location)
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return 1
    written = write_render(spec, Path(args.out), problems)
    print(format_report(problems, location))
    print(f"wrote {len(written)} files for {len(spec.clusters)} clusters under {args.out}")
    return 0


def _render_diff(args: argparse.Namespace) -> int:
    if args.old and args.new:
        old, new = args.old, args.new
    elif len(args.stack) == 1:
        new = _locations(args)[0]
        relative = Path(new).resolve().relative_to(stack_path("x").parent.parent)
        old = f"{args.base}:{relative}"
    else:
        print(
            "render --diff needs --stack NAME [--base REV], or --old A --new B "
            "(each a path or REV:path)",
            file=sys.stderr,
        )
        return 2
    try:
        old_spec, _ = load_stack(old)
        new_spec, _ = load_stack(new)
    except (FleetConfigError, FileNotFoundError) as exc:
        print(exc, file=sys.stderr)
        return 1
    lines = diff_fleets(old_spec, new_spec, old, new)
    print("\n".join(lines) if lines else f"no changes between {old} and {new}")
    return 1 if lines and args.exit_code else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m components", description="Check and view a fleet offline."
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
    v.set_defaults(func=cmd_validate)
    r = sub.add_parser("render", help="write every cluster's objects as YAML, or diff two stacks")
    r.add_argument("--stack", action="append", default=[], help="stack name or path")
    r.add_argument("--out", help="directory to write (replaced)")
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
    args = parser.parse_args(argv)
    if args.command == "validate" and not args.stack and not args.all:
        parser.error("validate needs --stack NAME or --all")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
