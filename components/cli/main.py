"""The fleet's commands: validate, render (and --diff), status, schema, reference, the CI
driver (up, down, preview, run) and reader-access. `python -m components ...` and the
installed `mkf ...` (cli/mkf.py) are the same commands.

Conventions, as kubectl, git and helm have them: results on stdout, every diagnostic on
stderr; exit 0 when all is well (same, valid, ready), 1 when the answer is no (differs,
invalid, not ready), 2 when the command could not do its job (wrong arguments, a stack
that cannot be read for a diff, an unexpected error); `-o json` for machines."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.checks.crd_schema import cached_crds, schema_problems
from components.checks.immutable import change_problems
from components.checks.load import load_stack
from components.cli.capacity import below_use_warnings, capacity_lines, capacity_rows
from components.cli.completion import STACK_METAVAR
from components.cli.render import (
    RenderDirError,
    diff_json,
    diff_lines,
    fleet_diff,
    render_stream,
    write_render,
)
from components.cli.report import Reporter, problem_json
from components.model.problems import FleetConfigError, Problem, errors, notes, warnings
from components.model.spec import FleetSpec
from components.model.stack_file import stack_name_of, stack_path
from controller.api.terminal import common_flags, flag, quietly_on_broken_pipe, seconds

if TYPE_CHECKING:
    # For the annotation alone: each command imports the modules it needs when it runs
    # (fleet_dir only for the commands that read a running fleet), and this keeps it so.
    from components.cli.fleet_dir import FleetDir

# Exit codes of every command that compares or checks (see the module's docstring).
SAME, DIFFERS, FAILED = 0, 1, 2


class CliError(Exception):
    """A command cannot do its job: the message says why and what to do (no traceback)."""


def _shown(path: Path) -> str:
    """Paths as a person would type them: relative to here when possible."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _locations(args: argparse.Namespace) -> list[str]:
    if getattr(args, "all", False):
        folder = Path(args.stacks_dir) if args.stacks_dir else stack_path("*").parent
        if not folder.is_dir():
            what = "is not a folder" if folder.exists() else "does not exist"
            raise CliError(
                f"--stacks-dir {folder} {what}; name the folder that holds the "
                "Pulumi.<stack>.yaml files (default: stacks/)"
            )
        found = [_shown(p) for p in sorted(folder.glob("Pulumi.*.yaml"))]
        if not found:
            raise CliError(
                f"no stack files (Pulumi.*.yaml) in {_shown(folder)}; name the folder that "
                "holds them with --stacks-dir"
            )
        return found
    return [s if s.endswith(".yaml") else _shown(stack_path(s)) for s in args.stack]


def _load(location: str, args: argparse.Namespace) -> tuple[Any, list[Problem]]:
    """The stack's spec (None when it has errors or cannot be read) and its problems."""
    try:
        spec, problems = load_stack(location)
        # Offline, and only once a deploy has cached the pinned Kueue release: every object
        # checked against the real CRDs before `pulumi up` would meet them.
        problems = problems + schema_problems(spec, cached_crds(spec))
    except FleetConfigError as exc:
        return None, exc.problems
    except Exception as exc:  # one stack's failure must not hide the others' reports
        if flag(args, "debug"):
            raise
        return None, [Problem("", f"{type(exc).__name__}: {exc}")]
    return (None if errors(problems) else spec), problems


def _head(location: str, problems: list[Problem]) -> str:
    return f"{location}: {len(errors(problems))} error(s), {len(warnings(problems))} warning(s)"


def _load_or_report(
    location: str, args: argparse.Namespace, report: Reporter
) -> tuple[Any, list[Problem]]:
    """The stack's spec and problems; the spec is None after its errors went to stderr."""
    spec, problems = _load(location, args)
    if spec is None:
        report.error(_head(location, problems))
    report.problems(problems, location)
    if spec is None:
        report.error("Nothing was changed on any cluster. Fix the errors above and run again.")
    return spec, problems


