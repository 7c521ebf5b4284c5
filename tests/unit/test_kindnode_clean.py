"""`python -m kindnode clean`, on a fake docker that records every call: the registry
mirror's container and volume and every image `build` made go, by name and only where the
stand-in label proves it built them; a user's image of the same name, or one built FROM a
stand-in, stays; nothing at all while a kind cluster runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kindnode import __main__ as kindnode_main
from kindnode import clean, images, nodeimage, registry
from tests.helpers.fake_docker import install_fake_docker

FAKE = r"""#!/usr/bin/env bash
echo "docker $*" >> "$FAKE_LOG"
has() { case " $1 " in *" $2 "*) return 0 ;; esac; return 1; }
case "$1 $2" in
  "ps -a") printf '%s\n' $FAKE_KIND_CLUSTERS; exit 0 ;;
  "container inspect") [ -n "$FAKE_REGISTRY" ]; exit $? ;;
  "volume inspect") [ -n "$FAKE_REGISTRY" ]; exit $? ;;
  "image inspect")
    name="${@: -1}"
    has "$FAKE_IMAGES" "$name" || exit 1
    if [ "$3" = --format ]; then has "$FAKE_LABELLED" "$name" && echo 0123abcd || echo; fi
    exit 0 ;;
esac
exit 0
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = install_fake_docker(tmp_path, monkeypatch, FAKE)
    monkeypatch.setenv("FAKE_REGISTRY", "yes")
    monkeypatch.setenv("FAKE_KIND_CLUSTERS", "")
    return log


def _removed(log: Path) -> list[str]:
    return [
        line.split()[-1] for line in log.read_text().splitlines() if line.startswith("docker rmi")
    ]


def test_every_built_name_goes_and_nothing_else(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = clean.built_names()
    mirror = f"127.0.0.1:{registry.HOST_PORT}/kindest/node:{images.KUBERNETES_VERSION}"
    busybox = images.stand_in("busybox:1.36")
    assert {images.DEBIAN, nodeimage.NODE_IMAGE_LOCAL, busybox, mirror} <= set(names)
    # Every name the build writes is the project's own: none a user could pull or build FROM.
    own = (images.OWNED, f"127.0.0.1:{registry.HOST_PORT}/")
    assert all(n.startswith(own) for n in names), [n for n in names if not n.startswith(own)]
    # A user's own image, built FROM the python stand-in: it has the label, not a built name.
    mine = "my-team/trainer:1"
    # An image under a built name without the label: not provably ours.
    monkeypatch.setenv("FAKE_IMAGES", " ".join([*names, mine]))
    labelled = [n for n in names if n != busybox]
    monkeypatch.setenv("FAKE_LABELLED", " ".join([*labelled, mine]))
    kept = clean.clean(log=lambda _line: None)
    assert sorted(_removed(fake)) == sorted(labelled)
    assert kept == [busybox]
    calls = fake.read_text()
    assert f"docker rm -f -v {registry.CONTAINER}" in calls
    assert f"docker volume rm {registry.VOLUME}" in calls
    assert mine not in " ".join(_removed(fake))


def test_published_names_an_earlier_build_took_are_given_back(
    fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builds before the project's own names kept stand-ins under the published ones: each
    such name goes where the label proves a build put it there; the user's published
    busybox (no label) stays."""
    published = clean.published_names()
    assert {"debian:bookworm-slim", "busybox:1.36", "python:3.11-slim-bookworm",
            nodeimage.NODE_IMAGE, registry.IMAGE,
            f"registry.k8s.io/kueue/kueue:{images.KUEUE_VERSION}"} <= set(published)  # fmt: skip
    assert not any(n.startswith(images.OWNED) for n in published)
    monkeypatch.setenv("FAKE_IMAGES", " ".join(published))
    ours = [n for n in published if n != "busybox:1.36"]
    monkeypatch.setenv("FAKE_LABELLED", " ".join(ours))
    lines: list[str] = []
    clean.release_published_names(log=lines.append)
    assert sorted(_removed(fake)) == sorted(ours)
    assert "gave back python:3.11-slim-bookworm: an earlier build kept its stand-in" in (
        "\n".join(lines)
    )


@pytest.mark.parametrize(
    ("published", "owned"),
    [
        ("busybox:1.36", "docker.io/library/busybox:1.36"),
        ("kindest/node:v1.36.4", "docker.io/kindest/node:v1.36.4"),
        ("registry.k8s.io/kueue/kueue:v0.19.2", "registry.k8s.io/kueue/kueue:v0.19.2"),
        ("localhost:5001/team/app:1", "localhost-5001/team/app:1"),
    ],
)
def test_a_stand_in_is_kept_under_its_published_name_below_the_projects(
    published: str, owned: str
) -> None:
    assert images.stand_in(published) == f"localhost/multikueue-fleet/stand-in/{owned}"


def test_a_running_kind_cluster_stops_it_before_anything_goes(
    fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_KIND_CLUSTERS", "dev-manager dev-manager dev-worker1")
    monkeypatch.setenv("FAKE_IMAGES", " ".join(clean.built_names()))
    monkeypatch.setenv("FAKE_LABELLED", " ".join(clean.built_names()))
    assert kindnode_main.main(["clean"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: kind clusters dev-manager, dev-worker1 still run")
    assert "scripts/down.sh" in err
    calls = fake.read_text()
    assert "docker rm" not in calls and "docker rmi" not in calls and "volume rm" not in calls


def test_on_a_clean_host_it_removes_nothing_and_says_so(
    fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_REGISTRY", "")
    monkeypatch.setenv("FAKE_IMAGES", "")
    monkeypatch.setenv("FAKE_LABELLED", "")
    assert kindnode_main.main(["clean"]) == 0
    assert "removing what" in capsys.readouterr().out
    assert "docker rm" not in fake.read_text()
