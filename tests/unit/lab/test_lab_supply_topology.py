"""The benchmark spec: scaling rules, the message mix they give, and refused specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from courier.lab.supply import destinations, kinds, mix, topology

EXPERIMENTS = Path(__file__).parents[3] / "experiments"


def test_horizontal_scales_locations_and_keeps_rates() -> None:
    spec = topology.parse({"horizontal": {"sm": 4, "dc": 2, "sp": 3}, "rates": {"orders": 0.5}})
    plan = spec.plan(3, "horizontal")
    assert plan.locations == {"sm": 12, "dc": 6, "sp": 9, "hq": 1}
    assert plan.rates["orders"] == 0.5
    assert len(plan.all_names()) == 28


@pytest.mark.parametrize("topology_name", ["vertical", "freeform"])
def test_vertical_and_freeform_keep_locations_and_scale_rates(topology_name: str) -> None:
    spec = topology.parse({topology_name: {"sm": 3, "dc": 1, "sp": 1}})
    plan = spec.plan(4, topology_name)
    assert plan.locations == {"sm": 3, "dc": 1, "sp": 1, "hq": 1}
    assert plan.rates == {name: rate * 4 for name, rate in topology.RATES.items()}


@pytest.mark.parametrize(
    ("topology_name", "base"), [("horizontal", 1), ("horizontal", 7), ("vertical", 5)]
)
def test_the_default_rates_give_the_target_mix(topology_name: str, base: int) -> None:
    plan = topology.parse({}).plan(base, topology_name)
    assert mix.of(plan).shares() == pytest.approx(mix.TARGET)


def test_messages_per_second_count_each_subscription_copy() -> None:
    plan = topology.parse({}).plan(2, "horizontal")  # 10 SMs, 2 DCs, 4 SPs
    rates = mix.kinds_per_second(plan)
    assert rates["priceUpdate"] == pytest.approx(topology.RATES["price_updates"] * 10)
    assert rates["callForOffers"] == pytest.approx(topology.RATES["purchases"] * 2 * 2)
    assert rates["order"] == pytest.approx(topology.RATES["orders"] * 10)
    assert mix.of(plan).total == pytest.approx(2 * 56)


def test_every_kind_has_one_destination_and_the_listed_modes() -> None:
    non_persistent = {k.name for k in kinds.KINDS.values() if not k.persistent}
    assert non_persistent == {
        "statInfoOrderDC", "statInfoShipDC", "statInfoSM", "productAnnouncement", "creditCardHL",
    }  # fmt: skip
    assert {k.name for k in kinds.KINDS.values() if k.topic and not k.durable} == {
        "productAnnouncement",
        "creditCardHL",
    }
    assert sorted({k.interaction for k in kinds.KINDS.values()}) == list(range(1, 8))


def test_queue_names_map_back_to_their_kinds() -> None:
    plan = topology.parse({}).plan(1, "horizontal")
    names = destinations.queues(plan)
    assert "dc-000.order" in names and "hq-000.statInfoSM" in names
    assert {destinations.kind_of(name) for name in names} == {
        k.name for k in kinds.KINDS.values() if not k.topic
    }
    assert destinations.kind_of("callForOffers.f001:sp-000") == "callForOffers"
    assert destinations.kind_of("priceUpdate:sm-003") == "priceUpdate"
    assert destinations.kind_of("queue-00") is None
    assert destinations.subscriptions(plan, "sp-001", "sp") == [
        "callForOffers.f000",
        "callForOffers.f001",
    ]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"benchmark": {"topology": "diagonal"}}, "topology"),
        ({"rates": {"orderz": 1.0}}, "[rates]"),
        ({"rates": {"orders": -1}}, "negative"),
        ({"sizes": {"order": {}}}, "sizes of order"),
        ({"handlers": {"nothing": 1}}, "[handlers]"),
        ({"horizontal": {"sm": 0}}, "one or more"),
        ({"search": {"start": 8, "max_base": 4}}, "start"),
        ({"run": {"duration_s": 10, "warmup_s": 8, "cooldown_s": 4}}, "warmup_s"),
        ({"extra": {}}, "unknown tables"),
    ],
)
def test_a_wrong_spec_is_refused_with_its_reason(raw: dict[str, object], words: str) -> None:
    with pytest.raises(topology.SpecError, match=words.replace("[", r"\[").replace("]", r"\]")):
        topology.parse(raw)


@pytest.mark.parametrize("name", ["supply-smoke", "supply-horizontal", "supply-vertical"])
def test_the_shipped_specs_load(name: str) -> None:
    spec = topology.load(EXPERIMENTS / f"{name}.toml")
    assert spec.plan().locations["hq"] == 1
