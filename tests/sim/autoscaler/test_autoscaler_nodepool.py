"""NodePool spec.autoscaling and spec.pricePerHour: parsing, defaults, every bad input, nodes on demand."""

import copy

import pytest
import yaml

from gpu_lab.errors import GpuLabError, InvalidNodePool
from gpu_lab.gpus.catalog import get_model
from gpu_lab.gpus.pricing import node_price_per_hour
from gpu_lab.model.nodepool import (
    PoolAutoscaling,
    expand_node_pool,
    make_pool_node,
    node_pool,
    spec_duration,
)
from gpu_lab.model.quantity import QUANTITY_PATTERN

POOL = yaml.safe_load("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 1
  autoscaling: {minCount: 1, maxCount: 4, provisioningDelay: 7m}
  gpu: {model: H100-80GB, count: 8}
""")


def pool(**spec):
    doc = copy.deepcopy(POOL)
    for key, val in spec.items():
        if val is None:
            doc["spec"].pop(key, None)
        else:
            doc["spec"][key] = val
    return doc


def error(doc) -> str:
    with pytest.raises(GpuLabError) as exc:
        node_pool(doc)
    return str(exc.value)


# -- what a valid pool says ------------------------------------------------------------------


def test_autoscaling_is_read_with_seconds():
    p = node_pool(POOL)
    assert p.autoscaling == PoolAutoscaling(min_count=1, max_count=4, provisioning_delay=420.0)
    assert p.count == 1 and p.price_per_hour is None


def test_defaults_min_zero_and_five_minutes():
    p = node_pool(pool(count=0, autoscaling={"maxCount": 3}))
    assert p.autoscaling == PoolAutoscaling(0, 3, 300.0)


def test_count_defaults_to_min_count():
    p = node_pool(pool(count=None, autoscaling={"minCount": 2, "maxCount": 5}))
    assert p.count == 2
    assert [n.name for n in expand_node_pool(pool(count=None, autoscaling={"minCount": 2, "maxCount": 5}))] == [
        "h100-0", "h100-1"]


def test_a_pool_without_autoscaling_has_none():
    assert node_pool(pool(autoscaling=None)).autoscaling is None


def test_price_per_hour_overrides_the_catalog():
    doc = pool(pricePerHour=98.32)
    assert node_pool(doc).price_per_hour == 98.32
    n = expand_node_pool(doc)[0]
    assert node_price_per_hour(n.labels, n.capacity, n.raw["nodePool"]) == 98.32
    plain = expand_node_pool(POOL)[0]
    assert node_price_per_hour(plain.labels, plain.capacity, plain.raw["nodePool"]) == pytest.approx(
        8 * get_model("H100-80GB").price_per_hour)


def test_an_integer_price_is_a_float():
    assert node_pool(pool(pricePerHour=40)).price_per_hour == 40.0


# -- nodes on demand --------------------------------------------------------------------------


def test_node_n_follows_the_pool_naming():
    p = node_pool(POOL)
    later = p.node(7)
    assert later.name == "h100-7"
    assert later.pool == "h100"
    assert later.labels["kubernetes.io/hostname"] == "h100-7"
    assert later.allocatable == expand_node_pool(POOL)[0].allocatable
    assert later.devices["nvidia.com/gpu"] != p.node(0).devices["nvidia.com/gpu"]  # IDs follow the name
    assert make_pool_node(POOL, 7).devices == later.devices


def test_node_index_must_be_a_non_negative_integer():
    with pytest.raises(GpuLabError, match=r'NodePool "h100": node index must be a non-negative integer, got -1'):
        node_pool(POOL).node(-1)


def test_new_node_names_stay_within_63_characters():
    name = "p" * 60
    doc = pool(count=0, autoscaling={"maxCount": 3})
    doc["metadata"]["name"] = name
    assert node_pool(doc).node(2).name == f"{name}-2"
    with pytest.raises(GpuLabError, match=f'node name "{name}-100" must be no more than 63 characters'):
        node_pool(doc).node(100)


def test_max_count_names_are_checked_up_front():
    name = "p" * 61
    doc = pool(count=0, autoscaling={"maxCount": 11})
    doc["metadata"]["name"] = name
    assert error(doc) == (f'NodePool "{name}" is invalid: metadata.name: Invalid value: "{name}": node name '
                          f'"{name}-10" must be no more than 63 characters')


# -- bad input: one line, every error at once ------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"autoscaling": {"minCount": 3, "maxCount": 2}, "count": 3},
         "spec.autoscaling.maxCount: Invalid value: 2: must be greater than or equal to `minCount`"),
        ({"autoscaling": {"minCount": -1, "maxCount": 2}},
         "spec.autoscaling.minCount: Invalid value: -1: must be greater than or equal to 0"),
        ({"autoscaling": {"maxCount": -2}, "count": 0},
         "spec.autoscaling.maxCount: Invalid value: -2: must be greater than or equal to 0"),
        ({"autoscaling": {"minCount": 0}}, "spec.autoscaling.maxCount: Required value"),
        ({"autoscaling": {"maxCount": "4"}}, "spec.autoscaling.maxCount: Invalid value: '4': must be an integer"),
        ({"autoscaling": {"maxCount": 6000}},
         "spec.autoscaling.maxCount: Invalid value: 6000: must be no more than 5000 (Kubernetes supports "
         "clusters of up to 5000 nodes)"),
        ({"autoscaling": {"maxCount": 4, "provisioningDelay": "soon"}},
         'spec.autoscaling.provisioningDelay: Invalid value: "soon": must be a duration such as 90s, 5m or 1h30m'),
        ({"autoscaling": {"maxCount": 4, "provisioningDelay": "-5m"}},
         'spec.autoscaling.provisioningDelay: Invalid value: "-5m": must be greater than or equal to 0'),
        ({"autoscaling": {"maxCount": 4, "provisioningDelay": 300}},
         "spec.autoscaling.provisioningDelay: Invalid value: 300: must be a duration string such as 90s, 5m "
         "or 1h30m"),
        ({"autoscaling": {"maxCount": 4, "max": 9}},
         "spec.autoscaling.max: unknown field (known: minCount, maxCount, provisioningDelay)"),
        ({"autoscaling": [1, 4]},
         "spec.autoscaling: must be a mapping with minCount, maxCount and provisioningDelay"),
        ({"count": 5}, "spec.count: Invalid value: 5: must be between spec.autoscaling.minCount (1) and "
                       "spec.autoscaling.maxCount (4)"),
        ({"count": 0}, "spec.count: Invalid value: 0: must be between spec.autoscaling.minCount (1) and "
                       "spec.autoscaling.maxCount (4)"),
        ({"count": -1}, "spec.count: Invalid value: -1: must be greater than or equal to 0"),
        ({"pricePerHour": "cheap"}, "spec.pricePerHour: Invalid value: 'cheap': must be a number (USD per node-hour)"),
        ({"pricePerHour": -3}, "spec.pricePerHour: Invalid value: -3: must be greater than or equal to 0"),
        ({"pricePerHour": True}, "spec.pricePerHour: Invalid value: True: must be a number (USD per node-hour)"),
        ({"pricePerHour": float("nan")}, "spec.pricePerHour: Invalid value: nan: must be a finite number"),
    ],
)
def test_bad_autoscaling_and_price(spec, message):
    assert error(pool(**spec)) == f'NodePool "h100" is invalid: {message}'
    with pytest.raises(InvalidNodePool):
        expand_node_pool(pool(**spec))


def test_count_is_still_required_without_autoscaling():
    assert error(pool(count=None, autoscaling=None)) == 'NodePool "h100" is invalid: spec.count: Required value'


def test_all_errors_listed_at_once_in_field_order():
    doc = pool(count=9, autoscaling={"minCount": -1, "maxCount": "x", "provisioningDelay": "1 hour"},
               pricePerHour="free", cpu="lots")
    assert error(doc) == (
        'NodePool "h100" is invalid: [spec.autoscaling.minCount: Invalid value: -1: must be greater than or '
        "equal to 0, spec.autoscaling.maxCount: Invalid value: 'x': must be an integer, "
        'spec.autoscaling.provisioningDelay: Invalid value: "1 hour": must be a duration such as 90s, 5m or '
        f"1h30m, spec.cpu: quantities must match the regular expression '{QUANTITY_PATTERN}', "
        "spec.pricePerHour: Invalid value: 'free': must be a number (USD per node-hour)]")


def test_count_range_is_not_checked_against_broken_bounds():
    # maxCount < minCount is the error; a count between neither is not a second one
    assert error(pool(count=2, autoscaling={"minCount": 3, "maxCount": 1})) == (
        'NodePool "h100" is invalid: spec.autoscaling.maxCount: Invalid value: 1: must be greater than or '
        "equal to `minCount`")


# -- Go durations in spec fields --------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("0s", 0), ("0", 0),
                                               ("1.5h", 5400), ("250ms", 0.25)])
def test_spec_duration(text, seconds):
    assert spec_duration(text) == seconds


def test_never_only_where_allowed():
    assert spec_duration("Never", never=True) is None
    with pytest.raises(ValueError, match='Invalid value: "Never": must be a duration such as 90s, 5m or 1h30m$'):
        spec_duration("Never")
    with pytest.raises(ValueError, match=r'or 1h30m, or "Never"$'):
        spec_duration("later", never=True)
