"""CEL device selectors: compiled with the API server's words, evaluated as the allocator does.

Every expected message below was produced by k8s.io/dynamic-resource-allocation/cel v0.37.2
(cel-go v0.29.2), the compiler kube-apiserver v1.37.2 runs on ResourceClaims and DeviceClasses.
"""

from fractions import Fraction

import pytest

from gpu_lab.errors import CelCompileError
from gpu_lab.sim.dra.cel import CelRuntimeError, Semver, compile_selector

GPU = "gpu.nvidia.com"
EXPECTING = ("{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, "
             "STRING, BYTES, IDENTIFIER}")


def detail(expr: str) -> str:
    with pytest.raises(CelCompileError) as err:
        compile_selector(expr)
    return err.value.detail


def h100(**attrs):
    base = {"type": "gpu", "productName": "NVIDIA H100 80GB HBM3", "cudaComputeCapability": Semver.parse("9.0.0")}
    return {GPU: {**base, **attrs}}


MEMORY = {GPU: {"memory": Fraction(81559 * 2**20)}}


# ------------------------------------------------------------------ what compiles


@pytest.mark.parametrize("expr", [
    'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-80GB"',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    'device.attributes["gpu.nvidia.com"].productName in ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]',
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')",
    'device.attributes["gpu.nvidia.com"].cudaComputeCapability.isGreaterThan(semver("8.0.0"))',
    'has(device.attributes["gpu.nvidia.com"].profile) || !device.allowMultipleAllocations',
    'device.driver == "x" ? true : false',
])
def test_the_selectors_the_lessons_use_compile(expr):
    assert compile_selector(expr).expression == expr


# ------------------------------------------------------------------ compile errors, verbatim


def test_a_missing_operand_is_a_syntax_error_with_cel_gos_caret():
    expr = "device.attributes['gpu.nvidia.com'].productName =="
    assert detail(expr) == (f"compilation failed: ERROR: <input>:1:51: Syntax error: mismatched input '<EOF>' "
                            f"expecting {EXPECTING}\n | {expr}\n | {'.' * 50}^")


def test_comparing_a_quantity_with_an_operator_is_a_type_error():
    expr = "device.capacity['gpu.nvidia.com'].memory >= '40Gi'"
    assert detail(expr) == ("compilation failed: ERROR: <input>:1:42: found no matching overload for '_>=_' "
                            f"applied to '(kubernetes.Quantity, string)'\n | {expr}\n | {'.' * 41}^")


@pytest.mark.parametrize("expr, error", [
    ('devices.driver == "gpu.nvidia.com"', "1:1: undeclared reference to 'devices' (in container '')"),
    ('device.drivr == "gpu.nvidia.com"', "1:7: undefined field 'drivr'"),
    ("device.driver == 1", "1:15: found no matching overload for '_==_' applied to '(string, int)'"),
    ("device.driver.startsWith(1)", "1:25: found no matching overload for 'startsWith' applied to 'string.(int)'"),
    ("device.driver.foo", "1:14: type 'string' does not support field selection"),
    ("has(device)", "1:5: invalid argument to has() macro"),
    ("device.driver in \"abc\"", "1:15: found no matching overload for '@in' applied to '(string, string)'"),
    ("device.attributes[1]", "1:18: found no matching overload for '_[_]' applied to "
                             "'(map(string, map(string, any)), int)'"),
    ("device.allowMultipleAllocations && device.driver", "1:42: expected type 'bool' but found 'string'"),
    ("(device.driver", "1:15: Syntax error: missing ')' at '<EOF>'"),
    ('(device.driver "x"', "1:16: Syntax error: mismatched input '\"x\"' expecting ')'"),
    ('device.driver == "a" "b"', "1:22: Syntax error: extraneous input '\"b\"' expecting <EOF>"),
    ("device.attributes[\"gpu.nvidia.com\"].", "1:37: Syntax error: no viable alternative at input '.'"),
    ("device.driver == 'x' ; ", "1:22: Syntax error: token recognition error at: ';'"),
])
def test_each_compile_error_is_cel_gos_first_line(expr, error):
    assert detail(expr).split("\n")[0] == f"compilation failed: ERROR: <input>:{error}"


def test_an_unlexable_character_is_reported_and_then_what_the_parser_makes_of_the_rest():
    lines = detail("device.driver & true").split("\n")
    assert [lines[0], lines[3]] == [
        "compilation failed: ERROR: <input>:1:15: Syntax error: token recognition error at: '& '",
        "ERROR: <input>:1:17: Syntax error: extraneous input 'true' expecting <EOF>"]


def test_a_selector_must_be_boolean():
    assert detail("device.driver") == "must evaluate to bool or the unknown type, not string"


def test_valid_cel_outside_the_modelled_subset_is_refused_in_one_clear_line():
    msg = detail("device.attributes['gpu.nvidia.com'].type.exists(x, x == 'gpu')")
    assert msg == "exists() is valid CEL but outside the CEL subset gpu-lab's simulator models for DRA selectors"


# ------------------------------------------------------------------ evaluation


def test_memory_capacity_against_a_quantity():
    sel = compile_selector('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0')
    assert sel.matches(GPU, h100(), MEMORY)
    assert not sel.matches(GPU, h100(), {GPU: {"memory": Fraction(23034 * 2**20)}})  # an L4


def test_strings_lists_and_boolean_operators():
    sel = compile_selector("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName "
                           "in ['NVIDIA H100 80GB HBM3', 'NVIDIA H200'] && !(device.attributes['gpu.nvidia.com']"
                           ".type == 'mig')")
    assert sel.matches(GPU, h100(), MEMORY)
    assert not sel.matches(GPU, h100(type="mig"), MEMORY)
    assert not sel.matches("other.example.com", h100(), MEMORY)


def test_versions_compare_as_semver():
    sel = compile_selector("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.9.0'))")
    assert sel.matches(GPU, h100(), MEMORY)
    assert not sel.matches(GPU, h100(cudaComputeCapability=Semver.parse("8.0.0")), MEMORY)


def test_a_domain_the_device_lacks_is_an_empty_map_and_has_tests_presence():
    sel = compile_selector("has(device.attributes['gpu.nvidia.com'].profile)")
    assert not sel.matches(GPU, h100(), MEMORY)
    assert sel.matches(GPU, h100(profile="1g.10gb"), MEMORY)


def test_a_missing_attribute_is_cel_gos_runtime_error_with_dras_hint():
    sel = compile_selector("device.attributes['gpu.nvidia.com'].profile == '1g.5gb'")
    with pytest.raises(CelRuntimeError) as err:
        sel.matches(GPU, h100(), MEMORY)
    assert str(err.value) == ("no such key: profile. consider using CEL optional chaining (.? followed by "
                              "orValue()) or guarding the check with has() for optional fields")


def test_a_deciding_operand_wins_over_an_error_in_the_other():
    sel = compile_selector("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")
    assert not sel.matches("other.example.com", {}, {})  # false && error: false, as CEL's commutative &&
