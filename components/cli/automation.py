"""Ephemeral fleets for CI, driven through Pulumi's Automation API.

`up` makes a uniquely named stack from a base stack file (its config copied, the fleet
named after the stack so kind clusters never collide), on the local file backend,
brings it up, waits until the fleet is ready, and writes each cluster's kubeconfig and a
JSON summary to a directory. `down` destroys and removes it, and is safe to run twice.
`run` does up, runs a command with KUBECONFIG set to the manager's, and always does down.

The driver owns every child it starts (the Pulumi CLI, the command of `run`): `--timeout`,
Ctrl-C and SIGTERM send that child SIGINT (the Pulumi CLI then cancels gracefully and
releases the stack's lock), wait for it to exit, escalate to SIGTERM and SIGKILL when it
does not, and only then tear the fleet down. The Automation API alone cannot do this: its
`Stack.cancel` only removes the local backend's lock while `pulumi up` keeps running, and
its CLI child is a plain `subprocess.Popen` that a KeyboardInterrupt abandons after a quarter
second (pulumi 3.272.0 sdk/python/lib/pulumi/automation/_cmd.py `PulumiCommand.run`,
_stack.py `Stack.cancel`; CPython Lib/subprocess.py `Popen.__exit__`).

Ephemeral stack config files live beside the backend (`<backend>/stack-config/`), never in
`stacks/`: `pulumi stack init` writes its passphrase salt into `stacks/Pulumi.<name>.yaml`,
so the driver moves that file out right after creating the stack and passes it to every
operation with `--config-file`.

Exit codes of `run`: the command's own code when everything ran; 1 when the driver stopped
with an error (the fleet torn down); 124 after `--timeout`, 130 after SIGINT, 143 after
SIGTERM (the fleet torn down); 3 when the teardown itself failed (the stack is left, and
the message says how to remove it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pulumi.automation import CommandResult, PulumiCommand
from pulumi.automation.errors import create_command_error

from components.checks.kind_host import preflight as kind_preflight
from components.checks.kubeconfigs import (
    context_problem,
    credential_command_problem,
    existing_worker_servers,
    kubeconfig_problems,
)
from components.checks.load import load_stack
from components.cli.engine_tmp import engine_tmpdir
from components.cli.pinned_tools import use_pinned_tools
from components.cli.pulumi_output import Tracebacks
from components.model import yaml_v3
from components.model.host_local import with_host_settings
from components.model.spec import PROJECT, ClusterSpec
from components.model.stack_file import parse_stack_text, stack_path
from components.resources.commands import CommandFailed
from components.resources.kind_creates import remove_cut_short, stack_folder
from components.resources.program_env import (
    missing_cloud_sdks,
    missing_credential_plugins,
    missing_message,
    program_env,
    program_path,
)

ROOT = Path(__file__).resolve().parents[2]
Log = Callable[[str], Any]

EXIT_TEARDOWN_FAILED = 3
EXIT_TIMEOUT = 124
EXIT_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
# Selecting, creating or removing a stack on the local backend: file operations, quick.
STACK_OP_TIMEOUT = 300
MISSING_CLI = "the Pulumi CLI is not on PATH (scripts/up.sh installs it into .tools/bin)"


DEFAULT_DRAIN_TIMEOUT = 600.0


def kind_only_config(path: Path) -> bool:
    """Whether the stack config `up` wrote (Driver.config_file) names kind clusters only;
    False when it cannot be read, so an unknown fleet keeps every checkpoint."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return False
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        return False
    workers = config.get(f"{PROJECT}:workers")
    clusters = [config.get(f"{PROJECT}:manager") or {}]
    clusters += workers if isinstance(workers, list) else [{}]  # the default workers: kind
    default = ClusterSpec.model_fields["provider"].default
    return all(isinstance(c, dict) and c.get("provider", default) == "kind" for c in clusters)


class DriverError(Exception):
    """A failure the driver explains; the CLI prints it and exits non-zero."""


def _seconds(variable: str, default: float) -> float:
    value = os.environ.get(variable)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise DriverError(f"{variable}={value!r} is not a number of seconds; e.g. {variable}=900")
    return seconds


