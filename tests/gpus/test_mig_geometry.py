"""MIG profiles and placement geometry for every profile of every MIG-capable model."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_lab.errors import GpuLabError, ImpossibleLayout, MigNotSupported, UnknownMigProfile
from gpu_lab.gpus.catalog import MODELS
from gpu_lab.gpus.mig import (
    COMPUTE_SLICES,
    GEOMETRIES,
    MEMORY_SLICES,
    MIG_MODELS,
    all_layouts,
    geometry,
    is_valid_layout,
    maximal_layouts,
    validate_layout,
)

ALL_PROFILES = [(m, p) for m in MIG_MODELS for p in GEOMETRIES[m].profiles]
IDS = [f"{m}-{p.name}" for m, p in ALL_PROFILES]

# NVIDIA MIG User Guide, "Supported MIG Profiles": name -> instances available.
GUIDE = {
    "A100-40GB": {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    "A100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H100-80GB": {"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1},
    "H200-141GB": {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1,
                   "7g.141gb": 1},
}
# nvidia-smi mig -lgipp on A100/H100: {starts}:memory slices.
LGIPP = {1: ((0, 1, 2, 3, 4, 5, 6), 1), 2: ((0, 2, 4, 6), 2), 3: ((0, 2, 4), 2), 4: ((0, 4), 4),
         5: ((0,), 4), 7: ((0,), 8)}


def _lgipp_key(p):
    if p.compute_slices == 1:
        return 2 if p.memory_slices == 2 else 1
    return {2: 3, 3: 4, 4: 5, 7: 7}[p.compute_slices]


def test_catalogued_profiles_match_nvidias_tables():
    for model, table in GUIDE.items():
        geom = geometry(model)
        assert {p.name: p.max_instances for p in geom.profiles} == table
        for p in geom.profiles:
            assert (p.starts, p.memory_slices) == LGIPP[_lgipp_key(p)]
            assert p.memory_gb == int(p.name.split(".")[1].rstrip("gb").split("+")[0].removesuffix("gb"))
            assert p.compute_slices == int(p.name.split("g.")[0])
            assert p.memory_mib / 1024 <= p.memory_gb  # usable memory is a bit under the name


def test_mig_models_are_the_catalogs_mig_capable_ones():
    assert set(MIG_MODELS) == {m for m, g in MODELS.items() if g.mig_capable}


@pytest.mark.parametrize("model, profile", ALL_PROFILES, ids=IDS)
def test_max_instances_fit_and_one_more_does_not(model, profile):
    placement = validate_layout(model, [profile.name] * profile.max_instances)
    assert placement.counts() == {profile.name: profile.max_instances}
    for slot in placement.slots:
        assert slot.start in profile.starts
    with pytest.raises(ImpossibleLayout):
        validate_layout(model, [profile.name] * (profile.max_instances + 1))


@pytest.mark.parametrize("model, profile", ALL_PROFILES, ids=IDS)
def test_instances_only_start_where_allowed(model, profile):
    starts = {s.start for _, p in all_layouts(model) for s in p.slots if s.profile == profile.name}
    assert starts <= set(profile.starts)
    if not profile.media_extensions:  # one +me instance: its canonical placement is slot 0
        full = validate_layout(model, [profile.name] * profile.max_instances)
        assert {s.start for s in full.slots} == set(profile.starts)


def test_all_models_share_one_slot_geometry():
    shapes = {m: tuple((p.compute_slices, p.memory_slices, p.starts, p.max_instances) for p in g.profiles)
              for m, g in GEOMETRIES.items()}
    assert len(set(shapes.values())) == 1


@pytest.mark.parametrize("model", MIG_MODELS)
def test_every_layout_respects_the_geometry(model):
    geom = geometry(model)
    layouts = all_layouts(model)
    assert len(layouts) == len({names for names, _ in layouts}) == 127
    for names, placement in layouts:
        used = [i for s in placement.slots for i in range(s.start, s.end + 1)]
        assert len(used) == len(set(used)) and max(used) < MEMORY_SLICES
        assert placement.compute_slices_used <= COMPUTE_SLICES
        assert placement.profiles == names
        for s in placement.slots:
            p = geom.profile(s.profile)
            assert s.start in p.starts and s.size == p.memory_slices
        # Engines never exceed the whole GPU's (7g) count: they do not constrain beyond slices.
        whole = geom.profiles[0]
        for attr in ("decoders", "jpeg", "ofa", "copy_engines", "multiprocessors"):
            assert sum(getattr(geom.profile(n), attr) for n in names) <= getattr(whole, attr)


def test_search_agrees_with_brute_force_over_every_count_vector():
    """Exhaustive: every count vector up to one over each limit, placed by plain backtracking.

    The four models share one slot geometry (test above), so one model covers them all.
    """
    model = "A100-40GB"
    geom = geometry(model)
    valid = {names for names, _ in all_layouts(model)}
    checked = 0
    for counts in itertools.product(*[range(p.max_instances + 2) for p in geom.profiles]):
        names = tuple(p.name for p, n in zip(geom.profiles, counts) for _ in range(n))
        if not names or sum(n * p.compute_slices for p, n in zip(geom.profiles, counts)) > COMPUTE_SLICES + 1:
            continue
        checked += 1
        assert (names in valid) == _brute(geom, names), names
    assert checked > 300


def _brute(geom, names) -> bool:
    profs = [geom.profile(n) for n in names]
    if any(names.count(p.name) > p.max_instances for p in profs):
        return False
    if sum(p.compute_slices for p in profs) > COMPUTE_SLICES:
        return False

    def place(i, used):
        if i == len(profs):
            return True
        p = profs[i]
        for s in p.starts:
            cells = set(range(s, s + p.memory_slices))
            if max(cells) < MEMORY_SLICES and not cells & used and place(i + 1, used | cells):
                return True
        return False

    return place(0, frozenset())


@pytest.mark.parametrize("model", MIG_MODELS)
def test_maximal_layouts_cannot_grow(model):
    geom = geometry(model)
    maximal = maximal_layouts(model)
    assert maximal and set(maximal) <= set(all_layouts(model))
    for names, _ in maximal:
        for p in geom.profiles:
            assert not is_valid_layout(model, [*names, p.name])


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MIG_MODELS), data=st.data())
def test_order_of_the_request_never_changes_the_verdict(model, data):
    names = geometry(model).names
    request = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=9))
    shuffled = data.draw(st.permutations(request))
    first, second = _verdict(model, request), _verdict(model, shuffled)
    assert first == second


def _verdict(model, request):
    try:
        return ("ok", validate_layout(model, request))
    except ImpossibleLayout as err:
        return ("no", err.reason)


def test_mapping_request_equals_list_request():
    assert validate_layout("A100-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}) == validate_layout(
        "A100-40GB", ["3g.20gb", "1g.5gb", "2g.10gb", "1g.5gb"])


@pytest.mark.parametrize("request_, reason", [
    (["4g.20gb", "4g.20gb"],
     "only one 4g.20gb fits on an A100-40GB (max 1 instance: it can only start at memory slice 0); asked for 2"),
    (["1g.5gb"] * 8, "1g.5gb x8 needs 8 compute slices; an A100-40GB has 7"),
    (["7g.40gb", "1g.5gb"],
     "7g.40gb uses the whole GPU and cannot be combined with other instances (asked for 7g.40gb + 1g.5gb)"),
    (["1g.5gb", "7g.40gb"],
     "7g.40gb uses the whole GPU and cannot be combined with other instances (asked for 7g.40gb + 1g.5gb)"),
    (["7g.40gb", "7g.40gb"],
     "7g.40gb uses the whole GPU and cannot be combined with other instances (asked for 7g.40gb x2)"),
    (["1g.5gb+me", "1g.5gb+me"], "only one 1g.5gb+me fits on an A100-40GB (max 1 instance: a GPU has one set "
                                 "of media extensions); asked for 2"),
    (["3g.20gb", "3g.20gb", "1g.5gb"], "3g.20gb x2 + 1g.5gb needs 9 memory slices; an A100-40GB has 8"),
    (["4g.20gb", "2g.10gb", "2g.10gb"], "4g.20gb + 2g.10gb x2 needs 8 compute slices; an A100-40GB has 7"),
    (["1g.10gb"] * 5, "1g.10gb x5 needs 10 memory slices; an A100-40GB has 8"),
])
def test_named_impossible_layouts_say_why(request_, reason):
    with pytest.raises(ImpossibleLayout) as exc:
        validate_layout("A100-40GB", request_)
    assert str(exc.value) == exc.value.reason == reason
    assert isinstance(exc.value, GpuLabError)
    assert exc.value.model == "A100-40GB"


def test_the_issue_examples_on_other_models():
    with pytest.raises(ImpossibleLayout, match="only one 4g.40gb fits on an H100-80GB"):
        validate_layout("H100-80GB", ["4g.40gb", "4g.40gb"])
    with pytest.raises(ImpossibleLayout, match="1g.18gb x8 needs 8 compute slices; an H200-141GB has 7"):
        validate_layout("h200", ["1g.18gb"] * 8)


def test_placements_are_exact_not_greedy():
    # Greedy left-to-right would put 1g.10gb at 0 and then find no even start for 2g x3.
    p = validate_layout("A100-40GB", ["1g.10gb", "2g.10gb", "2g.10gb", "2g.10gb"])
    assert [str(s) for s in p.slots] == ["2g.10gb@0-1", "2g.10gb@2-3", "2g.10gb@4-5", "1g.10gb@6-7"]
    p = validate_layout("A100-40GB", ["2g.10gb", "2g.10gb", "3g.20gb"])
    assert str(p) == "2g.10gb@0-1, 2g.10gb@2-3, 3g.20gb@4-7"
    assert p.free_memory_slices == ()


def test_placement_rendering():
    p = validate_layout("A100-40GB", ["4g.20gb", "2g.10gb", "1g.5gb"])
    assert str(p) == "4g.20gb@0-3, 2g.10gb@4-5, 1g.5gb@6"
    assert p.diagram() == "|4g.20gb                        |2g.10gb        |1g.5gb |-      |"
    assert p.free_memory_slices == (7,)
    assert p.to_dict()["computeSlicesUsed"] == 7
    empty = validate_layout("A100-40GB", [])
    assert empty.slots == () and str(empty) == "(no instances)"


def test_profile_names_are_forgiving_but_strict():
    geom = geometry("A100-40GB")
    for spelling in ("1g.5gb+me", "1g.5gb.me", "MIG 1g.5gb+me", "nvidia.com/mig-1g.5gb.me", "mig-1g.5gb+me"):
        assert geom.profile(spelling).name == "1g.5gb+me"
    assert geom.profile("1g.5gb").resource == "nvidia.com/mig-1g.5gb"
    assert geom.profile("1g.5gb+me").resource == "nvidia.com/mig-1g.5gb.me"


def test_unknown_profile_lists_the_valid_ones():
    with pytest.raises(UnknownMigProfile) as exc:
        validate_layout("A100-40GB", ["2g.20gb"])
    assert str(exc.value) == ('unknown MIG profile "2g.20gb" for A100-40GB (valid: 7g.40gb, 4g.20gb, 3g.20gb, '
                              "2g.10gb, 1g.10gb, 1g.5gb+me, 1g.5gb)")


@pytest.mark.parametrize("model", ["T4", "L4", "A10G", "L40S"])
def test_gpus_without_mig_are_refused(model):
    with pytest.raises(MigNotSupported) as exc:
        validate_layout(model, ["1g.5gb"])
    assert str(exc.value) == (f"{model} GPUs do not support MIG (MIG-capable models: A100-40GB, A100-80GB, "
                              "H100-80GB, H200-141GB)")


def test_bad_counts():
    with pytest.raises(GpuLabError, match="count must be a non-negative integer"):
        validate_layout("A100-40GB", {"1g.5gb": -1})