def cmd_validate(args: argparse.Namespace) -> int:
    from components.checks.clusters import validate_together

    # Notes need nothing done: shown when asked for (--notes), counted otherwise, so that
    # the default stack's validate (also every scripts/up.sh run) is quiet when all is well.
    report = Reporter.for_args(args, show_notes=args.notes)
    locations = _locations(args)
    if not locations:
        raise CliError("no stack files (Pulumi.*.yaml) to validate")
    loaded: list[tuple[str, Any]] = []
    results: list[tuple[str, bool, list[Problem]]] = []
    for location in locations:
        spec, problems = _load(location, args)
        results.append((location, spec is not None, problems))
        if spec is not None:
            loaded.append((location, spec))
        if args.output == "text":
            report.result(_head(location, problems))
            report.problems(problems, location)
    shared = validate_together(loaded)
    valid = all(ok for _, ok, _ in results) and not shared
    if args.output == "json":
        stacks = [
            {"file": f, "valid": ok, "problems": [problem_json(p, f) for p in problems]}
            for f, ok, problems in results
        ]
        shared_json = [problem_json(p, "") for p in shared]
        document = {"valid": valid, "stacks": stacks, "acrossStacks": shared_json}
        report.result(json.dumps(document, indent=2))
        return SAME if valid else DIFFERS
    for problem in shared:
        report.error(str(problem))
    report.finish()
    held = {(p.path, p.message) for _, _, problems in results for p in notes(problems)}
    if held and not args.notes:
        report.info(f"{len(held)} note(s) that need nothing done: --notes shows them")
    return SAME if valid else DIFFERS


def cmd_render(args: argparse.Namespace) -> int:
    if args.diff:
        return _render_diff(args)
    if args.fleet or args.fleet_stack:
        raise CliError(
            "--fleet and --fleet-stack go with --diff: render --diff --stack NAME --fleet DIR"
        )
    if len(args.stack) != 1:
        raise CliError(
            "render needs one --stack NAME (the objects go to stdout, or --out DIR), or --diff"
        )
    report = Reporter.for_args(args)
    location = _locations(args)[0]
    spec, problems = _load_or_report(location, args, report)
    if spec is None:
        return DIFFERS
    if args.out in (None, "-"):
        # helm template's habit: the objects on stdout, ready for `kubectl apply -f -`.
        report.result(render_stream(spec).rstrip("\n"))
        report.finish()
        return SAME
    try:
        written = write_render(spec, Path(args.out), problems)
    except RenderDirError as exc:
        raise CliError(str(exc)) from None
    report.finish()
    report.result(f"wrote {len(written)} files for {len(spec.clusters)} clusters under {args.out}")
    return SAME


def _diff_sides(args: argparse.Namespace) -> tuple[str, str]:
    if args.old and args.new:
        return args.old, args.new
    if len(args.stack) != 1 or args.old or args.new:
        raise CliError(
            "render --diff needs --stack NAME [--base REV], or --old A --new B (each a path "
            "or REV:path)"
        )
    new = _locations(args)[0]
    checkout = _project_dir()
    try:
        relative = Path(new).resolve().relative_to(checkout)
    except ValueError:
        raise CliError(
            f"{new} is not inside this checkout, so it has no git history to diff "
            "against: use --old A --new B (each a path or REV:path)"
        ) from None
    return f"{args.base}:{relative.as_posix()}", new