class Interrupted(DriverError):
    """The run was stopped by --timeout or a signal; `code` is the exit code that says so."""

    def __init__(self, reason: str, code: int) -> None:
        super().__init__(reason)
        self.code = code


@dataclass
class Options:
    base: str = "ci"
    name: str | None = None
    out: Path = ROOT / ".fleet"
    backend: Path = ROOT / ".pulumi-state"
    up_timeout: float = 3600
    ready_timeout: float = 900
    destroy_timeout: float = 1800
    # How long an interrupted child gets to stop by itself before SIGTERM, then SIGKILL.
    interrupt_grace: float = field(default_factory=lambda: _seconds("MKF_INTERRUPT_GRACE", 60))
    # How long teardown waits for work holding quota on existing/cloud clusters to end.
    drain_timeout: float = field(
        default_factory=lambda: _seconds("MKF_DRAIN_TIMEOUT", DEFAULT_DRAIN_TIMEOUT)
    )
    passphrase: str | None = None
    project: Path = ROOT


def run_suffix() -> str:
    """Unique per CI run: the workflow run and attempt on GitHub, random elsewhere."""
    run, attempt = os.environ.get("GITHUB_RUN_ID"), os.environ.get("GITHUB_RUN_ATTEMPT", "1")
    return f"{run}-{attempt}" if run else uuid.uuid4().hex[:6]


def stack_name(base: str, suffix: str) -> str:
    # kind names its node containers <fleet>-<cluster>-control-plane: keep it short.
    return f"{base}-{suffix}"[:24].rstrip("-")


def require_tools(
    kind_stack: bool,
    builds_image: bool = False,
    providers: Iterable[str] = (),
    which: Callable[[str], str | None] = shutil.which,
    docker_running: Callable[[], bool] | None = None,
) -> None:
    """kind needs kind and Docker; building the dispatcher image needs Docker on any
    stack (it is pushed to a registry when the manager is not kind); a GKE or EKS cluster
    needs the credential plugin its kubeconfig runs (program_env.CREDENTIAL_PLUGINS)."""
    missing = missing_credential_plugins(providers, which)
    if which("pulumi") is None:
        missing.append(
            "the Pulumi CLI (scripts/up.sh installs it into .tools/bin; put that on PATH)"
        )
    if kind_stack and which("kind") is None:
        missing.append("kind (scripts/up.sh installs it into .tools/bin)")
    if kind_stack or builds_image:
        if which("docker") is None:
            missing.append("docker")
        elif not (docker_running or _docker_running)():
            missing.append("a running Docker engine (docker info failed)")
    if missing:
        raise DriverError("cannot create the fleet: missing " + "; ".join(missing))


def _docker_running() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True, check=False).returncode == 0


