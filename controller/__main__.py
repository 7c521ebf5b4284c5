"""`python -m controller run|explain`: the dispatch controller and its dry run."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

import yaml

from controller.app import explain, run
from controller.kube import Kube
from controller.settings import load_settings


class _JsonFormatter(logging.Formatter):
    """One JSON object per line: what log pipelines in a cluster expect."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


async def _manager(kubeconfig: str | None) -> Kube:
    if kubeconfig:
        return await Kube.from_kubeconfig(yaml.safe_load(Path(kubeconfig).read_text()), "manager")
    return await Kube.in_cluster("manager")


async def _run(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    manager = await _manager(args.kubeconfig)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await run(manager, settings, stop)
    finally:
        await manager.close()
    return 0


async def _explain(args: argparse.Namespace) -> int:
    if args.workload.count("/") != 1:
        print("give the workload as <namespace>/<name>", file=sys.stderr)
        return 2
    settings = load_settings(args.config)
    manager = await _manager(args.kubeconfig)
    try:
        print(await explain(manager, settings, args.workload, args.timeout))
    finally:
        await manager.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller", description="MultiKueue dispatch controller"
    )
    parser.add_argument("--kubeconfig", help="the manager's kubeconfig (default: in-cluster)")
    parser.add_argument("--config", help="settings file (YAML); every key has a default")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run", help="run the controller")
    e = sub.add_parser(
        "explain",
        help="show what the policy would do for one workload now, without writing anything",
    )
    e.add_argument("workload", help="<namespace>/<name> of a Workload on the manager")
    e.add_argument("--timeout", type=float, default=30, help="seconds to wait for caches")
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    if args.command == "run":
        handler.setFormatter(_JsonFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    return asyncio.run(_run(args) if args.command == "run" else _explain(args))


if __name__ == "__main__":
    sys.exit(main())
