"""Bad manifests and the exact one-line message each one gets.

The field-validation messages below were produced by the Kubernetes v1.37.2
validation code itself (``ValidatePodCreate``, ``ValidateDeployment``,
``ValidateJobCreate`` run on the same YAML); gpu-lab joins several errors with
", " where the API server wraps them in ``[...]``. Where the API server refuses
while decoding (a malformed quantity) we name the field instead.
"""

from pathlib import Path

import pytest

from gpu_lab.errors import GpuLabError, InvalidObject
from gpu_lab.model.scenario import load_scenario

SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
             "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
             r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
QUANTITY_RE = "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def pod(resources: str = "{}", extra: str = "", name: str = "p") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: c
    image: x
    resources: {resources}
{extra}"""


def deployment(selector: str, labels: str, extra: str = "") -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  selector: {selector}
  template:
    metadata: {{labels: {labels}}}
    spec:
{extra}      containers: [{{name: c, image: x}}]
"""


def job(extra: str = "", restart: str = "Never") -> str:
    return f"""apiVersion: batch/v1
kind: Job
metadata: {{name: train}}
spec:
{extra}  template:
    spec:
      restartPolicy: {restart}
      containers: [{{name: c, image: x}}]
"""


CASES = [
    ("fractional GPU (limit defaults the request, both are checked)",
     pod("{limits: {nvidia.com/gpu: 0.5}}"),
     'Pod "p" is invalid: [spec.containers[0].resources.limits[nvidia.com/gpu]: Invalid value: "500m": '
     'must be an integer, spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: "500m": '
     "must be an integer]"),
    ("GPU request differs from limit",
     pod("{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}"),
     'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be equal to '
     "nvidia.com/gpu limit of 2"),
    ("GPU request without a limit",
     pod("{requests: {nvidia.com/gpu: 1}}"),
     'Pod "p" is invalid: spec.containers[0].resources.limits: Required value: Limit must be set for '
     "non overcommitable resources"),
    ("malformed quantity",
     pod("{requests: {memory: 1GB}}"),
     'Pod "p" is invalid: spec.containers[0].resources.requests[memory]: Invalid value: "1GB": '
     f"quantities must match the regular expression {QUANTITY_RE}"),
    ("negative cpu",
     pod("{requests: {cpu: '-1'}}"),
     'Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater '
     "than or equal to 0"),
    ("cpu request above its limit (printed in canonical form)",
     pod("{requests: {cpu: '2'}, limits: {cpu: 1.5}}"),
     'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2": must be less than or '
     "equal to cpu limit of 1500m"),
    ("memory request above its limit",
     pod("{requests: {memory: 2Gi}, limits: {memory: 1024Mi}}"),
     'Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or '
     "equal to memory limit of 1Gi"),
    ("resource name without a domain",
     pod("{limits: {gpu: 1}}"),
     'Pod "p" is invalid: [spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must be a standard '
     'resource type or fully qualified, spec.containers[0].resources.limits[gpu]: Invalid value: "gpu": must '
     'be a standard resource for containers, spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": '
     'must be a standard resource type or fully qualified, spec.containers[0].resources.requests[gpu]: Invalid '
     'value: "gpu": must be a standard resource for containers]'),
    ("bad pod name", pod(name="Bad_Name"), f'Pod "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}'),
    ("missing pod name",
     "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: [{name: c, image: x}]}\n",
     'Pod "" is invalid: metadata.name: Required value: name or generateName is required'),
    ("no containers",
     "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n",
     'Pod "p" is invalid: spec.containers: Required value'),
    ("Exists toleration with a value",
     pod(extra="  tolerations: [{key: gpu, operator: Exists, value: 'true'}]"),
     'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: "true": value must be empty when '
     "`operator` is 'Exists'"),
    ("toleration with an unknown operator and effect",
     pod(extra="  tolerations: [{key: gpu, operator: In, effect: NoRun}]"),
     'Pod "p" is invalid: [spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", '
     '"Exists", spec.tolerations[0].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
     '"PreferNoSchedule", "NoExecute"]'),
    ("toleration without a key must use Exists",
     pod(extra="  tolerations: [{effect: NoSchedule}]"),
     'Pod "p" is invalid: spec.tolerations[0].operator: Invalid value: "": operator must be Exists when '
     '`key` is empty, which means "match all values and all keys"'),
    ("topology spread constraint",
     pod(extra="  topologySpreadConstraints: [{maxSkew: 0, whenUnsatisfiable: Always}]"),
     'Pod "p" is invalid: [spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than '
     "zero, spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty, "
     'spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Always": supported values: '
     '"DoNotSchedule", "ScheduleAnyway"]'),
    ("pod anti-affinity without a topologyKey",
     pod(extra="  affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
               "[{labelSelector: {matchLabels: {app: x}}}]}}"),
     'Pod "p" is invalid: [spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]'
     ".topologyKey: Required value: can not be empty, spec.affinity.podAntiAffinity."
     'requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "": name part must be '
     "non-empty, spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
     "Invalid value: \"\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
     # Go writes "'MyName',  or" with two spaces, and so do we
     "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]"),
    ("node affinity In without values",
     pod(extra="  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
               "{nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In}]}]}}}"),
     'Pod "p" is invalid: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution'
     ".nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` "
     "is 'In' or 'NotIn'"),
    ("two containers on one host port",
     pod(extra="  - {name: d, image: x, ports: [{containerPort: 81, hostPort: 8080}]}").replace(
         "resources: {}", "resources: {}\n    ports: [{containerPort: 80, hostPort: 8080}]"),
     'Pod "p" is invalid: spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"'),
    ("unknown priority class (the Priority admission plugin)",
     pod(extra="  priorityClassName: high"),
     'pods "p" is forbidden: no PriorityClass with name high was found'),
    ("priority set by hand",
     pod(extra="  priority: 5"),
     'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority '
     "admission controller computed 0 from the given PriorityClass name"),
    ("Deployment selector does not match the template",
     deployment("{matchLabels: {app: web}}", "{app: api}"),
     'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: {"app":"api"}: '
     "`selector` does not match template `labels`"),
    ("Deployment with restartPolicy Never",
     deployment("{matchLabels: {app: web}}", "{app: web}", "      restartPolicy: Never\n"),
     'Deployment.apps "web" is invalid: spec.template.spec.restartPolicy: Unsupported value: "Never": '
     'supported values: "Always"'),
    ("negative replicas",
     deployment("{matchLabels: {app: web}}", "{app: web}").replace("spec:\n  selector", "spec:\n  replicas: -1\n  selector"),
     'Deployment.apps "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'),
    ("Job without restartPolicy",
     job().replace("      restartPolicy: Never\n", ""),
     'Job.batch "train" is invalid: spec.template.spec.restartPolicy: Required value: valid values: '
     '"OnFailure", "Never"'),
    ("Job with negative parallelism",
     job("  parallelism: -2\n"),
     'Job.batch "train" is invalid: spec.parallelism: Invalid value: -2: must be greater than or equal to 0'),
    ("unknown kind", "apiVersion: v1\nkind: Foo\nmetadata: {name: x}\n",
     'no matches for kind "Foo" in version "v1"'),
    ("known kind, wrong version", "apiVersion: apps/v1beta1\nkind: Deployment\nmetadata: {name: x}\n",
     'no matches for kind "Deployment" in version "apps/v1beta1"'),
    ("missing kind", "apiVersion: v1\nmetadata: {name: x}\n",
     'Object \'Kind\' is missing in \'{"apiVersion":"v1","metadata":{"name":"x"}}\''),
    ("missing apiVersion", "kind: Pod\nmetadata: {name: x}\n",
     'Object \'apiVersion\' is missing in \'{"kind":"Pod","metadata":{"name":"x"}}\''),
    ("YAML syntax error", "apiVersion: v1\nkind: Pod\nmetadata: {name: p\n",
     "error parsing <string>: did not find expected ',' or '}' (line 4)"),
    ("YAML bad indentation", "apiVersion: v1\nkind: Pod\n  metadata: x\n",
     "error parsing <string>: mapping values are not allowed in this context (line 3)"),
    ("the same pod twice", pod() + "---\n" + pod(), 'pods "p" already exists'),
    ("PriorityClass above the user range",
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: top}\nvalue: 2000000000\n",
     'PriorityClass.scheduling.k8s.io "top" is invalid: value: Forbidden: maximum allowed value of a user '
     "defined priority is 1000000000"),
    ("PriorityClass without a value",
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: low}\n",
     'PriorityClass.scheduling.k8s.io "low" is invalid: value: Required value'),
    ("two global defaults",
     "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: a}\nvalue: 1\nglobalDefault: true\n"
     "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: b}\nvalue: 2\nglobalDefault: true\n",
     'priorityclasses.scheduling.k8s.io "b" is forbidden: PriorityClass a is already marked as default. '
     "Only one default can exist"),
]