class Supervisor:
    """The one child running at a time, and what interrupts do to it.

    Interrupts (signal handlers in the main thread, the timeout timer in another) never
    raise: they record why the run stops and signal the child; the main thread sees the
    child exit and the recorded reason. During teardown the first interrupt is ignored
    (the teardown is what the interrupt asked for); another one stops the teardown too."""

    def __init__(self, grace: float, log: Log) -> None:
        self.grace = grace
        self.log = log
        self.child: subprocess.Popen[str] | None = None
        self.signalled: subprocess.Popen[str] | None = None  # the child already sent SIGINT
        self.reason: str | None = None
        self.code = 0
        self.tearing_down = False
        self.teardown_interrupts = 0
        self.forced = False  # a child was killed: it may have left the stack locked
        self._lock = threading.RLock()

    def interrupt(self, reason: str, code: int) -> None:
        with self._lock:
            if self.tearing_down:
                self.teardown_interrupts += 1
                if self.teardown_interrupts == 1:
                    self.log(f"{reason} during teardown: the teardown goes on (again to stop it)")
                    return
                self._stop(self.child, now=True)
                return
            first = self.reason is None
            if first:
                self.reason, self.code = reason, code
                self.log(f"{reason}: stopping the running step, then tearing down")
            self._stop(self.child, now=not first)

    def stop_child(self, reason: str) -> None:
        """Stops the running child whatever the phase (a teardown's own time limit)."""
        with self._lock:
            self.log(reason)
            self._stop(self.child, now=False)

    def _stop(self, child: subprocess.Popen[str] | None, now: bool) -> None:
        if child is None or child.poll() is not None:
            return
        if now:
            self._kill(child, signal.SIGTERM)
            return
        if self.signalled is child:
            return
        self.signalled = child
        _signal(child.pid, signal.SIGINT)
        threading.Thread(target=self._escalate, args=(child,), daemon=True).start()

    def _escalate(self, child: subprocess.Popen[str]) -> None:
        for sig, wait in ((signal.SIGTERM, self.grace), (signal.SIGKILL, 10.0)):
            try:
                child.wait(wait)
                return
            except subprocess.TimeoutExpired:
                self.log(f"child {child.pid} did not exit after {wait:.0f}s: sending {sig.name}")
                self._kill(child, sig)

    def _kill(self, child: subprocess.Popen[str], sig: signal.Signals) -> None:
        self.forced = True
        # The whole group: the Pulumi CLI's plugins and language host go with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)

    def spawn(
        self,
        cmd: Sequence[str],
        cwd: str | None,
        env: Mapping[str, str],
        on_output: Log | None = None,
        on_error: Log | None = None,
        capture: bool = True,
    ) -> tuple[int, str, str]:
        """Runs a child in its own session (a terminal's Ctrl-C reaches only the driver,
        which forwards it) and returns its exit code, stdout and stderr."""
        if self.reason is not None and not self.tearing_down:
            raise Interrupted(self.reason, self.code)
        pipe = subprocess.PIPE if capture else None
        with self._lock:
            child = subprocess.Popen(
                list(cmd),
                stdout=pipe,
                stderr=pipe,
                cwd=cwd,
                env=dict(env),
                text=True,
                start_new_session=True,
            )
            self.child = child
            # An interrupt that came while the child was starting found no child to stop.
            if self.reason is not None and not self.tearing_down:
                self._stop(child, now=False)
        out: list[str] = []
        err: list[str] = []
        readers = [
            threading.Thread(target=_read, args=(stream, sink, callback), daemon=True)
            for stream, sink, callback in (
                (child.stdout, out, on_output),
                (child.stderr, err, on_error),
            )
            if stream is not None
        ]
        for reader in readers:
            reader.start()
        try:
            code = child.wait()
            for reader in readers:
                reader.join()
        finally:
            self.child = None
        return code, "\n".join(out), "\n".join(err)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _read(stream: Any, sink: list[str], callback: Log | None) -> None:
    for line in stream:
        line = line.rstrip("\n")
        sink.append(line)
        if callback is not None:
            callback(line)
    stream.close()


class OwnedPulumiCommand(PulumiCommand):
    """The Automation API's CLI runner, with every child started through the Supervisor."""

    def __init__(self, supervisor: Supervisor) -> None:
        path = shutil.which("pulumi")
        if path is None:
            raise DriverError(MISSING_CLI)
        try:
            super().__init__()
        except (OSError, subprocess.CalledProcessError) as exc:
            raise DriverError(f"cannot run the Pulumi CLI at {path}: {exc}") from exc
        self.command = path
        self.supervisor = supervisor

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: Log | None = None,
        on_error: Log | None = None,
    ) -> CommandResult:
        # Never a prompt: a CI run must fail, not wait for a keyboard.
        flags = args[: args.index("--")] if "--" in args else args
        argv = args if "--non-interactive" in flags else ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        code, out, err = self.supervisor.spawn([self.command, *argv], cwd, env, on_output, on_error)
        result = CommandResult(stdout=out, stderr=err, code=code)
        if code != 0:
            raise create_command_error(result)
        return result


# What `pulumi stack init` writes into a stack's config file with the passphrase provider
# (pulumi pkg/cmd/pulumi/stack/stack_init.go; sdk/go/common/workspace/project.go ProjectStack).
STACK_INIT_KEYS = frozenset({"encryptionsalt", "secretsprovider", "encryptedkey"})