def _render_diff(args: argparse.Namespace) -> int:
    """Exit 0 same, 1 differs (with --exit-code or -q, as `git diff`), 2 when the diff
    cannot be made or the change cannot be applied (an immutable field refused)."""
    report = Reporter.for_args(args)
    old, new = _diff_sides(args)
    if old == os.devnull and new == os.devnull:
        raise CliError("render --diff: at most one side may be /dev/null (no stack)")
    new_spec: FleetSpec | None = None
    new_problems: list[Problem] = []
    if new != os.devnull:  # /dev/null, as for `git diff`: the stack is removed
        try:
            new_spec, new_problems = load_stack(new)
        except FleetConfigError as exc:
            report.error(_head(new, exc.problems))
            report.problems(exc.problems, new)
            return FAILED
    old_spec: FleetSpec | None = None
    if old != os.devnull:
        try:
            # Two versions of one stack: the old is read under the new one's name, which
            # the fleet's name and every label default to, so files named differently
            # (Pulumi.a.yaml against a copy) show what changed, not every object.
            old_spec, _ = load_stack(old, stack=stack_name_of(new if new_spec else old))
        except FleetConfigError as exc:
            if not _not_in_revision(old):
                report.error(_head(old, exc.problems))
                report.problems(exc.problems, old)
                return FAILED
            # a stack added since: everything in it is new
    report.problems(new_problems, new)
    # Immutable fields (components/checks/immutable.py): a replacement is marked in the diff,
    # a change the API server would refuse is an error.
    refused = errors(change_problems(old_spec, new_spec)) if old_spec and new_spec else []
    clusters = fleet_diff(old_spec, new_spec, old, new)
    in_use = _fleet_usage(args, report) if args.fleet or args.fleet_stack else None
    quota_rows = capacity_rows(old_spec, new_spec, in_use)
    if args.output == "json":
        document = {
            "old": old,
            "new": new,
            "differs": bool(clusters),
            "capacity": [r.as_json() for r in quota_rows],
            "clusters": diff_json(clusters),
            "problems": [problem_json(p, new) for p in refused],
        }
        report.result(json.dumps(document, indent=2))
    elif not flag(args, "quiet"):
        lines = diff_lines(clusters, report.paint_out, bodies=old_spec is not None)
        if lines:
            # What a reviewer asks first: how much each queue can run, before the objects.
            lines = [*capacity_lines(quota_rows, in_use is not None), "", *lines]
        if old_spec is None:
            gone = f"/dev/null against {new}" if old == os.devnull else f"{old} does not exist"
            lines = [
                f"{gone}: the whole stack is new, so every object is added "
                f"(listed below; `mkf render --stack {new}` prints them in full)",
                "",
                *lines,
            ]
        elif new_spec is None:
            lines = [
                f"the stack is removed ({old} against /dev/null): every object of it is "
                "removed, as `pulumi destroy` of that stack would delete it",
                "",
                *lines,
            ]
        report.result("\n".join(lines) if lines else f"no changes between {old} and {new}")
    for warning in below_use_warnings(quota_rows):
        report.error(warning)
    for problem in refused:
        report.error(problem.render(new))
    report.finish()
    if refused:
        return FAILED
    return DIFFERS if clusters and (args.exit_code or flag(args, "quiet")) else SAME


def _fleet_usage(args: argparse.Namespace, report: Reporter) -> dict[Any, str]:
    """The quota each ClusterQueue's work holds now on every cluster of the fleet: the one
    `mkf up` wrote to --fleet DIR, or a plain `pulumi up`'s (--fleet-stack NAME, its outputs
    read with the Pulumi CLI). A cluster that does not answer is said on stderr, left out."""
    import asyncio

    from components.cli.fleet_dir import (
        FleetDirError,
        read_fleet_dir,
        read_stack_outputs,
        read_usage,
    )

    try:
        if args.fleet_stack:
            fleet = read_stack_outputs(args.fleet_stack, _project_dir())
        else:
            fleet = read_fleet_dir(Path(args.fleet))
    except FleetDirError as exc:
        message = (
            str(exc)
            .replace("give --dir", "give --fleet")
            .replace("--stack NAME", "--fleet-stack NAME")
        )
        raise CliError(message) from None
    usage, missed = asyncio.run(read_usage(fleet.kubeconfigs))
    for line in missed:
        report.error(f"warning: {line}")
    return usage


def _project_dir() -> Path:
    """The project this command acts on (components/model/project.py)."""
    from components.model.project import project_root

    return project_root()


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

    # Each command has only the flags it uses (down: --name, --timeout; preview: no --out
    # nor --ready-timeout); the others keep Options' defaults.
    given = {
        key: value
        for key, value in (
            ("base", getattr(args, "base", None)),
            ("out", Path(args.out) if getattr(args, "out", None) else None),
            ("ready_timeout", getattr(args, "ready_timeout", None)),
        )
        if value is not None
    }
    limit = "destroy_timeout" if args.command == "down" else "up_timeout"
    # The project this command stands in, and its own local state backend.
    project = _project_dir()
    options = Options(
        name=args.name,
        project=project,
        backend=project / ".pulumi-state",
        **{limit: args.timeout},
        **given,
    )
    # Progress (and the Pulumi CLI's own) is a diagnostic, on stderr; only preview's diff
    # is the result of its command. `run`'s command writes where it likes.
    if args.command == "preview":
        return Driver(options)
    return Driver(options, log=lambda text: print(text, file=sys.stderr, flush=True))


