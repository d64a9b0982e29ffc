"""deep_equal / deep_derivative follow Kubernetes' Semantic.DeepEqual / DeepDerivative on decoded JSON."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arc_scaleset.kube.quantity import InvalidQuantity, parse_quantity
from arc_scaleset.kube.semantic import (
    MAP_FIELDS,
    POINTER_FIELDS,
    QUANTITY_FIELDS,
    QUANTITY_MAP_FIELDS,
    deep_derivative,
    deep_equal,
)
from tests.unit.kube.pod_fixtures import listener_pod_spec_desired, listener_pod_spec_live, runner_pod_template

# --- deep_equal: unset versus empty --------------------------------------------------------------------


@pytest.mark.parametrize("empty", [None, "", 0, False, [], {}])
def test_missing_plain_field_equals_its_zero_value(empty: Any) -> None:
    assert deep_equal({"name": "x"}, {"name": "x", "field": empty})
    assert deep_equal({"name": "x", "field": empty}, {"name": "x"})


@pytest.mark.parametrize(("left", "right"), [(None, []), (None, {}), (None, ""), ([], None), ({}, None)])
def test_top_level_null_equals_empty(left: Any, right: Any) -> None:
    assert deep_equal(left, right)


def test_all_zero_struct_equals_missing_struct() -> None:
    assert deep_equal({"resources": {}}, {})
    assert deep_equal({"resources": {"limits": {}, "requests": None, "claims": []}}, {})


@pytest.mark.parametrize(
    ("field", "zero"),
    [
        ("runAsUser", 0),
        ("runAsNonRoot", False),
        ("privileged", False),
        ("readOnlyRootFilesystem", False),
        ("allowPrivilegeEscalation", False),
        ("automountServiceAccountToken", False),
        ("terminationGracePeriodSeconds", 0),
        ("activeDeadlineSeconds", 0),
        ("enableServiceLinks", False),
        ("shareProcessNamespace", False),
        ("hostUsers", False),
        ("priority", 0),
        ("setHostnameAsFQDN", False),
        ("storageClassName", ""),
        ("securityContext", {}),
    ],
)
def test_pointer_field_set_to_its_zero_value_differs_from_unset(field: str, zero: Any) -> None:
    assert field in POINTER_FIELDS
    assert not deep_equal({field: zero}, {})
    assert not deep_equal({}, {field: zero})
    assert not deep_equal({field: zero}, {field: None})
    assert deep_equal({field: None}, {})
    assert deep_equal({field: zero}, {field: copy.deepcopy(zero)})


def test_pointer_struct_compares_its_target_with_struct_rules() -> None:
    assert deep_equal({"securityContext": {}}, {"securityContext": {"runAsUser": None, "procMount": None}})
    assert not deep_equal({"securityContext": {}}, {"securityContext": {"runAsUser": 0}})
    assert deep_equal({"securityContext": {"sysctls": []}}, {"securityContext": {}})


def test_a_struct_holding_a_set_pointer_is_not_zero() -> None:
    assert not deep_equal({"spec": {"securityContext": {}}}, {})
    assert not deep_equal({"spec": {"runAsUser": 0}}, {"spec": None})


def test_list_under_a_pointer_key_is_a_slice_where_nil_equals_empty() -> None:
    # podAffinity.requiredDuringScheduling... is a list; nodeAffinity's is a pointer to a NodeSelector.
    assert deep_equal({"requiredDuringSchedulingIgnoredDuringExecution": []}, {})
    assert not deep_equal({"requiredDuringSchedulingIgnoredDuringExecution": {}}, {})


def test_maps_compare_key_sets_exactly_and_nil_equals_empty() -> None:
    assert "labels" in MAP_FIELDS
    assert deep_equal({"labels": {}}, {})
    assert deep_equal({"labels": None}, {"labels": {}})
    assert not deep_equal({"labels": {"a": ""}}, {"labels": {}})
    assert not deep_equal({"labels": {"a": ""}}, {})
    assert not deep_equal({"labels": {"a": "1"}}, {"labels": {"b": "1"}})
    assert deep_equal({"labels": {"a": "1", "b": "2"}}, {"labels": {"b": "2", "a": "1"}})


def test_unknown_objects_are_structs_where_an_empty_member_equals_absence() -> None:
    assert deep_equal({"spec": {"a": ""}}, {"spec": {}})


# --- deep_equal: quantities ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("1", "1000m"),
        ("1Gi", "1073741824"),
        ("0.5", "500m"),
        ("1k", "1e3"),
        ("2", 2),
        ("0.25", 0.25),
        ("1.5Gi", "1536Mi"),
    ],
)
def test_resource_quantities_compare_by_value(left: Any, right: Any) -> None:
    for key in ("limits", "requests", "overhead"):
        assert deep_equal({key: {"cpu": left}}, {key: {"cpu": right}})
    assert deep_equal(
        {"resources": {"limits": {"ephemeral-storage": left}}}, {"resources": {"limits": {"ephemeral-storage": right}}}
    )


def test_different_quantities_are_unequal() -> None:
    assert not deep_equal({"limits": {"memory": "1Gi"}}, {"limits": {"memory": "1G"}})
    assert not deep_equal({"requests": {"cpu": "1"}}, {"requests": {"cpu": "1001m"}})


def test_quantity_maps_still_compare_their_key_sets() -> None:
    assert not deep_equal({"limits": {"cpu": "0"}}, {"limits": {}})
    assert deep_equal({"limits": {}}, {})


def test_size_limit_compares_by_value_and_is_a_pointer() -> None:
    assert "sizeLimit" in QUANTITY_FIELDS
    assert deep_equal({"emptyDir": {"sizeLimit": "1Gi"}}, {"emptyDir": {"sizeLimit": "1024Mi"}})
    assert not deep_equal({"emptyDir": {"sizeLimit": "0"}}, {"emptyDir": {}})


def test_non_pointer_quantity_unset_equals_zero() -> None:
    # resourceFieldRef.divisor is a plain Quantity: the API server writes "0" for an unset one.
    assert deep_equal(
        {"resourceFieldRef": {"resource": "limits.cpu"}},
        {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}},
    )
    assert not deep_equal({"resourceFieldRef": {"divisor": "1m"}}, {"resourceFieldRef": {}})


def test_unparsable_quantities_compare_as_text() -> None:
    with pytest.raises(InvalidQuantity):
        parse_quantity("lots")
    assert deep_equal({"limits": {"cpu": "lots"}}, {"limits": {"cpu": "lots"}})
    assert not deep_equal({"limits": {"cpu": "lots"}}, {"limits": {"cpu": "1"}})


def test_quantities_outside_quantity_fields_compare_as_text() -> None:
    assert not deep_equal({"value": "1"}, {"value": "1000m"})
    assert not deep_equal({"labels": {"cpu": "1"}}, {"labels": {"cpu": "1000m"}})


# --- deep_equal: lists and scalars ---------------------------------------------------------------------


def test_list_order_matters() -> None:
    assert not deep_equal({"args": ["a", "b"]}, {"args": ["b", "a"]})
    assert not deep_equal({"tolerations": [{"key": "a"}, {"key": "b"}]}, {"tolerations": [{"key": "b"}, {"key": "a"}]})
    assert not deep_equal({"args": ["a"]}, {"args": ["a", "a"]})


def test_list_elements_compare_semantically() -> None:
    assert deep_equal([{"name": "a", "value": ""}], [{"name": "a"}])
    assert deep_equal([{"resources": {"limits": {"cpu": "1"}}}], [{"resources": {"limits": {"cpu": "1000m"}}}])


def test_scalars_compare_exactly() -> None:
    assert not deep_equal("a", "a ")
    assert not deep_equal("", "x")
    assert not deep_equal(True, 1)
    assert not deep_equal(0, False)
    assert not deep_equal("1", 1)
    assert not deep_equal({"port": "8080"}, {"port": 8080})
    assert deep_equal(1, 1.0)
    assert not deep_equal(0.1 + 0.2, 0.3)
    assert deep_equal(2**70, 2**70)
    assert not deep_equal(2**70, 2**70 + 1)


def test_mismatched_shapes_are_unequal() -> None:
    assert not deep_equal({"a": []}, {"a": {}})
    assert not deep_equal({"a": "x"}, {"a": ["x"]})
    assert not deep_equal([], {"a": 1})


def test_realistic_runner_template_equals_itself_with_cosmetic_differences() -> None:
    live = runner_pod_template()
    desired = runner_pod_template()
    desired["spec"]["containers"][0]["resources"]["limits"]["memory"] = "4096Mi"
    desired["spec"]["containers"][1]["resources"]["limits"]["cpu"] = "1.5"
    desired["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] = "20480Mi"
    desired["spec"]["containers"][2]["args"] = ["--tls=false"]
    desired["spec"]["initContainers"][0]["env"] = None
    desired["spec"]["containers"][0]["command"] = ["/home/runner/run.sh"]
    del desired["spec"]["containers"][1]["command"]
    assert deep_equal(desired, live)
    desired["spec"]["containers"][2]["env"][5]["value"] = "60"
    assert not deep_equal(desired, live)


# --- deep_derivative -----------------------------------------------------------------------------------


def test_server_defaulted_listener_pod_is_derivative_of_the_desired_spec() -> None:
    desired, live = listener_pod_spec_desired(), listener_pod_spec_live()
    assert deep_derivative(desired, live)
    assert not deep_equal(desired, live)


def test_changed_image_is_not_derivative() -> None:
    live = listener_pod_spec_live()
    live["containers"][0]["image"] = "ghcr.io/actions/gha-runner-scale-set-controller:0.14.1"
    assert not deep_derivative(listener_pod_spec_desired(), live)


def test_extra_desired_env_is_not_derivative() -> None:
    desired = listener_pod_spec_desired()
    desired["containers"][0]["env"].append({"name": "LOG_LEVEL", "value": "debug"})
    assert not deep_derivative(desired, listener_pod_spec_live())


def test_desired_port_missing_from_the_live_pod_is_not_derivative() -> None:
    live = listener_pod_spec_live()
    live["containers"][0]["ports"] = []
    assert not deep_derivative(listener_pod_spec_desired(), live)
    del live["containers"][0]["ports"]
    assert not deep_derivative(listener_pod_spec_desired(), live)


def test_changed_desired_port_is_not_derivative() -> None:
    desired = listener_pod_spec_desired()
    desired["containers"][0]["ports"][0]["containerPort"] = 9090
    assert not deep_derivative(desired, listener_pod_spec_live())


def test_port_removed_from_the_desired_spec_is_invisible_to_derivative() -> None:
    # As in Go: the desired list is a prefix of the live one. The listener controller catches removed ports
    # with its own check (live container has more ports than desired).
    desired = listener_pod_spec_desired()
    desired["containers"][0]["ports"] = []
    assert deep_derivative(desired, listener_pod_spec_live())


def test_reordered_tolerations_are_not_derivative() -> None:
    desired = listener_pod_spec_desired()
    desired["tolerations"].insert(0, {"key": "node.kubernetes.io/not-ready", "operator": "Exists"})
    assert not deep_derivative(desired, listener_pod_spec_live())


def test_derivative_compares_quantities_by_value() -> None:
    desired = listener_pod_spec_desired()
    desired["containers"][0]["resources"]["limits"]["memory"] = "268435456"
    assert deep_derivative(desired, listener_pod_spec_live())
    desired["containers"][0]["resources"]["limits"]["memory"] = "257Mi"
    assert not deep_derivative(desired, listener_pod_spec_live())


def test_derivative_requires_every_desired_map_key_even_with_an_empty_value() -> None:
    assert not deep_derivative({"nodeSelector": {"pool": ""}}, {"nodeSelector": {"zone": "a"}})
    assert deep_derivative({"nodeSelector": {"pool": ""}}, {"nodeSelector": {"pool": "ci"}})
    assert not deep_derivative({"nodeSelector": {"a": "1", "b": "2"}}, {"nodeSelector": {"a": "1"}})
    assert deep_derivative({"nodeSelector": {}}, {"nodeSelector": {"a": "1"}})


def test_derivative_compares_set_numbers_and_booleans_exactly_even_when_zero() -> None:
    assert not deep_derivative({"priority": 0}, {"priority": 1000})
    assert deep_derivative({"priority": 0}, {"priority": 0})
    assert not deep_derivative({"stdin": False}, {"stdin": True})
    assert deep_derivative({"hostPort": 0}, {})  # a non-pointer int the server omitted is 0
    assert not deep_derivative({"hostPort": 1}, {})


def test_derivative_fails_when_a_set_desired_pointer_is_unset_live() -> None:
    assert not deep_derivative({"automountServiceAccountToken": False}, {})
    assert not deep_derivative({"securityContext": {}}, {"securityContext": None})
    assert deep_derivative({"securityContext": {}}, {"securityContext": {"runAsUser": 1}})


def test_derivative_ignores_unset_and_empty_desired_values() -> None:
    live = {"name": "x", "args": ["a"], "labels": {"a": "1"}, "dnsPolicy": "ClusterFirst"}
    assert deep_derivative(None, live)
    assert deep_derivative({}, live)
    assert deep_derivative({"name": "", "args": [], "labels": {}, "dnsPolicy": None}, live)
    assert deep_derivative({"name": "x", "ignored": None}, live)


def test_derivative_of_a_missing_live_struct_compares_against_zero() -> None:
    assert deep_derivative({"resources": {"limits": {}}}, {})
    assert not deep_derivative({"resources": {"limits": {"cpu": "1"}}}, {})
    assert deep_derivative({"resourceFieldRef": {"divisor": "0"}}, {"resourceFieldRef": {}})


def test_derivative_rejects_mismatched_shapes() -> None:
    assert not deep_derivative({"a": {"b": 1}}, {"a": [1]})
    assert not deep_derivative({"a": ["x"]}, {"a": "x"})
    assert not deep_derivative({"a": 1}, {"a": "1"})
    assert not deep_derivative({"a": True}, {"a": 1})


# --- properties ----------------------------------------------------------------------------------------

KEYS = st.sampled_from(
    ["name", "image", "value", "spec", "items", "env", "labels", "limits", "sizeLimit", "securityContext", "runAsUser"]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["", "a", "b", "1", "1000m", "1Gi", "1073741824", "x y"]),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=5)),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_deep_equal_is_reflexive(value: Any) -> None:
    assert deep_equal(value, copy.deepcopy(value))
    assert deep_derivative(value, copy.deepcopy(value))


@given(JSON_VALUES, JSON_VALUES)
def test_deep_equal_is_symmetric(left: Any, right: Any) -> None:
    assert deep_equal(left, right) == deep_equal(right, left)


def _context_free_rewrite(value: Any, parent: str | None, draw: st.DrawFn) -> Any:
    """An equivalent value: zero fields dropped or nulled, [] <-> None, quantities respelled."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        # Objects under map and quantity keys compare as maps: their members are never optional.
        is_map = parent in MAP_FIELDS or parent in QUANTITY_MAP_FIELDS or parent in QUANTITY_FIELDS
        is_map = is_map or parent == "__quantity__"
        for key, item in value.items():
            if not is_map and key not in POINTER_FIELDS and _zero(item) and draw(st.booleans()):
                if draw(st.booleans()):
                    out[key] = None
                continue  # drop it
            # A key inside a plain map (labels, annotations) is data, never a field name: its value is not
            # a quantity even when the key happens to read "sizeLimit".
            if parent in QUANTITY_MAP_FIELDS:
                child_parent = "__quantity__"
            elif is_map:
                child_parent = "__map_value__"
            else:
                child_parent = key
            out[key] = _context_free_rewrite(item, child_parent, draw)
        return out
    if isinstance(value, list):
        if not value and draw(st.booleans()):
            return None
        return [_context_free_rewrite(item, None, draw) for item in value]
    if isinstance(value, str) and (parent in QUANTITY_FIELDS or parent == "__quantity__"):
        return _respell(value, draw)
    return value


