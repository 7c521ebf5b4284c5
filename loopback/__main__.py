"""python -m loopback: the real engines on this machine, without Docker.

build [TOOL ...]        build the pinned binaries into .tools/bin (needs Go)
up [--stack S]          a control plane and Kueue for each cluster of stack S
down                    stop what `up` started and remove its state
kubeconfig CLUSTER      print the path of a cluster's admin kubeconfig
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from components.model.problems import FleetConfigError
from components.upstream import gomodule, toolchain
from loopback import fleet
from loopback.controlplane import StartError
from loopback.kwok import NodeShape


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loopback",
        description="Kubernetes control planes with Kueue v0.19.2 on 127.0.0.1, built from the "
        "pinned Go modules in tools/: every control-plane decision is real, but no pod runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the pinned binaries into .tools/bin")
    build.add_argument(
        "tools",
        nargs="*",
        help=f"which ones (default: {' '.join(toolchain.CONTROL_PLANE)}); "
        f"known: {', '.join(sorted(toolchain.TOOLS))}",
    )
    state_help = (
        f"the fleet's state folder (default: {fleet.DEFAULT_STATE.relative_to(fleet.ROOT)})"
    )
    up = sub.add_parser("up", help="start a control plane and Kueue per cluster of a stack")
    up.add_argument(
        "--stack", default="dev", help="the stack whose clusters to start (default: dev)"
    )
    up.add_argument("--state", type=Path, default=fleet.DEFAULT_STATE, help=state_help)
    up.add_argument("--timeout", type=float, default=180, help="seconds to wait for readiness")
    up.add_argument(
        "--framework-controllers",
        action="store_true",
        help="also run the LeaderWorkerSet controller where the stack enables it (build it "
        "first: python -m loopback build " + " ".join(toolchain.FRAMEWORK_CONTROLLERS) + ")",
    )
    up.add_argument(
        "--kwok",
        action="store_true",
        help="give every worker simulated nodes, a scheduler and KWOK, so that admitted Jobs "
        "run and complete (build them first: python -m loopback build kwok kube-scheduler)",
    )
    down = sub.add_parser("down", help="stop what `up` started and remove its state")
    down.add_argument("--state", type=Path, default=fleet.DEFAULT_STATE, help=state_help)
    kubeconfig = sub.add_parser("kubeconfig", help="the path of a cluster's admin kubeconfig")
    kubeconfig.add_argument("cluster")
    kubeconfig.add_argument("--state", type=Path, default=fleet.DEFAULT_STATE, help=state_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            print(f"building into {toolchain.BIN_DIR} from {toolchain.TOOLS_MODULE / 'go.mod'}:")
            toolchain.build(args.tools or None)
        elif args.command == "up":
            print(f"starting the clusters of stack {args.stack} in {args.state}:")
            started = fleet.up(
                args.stack,
                args.state,
                timeout=args.timeout,
                framework_controllers=args.framework_controllers,
                kwok=NodeShape() if args.kwok else None,
            )
            for name, cluster in started.clusters.items():
                print(f"  {name:<16} {cluster['server']:<26} {cluster['kubeconfig']}")
            print("stop it with: python -m loopback down")
        elif args.command == "down":
            if not fleet.down(args.state):
                print(f"no loopback fleet in {args.state}: nothing to stop", file=sys.stderr)
        elif args.command == "kubeconfig":
            record = fleet.read_record(args.state)
            if record is None or args.cluster not in record["clusters"]:
                known = ", ".join(record["clusters"]) if record else "none: run up first"
                print(
                    f"error: no cluster {args.cluster!r} in {args.state} (clusters: {known})",
                    file=sys.stderr,
                )
                return 2
            print(record["clusters"][args.cluster]["kubeconfig"])
    except FleetConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except (
        toolchain.ToolchainError,
        gomodule.ModuleSourceError,
        fleet.FleetError,
        StartError,
        RuntimeError,
    ) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
