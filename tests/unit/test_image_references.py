"""Image references as container runtimes parse them (distribution/reference v0.6.0 and
go-digest v1.0.0; tests/real/test_image_references_real.py runs that parser on the same
cases): what it refuses is refused at `validate`, naming the key, and what it takes is taken."""

from __future__ import annotations

import pytest
from pydantic_core import PydanticCustomError

from components.model.fieldtypes import _image_problem, _mirror_url
from tests.helpers.fleet_config import problems_of
from tests.helpers.image_cases import CASES, HEX64, MIRROR_CASES


@pytest.mark.parametrize(("reference", "accepted"), CASES)
def test_the_image_check_agrees_with_the_runtimes_parser(reference: str, accepted: bool) -> None:
    problem = _image_problem(reference)
    assert (problem is None) == accepted, problem


@pytest.mark.parametrize(
    ("image", "said"),
    [
        (f"mkf/dispatcher@sha256:{HEX64.upper()}", "is not 64 lower-case hex digits"),
        (f"mkf/dispatcher@md5:{'a' * 32}", "md5 digest, which container runtimes do not verify"),
        ("mkf/Dispatcher:v1", "has upper-case letters in its repository name"),
    ],
)
def test_a_refused_image_is_named_by_its_key_with_the_fix(image: str, said: str) -> None:
    errors = [
        p
        for p in problems_of({"dispatcher": {"image": image}}, stack="dev")
        if p.severity == "error"
    ]
    assert [p.path for p in errors] == ["dispatcher.image"], errors
    assert said in errors[0].message
    assert "[registry/]repository[:tag][@sha256:digest]" in errors[0].hint


@pytest.mark.parametrize(("url", "go_takes", "taken"), MIRROR_CASES)
def test_a_mirror_url_is_taken_only_where_containerd_can_use_it(
    url: str, go_takes: bool, taken: bool
) -> None:
    assert go_takes or not taken, "the table says the project takes what Go refuses"
    try:
        _mirror_url(url)
        refused = ""
    except PydanticCustomError as exc:  # the model's error, worded for the user
        refused = str(exc)
    assert (not refused) == taken, refused


AS_NAMED = "write the host as the images name it"


@pytest.mark.parametrize(
    ("mirrors", "path", "said"),
    [
        ({"index.docker.io": "http://m:5000"}, "index.docker.io", "write docker.io"),
        ({"docker.io": "http://127.0.0.1:5001"}, "docker.io", "inside a kind node"),
        ({"docker.io": "http://fd00::1:5000"}, "docker.io", "not a registry mirror URL"),
        ({"[fd00::1]:5000": "http://[fd00::1]:5000"}, None, ""),
        ({"docker.io": "http://0.0.0.0:5000"}, "docker.io", "inside a kind node"),
        # containerd looks hosts.toml up by the image's host as written: keys as images name
        # their registry, or the fix that names it so.
        ({"Registry.K8s.IO": "http://m:5000"}, "Registry.K8s.IO", f"{AS_NAMED}: registry.k8s.io"),
        (
            {"registry.k8s.io:443": "http://m:5000"},
            "registry.k8s.io:443",
            f"{AS_NAMED}: registry.k8s.io",
        ),
        ({"[FD00::1]:5000": "http://m:5000"}, "[FD00::1]:5000", f"{AS_NAMED}: [fd00::1]:5000"),
        ({"[fd00:0::1]:5000": "http://m:5000"}, "[fd00:0::1]:5000", f"{AS_NAMED}: [fd00::1]:5000"),
        ({"Index.Docker.IO": "http://m:5000"}, "Index.Docker.IO", "write docker.io"),
        ({"localhost:5001": "http://mkf-registry:5000"}, None, ""),
    ],
)
def test_mirrors_are_named_by_their_key_with_the_fix(
    mirrors: dict[str, str], path: str | None, said: str
) -> None:
    config = {"manager": {"provider": "kind", "kind": {"registryMirrors": mirrors}}}
    errors = [p for p in problems_of(config, stack="dev") if p.severity == "error"]
    if path is None:
        assert errors == []
        return
    assert [p.path for p in errors] == [f"manager.kind.registryMirrors.{path}"], errors
    assert said in errors[0].message + errors[0].hint