def _respell(text: str, draw: st.DrawFn) -> str:
    try:
        quantity = parse_quantity(text)
    except InvalidQuantity:
        return text
    milli = quantity.value * 1000
    return draw(st.sampled_from([quantity.canonical(), f"{milli.numerator}m" if milli.denominator == 1 else text]))


def _zero(value: Any) -> bool:
    return value is None or value is False or (type(value) in (str, int, list, dict) and not value)


@st.composite
def equivalent_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    value = draw(JSON_VALUES)
    return value, _context_free_rewrite(value, None, draw)


@settings(max_examples=300)
@given(equivalent_pairs())
def test_equivalent_rewrites_are_equal_and_derivative_both_ways(pair: tuple[Any, Any]) -> None:
    original, rewritten = pair
    assert deep_equal(original, rewritten)
    assert deep_equal(rewritten, original)
    assert deep_derivative(original, rewritten)
    assert deep_derivative(rewritten, original)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(sorted(QUANTITY_MAP_FIELDS)))
def test_whole_quantities_equal_their_milli_spelling(n: int, field: str) -> None:
    assert deep_equal({field: {"memory": f"{n}"}}, {field: {"memory": f"{n * 1000}m"}})
    assert deep_derivative({field: {"memory": f"{n}"}}, {field: {"memory": f"{n * 1000}m"}})