@pytest.mark.parametrize("manifest,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_exact_one_line_message(manifest, message):
    with pytest.raises(GpuLabError) as info:
        load_scenario(manifest)
    text = str(info.value)
    assert text == message
    assert "\n" not in text


def test_invalid_objects_carry_their_field_errors():
    with pytest.raises(InvalidObject) as info:
        load_scenario(pod("{requests: {cpu: '-1', nvidia.com/gpu: 1}}"))
    err = info.value
    assert (err.kind, err.name) == ("Pod", "p")
    assert err.errors == [
        'spec.containers[0].resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
        "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
    ]


def test_admission_refusals_are_invalid_objects_too():
    # callers that catch InvalidObject also catch the admission plugin's refusal
    with pytest.raises(InvalidObject) as info:
        load_scenario(pod(extra="  priorityClassName: high"))
    assert info.value.errors == ["no PriorityClass with name high was found"]


def test_missing_file_names_the_path(tmp_path: Path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(GpuLabError) as info:
        load_scenario(missing)
    assert str(info.value) == f'the path "{missing}" does not exist'


def test_yaml_error_in_a_file_names_the_file(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: [p\n")
    with pytest.raises(GpuLabError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"error parsing {path}: ")
    assert str(info.value).endswith("(line 5)")
    assert "\n" not in str(info.value)


def test_a_boolean_toleration_value_names_the_field():
    with pytest.raises(InvalidObject) as info:
        load_scenario(pod(extra="  tolerations: [{key: gpu, value: true, effect: NoSchedule}]"))
    assert info.value.errors == ["spec.tolerations[0].value: Invalid value: true: must be a string (quote it in YAML)"]
