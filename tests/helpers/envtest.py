"""The `apiserver` fixture: a real kube-apiserver with etcd for one test module, from
KUBEBUILDER_ASSETS (tests/helpers/apiserver.py); tests skip with `missing()`'s reason without it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.apiserver import running_apiserver


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with running_apiserver(tmp_path_factory.mktemp("envtest")) as kubeconfig:
        yield kubeconfig