def tracked_by_git(path: Path) -> bool:
    """Whether git tracks `path` (False outside a work tree or where git is missing)."""
    try:
        found = subprocess.run(
            ["git", "ls-files", "--error-unmatch", "--", path.name],
            cwd=path.parent, capture_output=True, timeout=30, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0


def stack_init_leftover(path: Path) -> bool:
    """Whether `path` is a stack config file that holds only what `stack init` writes, so
    that removing it loses nothing of the user's. One that git tracks is the user's even so:
    a team commits a stack's salt to share it."""
    if not path.is_file():
        return False
    try:
        settings = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    only_salt = isinstance(settings, dict) and bool(settings) and set(settings) <= STACK_INIT_KEYS
    return only_salt and not tracked_by_git(path)


def write_fleet_dir(out: Path, name: str, outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Each cluster's kubeconfig and summary.json under `out`, from the stack's outputs (as
    `pulumi stack output --json --show-secrets` prints them): what `python -m components
    status --dir` reads. Used by the driver and by scripts/up.sh."""
    (out / "kubeconfigs").mkdir(parents=True, exist_ok=True)
    clusters = []
    for cluster in outputs.get("clusters") or []:
        path = out / "kubeconfigs" / f"{cluster['name']}.yaml"
        path.touch(mode=0o600)  # credentials: never readable by others, not even briefly
        path.chmod(0o600)
        path.write_text(outputs["kubeconfigs"][cluster["name"]])
        clusters.append({**cluster, "kubeconfig": str(path.relative_to(out))})
    summary = {
        "stack": name,
        "fleet": outputs.get("fleet"),
        "clusters": clusters,
        "checks": outputs.get("checks") or [],
        "installs": outputs.get("installs"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def forget_fleet_dir(out: Path, name: str) -> bool:
    """Removes what write_fleet_dir wrote under `out` for stack `name`: the kubeconfigs its
    summary lists and the summary, then the folders if that left them empty. A file of
    anyone else's there stays; another stack's fleet is not touched (False)."""
    summary_file = out / "summary.json"
    try:
        summary = json.loads(summary_file.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(summary, dict) or summary.get("stack") != name:
        return False
    folder = (out / "kubeconfigs").resolve()
    for cluster in summary.get("clusters") or []:
        path = (out / str(cluster.get("kubeconfig", ""))).resolve()
        if path.parent == folder:  # never a path the summary points elsewhere
            path.unlink(missing_ok=True)
    summary_file.unlink()
    for empty in (out / "kubeconfigs", out):
        with contextlib.suppress(OSError):
            empty.rmdir()
    return True


class Driver:
    def __init__(
        self,
        options: Options,
        automation: Any = None,
        log: Log = print,
        tools: Callable[[bool, bool, set[str]], None] = require_tools,
        host_check: Callable[[Any], list[str]] = kind_preflight,
    ) -> None:
        # A faked Automation API (tests) brings its own CLI; the real one gets the owned one.
        self.owned_cli = automation is None
        if automation is None:
            from pulumi import automation
        self.auto = automation
        self.options = options
        self.log = log
        if self.owned_cli:
            use_pinned_tools(options.project, log)
        self.tools = tools
        self.host_check = host_check
        self.kind_only = False  # set once the base stack is read
        self.supervisor = Supervisor(options.interrupt_grace, log)
        self.stack_touched = False  # from here on a teardown has something to look for
        self.engine_tmp: Path | None = None  # the engine's TMPDIR while a command runs

    @contextlib.contextmanager
    def _command(self) -> Iterator[None]:
        """What every operation runs inside: interrupts routed to the child, and a TMPDIR of
        the engine's own, emptied at the end (components/cli/engine_tmp.py says why)."""
        with self._interrupts(), engine_tmpdir(self.options.backend) as tmp:
            self.engine_tmp = tmp
            try:
                yield
            finally:
                self.engine_tmp = None

    # --- signals and time limits ------------------------------------------------------------

    @contextlib.contextmanager
    def _interrupts(self) -> Iterator[None]:
        """SIGINT and SIGTERM stop the running child instead of the driver (main thread only:
        Python runs signal handlers there)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, _frame: Any) -> None:
            sig = signal.Signals(signum)
            self.supervisor.interrupt(f"{sig.name} received", EXIT_SIGNAL[sig])

        previous = {sig: signal.signal(sig, handler) for sig in EXIT_SIGNAL}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _bounded(self, seconds: float, what: str, action: Callable[[], Any]) -> Any:
        """Runs one operation; past `seconds` its child is interrupted like on Ctrl-C.
        Any failure becomes a one-line DriverError (the CLI's output was already logged)."""
        sup = self.supervisor
        if sup.tearing_down:
            timer = threading.Timer(
                seconds, sup.stop_child, (f"{what} did not finish in {seconds:.0f}s",)
            )
        else:
            timer = threading.Timer(
                seconds,
                sup.interrupt,
                (f"{what} did not finish in {seconds:.0f}s (--timeout)", EXIT_TIMEOUT),
            )
        timer.daemon = True
        timer.start()
        try:
            return action()
        except DriverError:
            raise
        except Exception as exc:
            if sup.reason is not None and not sup.tearing_down:
                raise Interrupted(sup.reason, sup.code) from exc
            last = (str(exc).strip().splitlines() or [type(exc).__name__])[-1]
            raise DriverError(f"{what} failed: {last}") from exc
        finally:
            timer.cancel()

    # --- stacks ----------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {
            "PULUMI_BACKEND_URL": f"file://{self.options.backend}",
            "PULUMI_SKIP_UPDATE_CHECK": "1",
            **program_path(ROOT),
            # scripts/env.sh checkpoints_for: the state written once per update, on a stack
            # of kind clusters only.
            **({"PULUMI_SKIP_CHECKPOINTS": "true"} if self.kind_only else {}),
            **({"TMPDIR": str(self.engine_tmp)} if self.engine_tmp else {}),
        }
        if self.options.passphrase:
            return {**env, "PULUMI_CONFIG_PASSPHRASE": self.options.passphrase}
        if "PULUMI_CONFIG_PASSPHRASE" in os.environ:
            return {**env, "PULUMI_CONFIG_PASSPHRASE": os.environ["PULUMI_CONFIG_PASSPHRASE"]}
        file = os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
        if file:
            if not os.access(file, os.R_OK):
                raise DriverError(
                    f"PULUMI_CONFIG_PASSPHRASE_FILE={file} cannot be read; point it at a "
                    "readable file holding the passphrase"
                )
            return {**env, "PULUMI_CONFIG_PASSPHRASE_FILE": file}
        raise DriverError(
            "set PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE: it encrypts this "
            "stack's secrets (the kubeconfigs) in the local backend"
        )

    def _workspace_options(self) -> Any:
        env = self._env()
        self.options.backend.mkdir(parents=True, exist_ok=True)
        extra = {"pulumi_command": OwnedPulumiCommand(self.supervisor)} if self.owned_cli else {}
        return self.auto.LocalWorkspaceOptions(
            work_dir=str(self.options.project), env_vars=env, **extra
        )

    def _stack(self, name: str, create: bool) -> Any:
        opts = self._workspace_options()
        work_dir = str(self.options.project)
        if create:
            return self.auto.create_or_select_stack(stack_name=name, work_dir=work_dir, opts=opts)
        return self.auto.select_stack(stack_name=name, work_dir=work_dir, opts=opts)

    def config_file(self, name: str) -> Path:
        """The ephemeral stack's config, outside stacks/ (see the module docstring)."""
        return self.options.backend / "stack-config" / f"Pulumi.{name}.yaml"

    def _write_config(self, name: str, values: dict[str, Any]) -> Path:
        """Moves what `stack init` wrote into stacks/ (its salt) out, with the config added."""
        in_stacks = self.options.project / "stacks" / f"Pulumi.{name}.yaml"
        path = self.config_file(name)
        settings: dict[str, Any] = {}
        # A new stack's salt is in what `stack init` wrote; a stack updated in place (`up
        # --name` of a fleet that exists) keeps the one its config file has, or Pulumi would
        # make a new salt and the state's secrets would no longer open.
        for written in (in_stacks, path):
            if written.exists():
                settings = yaml.safe_load(written.read_text()) or {}
                break
        settings["config"] = {f"{PROJECT}:{key}": value for key, value in values.items()}
        path.parent.mkdir(parents=True, exist_ok=True)
        # Pulumi reads it with yaml.v3: a text such as '08' must stay text.
        path.write_text(yaml_v3.dump(settings))
        in_stacks.unlink(missing_ok=True)
        return path

    def _forget_config(self, name: str) -> None:
        """Removes what this driver wrote for stack `name`: its config outside stacks/, and
        in stacks/ only a file `stack init` left there (its salt, nothing else). A stack
        file of the user's, committed or not, is never deleted."""
        self.config_file(name).unlink(missing_ok=True)
        in_stacks = self.options.project / "stacks" / f"Pulumi.{name}.yaml"
        if stack_init_leftover(in_stacks):
            in_stacks.unlink()

    def _refuse_a_users_stack_file(self, name: str) -> None:
        """An ephemeral stack's `stack init` writes stacks/Pulumi.<name>.yaml and this driver
        moves it out: a stack file of the user's by that name would be taken over."""
        in_stacks = self.options.project / "stacks" / f"Pulumi.{name}.yaml"
        if in_stacks.exists() and not stack_init_leftover(in_stacks):
            raise DriverError(
                f"--name {name}: {in_stacks.relative_to(self.options.project)} is a stack file "
                "of this project, which an ephemeral fleet of that name would take over; "
                f"choose another --name (e.g. {name}-ephemeral)"
            )

    # --- operations ------------------------------------------------------------------------

    def up(self) -> dict[str, Any]:
        with self._command():
            return self._up()

    def _up(self) -> dict[str, Any]:
        o = self.options
        base_file = stack_path(o.base)
        spec, _ = load_stack(str(base_file))  # validated before anything is created
        providers = {c.provider for c in spec.clusters}
        self.kind_only = providers == {"kind"}
        self.tools("kind" in providers, spec.dispatcher.builds_image, providers)
        # What this host lacks for kind (Docker's privileges, cgroups, inotify, disk, the
        # node image): one line each, before any cluster is created.
        host_problems = self.host_check(spec)
        if host_problems:
            raise DriverError("cannot create the kind clusters: " + "; ".join(host_problems))
        # The kubeconfig of this machine, which `validate` leaves alone unless the stack
        # names the file (components/checks/kubeconfigs.py).
        found = [context_problem(c) for c in spec.clusters if c.existing is not None]
        found += [credential_command_problem(c) for c in spec.clusters if c.existing is not None]
        found += [
            p for c in spec.clusters if c.existing is not None for p in kubeconfig_problems(c)
        ]
        found += list(existing_worker_servers(spec, this_machine=True))
        for problem in found:
            if problem is not None and problem.severity == "error":
                raise DriverError(f"{problem.path}: {problem.message}; fix: {problem.hint}")
        missing = missing_cloud_sdks(o.project, providers)
        if missing:
            raise DriverError(
                missing_message(o.base, providers, missing, program_env(o.project).name)
            )
        config, secret = parse_stack_text(base_file.read_text())
        if secret:
            raise DriverError(
                f"{base_file} has encrypted values ({', '.join(sorted(secret))}); "
                "an ephemeral stack cannot decrypt another stack's secrets"
            )
        name = o.name or stack_name(o.base, run_suffix())
        o.name = name
        self._refuse_a_users_stack_file(name)
        self.log(f"creating stack {name} from {base_file.name}")
        # This host's settings for the base (stacks/local/BASE.yaml: the node image and
        # mirror `kindnode build --for-stack BASE` made) go into the new stack's config, as
        # the checks above read them: the program reads stacks/local/NAME.yaml, which an
        # ephemeral stack has none of, and would pull images this host cannot.
        config, host_notes = with_host_settings(config, o.base)
        for note in host_notes:
            self.log(f"{name}: {note.message}")
        self.stack_touched = True
        stack = self._bounded(
            STACK_OP_TIMEOUT, f"creating stack {name}", lambda: self._stack(name, create=True)
        )
        config_file = str(self._write_config(name, {**config, "fleetName": name}))
        self.log(f"pulumi up {name} (time limit {o.up_timeout:.0f}s)")
        self._bounded(
            o.up_timeout,
            f"pulumi up of {name}",
            # show_secrets=False: the SDK's summary after `up` and `destroy` runs `stack
            # history --show-secrets` without --config-file, and the CLI then makes a new
            # salt and writes it to stacks/Pulumi.<name>.yaml (pulumi v3.259.0
            # pkg/cmd/pulumi/stack/stack_history.go; SDK 3.272.0 automation/_stack.py).
            lambda: stack.up(
                config_file=config_file, on_output=Tracebacks(self.log), show_secrets=False
            ),
        )
        outputs = {k: v.value for k, v in stack.outputs().items()}
        summary = self._write(name, outputs)
        self.log(f"waiting until the fleet is ready (time limit {o.ready_timeout:.0f}s)")
        status = asyncio.run(self._until_interrupted(self._wait_ready(summary)))
        summary["ready"] = status.ready
        summary["status"] = json.loads(status.as_json())["checks"]
        (o.out / "summary.json").write_text(json.dumps(summary, indent=2))
        self.log(status.table())
        if not status.ready:
            raise DriverError(
                f"fleet {name} is up but not ready after {o.ready_timeout:.0f}s "
                f"(see {o.out / 'summary.json'})"
            )
        return summary

    async def _until_interrupted(self, work: Any) -> Any:
        """`work`, cancelled when an interrupt arrives (it has no child to signal)."""
        task = asyncio.ensure_future(work)
        while not task.done():
            if self.supervisor.reason is not None:
                task.cancel()
                raise Interrupted(self.supervisor.reason, self.supervisor.code)
            await asyncio.wait({task}, timeout=0.2)
        return task.result()

    async def _wait_ready(self, summary: dict[str, Any]) -> Any:
        from components.cli.status import Installs, wait_ready

        kubeconfigs = {
            c["name"]: yaml.safe_load((self.options.out / c["kubeconfig"]).read_text())
            for c in summary["clusters"]
        }
        roles = {c["name"]: c["role"] for c in summary["clusters"]}
        installs = Installs.from_json(summary.get("installs"))
        return await wait_ready(kubeconfigs, roles, self.options.ready_timeout, installs)

    def _write(self, name: str, outputs: dict[str, Any]) -> dict[str, Any]:
        return write_fleet_dir(self.options.out, name, outputs)

    def down(self, name: str) -> None:
        with self._command():
            self._down(name)

    def _down(self, name: str) -> None:
        o = self.options
        # `down` alone reads no base stack: the config `up` wrote says what the fleet is.
        self.kind_only = kind_only_config(self.config_file(name))
        try:
            stack = self._bounded(
                STACK_OP_TIMEOUT, f"selecting stack {name}", lambda: self._stack(name, False)
            )
        except DriverError as exc:
            if not isinstance(exc.__cause__, self.auto.StackNotFoundError):
                raise
            self.log(f"stack {name} does not exist: nothing to tear down")
            self._forget_config(name)
            return
        if self.supervisor.forced:
            # The killed child could not release the local backend's lock; it is gone now,
            # so removing the lock is safe (that is all `cancel` does on this backend).
            with contextlib.suppress(Exception):
                stack.cancel()
        self._drain(stack)
        self.log(f"pulumi destroy {name} (time limit {o.destroy_timeout:.0f}s)")
        config_file = self.config_file(name)
        extra = {"config_file": str(config_file)} if config_file.exists() else {}
        self._bounded(
            o.destroy_timeout,
            f"destroy of {name}",
            lambda: stack.destroy(on_output=Tracebacks(self.log), show_secrets=False, **extra),
        )
        # What destroy skips: a kind cluster whose create was cut short (the CLI killed when
        # an interrupt's grace ran out) is in the state only as a pending create.
        try:
            remove_cut_short(stack_folder(name), self.log)
        except CommandFailed as exc:
            raise DriverError(str(exc)) from None
        self._bounded(
            STACK_OP_TIMEOUT,
            f"removing stack {name}",
            lambda: stack.workspace.remove_stack(name, preserve_config=True),
        )
        self._forget_config(name)
        self.log(f"stack {name} removed")

    def _drain(self, stack: Any) -> None:
        """On existing clusters, stop the fleet's ClusterQueues and let the work holding
        their quota end first (components/cli/teardown.py). Clusters the stack created
        (kind, GKE, EKS) need none: their objects go with the cluster."""
        from components.cli.teardown import DrainTimeout, drain_plan, stop_and_drain

        outputs = {k: v.value for k, v in stack.outputs().items()}
        kubeconfigs, lasting = drain_plan(outputs)
        if not kubeconfigs or not outputs.get("fleet"):
            return
        try:
            asyncio.run(
                self._until_interrupted(
                    stop_and_drain(
                        kubeconfigs,
                        outputs["fleet"],
                        self.options.drain_timeout,
                        log=self.log,
                        wait_on=lasting,
                    )
                )
            )
        except DrainTimeout as exc:
            raise DriverError(f"teardown stopped before destroy: {exc}") from exc

    def preview(self, name: str) -> str:
        with self._command():
            try:
                stack = self._bounded(
                    STACK_OP_TIMEOUT, f"selecting stack {name}", lambda: self._stack(name, False)
                )
            except DriverError as exc:
                if not isinstance(exc.__cause__, self.auto.StackNotFoundError):
                    raise
                raise DriverError(
                    f"no fleet named {name} in {self.options.backend} (the backend `mkf up` "
                    f"uses): preview a fleet `mkf up` made with --name <the stack it printed>; "
                    f"for a stack file's change without a fleet, `mkf render --diff --stack "
                    f"{name}`"
                ) from None
            config_file = self.config_file(name)
            extra = {"config_file": str(config_file)} if config_file.exists() else {}
            return self._bounded(
                self.options.up_timeout,
                f"preview of {name}",
                lambda: stack.preview(diff=True, on_output=Tracebacks(self.log), **extra).stdout,
            )

    def run(self, command: Sequence[str]) -> int:
        """up, the command with the manager's KUBECONFIG, then down whatever happened."""
        name = self.options.name or stack_name(self.options.base, run_suffix())
        self.options.name = name
        with self._command():
            return self._run(name, command)

    def _run(self, name: str, command: Sequence[str]) -> int:
        error: DriverError | None = None
        code = 0
        try:
            summary = self._up()
            manager = next(c for c in summary["clusters"] if c["role"] == "manager")
            env = {
                **os.environ,
                "KUBECONFIG": str(self.options.out / manager["kubeconfig"]),
                "FLEET_SUMMARY": str(self.options.out / "summary.json"),
            }
            self.log(f"running: {' '.join(command)}")
            code = self._bounded(
                self.options.up_timeout,
                command[0],
                lambda: self.supervisor.spawn(command, None, env, capture=False)[0],
            )
        except DriverError as exc:
            error = exc
        finally:
            # Whatever happened, including an unexpected exception on its way out.
            self.supervisor.tearing_down = True
            teardown = self._teardown(name)
        if teardown is not None:
            first = f"{error}; then " if error and not isinstance(error, Interrupted) else ""
            self.log(f"error: {first}{teardown}")
            return EXIT_TEARDOWN_FAILED
        if isinstance(error, Interrupted):
            self.log(f"stopped: {error}; the fleet was torn down")
            return error.code
        if error is not None:
            raise error
        if self.supervisor.reason is not None:  # an interrupt the command exited on
            return self.supervisor.code
        return code

    def _teardown(self, name: str) -> str | None:
        """down; None, or why it failed and how to finish it by hand."""
        if not self.stack_touched:
            return None
        try:
            self._down(name)
        except DriverError as exc:
            return f"teardown of {name} failed: {exc}; finish it with `mkf down --name {name}`"
        return None
