"""The habits of kubectl, git and helm, run as a user runs the commands: exit codes 0 same /
1 differs / 2 error, diagnostics on stderr and results on stdout, `-o json`, `render --out -`
as one YAML stream, colour only on a terminal, `-q`, flags before or after the subcommand,
a closed pipe ending quietly, a note shown once per run, no YAML anchors."""

from __future__ import annotations

import json
import os
import pty
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.checks.load import load_stack
from components.cli.render import render_stream
from components.objects.fleet import build_fleet
from tests.helpers.fleet_config import base
from tests.helpers.stack_texts import DEV, ROOT, SMALL, cli, write_stack

ESC = "\033["


def stack_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": {f"multikueue-fleet:{k}": v for k, v in config.items()}})


def tas(levels: list[str]) -> dict[str, Any]:
    config = base()
    config["queues"]["topologies"] = [{"name": "default", "levels": levels}]
    config["queues"]["flavors"] = [
        {"name": "default-flavor", "nodeLabels": {"pool": "a"}, "topology": "default"}
    ]
    return config


@pytest.fixture
def small(tmp_path: Path) -> Path:
    return write_stack(tmp_path, "small", SMALL)


@pytest.fixture
def dev(tmp_path: Path) -> Path:
    return write_stack(tmp_path, "dev", DEV)


def variant(tmp_path: Path, source: Path, old: str, new: str, name: str) -> Path:
    (tmp_path / name).mkdir()
    text = source.read_text()
    assert old in text
    return write_stack(tmp_path / name, source.stem.removeprefix("Pulumi."), text.replace(old, new))


# --- exit codes ---------------------------------------------------------------------------


def test_diff_exit_codes_tell_differs_from_error(tmp_path: Path, dev: Path) -> None:
    changed = variant(tmp_path, dev, "cpu: 4", "cpu: 6", "changed")
    broken = variant(tmp_path, dev, "cpu: 4", "cpu: four", "broken")
    same = cli("render", "--diff", "--old", str(dev), "--new", str(dev), "--exit-code")
    assert same.returncode == 0, same.stderr
    differs = cli("render", "--diff", "--old", str(dev), "--new", str(changed), "--exit-code")
    assert differs.returncode == 1, differs.stderr
    # Without --exit-code a difference is still success, as `git diff`.
    assert cli("render", "--diff", "--old", str(dev), "--new", str(changed)).returncode == 0
    error = cli("render", "--diff", "--old", str(dev), "--new", str(broken), "--exit-code")
    assert error.returncode == 2
    assert "nominalQuota 'four' is not a Kubernetes quantity" in error.stderr
    assert error.stdout == ""


def test_a_refused_immutable_change_is_an_error_not_a_difference(tmp_path: Path) -> None:
    old = write_stack(
        tmp_path, "t", stack_text(tas(["example.com/block", "kubernetes.io/hostname"]))
    )
    (tmp_path / "new").mkdir()
    new = write_stack(tmp_path / "new", "t", stack_text(tas(["kubernetes.io/hostname"])))
    result = cli("render", "--diff", "--old", str(old), "--new", str(new), "--exit-code")
    assert result.returncode == 2
    assert "spec.levels cannot change" in result.stderr
    assert "cannot change" not in result.stdout


def test_quiet_diff_is_git_diff_quiet(tmp_path: Path, dev: Path) -> None:
    changed = variant(tmp_path, dev, "cpu: 4", "cpu: 6", "changed")
    result = cli("render", "--diff", "--old", str(dev), "--new", str(changed), "-q")
    assert (result.returncode, result.stdout, result.stderr) == (1, "", "")
    result = cli("render", "--diff", "-q", "--old", str(dev), "--new", str(dev))
    assert (result.returncode, result.stdout) == (0, "")


def test_schema_check_exit_codes(tmp_path: Path) -> None:
    stale = tmp_path / "stale.json"
    stale.write_text("{}")
    assert cli("schema", "--check", "--out", str(stale)).returncode == 1
    assert cli("schema", "--check").returncode == 0


# --- where the words go ------------------------------------------------------------------


def test_validate_results_on_stdout_and_diagnostics_on_stderr(dev: Path, tmp_path: Path) -> None:
    broken = variant(tmp_path, dev, "cpu: 4", "cpu: four", "broken")
    result = cli("validate", "--stack", str(dev), "--stack", str(broken), "--notes")
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"{dev}: 0 error(s), 0 warning(s)",
        f"{broken}: 1 error(s), 0 warning(s)",
    ]
    assert "error: queues.clusterQueues[0]" in result.stderr
    assert "note: kueue.waitForPodsReady" in result.stderr


