"""What a developer's shell (or this test session) may hold that a user following the
README has not: a test that runs the project as a user would starts from the environment
less these, so no fleet it makes sees another kubeconfig, an upstream cache of test files,
another virtualenv or another stack's passphrase file, and reads this host's settings
for a stack (stacks/local/, which the test session switches off) as a user's run does."""

from __future__ import annotations

from collections.abc import Mapping

AMBIENT = (
    "KUBECONFIG",
    "MKF_UPSTREAM_CACHE",
    "VIRTUAL_ENV",
    "PULUMI_CONFIG_PASSPHRASE_FILE",
    "MKF_HOST_SETTINGS",
)


def as_a_user(environ: Mapping[str, str], *more: str) -> dict[str, str]:
    """`environ` without AMBIENT and `more`."""
    dropped = {*AMBIENT, *more}
    return {k: v for k, v in environ.items() if k not in dropped}
