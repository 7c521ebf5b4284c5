"""The controller's settings file: every mistake refused at start, one line naming the key,
what is wrong and the fix; the silently-wrong values of old (a quoted "false" turning
inventory on, a zero resync period spinning a core) refused; and the settings the stack
renders for the controller always accepted."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
import yaml

from components.checks.load import load_stack
from components.objects.fleet import build_fleet
from controller.settings import SettingsError, load_settings
from tests.helpers.fleet_config import PEM, as_deployed, base, find, fleet

ROOT = Path(__file__).resolve().parents[2]


def refused(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    for line in caught.value.lines:
        assert line.startswith(f"{path}: ") and "fix: " in line and "\n" not in line, line
    return [line.removeprefix(f"{path}: ") for line in caught.value.lines]


@pytest.mark.parametrize(
    ("text", "where", "what"),
    [
        ("inventory: 'false'\n", "inventory: 'false'", "valid boolean"),
        ("inventory: yes please\n", "inventory: 'yes please'", "valid boolean"),
        ("resyncSeconds: 0\n", "resyncSeconds: 0", "greater than or equal to 0.1"),
        ("resyncSeconds: 100000\n", "resyncSeconds: 100000", "less than or equal to 3600"),
        ("concurrentWrites: 0\n", "concurrentWrites: 0", "greater than or equal to 1"),
        ("concurrentWrites: 1.5\n", "concurrentWrites: 1.5", "valid integer"),
        ("staleAfterSeconds: -5\n", "staleAfterSeconds: -5", "greater than 0"),
        ("staleAfterSeconds: abc\n", "staleAfterSeconds: 'abc'", "valid number"),
        ("staleAfterSeconds: .nan\n", "staleAfterSeconds: nan", "less than or equal"),
        ("leaseDurationSeconds: 0\n", "leaseDurationSeconds: 0", "greater than or equal"),
        ("namespace: 42\n", "namespace: 42", "valid string"),
        ("namespace: Fleet_System\n", "namespace: 'Fleet_System'", "not a valid name"),
        ('namespace: "fleet\\n"\n', "namespace: 'fleet\\n'", "not a valid name"),
        ("kueueNamespace: [a]\n", "kueueNamespace: ['a']", "valid string"),
        ("leaseName: UPPER\n", "leaseName: 'UPPER'", "not a valid name"),
        ("workerSecretLabel: 'bad key!'\n", "workerSecretLabel: 'bad key!'", "not a label"),
        ("metricsPort: 99999\n", "metricsPort: 99999", "less than or equal to 65535"),
        ("metricsPort: 0\n", "metricsPort: 0", "greater than or equal to 1"),
        ("metricsPort: '8080'\n", "metricsPort: '8080'", "valid integer"),
        ("just a string\n", "(top level): 'just a string'", "mapping"),
        ("- a\n- b\n", "(top level): ['a', 'b']", "mapping"),
        ("clusterProfiles: w1\n", "clusterProfiles: 'w1'", "valid list"),
        ("clusterProfiles: [w1]\n", "clusterProfiles[0]: 'w1'", "mapping"),
        ("defaultPolicy: {strategy: Nope}\n", "defaultPolicy.strategy: 'Nope'", "not one of"),
        ("defaultPolicy: {widenAfter: 30}\n", "defaultPolicy.widenAfter: 30", "valid string"),
        (
            "defaultPolicy: {clusterSelector: {matchLabels: {gpu: true}}}\n",
            "defaultPolicy.clusterSelector.matchLabels.gpu: True",
            "valid string",
        ),
    ],
)
def test_each_wrong_value_is_refused_naming_the_key(
    tmp_path: Path, text: str, where: str, what: str
) -> None:
    (line,) = refused(tmp_path, text)
    assert line.startswith(f"{where} is refused: ") and what in line, line


def test_unknown_keys_get_a_did_you_mean(tmp_path: Path) -> None:
    (line,) = refused(tmp_path, "namespce: x\n")
    assert line.startswith("namespce: unknown key (did you mean 'namespace'?); fix: remove it")
    (line,) = refused(tmp_path, "defaultPolicy: {stratgy: BestFit}\n")
    assert line.startswith("defaultPolicy.stratgy: unknown key (did you mean 'strategy'?)")
    lines = refused(
        tmp_path, "clusterProfiles: [{name: w, server: 'https://s', tokenSecrets: t}]\n"
    )
    assert lines == [
        "clusterProfiles[0].tokenSecret: required and missing; fix: set tokenSecret to the "
        "Secret holding the worker's token (an object name: lowercase letters, digits, '-' "
        "and '.', at most 253 characters)",
        "clusterProfiles[0].tokenSecrets: unknown key (did you mean 'tokenSecret'?); fix: "
        "remove it or use one of name, server, tokenSecret, certificateAuthorityData, "
        "accessProvider",
    ]


def test_a_profile_entry_without_its_name_says_so(tmp_path: Path) -> None:
    lines = refused(tmp_path, "clusterProfiles:\n  - {server: 'https://w1:6443'}\n")
    assert sorted(line.split(":")[0] for line in lines) == [
        "clusterProfiles[0].name",
        "clusterProfiles[0].tokenSecret",
    ]
    assert all("required and missing; fix: set " in line for line in lines)


def test_every_mistake_is_listed_at_once(tmp_path: Path) -> None:
    lines = refused(tmp_path, "resyncSeconds: 0\nconcurrentWrites: 0\nmetricsPort: -1\n")
    assert [line.split(":")[0] for line in lines] == [
        "resyncSeconds",
        "metricsPort",
        "concurrentWrites",
    ]


def test_the_renew_deadline_follows_client_gos_rules(tmp_path: Path) -> None:
    """leaseDuration > renewDeadline > 1.2 x retryPeriod (client-go NewLeaderElector)."""
    (line,) = refused(tmp_path, "leaseDurationSeconds: 10\nleaseRenewDeadlineSeconds: 10\n")
    assert "leaseRenewDeadlineSeconds (10) must be below leaseDurationSeconds (10)" in line
    (line,) = refused(tmp_path, "leaseRenewSeconds: 5\nleaseRenewDeadlineSeconds: 6\n")
    assert "must be above 1.2 x leaseRenewSeconds (6)" in line
    # Derived: two thirds of 15 is 10, not above 1.2 x 9.
    (line,) = refused(tmp_path, "leaseRenewSeconds: 9\n")
    assert "the renew deadline (two thirds of leaseDurationSeconds, 10)" in line
    path = tmp_path / "ok.yaml"
    path.write_text(
        "leaseDurationSeconds: 30\nleaseRenewSeconds: 2\nleaseRenewDeadlineSeconds: 20\n"
    )
    assert load_settings(path).lease_renew_deadline_seconds == 20
    path.write_text("{}\n")
    assert load_settings(path).lease_renew_deadline_seconds is None  # 10 s, from 15 s


def test_rules_across_keys(tmp_path: Path) -> None:
    (line,) = refused(tmp_path, "leaseDurationSeconds: 10\nleaseRenewSeconds: 10\n")
    assert "leaseRenewSeconds (10) must be below leaseDurationSeconds (10)" in line
    (line,) = refused(
        tmp_path,
        "clusterProfiles:\n"
        "  - {name: w1, server: 'https://a', tokenSecret: t1}\n"
        "  - {name: w1, server: 'https://b', tokenSecret: t2}\n",
    )
    assert "the name(s) w1 appear more than once" in line


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("a: [\n", "not valid YAML at line 2, column 1: "),
        ("\tnamespace: x\n", "not valid YAML at line 1, column 1: "),
        ("a: *nowhere\n", "not valid YAML at line 1, column 4: found undefined alias"),
        (
            "namespace: a\ninventory: true\nnamespace: b\n",
            "not valid YAML at line 3, column 1: the key 'namespace' is given twice",
        ),
        (
            "defaultPolicy:\n  strategy: BestFit\n  strategy: MostFreeQuota\n",
            "not valid YAML at line 3, column 3: the key 'strategy' is given twice",
        ),
    ],
)
def test_bad_yaml_says_where(tmp_path: Path, text: str, what: str) -> None:
    (line,) = refused(tmp_path, text)
    assert line.startswith(what), line


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"nope.yaml: cannot read the settings file: No such"):
        load_settings(tmp_path / "nope.yaml")


def test_a_good_file_and_the_defaults(tmp_path: Path) -> None:
    assert load_settings(None).resync_seconds == 15
    path = tmp_path / "config.yaml"
    path.write_text("")
    assert load_settings(path).concurrent_writes == 16  # empty: every default
    path.write_text(
        "inventory: true\nresyncSeconds: 2\nstaleAfterSeconds: 30.5\nmetricsPort: 9090\n"
        "defaultPolicy: {strategy: BestFit, widenAfter: 90s}\n"
        "clusterProfiles:\n  - {name: w1, server: 'https://w1:6443', tokenSecret: w1-token}\n"
    )
    settings = load_settings(path)
    assert settings.inventory is True
    assert (settings.resync_seconds, settings.stale_after_seconds) == (2, 30.5)
    assert settings.metrics_port == 9090
    assert settings.default_policy.strategy == "BestFit"
    assert settings.default_policy.widen_after_seconds == 90
    (profile,) = settings.cluster_profiles
    assert (profile.name, profile.token_secret, profile.access_provider) == (
        "w1",
        "w1-token",
        "secretreader",
    )


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "defaultPolicy:\n  <<: {strategy: BestFit, clustersToNominate: 3}\n"
        "  clustersToNominate: 2\n"
    )
    policy = load_settings(path).default_policy
    assert (policy.strategy, policy.clusters_to_nominate) == ("BestFit", 2)


def rendered_settings(objects: list[dict]) -> str:
    (config_map,) = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "multikueue-fleet-dispatcher"
    ]
    return as_deployed(config_map["data"]["config.yaml"])


@pytest.mark.parametrize("stack", sorted(p.name for p in (ROOT / "stacks").glob("Pulumi.*.yaml")))
def test_the_settings_rendered_for_every_stack_are_accepted(tmp_path: Path, stack: str) -> None:
    copy = tmp_path / stack
    shutil.copyfile(ROOT / "stacks" / stack, copy)
    spec, _ = load_stack(str(copy))
    if not spec.dispatcher.enabled:
        pytest.skip(f"{stack} runs no dispatcher")
    (manager,) = [c for c in build_fleet(spec) if c.cluster.role == "manager"]
    path = tmp_path / "config.yaml"
    path.write_text(rendered_settings(list(manager.objects)))
    assert load_settings(path).namespace == "multikueue-fleet-system"


@pytest.mark.parametrize(
    "variant",
    [
        {},
        {"dispatcher": {"inventory": True}, "credentials": {"mode": "clusterProfile"}},
        {"credentials": {"mode": "clusterProfile"}},
    ],
)
def test_the_settings_every_builder_variant_renders_are_accepted(
    tmp_path: Path, variant: dict
) -> None:
    config = {**base(), **variant}
    (config_map,) = find(fleet(config)["manager"], "ConfigMap", "multikueue-fleet-dispatcher")
    path = tmp_path / "config.yaml"
    path.write_text(as_deployed(config_map["data"]["config.yaml"]))
    settings = load_settings(path)
    assert settings.inventory is bool(variant.get("dispatcher"))
    assert bool(settings.cluster_profiles) is ("credentials" in variant)


@pytest.mark.parametrize(
    ("server", "ca", "where", "what"),
    [
        ("w1.example:6443", "", "server", "is not an https:// URL with a host"),
        ("http://w1.example:6443", "", "server", "is not an https:// URL with a host"),
        ("https://:6443", "", "server", "is not an https:// URL with a host"),
        ("https://w1.example:99999", "", "server", "has an invalid port"),
        # Kueue v0.19.2 isValidHostname: neither an IP nor a DNS name, so untrusted.
        ("https://w1_bad:6443", "", "server", "untrusted server endpoint"),
        ("https://user@w1:6443", "", "server", "has a user@, a query or a fragment"),
        ("https://w1:6443?x=1", "", "server", "has a user@, a query or a fragment"),
        ("https://w1:6443#f", "", "server", "has a user@, a query or a fragment"),
        (" https://w1:6443", "", "server", "has spaces around it"),
        ("https://w1:6443 ", "", "server", "has spaces around it"),
        ("https://w1:6443", PEM, "certificateAuthorityData", "is PEM text"),
        ("https://w1:6443", "not base64!", "certificateAuthorityData", "is not base64"),
        ("https://w1:6443", "aGVsbG8=", "certificateAuthorityData", "decodes to no PEM"),
    ],
)
def test_a_profile_the_clusterprofile_crd_would_refuse_is_refused_at_start(
    tmp_path: Path, server: str, ca: str, where: str, what: str
) -> None:
    """The ClusterProfile CRD (cluster-inventory-api v0.1.3): `server` is
    https://hostname:port, `certificate-authority-data` base64 of PEM (format: byte)."""
    entry = {"name": "w1", "server": server, "tokenSecret": "t1"}
    if ca:
        entry["certificateAuthorityData"] = ca
    (line,) = refused(tmp_path, yaml.safe_dump({"clusterProfiles": [entry]}))
    assert line.startswith(f"clusterProfiles[0].{where}: ") and what in line, line
    assert "base64 -w0 ca.crt" in line or "https://hostname:port" in line


def test_a_profile_as_the_stack_renders_it_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    entry = {
        "name": "w1",
        "server": "https://[fd00::1]:6443/prefix",
        "tokenSecret": "t1",
        "certificateAuthorityData": base64.b64encode(PEM.encode()).decode(),
    }
    path.write_text(yaml.safe_dump({"clusterProfiles": [entry]}))
    (profile,) = load_settings(path).cluster_profiles
    assert profile.server == entry["server"]
