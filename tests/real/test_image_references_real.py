"""distribution/reference v0.6.0 itself (tools/refcheck, built from the tools module's pinned
build list) on the cases the unit tier holds the project's Image check to: the parser
containerd follows refuses exactly what the project refuses."""

from __future__ import annotations

import subprocess

import pytest

from components.upstream import toolchain
from tests.helpers.image_cases import CASES, MIRROR_CASES
from tests.helpers.real_fleet import go_missing


def refcheck(mode: str, args: list[str]) -> list[str]:
    """tools/refcheck's verdict on each of `args`, one line each."""
    if why := go_missing():
        pytest.skip(why)
    done = subprocess.run(
        [toolchain.go_binary(), "run", "./refcheck", mode, *args],
        cwd=toolchain.TOOLS_MODULE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    verdicts = done.stdout.splitlines()
    assert len(verdicts) == len(args), done.stdout
    return verdicts


def test_the_runtimes_parser_gives_each_case_its_verdict() -> None:
    verdicts = refcheck("image", [reference for reference, _ in CASES])
    wrong = [
        f"{reference!r}: expected {'ok' if accepted else 'an error'}, the parser says {verdict}"
        for (reference, accepted), verdict in zip(CASES, verdicts, strict=True)
        if (verdict == "ok") != accepted
    ]
    assert not wrong, "\n".join(wrong)


def test_gos_url_parser_refuses_no_mirror_the_project_takes() -> None:
    verdicts = refcheck("url", [url for url, _, _ in MIRROR_CASES])
    wrong = [
        f"{url!r}: expected {'ok' if go_takes else 'an error'}, url.Parse says {verdict}"
        for (url, go_takes, _), verdict in zip(MIRROR_CASES, verdicts, strict=True)
        if (verdict == "ok") != go_takes
    ]
    assert not wrong, "\n".join(wrong)