def _guarded(action: Callable[[], int]) -> int:
    from components.cli.automation import DriverError

    try:
        return action()
    except (DriverError, FleetConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        # An interrupted run exits as the driver says (124 after --timeout, 130, 143); its
        # codes are the driver's own (README: the CI driver), not the 0/1/2 of the checks.
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
    command = [c for c in args.command_args if c != "--"]
    if not command:
        print("run needs a command after --", file=sys.stderr)
        return 2
    return _guarded(lambda: _driver(args).run(command))


def cmd_status(args: argparse.Namespace) -> int:
    """Exit 0 ready, 1 not ready, 2 when the fleet's files cannot be read."""
    import asyncio

    from components.cli.status import collect, wait_ready

    report = Reporter.for_args(args)
    fleet = _running_fleet(args)
    kubeconfigs, roles, installs = fleet.kubeconfigs, fleet.roles, fleet.installs
    if args.wait:
        status = asyncio.run(
            wait_ready(
                kubeconfigs,
                roles,
                args.wait,
                installs,
                timeout=args.timeout,
                progress=report.info,
            )
        )
    else:
        status = asyncio.run(collect(kubeconfigs, roles, installs, timeout=args.timeout))
    json_out = args.output == "json" or args.json
    report.result(status.as_json() if json_out else status.table(report.paint_out))
    if args.wait and status.failed:
        first = status.failed[0]
        report.error(
            f"error: stopped waiting: {first.cluster} {first.kind} {first.name} is {first.reason}, "
            "which no wait mends (its row above says why)"
        )
    return SAME if status.ready else DIFFERS


def _running_fleet(args: argparse.Namespace) -> FleetDir:
    """The FleetDir of --stack (its outputs) or --dir (the files up wrote)."""
    from components.cli.fleet_dir import FleetDirError, read_fleet_dir, read_stack_outputs

    try:
        if args.stack:
            return read_stack_outputs(args.stack, _project_dir())
        return read_fleet_dir(_fleet_dir(args))
    except FleetDirError as exc:
        raise CliError(str(exc)) from None


def cmd_job(args: argparse.Namespace) -> int:
    """Where a job runs: exit 0 found, 2 not found (or the fleet cannot be read)."""
    import asyncio

    from components.cli.job_trail import JobTrailError, table, trail_of
    from controller.api.cluster_access import connected

    report = Reporter.for_args(args)
    fleet = _running_fleet(args)
    json_out = args.output == "json"

    async def run() -> int:
        # At most two tries a request: a person waits.
        async with connected(fleet.kubeconfigs, attempts=2) as kubes:
            shown = ""
            while True:
                trail = await trail_of(kubes, fleet.roles, args.name, args.namespace, args.kind)
                text = (
                    json.dumps(trail.as_json(), indent=2)
                    if json_out
                    else table(trail, report.paint_out, args.events)
                )
                if text != shown:
                    if shown:
                        report.result("---")
                    report.result(text)
                    shown = text
                if not args.watch or trail.finished:
                    return SAME
                await asyncio.sleep(args.interval)

    try:
        return asyncio.run(run())
    except JobTrailError as exc:
        raise CliError(str(exc)) from None


def cmd_logs(args: argparse.Namespace) -> int:
    """A job's logs from its worker: exit 0 printed, 1 a log not read, 2 nothing to read."""
    import asyncio

    from components.cli.job_logs import choose_when_running, print_logs
    from components.cli.job_trail import JobTrailError
    from controller.api.cluster_access import connected

    report = Reporter.for_args(args)
    fleet = _running_fleet(args)

    async def run() -> int:
        # At most two tries a request: a person waits.
        async with connected(fleet.kubeconfigs, attempts=2) as kubes:
            trail, sources = await choose_when_running(
                kubes,
                fleet.roles,
                args.name,
                args.namespace,
                args.kind,
                pod=args.pod,
                all_pods=args.all_pods,
                container=args.container,
                pod_running_timeout=args.pod_running_timeout,
                note=report.info,
            )
            problems = await print_logs(
                kubes,
                trail.namespace,
                sources,
                args.follow,
                args.since,
                lambda line: print(line, flush=args.follow),
            )
        for problem in problems:
            report.error(f"error: {problem}")
        return DIFFERS if problems else SAME

    try:
        return asyncio.run(run())
    except JobTrailError as exc:
        raise CliError(str(exc)) from None


def _generated(args: argparse.Namespace, path: Path, text: str, what: str, command: str) -> int:
    """Write a file generated from the code, or (--check) say whether the committed one is
    current: exit 0 up to date, 1 stale."""
    report = Reporter.for_args(args)
    if args.check:
        current = path.read_text() if path.is_file() else ""
        if current != text:
            report.error(f"error: {_shown(path)} is not {what}: run `{command}` and commit it")
            return DIFFERS
        report.info(f"{_shown(path)} is up to date")
        return SAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    report.info(f"wrote {_shown(path)}")
    return SAME


def cmd_schema(args: argparse.Namespace) -> int:
    from components.cli.schema import SCHEMA_PATH, schema_text

    out = Path(args.out) if args.out else SCHEMA_PATH
    return _generated(args, out, schema_text(), "the schema of the current model", "mkf schema")


def cmd_reference(args: argparse.Namespace) -> int:
    from components.cli.reference import generated_pages

    code = SAME
    for path, text in generated_pages(build_parser()).items():
        code = max(
            code,
            _generated(args, path, text, "what the code documents", "mkf reference"),
        )
    return code


READER_STEPS = """\
# The dispatcher's read-only identity for worker {cluster} (fleet {fleet}).
# 1. Apply this on the worker:
#      mkf reader-access --stack {stack} --cluster {cluster} \\
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
    from components.cli.render import dump
    from components.model.spec import DNS_LABEL
    from components.objects.dispatcher import WORKER_LABEL
    from components.objects.labels import FLEET_NAMESPACE, with_fleet_labels
    from components.objects.worker_access import READER_TOKEN, reader_access_objects

    if len(args.cluster) > 63 or not DNS_LABEL.match(args.cluster):
        raise CliError(
            f"--cluster '{args.cluster}' is not a valid DNS label: use the name of the "
            "worker's MultiKueueCluster (its ClusterProfile's name for inventory clusters)"
        )
    report = Reporter.for_args(args)
    spec, _ = _load_or_report(_locations(args)[0], args, report)
    report.finish()
    if spec is None:
        return DIFFERS
    steps = READER_STEPS.format(
        cluster=args.cluster,
        fleet=spec.fleet_name,
        stack=args.stack[0],
        ns=FLEET_NAMESPACE,
        token=READER_TOKEN,
        label=WORKER_LABEL,
    )
    print(steps + "---\n" + dump(with_fleet_labels(spec, reader_access_objects())))
    return SAME


def _fleet_dir(args: argparse.Namespace) -> Path:
    """--dir as given, else the .fleet of the project the command stands in."""
    if args.dir:
        return Path(args.dir)
    from components.model.project import project_root

    return project_root() / ".fleet"


def cmd_cordon(args: argparse.Namespace) -> int:
    """`cordon` and `uncordon`: the worker's `cordoned` written into its stack file."""
    from components.cli.cordon import CordonError, set_cordon

    stack = args.stack
    location = stack if stack.endswith(".yaml") else _shown(stack_path(stack))
    cordoned = args.command == "cordon"
    try:
        changed = set_cordon(Path(location), args.worker, cordoned)
    except CordonError as exc:
        raise CliError(str(exc)) from None
    print(changed.said)
    if changed.text:
        name = stack_name_of(location)
        effect = (
            "the dispatcher then sends it nothing new, and what runs there runs on"
            if cordoned
            else "the dispatcher then nominates it again"
        )
        print(f"next: `pulumi up --stack {name}` applies it ({effect})")
    return SAME


def cmd_env(args: argparse.Namespace) -> int:
    """The shell lines for a fleet `up` wrote, to eval."""
    from components.cli.shell_env import ShellEnvError, exports
    from components.model.project import project_root

    try:
        lines = exports(project_root(), _fleet_dir(args).resolve(), args.stack)
    except ShellEnvError as exc:
        raise CliError(str(exc)) from None
    print("\n".join(lines))
    return SAME


def _output_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help=f"text for people (default) or json for machines: {what}",
    )