def test_validate_json(dev: Path, tmp_path: Path) -> None:
    broken = variant(tmp_path, dev, "cpu: 4", "cpu: four", "broken")
    result = cli("validate", "--stack", str(dev), "--stack", str(broken), "-o", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["valid"] is False
    good, bad = document["stacks"]
    assert (good["file"], good["valid"]) == (str(dev), True)
    assert [p["severity"] for p in good["problems"]] == ["note"]
    (problem,) = bad["problems"]
    assert problem["path"].startswith("queues.clusterQueues[0].resourceGroups[0]")
    assert problem["line"] and problem["fix"] == "write it like 8, 500m or 32Gi"
    assert result.stderr == ""  # everything is in the document


def test_diff_json(tmp_path: Path, dev: Path) -> None:
    changed = variant(tmp_path, dev, "region: local-b", "region: local-c", "changed")
    result = cli("render", "--diff", "--old", str(dev), "--new", str(changed), "-o", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["differs"] is True
    (manager,) = document["clusters"]
    assert manager["cluster"] == "manager"
    assert manager["summary"] == {"added": 0, "changed": 1, "replaced": 0, "removed": 0}
    (obj,) = manager["objects"]
    assert obj["key"] == "MultiKueueCluster worker2" and "+    region: local-c" in obj["diff"]


def test_render_to_stdout_is_one_yaml_stream(small: Path) -> None:
    result = cli("render", "--stack", str(small), "--out", "-")
    assert result.returncode == 0, result.stderr
    assert not (small.parent / "-").exists()
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    spec, _ = load_stack(str(small))
    expected = [o for c in build_fleet(spec) for o in c.objects]
    assert documents == expected
    assert "# cluster: worker-worker2" in result.stdout
    assert "# upstream install (not in this stream): kueue v0.19.2" in result.stdout
    assert "wrote" not in result.stdout


def test_no_yaml_anchors_in_any_rendered_output() -> None:
    """Shared lists in the builders (a ClusterRole's verbs, a CRD's schemas) once came out
    as `&id001` / `*id001`; every shipped stack's render, its embedded configs included."""
    for path in sorted((ROOT / "stacks").glob("Pulumi.*.yaml")):
        spec, _ = load_stack(str(path))
        text = render_stream(spec)
        assert "&id0" not in text and "*id0" not in text, path.name
        for cluster in build_fleet(spec):
            for obj in cluster.objects:
                for value in (obj.get("data") or {}).values():
                    assert "&id0" not in value and "*id0" not in value, path.name


def test_a_note_is_shown_once_per_run_and_never_once_acknowledged(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("a", "b", "c"):
        write_stack(stacks, name, DEV)  # each runs a LeaderWorkerSet on its manager
    acknowledged = DEV.replace(
        "  multikueue-fleet:queues:",
        "  multikueue-fleet:kueue:\n    waitForPodsReady:\n      onManager: false\n"
        "  multikueue-fleet:queues:",
    )
    write_stack(stacks, "d", acknowledged)
    # Without --notes, only their count: the default stack's validate says nothing to act on.
    plain = cli("validate", "--all", "--stacks-dir", str(stacks))
    assert plain.returncode == 0, plain.stderr
    assert "waitForPodsReady" not in plain.stderr
    assert "note(s) that need nothing done: --notes shows them" in plain.stderr
    result = cli("validate", "--all", "--stacks-dir", str(stacks), "--notes")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("waitForPodsReady is off on the manager") == 1
    assert "Pulumi.a.yaml, " in result.stderr and "Pulumi.d.yaml" not in result.stderr
    quiet = cli("validate", "--all", "--stacks-dir", str(stacks), "-q", "--notes")
    assert quiet.stderr == ""
    alone = cli("validate", "--stack", str(stacks / "Pulumi.d.yaml"), "--notes")
    assert "waitForPodsReady" not in alone.stderr and "note" not in alone.stderr


def test_notes_are_for_validate_not_for_every_command(tmp_path: Path) -> None:
    """The default stack carries the waitForPodsReady note ("nothing to do"): `validate`
    says it; render, its diff and reader-access, run all day, do not repeat it."""
    stack = write_stack(tmp_path, "a", DEV)
    other = write_stack(tmp_path, "b", DEV.replace("cpu: 4", "cpu: 6"))
    assert (
        "note: kueue.waitForPodsReady" in cli("validate", "--stack", str(stack), "--notes").stderr
    )
    for args in (
        ("render", "--stack", str(stack)),
        ("render", "--stack", str(stack), "--out", str(tmp_path / "out")),
        ("render", "--diff", "--old", str(stack), "--new", str(other)),
        ("reader-access", "--stack", str(stack), "--cluster", "worker9"),
    ):
        result = cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == "", (args, result.stderr)


# --- flags, colour, pipes -----------------------------------------------------------------


def test_common_flags_before_or_after_the_subcommand(small: Path) -> None:
    for args in (
        ("-q", "validate", "--stack", str(small)),
        ("validate", "--stack", str(small), "-q"),
        ("validate", "-q", "--stack", str(small), "--no-color"),
    ):
        result = cli(*args)
        assert result.returncode == 0, (args, result.stderr)
        assert result.stderr == "", args


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """The command's stdout as a terminal shows it (stdout is a pseudo-terminal)."""
    main, other = pty.openpty()
    try:
        process = subprocess.Popen(
            args,
            stdout=other,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "TERM": "xterm", **env},
        )
        os.close(other)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other side closed: the command is done
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=120)
    finally:
        os.close(main)
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_only(tmp_path: Path, dev: Path) -> None:
    changed = variant(tmp_path, dev, "cpu: 4", "cpu: 6", "changed")
    args = [sys.executable, "-m", "components", "render", "--diff"]
    args += ["--old", str(dev), "--new", str(changed)]
    assert ESC in run_on_a_terminal(args, {})
    assert ESC not in run_on_a_terminal(args, {"NO_COLOR": "1"})
    assert ESC not in run_on_a_terminal([*args, "--no-color"], {})
    piped = cli(*args[3:])
    assert ESC not in piped.stdout and piped.returncode == 0


@pytest.mark.parametrize(
    "command",
    [
        ["components", "reader-access", "--stack", "gke", "--cluster", "new-worker"],
        ["components", "render", "--stack", "gke", "--out", "-"],
        ["controller", "--help"],
    ],
)
def test_a_reader_that_goes_away_ends_the_command_quietly(command: list[str]) -> None:
    """`... | head`: the reader closes the pipe before the command is done writing."""
    process = subprocess.Popen(
        [sys.executable, "-m", *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    error = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert "Traceback" not in error and "BrokenPipe" not in error, error
    assert "Exception ignored" not in error, error
    assert code in (0, 141), error


# --- status -------------------------------------------------------------------------------


def fleet_dir(tmp_path: Path, port: int) -> Path:
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "m.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "m",
                "clusters": [{"name": "m", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "m", "context": {"cluster": "m", "user": "u"}}],
            }
        )
    )
    summary = {"clusters": [{"name": "m", "role": "manager", "kubeconfig": "m.yaml"}]}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_status_of_an_unreachable_manager_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    folder = fleet_dir(tmp_path, port)
    started = time.monotonic()
    result = cli("status", "--dir", str(folder))
    assert time.monotonic() - started < 10
    assert result.returncode == 1
    *rows, last = result.stdout.splitlines()
    (row,) = [line for line in rows if "Unreachable" in line]
    assert row.endswith(f"cannot reach the manager at https://127.0.0.1:{port}: connection refused")
    assert last.startswith("fleet NOT ready: m Cluster api: Unreachable: cannot reach the manager")
    assert "ClientConnectorError" not in result.stdout + result.stderr


