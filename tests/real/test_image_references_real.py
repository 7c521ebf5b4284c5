"""distribution/reference v0.6.0 itself (tools/imageref, built from the tools module's pinned
build list) on the cases the unit tier holds the project's Image check to: the parser
containerd follows refuses exactly what the project refuses."""

from __future__ import annotations

import subprocess

import pytest

from components.upstream import toolchain
from tests.helpers.image_cases import CASES
from tests.helpers.real_fleet import go_missing


def test_the_runtimes_parser_gives_each_case_its_verdict() -> None:
    if why := go_missing():
        pytest.skip(why)
    done = subprocess.run(
        [toolchain.go_binary(), "run", "./imageref", *(reference for reference, _ in CASES)],
        cwd=toolchain.TOOLS_MODULE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdicts = done.stdout.splitlines()
    assert len(verdicts) == len(CASES), done.stdout
    wrong = [
        f"{reference!r}: expected {'ok' if accepted else 'an error'}, the parser says {verdict}"
        for (reference, accepted), verdict in zip(CASES, verdicts, strict=True)
        if (verdict == "ok") != accepted
    ]
    assert not wrong, "\n".join(wrong)