# The commands a person uses every day come first in the help.
def configure(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """Every command of the fleet on `parser`; returns its subcommands (mkf adds its own)."""
    parser.description = (
        "Check, render, diff and bring up a MultiKueue fleet described by a stack file. "
        "Exit codes: 0 ok/same/ready, 1 invalid/differs/not ready, 2 error."
    )
    common_flags(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, func: Callable[[argparse.Namespace], int], text: str) -> Any:
        p = sub.add_parser(name, help=text, description=text)
        common_flags(p, top=False)
        p.set_defaults(func=func)
        return p

    v = command("validate", cmd_validate, "check stack files: every problem at once")
    v.add_argument(
        "--stack",
        action="append",
        metavar=STACK_METAVAR,
        default=[],
        help="stack name (stacks/Pulumi.<name>.yaml) or a path; repeatable",
    )
    v.add_argument("--all", action="store_true", help="every stack in stacks/, checked together")
    v.add_argument("--stacks-dir", help="with --all: the folder of stack files (default: stacks/)")
    v.add_argument(
        "--notes", action="store_true", help="show the notes too (facts that need nothing done)"
    )
    _output_flag(v, "every problem with its path, line and fix")
    r = command("render", cmd_render, "every cluster's objects as YAML, or the diff of a change")
    r.add_argument(
        "--stack", action="append", default=[], metavar=STACK_METAVAR, help="stack name or path"
    )
    r.add_argument(
        "--out",
        help="a directory for one folder per cluster: a new or empty one, or a previous "
        "render (whose files are replaced); anything else is refused. Without it (or with "
        "-), one YAML stream on stdout",
    )
    r.add_argument(
        "--diff",
        action="store_true",
        help="show what a change adds, changes, replaces and removes, per cluster",
    )
    r.add_argument(
        "--base",
        default="HEAD",
        help="with --diff --stack: git revision to compare against (default HEAD)",
    )
    r.add_argument(
        "--old", help="with --diff: a stack file path or REV:path (/dev/null: a new stack)"
    )
    r.add_argument(
        "--new", help="with --diff: a stack file path or REV:path (/dev/null: a removed stack)"
    )
    r.add_argument(
        "--fleet",
        metavar="DIR",
        help="with --diff: the directory `mkf up` or scripts/up.sh wrote; reads what each "
        "ClusterQueue's work holds now and flags a quota the change would leave below it",
    )
    r.add_argument(
        "--fleet-stack",
        metavar=STACK_METAVAR,
        help="with --diff: as --fleet, for a fleet brought up with a plain `pulumi up --stack "
        "NAME` (its outputs read with the Pulumi CLI)",
    )
    r.add_argument(
        "--exit-code",
        action="store_true",
        help="with --diff: exit 1 when it differs (0 same, 2 error); -q implies it",
    )
    _output_flag(r, "with --diff, the changes per cluster")
    st = command("status", cmd_status, "is the fleet ready? (exit 1 when not)")
    st.add_argument("--dir", help="the directory `up` wrote (default: the project's .fleet)")
    st.add_argument(
        "--stack",
        metavar=STACK_METAVAR,
        help="a fleet brought up with a plain `pulumi up --stack NAME`: read its outputs "
        "with the Pulumi CLI (nothing is written) instead of --dir",
    )
    st.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # before -o json
    st.add_argument(
        "--wait",
        type=seconds,
        default=0,
        help="seconds to wait until ready; stops sooner on a failure no wait mends (progress "
        "on stderr)",
    )
    st.add_argument(
        "--timeout",
        type=seconds,
        default=5,
        help="seconds each cluster has to answer before it is reported unreachable (default 5)",
    )
    _output_flag(st, "every check with its reason")
    for name, func, text in (
        ("up", cmd_up, "create a uniquely named fleet from a base stack, wait until ready"),
        ("down", cmd_down, "destroy a fleet made by up and remove its stack (safe twice)"),
        ("preview", cmd_preview, "pulumi preview --diff of a stack"),
        ("run", cmd_run, "up, run a command with KUBECONFIG set to the manager, down"),
    ):
        p = command(name, func, text)
        if name != "down":
            p.add_argument(
                "--base", default="ci", metavar=STACK_METAVAR, help="stack the fleet is made from"
            )
        p.add_argument(
            "--name",
            help="the fleet's stack (the name `up` printed)"
            if name == "down"
            else "stack name (default: <base>-<run id>)",
        )
        what, limit = {"down": ("destroy", 1800), "preview": ("preview", 3600)}.get(
            name, ("up", 3600)
        )
        p.add_argument(
            "--timeout", type=seconds, default=limit, help=f"seconds for {what} (default {limit})"
        )
        if name in ("up", "run"):
            p.add_argument("--out", default=".fleet", help="where kubeconfigs and summary.json go")
            p.add_argument(
                "--ready-timeout",
                type=seconds,
                default=900,
                help="seconds to wait until the fleet is ready",
            )
        if name == "run":
            p.add_argument("command_args", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS]")
    for verb, text in (
        (
            "cordon",
            "take a worker out of service: nothing new is dispatched to it, what "
            "runs there runs on (writes workers[].cordoned into the stack file)",
        ),
        ("uncordon", "put a cordoned worker back in service (writes the stack file)"),
    ):
        co = command(verb, cmd_cordon, text)
        co.add_argument("worker", metavar="WORKER", help="the worker's name (workers[].name)")
        co.add_argument("--stack", required=True, metavar=STACK_METAVAR, help="stack name or path")
    _job_commands(command)
    en = command(
        "env",
        cmd_env,
        'shell settings for a fleet up brought up: eval "$(mkf env dev)" (KUBECONFIG, '
        "PATH, the Pulumi backend)",
    )
    en.add_argument(
        "stack", nargs="?", metavar="STACK", help="the stack the fleet must be (e.g. dev)"
    )
    en.add_argument("--dir", help="the directory `up` wrote (default: the project's .fleet)")
    ra = command(
        "reader-access",
        cmd_reader_access,
        "the dispatcher's read-only identity for a worker the stack does not manage",
    )
    ra.add_argument(
        "--stack", action="append", default=[], metavar=STACK_METAVAR, help="stack name or path"
    )
    ra.add_argument("--cluster", required=True, help="the worker's MultiKueueCluster name")
    sc = command("schema", cmd_schema, "write the stack files' JSON Schema (from the model)")
    sc.add_argument("--out", help="where to write it (default: schema/stack.schema.json)")
    sc.add_argument("--check", action="store_true", help="exit 1 if the written one is stale")
    rf = command(
        "reference",
        cmd_reference,
        "write the docs generated from the code (docs/stack-reference.md, the tables in "
        "docs/dispatcher.md and docs/commands.md)",
    )
    rf.add_argument("--check", action="store_true", help="exit 1 if a written page is stale")
    return sub


def _job_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    """`job` and `logs`: follow one job across the fleet."""
    from components.cli.job_args import KINDS_BY_KEY, duration

    for name, func, text in (
        (
            "job",
            cmd_job,
            "where a job runs: its Workloads, the worker that admitted each, the pods there "
            "and the events of manager and worker in time order",
        ),
        ("logs", cmd_logs, "a job's logs, from the worker that runs it"),
    ):
        p = command(name, func, text)
        p.add_argument(
            "name",
            metavar="[NAMESPACE/]NAME",
            help="a Job, JobSet, LeaderWorkerSet, TrainJob or Kubeflow job on the manager",
        )
        p.add_argument("-n", "--namespace", help="its namespace (default: default)")
        p.add_argument(
            "--kind",
            choices=sorted(KINDS_BY_KEY),
            help="its kind, when names clash (default: every kind the manager serves)",
        )
        p.add_argument("--dir", help="the directory `up` wrote (default: the project's .fleet)")
        p.add_argument(
            "--stack",
            metavar=STACK_METAVAR,
            help="a fleet brought up with a plain `pulumi up --stack NAME` (read its outputs)",
        )
        if name == "job":
            p.add_argument(
                "--watch",
                action="store_true",
                help="follow it, printing each change, until it ends",
            )
            p.add_argument(
                "--interval",
                type=seconds,
                default=2,
                help="with --watch: seconds between looks (default 2)",
            )
            p.add_argument(
                "--events", type=int, default=20, help="how many of the last events to show"
            )
            _output_flag(p, "everything found, events included")
        else:
            p.add_argument("-c", "--container", help="the container (default: the pod's default)")
            p.add_argument("-f", "--follow", action="store_true", help="stream it as it comes")
            which = p.add_mutually_exclusive_group()
            which.add_argument("--pod", help="one pod of the job, by name")
            which.add_argument(
                "--all-pods", action="store_true", help="every pod, each line prefixed"
            )
            p.add_argument(
                "--since",
                type=duration,
                help="only what was printed in the last D (30s, 5m, 1h)",
            )
            p.add_argument(
                "--pod-running-timeout",
                type=seconds,
                default=20,
                help="seconds to wait for the job to be admitted and a pod to run, as kubectl "
                "logs waits for one (default 20; 0: do not wait)",
            )


def _usage_problem(args: argparse.Namespace) -> str | None:
    if args.command == "validate" and not args.stack and not args.all:
        return "validate needs --stack NAME or --all"
    if args.command == "reader-access" and len(args.stack) != 1:
        return "reader-access needs one --stack NAME"
    return None


# The commands that read the project's stacks/ or deploy it: each says which project it acts
# on when that is not the current directory.
PROJECT_COMMANDS = frozenset({"validate", "render", "up", "run", "down", "preview"})


def _explain_the_fleet_up_wrote(args: argparse.Namespace) -> None:
    """`mkf controller explain` with no --kubeconfig, KUBECONFIG or in-cluster identity
    asks the manager of the fleet `up` wrote in this project's .fleet, saying so, before
    ~/.kube/config (which `up` never writes to)."""
    if args.command != "explain" or getattr(args, "kubeconfig", None):
        return
    if os.environ.get("KUBECONFIG") or os.environ.get("KUBERNETES_SERVICE_HOST"):
        return
    from components.cli.shell_env import fleet_manager_kubeconfig
    from components.model.project import project_root

    found = fleet_manager_kubeconfig(project_root() / ".fleet")
    if found is not None:
        args.kubeconfig = str(found)
        print(f"note: asking the manager of the fleet up wrote ({found})", file=sys.stderr)


def dispatch(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Runs a parsed command: every error ends as one line on stderr, never a traceback
    (--debug shows one for an unexpected error)."""
    problem = _usage_problem(args)
    if problem:
        parser.error(problem)
    _explain_the_fleet_up_wrote(args)
    if args.command in PROJECT_COMMANDS and not flag(args, "quiet"):
        from components.model.project import where_note

        note = where_note()
        if note:
            print(note, file=sys.stderr)
    try:
        return int(args.func(args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return FAILED
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return DIFFERS
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise  # the reader went away (`| head`): quietly_on_broken_pipe ends the command
    except Exception as exc:  # the one place every other error ends: one line, no traceback
        if flag(args, "debug"):
            raise
        print(
            f"error: {args.command} failed: {type(exc).__name__}: {exc} "
            "(run it again with --debug for the traceback)",
            file=sys.stderr,
        )
        return FAILED


def build_parser(prog: str = "mkf") -> argparse.ArgumentParser:
    """mkf's parser: the fleet's commands, the controller's under `controller`, shell
    completion and --version."""
    from components.cli.completion import completion_script
    from components.cli.version import version
    from components.model.versions import KUEUE_VERSION
    from controller.api.terminal import add_controller_commands

    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument(
        "--version",
        action="version",
        version=f"mkf {version()} (Kueue {KUEUE_VERSION}, Python {sys.version.split()[0]})",
    )
    sub = configure(parser)
    text = "the dispatch controller: run it, or explain a decision (python -m controller)"
    c = sub.add_parser("controller", help=text, description=text)
    add_controller_commands(c)
    text = "print a shell completion script: source <(mkf completion bash)"
    completion = sub.add_parser("completion", help=text, description=text)
    common_flags(completion, top=False)  # `mkf completion bash -q` as every other command
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(func=lambda args: print(completion_script(parser, args.shell)) or 0)
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m components") -> int:
    parser = argparse.ArgumentParser(prog=prog)
    configure(parser)
    return quietly_on_broken_pipe(lambda: dispatch(parser.parse_args(argv), parser))


if __name__ == "__main__":
    sys.exit(main())
