"""DispatchPolicy objects and the controller's settings file: parsing, selection, errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from controller.model import Policy
from controller.policy_api import InvalidPolicy, crd, parse, policy_object, seconds, select
from controller.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def obj(name: str, **spec: object) -> dict:
    return {"metadata": {"name": name}, "spec": spec}


def test_round_trip_of_a_policy() -> None:
    policy = Policy(
        name="gpu",
        cluster_selector={"accelerator": "nvidia-tesla-t4"},
        strategy="BestFit",
        clusters_to_nominate=2,
        widen_after_seconds=90,
        when_nothing_fits="LeastLoaded",
    )
    parsed, queues = parse(policy_object("gpu", policy, ["training"]))
    assert parsed == policy
    assert queues == ("training",)
    assert "hedgeClusters" not in policy_object("gpu", policy)["spec"]  # the defaults: left out
    hedging = Policy(name="gpu", hedge_clusters=4, hedge_share=0.75)
    assert policy_object("gpu", hedging)["spec"]["hedgeSharePercent"] == 75
    assert parse(policy_object("gpu", hedging))[0] == hedging


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"strategy": "Random"}, "spec.strategy: 'Random' is refused: not one of"),
        ({"whenNothingFits": "Cry"}, "spec.whenNothingFits: 'Cry' is refused: not one of"),
        ({"clustersToNominate": 21}, "spec.clustersToNominate: 21 is refused: .* less than"),
        ({"clustersToNominate": True}, "spec.clustersToNominate: True is refused"),
        ({"hedgeClusters": 0}, "spec.hedgeClusters: 0 is refused: .* greater than"),
        ({"hedgeClusters": 21}, r"hedgeClusters: 21 is refused: .*fix: set .* from 1 \(off\)"),
        ({"hedgeSharePercent": 0.5}, "spec.hedgeSharePercent: 0.5 is refused"),
        ({"hedgeSharePercent": 101}, "spec.hedgeSharePercent: 101 is refused: .* from 1 to 100"),
        ({"widenAfter": "soon"}, "spec.widenAfter: 'soon' is refused: 'soon' is not a duration"),
        ({"clusterSelector": {"matchLabels": {"gpu": 1}}}, "matchLabels.gpu: 1 is refused"),
        ({"clusterSelector": {"matchLabels": {"a b": "x"}}}, "'a b' is not a label name"),
        ({"clusterSelector": {"matchLabels": {"{x}": "y"}}}, "'{x}' is not a label name"),
        ({"clusterQueues": "training"}, "spec.clusterQueues: 'training' is refused"),
        ({"clusterQueues": ["cq\n"]}, r"spec.clusterQueues\[0\]: 'cq\\n' is refused"),
        ({"stratgy": "BestFit"}, r"spec.stratgy: unknown key \(did you mean 'strategy'"),
    ],
)
def test_invalid_policies_say_why(spec: dict, message: str) -> None:
    with pytest.raises(InvalidPolicy) as caught:
        parse(obj("p", **spec))
    (line,) = caught.value.lines
    assert line.startswith("DispatchPolicy p: spec") and "; fix: " in line, line
    assert re.search(message, line), line


def test_a_spec_that_is_no_mapping() -> None:
    with pytest.raises(InvalidPolicy, match=r"DispatchPolicy p: spec: 'x' is refused: .*mapping"):
        parse({"metadata": {"name": "p"}, "spec": "x"})


def test_durations() -> None:
    assert seconds("90s") == 90
    assert seconds("1h30m") == 5400
    assert seconds("250ms") == 0.25


def test_selection_per_cluster_queue_with_conflicts_reported() -> None:
    chosen = select(
        [
            obj("b-default"),
            obj("a-default"),
            obj("gpu", clusterQueues=["training"], strategy="BestFit"),
            obj("gpu-too", clusterQueues=["training", "serving"]),
            obj("broken", strategy="Nope"),
        ]
    )
    fallback = Policy(name="built-in")
    assert chosen.for_queue("training", fallback).name == "gpu"
    assert chosen.for_queue("serving", fallback).name == "gpu-too"
    assert chosen.for_queue("other", fallback).name == "a-default"
    assert (
        chosen.problems["b-default"]
        == "policy a-default is already the default (no clusterQueues); this one is not used"
    )
    assert chosen.problems["gpu-too"] == "ClusterQueues training are already governed by gpu"
    assert "spec.strategy: 'Nope' is refused" in chosen.problems["broken"]
    assert select([]).for_queue("x", fallback) is fallback


def test_crd_schema_matches_what_parse_accepts() -> None:
    definition = crd()
    version = definition["spec"]["versions"][0]
    assert definition["metadata"]["name"] == "dispatchpolicies.dispatch.multikueue-fleet.io"
    assert definition["spec"]["scope"] == "Cluster"
    assert version["subresources"] == {"status": {}}
    props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert props["strategy"]["enum"] == ["MostFreeQuota", "BestFit", "OrderedSpillover"]
    assert props["clustersToNominate"]["maximum"] == 20
    assert (props["hedgeClusters"]["maximum"], props["hedgeSharePercent"]["maximum"]) == (20, 100)
    defaults = {k: v["default"] for k, v in props.items() if "default" in v}
    assert parse(obj("d", **defaults))[0] == Policy(name="d")


def test_settings_defaults_and_errors(tmp_path: Path) -> None:
    assert load_settings(None).namespace == "multikueue-fleet-system"
    good = tmp_path / "ok.yaml"
    good.write_text(
        "defaultPolicy:\n  strategy: BestFit\nclusterProfiles:\n"
        "  - {name: w1, server: 'https://w1:6443', tokenSecret: w1-token}\n"
    )
    settings = load_settings(good)
    assert settings.default_policy.strategy == "BestFit"
    assert settings.cluster_profiles[0].token_secret == "w1-token"
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespce: x\n")
    with pytest.raises(ValueError, match=r"namespce: unknown key \(did you mean 'namespace'"):
        load_settings(bad)
    worse = tmp_path / "worse.yaml"
    worse.write_text("defaultPolicy: {strategy: Nope}\n")
    with pytest.raises(ValueError, match=r"defaultPolicy\.strategy: 'Nope' is refused"):
        load_settings(worse)


def test_the_image_pins_the_same_versions_as_the_project() -> None:
    def pins(path: Path) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
        return dict(line.lower().split("==") for line in lines if "==" in line)

    image, project = pins(ROOT / "controller" / "requirements.txt"), pins(ROOT / "requirements.txt")
    assert image and all(project.get(name) == version for name, version in image.items())


def test_selection_is_remembered_while_the_objects_stay_the_same() -> None:
    def versioned(name: str, version: str, **spec: object) -> dict:
        made = obj(name, **spec)
        made["metadata"].update(uid=f"uid-{name}", resourceVersion=version)
        return made

    first = select([versioned("gpu", "1", clusterQueues=["training"])])
    assert select([versioned("gpu", "1", clusterQueues=["training"])]) is first
    changed = select([versioned("gpu", "2", clusterQueues=["training"], strategy="BestFit")])
    assert changed is not first
    assert changed.for_queue("training", Policy()).strategy == "BestFit"
    # Without a uid and a resourceVersion nothing says two objects are equal: parsed again.
    plain = [obj("gpu", clusterQueues=["training"])]
    assert select(plain) is not select(plain)
