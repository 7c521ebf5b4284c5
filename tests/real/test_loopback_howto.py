"""docs/loopback-fleet.md's how-to, followed literally: its command block run as written in
a fresh clone (the loopback fleet, `pulumi up` of the loopback stack, the dispatcher from the
stack's outputs, a sample Job admitted through MultiKueue, teardown), then `git status` of
that clone, which must be clean: nothing written into tracked files, no credential outside
an ignored folder. Offline, the block itself is checked for what keeps the tree clean.

The run needs the real tier's binaries and the Pulumi engine built from their Go modules
(toolchain.build: CI builds them; without Go it skips, saying so)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from components.upstream import toolchain
from tests.helpers.ambient import as_a_user
from tests.helpers.real_fleet import binaries

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "loopback-fleet.md"
BLOCK = re.compile(
    r"<!-- loopback-howto:start -->\n```sh\n(?P<commands>.*?)```\n<!-- loopback-howto:end -->",
    re.S,
)
# Well beyond a loaded 2-core machine's run (the fleet ~1 min, `pulumi up` a few).
HOWTO_SECONDS = 1800


def howto() -> str:
    match = BLOCK.search(DOC.read_text())
    assert match, f"{DOC.name} has no loopback-howto block"
    return match.group("commands")


def _ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False)
    return done.returncode == 0


def test_every_file_the_howto_writes_is_ignored_by_git() -> None:
    """Each `> FILE` of the block (the dispatcher's kubeconfig holds a live token) lands in
    a folder git ignores, so it can never be committed by mistake."""
    targets = [
        word
        for line in howto().splitlines()
        if not line.startswith("#")
        for word in re.findall(r"(?<![0-9&])>\s*(\S+)", line)
        if word not in ("/dev/null", "&1")
    ]
    assert any("dispatcher.kubeconfig" in t for t in targets)
    for target in targets:
        assert _ignored(target), f"the how-to writes {target}, which git does not ignore"
    assert not _ignored("dispatcher.yaml")  # the check above can fail


def test_the_howto_keeps_the_tracked_stack_file_as_it_is() -> None:
    commands = howto()
    # The committed salt opens with this passphrase (tests/unit/test_dev_salt.py): stack
    # select --create writes nothing into stacks/Pulumi.loopback.yaml.
    assert "PULUMI_CONFIG_PASSPHRASE=multikueue-fleet-dev" in commands
    (remove,) = [line for line in commands.splitlines() if line.startswith("pulumi stack rm")]
    assert "--preserve-config" in shlex.split(remove)
    # The dispatcher is started, and stopped before the stack is destroyed.
    lines = commands.splitlines()
    started = next(i for i, line in enumerate(lines) if "-m controller" in line)
    stopped = next(i for i, line in enumerate(lines) if line.startswith("kill "))
    destroyed = next(i for i, line in enumerate(lines) if line.startswith("pulumi destroy"))
    assert started < stopped < destroyed
    assert "examples/loopback-job.yaml" in commands


def _clone(folder: Path) -> Path:
    """A fresh clone of this checkout's HEAD, with the built tools and this interpreter's
    environment (which has requirements.txt and mkf) where the README's setup puts them:
    .tools/bin and .venv, both ignored by git."""
    clone = folder / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    (clone / ".tools").mkdir()
    (clone / ".tools" / "bin").symlink_to(toolchain.BIN_DIR)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    return clone


def _env(folder: Path) -> dict[str, str]:
    # The how-to's plain `pulumi up` leaves each provider's kubeconfig in $TMPDIR
    # (pulumi-kubernetes; docs/troubleshooting.md): here, in the test's folder.
    (folder / "tmp").mkdir(exist_ok=True)
    env = {
        **os.environ,
        "TMPDIR": str(folder / "tmp"),
        "PULUMI_HOME": str(folder / "pulumi-home"),
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        # `python -m loopback build` in the clone finds the tools already built.
        "MKF_TOOLS_BIN": str(toolchain.BIN_DIR),
    }
    return as_a_user(env, "PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE")


def test_the_loopback_howto_as_written_leaves_the_clone_clean(tmp_path: Path) -> None:
    binaries()  # skips without Go, saying so
    toolchain.build([*toolchain.PULUMI_ENGINE, "kubectl"], log=lambda _line: None)
    clone = _clone(tmp_path)
    env = _env(tmp_path)
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", howto()],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=HOWTO_SECONDS,
            check=False,
        )
    finally:
        # Whatever step failed, no process of the fleet outlives the test.
        subprocess.run(
            [".venv/bin/python", "-m", "loopback", "down"],
            cwd=clone,
            env=env,
            capture_output=True,
            timeout=300,
            check=False,
        )
    log = clone / ".fleet" / "loopback" / "dispatcher.log"
    assert done.returncode == 0, (
        f"the how-to stopped (exit {done.returncode})\n{done.stdout[-4000:]}\n"
        f"{done.stderr[-4000:]}\n" + (log.read_text()[-2000:] if log.exists() else "")
    )
    assert "Would nominate" in done.stdout or "admitted on" in done.stdout
    # The launcher's discovery caches were in the fleet's folder, gone with it.
    assert not list((tmp_path / "tmp").glob("osrcp-*")), "discovery caches left in $TMPDIR"
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True
    )
    assert status.stdout == "", f"the how-to left the tree changed:\n{status.stdout}"
