"""`render --out` writes only into a directory it creates, an empty one, or a previous
render; anything else is refused with the reason and left exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cli.render import RENDER_MARKER
from tests.helpers.stack_texts import SMALL, cli, write_stack


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes())
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def stack(tmp_path: Path) -> Path:
    return write_stack(tmp_path, "small", SMALL)


def render(stack: Path, out: Path) -> tuple[int, str]:
    result = cli("render", "--stack", str(stack), "--out", str(out))
    assert "Traceback" not in result.stderr
    return result.returncode, result.stderr


def test_a_new_directory_is_created_and_marked(stack: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b"
    assert render(stack, out)[0] == 0
    listed = (out / RENDER_MARKER).read_text().splitlines()
    assert "fleet.yaml" in listed
    assert "manager/objects.yaml" in listed


@pytest.mark.parametrize(
    "contents",
    [
        {"notes.txt": b"mine"},
        {"Pulumi.dev.yaml": b"config: {}\n", "sub/deep.txt": b"x"},
        {".git/HEAD": b"ref: refs/heads/main\n"},
    ],
    ids=["a file", "stacks-like", "a checkout"],
)
def test_a_directory_that_is_not_a_render_is_refused_and_left_intact(
    stack: Path, tmp_path: Path, contents: dict[str, bytes]
) -> None:
    out = tmp_path / "precious"
    for name, data in contents.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    before = snapshot(out)
    code, stderr = render(stack, out)
    assert code == 2
    assert "is not a previous render" in stderr
    assert "nothing was written or removed" in stderr
    assert snapshot(out) == before


def test_a_file_is_refused(stack: Path, tmp_path: Path) -> None:
    out = tmp_path / "file.txt"
    out.write_text("keep me")
    code, stderr = render(stack, out)
    assert code == 2
    assert "is not a directory" in stderr
    assert out.read_text() == "keep me"


def test_a_previous_render_is_replaced(stack: Path, tmp_path: Path) -> None:
    out = tmp_path / "render"
    assert render(stack, out)[0] == 0
    fewer = write_stack(
        tmp_path,
        "fewer",
        SMALL.replace("    - name: worker2\n      labels:\n        region: b\n", ""),
    )
    assert render(fewer, out)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == [
        RENDER_MARKER,
        "fleet.yaml",
        "manager",
        "worker-worker1",
    ]


def test_a_previous_render_with_a_file_added_is_refused_and_left_intact(
    stack: Path, tmp_path: Path
) -> None:
    out = tmp_path / "render"
    assert render(stack, out)[0] == 0
    (out / "manager" / "my-notes.md").write_text("notes")
    before = snapshot(out)
    code, stderr = render(stack, out)
    assert code == 2
    assert "manager/my-notes.md" in stderr
    assert snapshot(out) == before


def test_an_empty_directory_is_used(stack: Path, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    assert render(stack, out)[0] == 0
    assert (out / "fleet.yaml").exists()


def test_a_render_from_before_the_marker_is_replaced(stack: Path, tmp_path: Path) -> None:
    out = tmp_path / "old"
    (out / "manager").mkdir(parents=True)
    (out / "worker-w9").mkdir()
    (out / "fleet.yaml").write_text("stack: old\n")
    for folder in ("manager", "worker-w9"):
        (out / folder / "objects.yaml").write_text("{}\n")
        (out / folder / "upstream.yaml").write_text("{}\n")
    assert render(stack, out)[0] == 0
    assert not (out / "worker-w9").exists()
    assert (out / RENDER_MARKER).exists()
