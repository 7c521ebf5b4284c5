"""Image references as container runtimes parse them (distribution/reference v0.6.0 and
go-digest v1.0.0; tests/real/test_image_references_real.py runs that parser on the same
cases): what it refuses is refused at `validate`, naming the key, and what it takes is taken."""

from __future__ import annotations

import pytest

from components.model.fieldtypes import _image_problem
from tests.helpers.fleet_config import problems_of
from tests.helpers.image_cases import CASES, HEX64


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
