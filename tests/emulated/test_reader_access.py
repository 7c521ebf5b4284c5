"""How the dispatcher reaches a worker: a whole kubeconfig, or a token paired with the API
server and CA its ClusterProfile publishes (clusters that joined through the inventory)."""

from __future__ import annotations

from typing import Any

import yaml

from controller.reader_access import profile_name, resolve
from tests.helpers.fleet_harness import reader_secret, reader_token_secret

PROFILE = {
    "metadata": {"name": "gke-new", "namespace": "kueue-system"},
    "status": {
        "accessProviders": [
            {"name": "google", "cluster": {}},  # no server yet: skipped
            {
                "name": "secretreader",
                "cluster": {
                    "server": "https://10.0.0.9:6443",
                    "certificate-authority-data": "Q0EK",
                    "extensions": [{"name": "client.authentication.k8s.io/exec"}],
                },
            },
        ]
    },
}


def token_secret(token: str = "s3cret") -> dict[str, Any]:
    return reader_token_secret("gke-new", f"{token}\n")


def test_a_whole_kubeconfig_is_used_as_it_is() -> None:
    kubeconfig = {"clusters": [{"name": "w1", "cluster": {"server": "https://w1"}}]}
    access = resolve("w1", reader_secret("w1", kubeconfig), None, {})
    assert yaml.safe_load(access.kubeconfig or "") == kubeconfig


def test_a_token_is_paired_with_the_profiles_server_and_ca() -> None:
    access = resolve("gke-new", token_secret(), None, {"gke-new": PROFILE})
    config = yaml.safe_load(access.kubeconfig or "")
    assert config["clusters"][0]["cluster"] == {
        "server": "https://10.0.0.9:6443",
        "certificate-authority-data": "Q0EK",
    }
    assert config["users"][0]["user"] == {"token": "s3cret"}  # the newline is not sent
    context = config["contexts"][0]
    assert config["current-context"] == context["name"] == "gke-new"


def test_the_profile_named_by_the_multikueuecluster_is_used() -> None:
    cluster = {"spec": {"clusterSource": {"clusterProfileRef": {"name": "gke-new"}}}}
    assert profile_name(cluster, "renamed") == "gke-new"
    assert profile_name(None, "renamed") == "renamed"
    access = resolve("renamed", token_secret(), cluster, {"gke-new": PROFILE})
    assert "https://10.0.0.9:6443" in (access.kubeconfig or "")


def test_why_a_worker_cannot_be_reached() -> None:
    missing = resolve("gke-new", token_secret(), None, {})
    assert missing.kubeconfig is None
    assert "no ClusterProfile gke-new" in missing.reason
    assert "dispatcher.inventory" in missing.reason

    bare = {"metadata": {"name": "gke-new"}, "status": {"accessProviders": [{"name": "x"}]}}
    no_server = resolve("gke-new", token_secret(), None, {"gke-new": bare})
    assert no_server.kubeconfig is None
    assert "no access provider with a server" in no_server.reason

    empty = resolve("gke-new", {"metadata": {"name": "odd"}, "data": {}}, None, {})
    assert empty.reason == "reader Secret odd has neither a `kubeconfig` nor a `token` key"
