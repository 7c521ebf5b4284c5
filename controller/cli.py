"""`python -m controller run|explain` (also `mkf controller ...`): the dispatch controller
and its dry run.

Every mistake at start (settings file, kubeconfig, a manager that cannot be reached) ends
with one line on stderr and a non-zero exit; `--debug` shows the traceback as well."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import logging
import os
import queue
import re
import signal
import ssl
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from controller.settings import Settings, SettingsError, load_settings
from controller.terminal import common_flags, flag, quietly_on_broken_pipe, seconds
from controller.typed import LABEL_PATTERN, SUBDOMAIN_PATTERN

if TYPE_CHECKING:
    from controller.kube import ApiError, Kube

# The Kubernetes client (kubernetes_asyncio, aiohttp: most of a second to import) and what
# uses it are imported where a command connects: `mkf` builds this parser for every one of
# its commands, `mkf --version` and `mkf validate` included.

# How long `explain` and `run` wait for the manager's first answer before saying it
# cannot be reached: a few seconds, not the 30 s of a whole request.
CONNECT_SECONDS = 5.0
DEFAULT_KUBECONFIG = "~/.kube/config"


class StartError(Exception):
    """The controller cannot start; the message is the one line shown."""


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


class DaemonThreads(concurrent.futures.ThreadPoolExecutor):
    """The event loop's executor for its blocking calls (aiohttp resolves a server's name
    with getaddrinfo in it): daemon threads, and a shutdown that does not wait for them.

    With the standard executor, `asyncio.run` and then the interpreter's exit wait for
    every call under way, and a name lookup cannot be cancelled: a worker whose name does
    not resolve in time (its DNS servers do not answer) held a stopped controller until
    the resolver gave up (seconds per server, per attempt and per search domain: with a
    pod's five search domains, longer than its 30 s grace period). Whatever a thread left
    behind is answering no one by then. A ThreadPoolExecutor only in name
    (`set_default_executor` takes no other), none of its machinery used."""

    def __init__(self, max_workers: int = 8) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="blocking")
        self._most = max_workers
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._started = 0
        self._closed = False
        self._guard = threading.Lock()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        with self._guard:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self._calls.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and self._started < self._most:
                self._started += 1
                name = f"blocking-{self._started}"
                threading.Thread(target=self._serve, name=name, daemon=True).start()
            return future

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, kwargs = call
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 (handed to whoever waits)
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del call, future
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Never waits: a thread still in a call is left to the process's exit."""
        with self._guard:
            if not self._closed:
                self._closed = True
                for _ in range(self._started):
                    self._calls.put(None)


def _first_current_context(listed: list[str]) -> str | None:
    """The current context of a KUBECONFIG list as kubectl takes it: the first file's that
    sets one (client-go v0.36.4 tools/clientcmd/loader.go, Load: struct values are merged
    in reverse order so that the first file wins). kubernetes_asyncio's merger lets the
    last file win instead, which sent `mkf env`'s list (the manager's kubeconfig first, then
    each worker's) to the last worker."""
    for path in listed:
        try:
            loaded = yaml.safe_load(Path(path).expanduser().read_text())
        except FileNotFoundError:
            continue  # client-go ignores a missing file in the list
        if isinstance(loaded, dict) and loaded.get("current-context"):
            return str(loaded["current-context"])
    return None


async def _from_kubeconfig(paths: str, source: str) -> Kube:
    """The manager from a kubeconfig (`paths` may list several, joined as KUBECONFIG joins
    them; merged as kubectl merges them, relative file paths resolved)."""
    from kubernetes_asyncio import client, config

    from controller.kube import Kube

    listed = [p for p in paths.split(os.pathsep) if p]
    if not any(Path(p).expanduser().is_file() for p in listed):
        raise StartError(
            f"kubeconfig {paths} (from {source}): no such file; fix: point {source} at the "
            "manager's kubeconfig"
        )
    configuration = client.Configuration()
    try:
        await config.load_kube_config(
            config_file=paths,
            context=_first_current_context(listed),
            client_configuration=configuration,
            persist_config=False,
        )
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise StartError(
            f"kubeconfig {paths} (from {source}): not valid YAML{where}; fix: give the "
            "manager's kubeconfig as `kubectl config view --raw` prints it"
        ) from exc
    except config.ConfigException as exc:
        raise StartError(
            f"kubeconfig {paths} (from {source}): {exc}; fix: give a kubeconfig whose "
            "current context names the manager"
        ) from exc
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        # The client reads the file's structure without checking it first.
        raise StartError(
            f"kubeconfig {paths} (from {source}): not a kubeconfig ({type(exc).__name__}: "
            f"{exc}); fix: give the manager's kubeconfig as `kubectl config view --raw` "
            "prints it"
        ) from exc
    if configuration.ssl_ca_cert:
        # Checked now: the TLS library would refuse it at the first request with an
        # SSLError that names neither the file nor the cluster.
        try:
            ssl.create_default_context(cafile=configuration.ssl_ca_cert)
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise StartError(
                f"kubeconfig {paths} (from {source}): the certificate authority of its current "
                f"context's cluster holds no usable certificate ({reason}); fix: set its "
                "certificate-authority-data to the base64 of the manager's CA certificate (PEM)"
            ) from None
    return Kube(client.ApiClient(configuration), "manager")


async def connect(kubeconfig: str | None) -> tuple[Kube, str]:
    """The manager, and how it was found: --kubeconfig, else $KUBECONFIG, else the
    in-cluster service account, else ~/.kube/config (kubectl's order, with the pod's own
    identity before a home directory a container does not have)."""
    from kubernetes_asyncio import client, config

    from controller.kube import Kube

    if kubeconfig:
        return await _from_kubeconfig(kubeconfig, "--kubeconfig"), f"--kubeconfig {kubeconfig}"
    from_env = os.environ.get("KUBECONFIG", "")
    if from_env:
        return await _from_kubeconfig(from_env, "KUBECONFIG"), f"KUBECONFIG={from_env}"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException as exc:
            raise StartError(
                f"in-cluster config: {exc}; fix: mount the service account token, or pass "
                "--kubeconfig"
            ) from exc
        return Kube(client.ApiClient(configuration), "manager"), "the in-cluster service account"
    if Path(DEFAULT_KUBECONFIG).expanduser().is_file():
        kube = await _from_kubeconfig(DEFAULT_KUBECONFIG, "the default kubeconfig")
        return kube, DEFAULT_KUBECONFIG
    raise StartError(
        "no way to reach the manager: tried --kubeconfig (not given), KUBECONFIG (not set), "
        "in-cluster config (KUBERNETES_SERVICE_HOST not set) and "
        f"{DEFAULT_KUBECONFIG} (no such file); fix: pass --kubeconfig PATH or set KUBECONFIG"
    )


def _reason(exc: ApiError) -> str:
    return exc.message or type(exc.__cause__ or exc).__name__


async def reach(manager: Kube, found: str, seconds: float = CONNECT_SECONDS) -> None:
    """One cheap request (/version), bounded in time: a wrong address or a closed port is
    said at once, not after every watch has timed out."""
    from controller.kube import ApiError

    url = manager.api.configuration.host
    try:
        await asyncio.wait_for(manager.request("GET", "/version", timeout=seconds), seconds)
    except TimeoutError:
        raise StartError(
            f"cannot reach the manager at {url}: no answer within {seconds:g}s (found through "
            f"{found}); fix: check the address and that the API server is up"
        ) from None
    except ApiError as exc:
        if exc.status == 0:
            raise StartError(
                f"cannot reach the manager at {url}: {_reason(exc)} (found through {found}); "
                "fix: check the address and that the API server is up"
            ) from exc
        if exc.status == 401:
            raise StartError(
                f"the manager at {url} refused the credentials (401; found through {found}); "
                "fix: renew the token or certificate in the kubeconfig"
            ) from exc
        if exc.status == 404:
            raise StartError(
                f"the server at {url} is not a Kubernetes API server (/version: 404; found "
                f"through {found}); fix: point the kubeconfig at the manager's API server"
            ) from exc
        # Any other answer (403 included) means the server is there: what the controller
        # may read is checked by the requests it makes.


async def _run(args: argparse.Namespace, settings: Settings) -> int:
    from controller.app import run

    asyncio.get_running_loop().set_default_executor(DaemonThreads())
    manager, found = await connect(args.kubeconfig)
    try:
        await reach(manager, found)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(manager, settings, stop)
    finally:
        await manager.close()
    return 0


async def _explain(args: argparse.Namespace, settings: Settings) -> int:
    from controller.app import explain_answers
    from controller.explain import NotFound, dispatcher_line, one_line, text

    asyncio.get_running_loop().set_default_executor(DaemonThreads())
    manager, found = await connect(args.kubeconfig)
    try:
        await reach(manager, found, args.connect_timeout)
        name = None if args.all else args.workload
        try:
            answers, holder = await explain_answers(manager, settings, name, args.timeout)
        except NotFound as exc:
            raise StartError(f"explain: {exc}") from None
        except TimeoutError as exc:
            raise StartError(
                f"the manager at {manager.api.configuration.host} did not list what the "
                f"dispatcher reads within {args.timeout:g}s: {exc or 'no answer'}; fix: check "
                "that Kueue's CRDs are installed there and the identity may read them (the "
                "dispatcher's ClusterRole), or raise --timeout"
            ) from None
    finally:
        await manager.close()
    if args.output == "json":
        lease = {"lease": f"{settings.namespace}/{settings.lease_name}", "holder": holder}
        document = {"dispatcher": {"running": holder is not None, **lease}, "workloads": answers}
        print(json.dumps(document, indent=2))
    elif args.all:
        print(dispatcher_line(holder, settings))
        print("\n".join(one_line(a) for a in answers) or "No pending workloads on the manager.")
    else:
        print("\n\n".join([dispatcher_line(holder, settings), *(text(a, holder) for a in answers)]))
    return 0


def _connection_flags(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """--kubeconfig and --config, before or after the subcommand (see common_flags)."""
    default: dict[str, Any] = {"default": None} if top else {"default": argparse.SUPPRESS}
    parser.add_argument(
        "--kubeconfig",
        help="the manager's kubeconfig (default: $KUBECONFIG, then the in-cluster service "
        "account, then ~/.kube/config)",
        **default,
    )
    parser.add_argument("--config", help="settings file (YAML); every key has a default", **default)


def configure(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """The controller's options and subcommands on `parser`: `python -m controller` and
    `mkf controller` are the same command (top=False there: mkf's own parser holds the
    common flags' defaults, and a subcommand's default would reset them)."""
    parser.description = "MultiKueue dispatch controller"
    _connection_flags(parser, top=True)
    common_flags(parser, top=top)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    r = sub.add_parser("run", help="run the controller")
    e = sub.add_parser(
        "explain",
        help="show what the policy would do for one workload now, without writing anything",
    )
    e.add_argument(
        "workload",
        nargs="?",
        help="<namespace>/<name> of a Workload, or of the Job, JobSet or LeaderWorkerSet "
        "that owns one",
    )
    e.add_argument(
        "--all", action="store_true", help="every pending workload, one line (or object) each"
    )
    e.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (default) or json for machines",
    )
    e.add_argument("--timeout", type=seconds, default=30, help="seconds to wait for caches")
    e.add_argument(
        "--connect-timeout",
        type=seconds,
        default=CONNECT_SECONDS,
        help="seconds to wait for the manager's first answer",
    )
    for each in (r, e):
        _connection_flags(each, top=False)
        common_flags(each, top=False)
    parser.set_defaults(func=dispatch)


def _workload_name_ok(text: str) -> bool:
    """<namespace>/<name>: a namespace is a DNS label, a Workload's name (and that of the
    Job, JobSet or LeaderWorkerSet owning it) a DNS subdomain (Kubernetes' object name rules);
    anything else would be sent to the manager and come back as a 404 or a URL error that
    blames the connection."""
    namespace, slash, name = text.partition("/")
    return bool(
        slash
        and len(namespace) <= 63
        and re.fullmatch(LABEL_PATTERN, namespace)
        and len(name) <= 253
        and re.fullmatch(SUBDOMAIN_PATTERN, name)
    )


def _explain_target_problem(args: argparse.Namespace) -> str:
    """Why explain's arguments name no target: a workload or --all, exactly one of them, and
    a workload as <namespace>/<name> with both parts valid names."""
    if args.all and args.workload is not None:
        return f"give a workload or --all, not both ('{args.workload}' and --all)"
    if not args.all and args.workload is None:
        return (
            "name a workload as <namespace>/<name> (a Workload, or the Job, JobSet or "
            "LeaderWorkerSet that owns it), or give --all"
        )
    if args.workload is not None and not _workload_name_ok(args.workload):
        return (
            f"'{args.workload}' is not <namespace>/<name> of a Workload (or of the Job, JobSet "
            "or LeaderWorkerSet that owns one); fix: name it as namespace/name, both parts "
            "non-empty (`kubectl get workloads -A` lists them)"
        )
    return ""


def dispatch(args: argparse.Namespace) -> int:
    """Runs the parsed command: every mistake at start is one line on stderr."""
    debug = flag(args, "debug")
    handler = logging.StreamHandler()
    if args.command == "run":
        handler.setFormatter(_JsonFormatter())
    # explain's answer is its output: the caches' progress is noise there unless --debug.
    quiet = flag(args, "quiet") or (args.command == "explain" and not debug)
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, handlers=[handler])
    if args.command == "explain":
        problem = _explain_target_problem(args)
        if problem:
            print(f"explain: {problem}", file=sys.stderr)
            return 2
    try:
        settings = load_settings(args.config)
        return asyncio.run(
            _run(args, settings) if args.command == "run" else _explain(args, settings)
        )
    except SettingsError as exc:
        if debug:
            raise
        print("\n".join(exc.lines), file=sys.stderr)
        return 2
    except StartError as exc:
        if debug:
            raise
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        raise  # the reader went away: quietly_on_broken_pipe ends the command
    except Exception as exc:  # anything else still gets one line; --debug shows where
        if debug:
            raise
        print(
            f"{args.command} failed: {type(exc).__name__}: {exc} (run with --debug for the "
            "traceback)",
            file=sys.stderr,
        )
        return 1


def main(argv: list[str] | None = None, prog: str = "python -m controller") -> int:
    parser = argparse.ArgumentParser(prog=prog)
    configure(parser)
    return quietly_on_broken_pipe(lambda: dispatch(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
