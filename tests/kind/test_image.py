"""The controller image builds from controller/Dockerfile and runs. Needs a Docker engine;
skips, saying so, without one."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kindnode.build import read_manifest

ROOT = Path(__file__).resolve().parents[2]


def _docker_reason() -> str:
    if not shutil.which("docker"):
        return "needs the docker CLI"
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        return "needs a running Docker engine (docker info failed)"
    return ""


@pytest.mark.e2e
@pytest.mark.skipif(bool(_docker_reason()), reason=_docker_reason() or "ok")
def test_controller_image_builds_and_runs() -> None:
    tag = "multikueue-fleet-dispatcher:test"
    # Where `python -m kindnode build` made the base (no image can be pulled here), FROM its
    # stand-in, as the stack's dispatcher.baseImage has it built; else the published one.
    base = (read_manifest() or {}).get("dispatcherBase")
    build_arg = ["--build-arg", f"BASE={base}"] if base else []
    build = subprocess.run(
        ["docker", "build", *build_arg, "-f", "controller/Dockerfile", "-t", tag, "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    help_text = subprocess.run(
        ["docker", "run", "--rm", "--read-only", tag, "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert help_text.returncode == 0, help_text.stderr
    assert "explain" in help_text.stdout
    user = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Config.User}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    assert user.stdout.strip() == "65532:65532"


def _pattern(rule: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker's moby/patternmatcher reads it: `*` within one
    path element, `**` across any number, and a match of a directory covers its content."""
    out = ""
    i = 0
    while i < len(rule):
        if rule.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif rule.startswith("**", i):
            out, i = out + ".*", i + 2
        elif rule[i] == "*":
            out, i = out + "[^/]*", i + 1
        else:
            out, i = out + re.escape(rule[i]), i + 1
    return re.compile(f"^{out}(?:/.*)?$")


def _sent_to_docker(path: str) -> bool:
    """Whether the build context includes `path`: the last rule that matches decides."""
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    sent = True
    for rule in rules:
        negated = rule.startswith("!")
        if _pattern(rule.removeprefix("!").rstrip("/")).match(path):
            sent = negated
    return sent


def test_the_build_context_holds_the_controller_and_no_secrets() -> None:
    """.fleet/ holds admin kubeconfigs; they, caches and virtualenvs stay out of the image's
    build context. The Dockerfile copies controller/ alone, so that is what is sent."""
    for kept_out in (
        ".fleet/ci-123/manager.kubeconfig",
        ".cache/upstream/kueue-v0.19.2.yaml",
        ".venv-dev/bin/python",
        ".venv/bin/python",
        ".pulumi-state/stacks/dev.json",
        ".tools/bin/kube-apiserver",
        "components/model/spec.py",
        "controller/__pycache__/app.cpython-311.pyc",
    ):
        assert not _sent_to_docker(kept_out), kept_out
    copied = re.findall(r"^COPY (\S+)", (ROOT / "controller" / "Dockerfile").read_text(), re.M)
    assert copied, "the Dockerfile copies nothing?"
    for source in [*copied, "controller/app.py", "controller/settings.py"]:
        assert _sent_to_docker(source.rstrip("/")), source
