"""python -m kindnode: the kind tier on this machine.

host [--prepare]    what this host lacks for kind (and, with --prepare, fix each lack)
build               build kind's node image and the fleet's images, serve them to kind nodes
build --for-stack S ... and use them for stack S's kind clusters (stacks/local/S.yaml)
clean               remove what build left on Docker: the mirror's container, volume, images
"""

from __future__ import annotations

import argparse
import sys

from components.upstream.toolchain import ToolchainError
from kindnode import host


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kindnode",
        description="kind on a machine without an image registry: the host, the node image "
        "and the fleet's images, built from the pinned Go modules in tools/kind-tier.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("host", help="what this host lacks for a kind fleet")
    check.add_argument(
        "--prepare",
        action="store_true",
        help="change the host where it lacks something (start Docker, mount cgroups, raise "
        "inotify limits); needs root",
    )
    check.add_argument("--nodes", type=int, default=6, help="node containers planned (default 6)")
    build = sub.add_parser(
        "build", help="build the node image and images; start the registry mirror"
    )
    build.add_argument(
        "--for-stack",
        metavar="STACK",
        help="then write stacks/local/STACK.yaml, this host's settings that point the stack's "
        "kind clusters at the built node image and the mirror (ignored by git; the stack "
        "file is left as it is)",
    )
    sub.add_parser(
        "clean",
        help="remove the registry mirror's container and volume and every image build made "
        "(refused while a kind cluster runs)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "host":
            if args.prepare:
                print("preparing this host for kind:")
                host.prepare()
            bad = 0
            for finding in host.checks(args.nodes):
                bad += not finding.ok
                mark = "FAIL" if not finding.ok else ("warn" if finding.warning else "ok  ")
                print(f"  {mark} {finding.name:<22} {finding.detail}")
            return 1 if bad else 0
        if args.command == "clean":
            from kindnode import clean

            print("removing what `python -m kindnode build` left on this host's Docker:")
            clean.clean()
            return 0
        if args.command == "build":
            from components.model.host_local import refuse_foreign, write_host_settings
            from components.model.stack_file import stack_path
            from kindnode import build

            if args.for_stack and not stack_path(args.for_stack).is_file():
                print(
                    f"error: no stack file {stack_path(args.for_stack)}: name a stack of "
                    "stacks/ (Pulumi.STACK.yaml)",
                    file=sys.stderr,
                )
                return 2
            if args.for_stack:
                # Before the build: a file of the user's in its place stops it at once.
                refuse_foreign(args.for_stack)
            manifest = build.build_all()
            if args.for_stack:
                written = write_host_settings(
                    args.for_stack,
                    str(manifest["nodeImage"]),
                    manifest["registryMirrors"],
                    dispatcher_base=str(manifest["dispatcherBase"]),
                )
                print(
                    f"stack {args.for_stack}'s kind clusters now use this node image and "
                    "mirror, and its dispatcher image builds FROM this base: "
                    f"{written} (delete it to use the stack file's own)"
                )
    except (host.HostError, ToolchainError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        # `host` needs nothing past the standard library (a bare python3 prepares a host);
        # build and clean read the stack model, which needs the project's packages.
        print(
            f"error: python -m kindnode {args.command} needs the project's Python packages "
            f"({exc.name} is not installed for {sys.executable}): run it with .venv/bin/python "
            "(scripts/up.sh makes it) or .venv-dev/bin/python (scripts/test.sh makes it)",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