def _leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to non-empty string leaves."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _leaf_paths(item, (*path, key))]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _leaf_paths(item, (*path, index))]
    return [path] if isinstance(value, str) and value else []


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = new


@given(JSON_VALUES.filter(lambda v: bool(_leaf_paths(v))), st.data())
def test_changing_any_non_empty_string_leaf_breaks_equality_and_derivation(value: Any, data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(_leaf_paths(value)))
    changed = copy.deepcopy(value)
    if path:
        _set(changed, path, "changed!")  # never a quantity, never equal to a drawn leaf
    else:
        changed = "changed!"
    assert not deep_equal(value, changed)
    assert not deep_derivative(value, changed)


def _add_server_defaults(value: Any, parent: str | None, draw: st.DrawFn) -> Any:
    """What an API server may add: new struct fields and elements appended to lists."""
    if isinstance(value, dict):
        out = {key: _add_server_defaults(item, key, draw) for key, item in value.items()}
        if parent not in MAP_FIELDS and parent not in QUANTITY_MAP_FIELDS and draw(st.booleans()):
            out.setdefault("defaultedByServer", draw(SCALARS))
        return out
    if isinstance(value, list):
        out_list = [_add_server_defaults(item, None, draw) for item in value]
        return out_list + draw(st.lists(SCALARS, max_size=2))
    return value


@st.composite
def defaulted_pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    value = draw(JSON_VALUES)
    return value, _add_server_defaults(value, None, draw)


@given(defaulted_pairs())
def test_server_additions_keep_the_live_object_derivative(pair: tuple[Any, Any]) -> None:
    desired, live = pair
    assert deep_derivative(desired, live)