def _held(silent: socket.socket, spans: list[tuple[float, float]], done: threading.Event) -> None:
    """Accepts each connection, never answers, and notes when it came and when the client
    gave up on it."""
    silent.settimeout(0.2)
    while not done.is_set():
        try:
            conn, _ = silent.accept()
        except TimeoutError:
            continue
        came = time.monotonic()
        with conn:
            conn.settimeout(30)
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass
        spans.append((came, time.monotonic()))


def test_status_honours_its_timeout_and_shows_progress_while_waiting(tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        folder = fleet_dir(tmp_path, silent.getsockname()[1])
        spans: list[tuple[float, float]] = []
        done = threading.Event()
        holder = threading.Thread(target=_held, args=(silent, spans, done))
        holder.start()
        try:
            started = time.monotonic()
            result = cli("status", "--dir", str(folder), "--timeout", "1", "-o", "json")
            assert time.monotonic() - started < 60  # never a hang, however loaded the host
        finally:
            done.set()
            holder.join()
        # Measured at the server, so the interpreter's start on a loaded host is not in it:
        # the client gave up after its 1 s, not the default 5.
        assert spans, "status never connected"
        held = max(end for _, end in spans) - min(came for came, _ in spans)
        assert held < 4, spans
        (check,) = json.loads(result.stdout)["checks"]
        assert check["message"].endswith("no answer within 1s")
        waited = cli("status", "--dir", str(folder), "--timeout", "1", "--wait", "3")
        quiet = cli("status", "--dir", str(folder), "--timeout", "1", "--wait", "2", "-q")
    assert waited.returncode == 1
    assert "waiting (" in waited.stderr and "0 of 1 checks ready" in waited.stderr
    assert "waiting" not in waited.stdout
    assert quiet.stderr == ""
