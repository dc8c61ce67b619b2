"""The `workloads` variable: strict like the rest of the spec, optional, and defaulted as Kubernetes does."""

from decimal import Decimal

import pytest
import yaml
from inventory_builder import ROOT, write_text

from infra.model.resolve import resolve
from infra.model.workloads import defaulted, demands, pool_offers, resolve_gpu
from infra.spec import SpecError, load_environment
from infra.spec.models import GpuNeed, Workload

GI = 2**30


def with_workloads(inventory, workloads):
    inventory["group_vars"]["all"]["workloads"] = workloads
    return inventory


def problems(write, inventory, workloads):
    with pytest.raises(SpecError) as error:
        load_environment(write(with_workloads(inventory, workloads)))
    return error.value.problems


def test_an_inventory_without_workloads_loads_as_before(inventory, write):
    env = load_environment(write(inventory))
    assert env.workloads == {}
    assert load_environment(write(with_workloads(inventory, None))).workloads == {}  # `workloads:` left empty


def test_workloads_load_per_tenant_in_the_order_written(inventory, write):
    env = load_environment(write(with_workloads(inventory, {
        "svc": {"web": {"replicas": 3}, "api": {"replicas": 1, "requests": {"cpu": "250m"}}},
        "infer": {"llm": {"replicas": 2, "gpu": {"type": "mig", "profile": "1g.10gb"}}},
    })))
    assert list(env.workloads) == ["svc", "infer"]
    assert list(env.workloads["svc"]) == ["web", "api"]
    assert env.workloads["infer"]["llm"].gpu == GpuNeed(type="mig", profile="1g.10gb")


def test_the_shipped_example_declares_workloads_for_every_tenant():
    env = load_environment(ROOT / "inventories" / "example")
    assert set(env.workloads) == set(env.cluster.tenants)


@pytest.mark.parametrize("workloads, expected", [
    ({"svc": {"web": {}}}, "workloads.svc.web.replicas: required; see README 'Workloads: fit and propose'"),
    ({"svc": {"web": {"replicas": "3"}}}, "workloads.svc.web.replicas: '3' is a string; write a whole number"),
    ({"svc": {"web": {"replicas": 0}}}, "workloads.svc.web.replicas: Input should be greater than or equal to 1"),
    ({"svc": {"web": {"replicas": 1, "replica": 2}}}, "workloads.svc.web.replica: unknown key; did you mean 'replicas'?"),
    ({"svc": {"web": {"replicas": 1, "requests": {"gpu": 1}}}}, "workloads.svc.web.requests.gpu.[key]: 'gpu'"),
    ({"svc": {"web": {"replicas": 1, "requests": {"cpu": "lots"}}}}, "'lots' is not a Kubernetes quantity"),
    ({"svc": {"Web": {"replicas": 1}}}, "workloads.svc.Web.[key]: 'Web': tenant and workload names are DNS labels"),
    ({"svc": {"web": {"replicas": 1, "requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}},
     "workloads.svc.web: requests.cpu 2 is above limits.cpu 1"),
    ({"svc": {"web": {"replicas": 1, "requests": {"hugepages-1Gi": "2Gi"}, "limits": {"hugepages-1Gi": "4Gi"}}}},
     "hugepages-1Gi: request 2Gi and limit 4Gi differ"),
    ({"svc": {"web": {"replicas": 2, "gang": 2}}}, "gang applies to kind job"),
    ({"svc": {"web": {"kind": "job", "replicas": 2, "gang": 3}}}, "gang 3 is above replicas 2"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "mig"}}}}, "profile (a MIG profile such as 3g.40gb) goes with type mig"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "whole", "profile": "1g.10gb"}}}}, "goes with type mig, and only"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "mig", "profile": "3g.40"}}}}, "'3g.40' is not a MIG profile name"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "memory"}}}}, "memory_gib goes with type memory"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "shared", "model": "T4-16GB"}}}}, "model applies to type whole or memory"),
    ({"svc": {"web": {"replicas": 1, "gpu": {"type": "any"}}}}, "workloads.svc.web.gpu.type: 'any': Input should be"),
    ({"svc": {"web": {"replicas": 1, "storage": {"storage_class": "nfs"}}}}, "workloads.svc.web.storage.size: required"),
    ({"svc": {"web": {"replicas": 1, "numa_aligned": "yes"}}}, "numa_aligned: 'yes' is a string; write true or false"),
    ({"svc": ["web"]}, "workloads.svc: Input should be a valid dictionary"),
])
def test_every_mistake_names_the_file_the_field_and_the_fix(inventory, write, workloads, expected):
    found = problems(write, inventory, workloads)
    assert any(expected in problem for problem in found), found
    assert all(problem.split(": ", 1)[0].endswith("group_vars/all.yml") for problem in found)


def test_a_misspelt_workloads_key_gets_a_hint(inventory, write):
    inventory["group_vars"]["all"]["workload"] = {"svc": {}}
    with pytest.raises(SpecError, match="workload: unknown key; did you mean 'workloads'"):
        load_environment(write(inventory))


def test_workloads_may_live_in_their_own_file_of_group_vars_all(inventory, write):
    cluster = inventory["group_vars"].pop("all")
    path = write(inventory)
    write_text(path, "group_vars/all/cluster.yml", yaml.safe_dump(cluster))
    write_text(path, "group_vars/all/workloads.yml", yaml.safe_dump({"workloads": {"svc": {"web": {"replica": 1}}}}))
    with pytest.raises(SpecError) as error:
        load_environment(path)
    assert error.value.problems[0].startswith(f"{path}/group_vars/all/workloads.yml: workloads.svc.web.replica")


# ---------------------------------------------------------------- Kubernetes' defaulting


# What the cluster layer adds to every tenant's LimitRange (platform.yml): scratch space for each container.
SCRATCH = ({"ephemeral-storage": 256 * 2**20}, {"ephemeral-storage": 4 * GI})


@pytest.mark.parametrize("workload, requests, limits", [
    # nothing written: the LimitRange's defaultRequest and default
    ({"replicas": 1}, {"cpu": "0.5", "memory": 512 * 2**20}, {"cpu": "1", "memory": GI}),
    # a written limit is the request too (API defaulting happens before the LimitRanger)
    ({"replicas": 1, "limits": {"cpu": "3"}}, {"cpu": "3", "memory": 512 * 2**20}, {"cpu": "3", "memory": GI}),
    ({"replicas": 1, "requests": {"memory": "3Gi"}}, {"cpu": "0.5", "memory": 3 * GI}, {"cpu": "1", "memory": GI}),
    # hugepages are never defaulted; a request alone is its own limit
    ({"replicas": 1, "requests": {"hugepages-2Mi": "4Mi"}},
     {"cpu": "0.5", "memory": 512 * 2**20, "hugepages-2Mi": 4 * 2**20}, {"cpu": "1", "memory": GI, "hugepages-2Mi": 4 * 2**20}),
])
def test_requests_and_limits_are_defaulted_as_kubernetes_does(inventory, write, workload, requests, limits):
    env = load_environment(write(inventory))
    got = defaulted(Workload.model_validate(workload), env.cluster.tenants["svc"])
    expected = ({**SCRATCH[0], **requests}, {**SCRATCH[1], **limits})
    assert got == tuple({k: Decimal(v) for k, v in side.items()} for side in expected)


@pytest.mark.parametrize("written, scratch_request, scratch_limit", [
    ({}, 256 * 2**20, 4 * GI),  # the platform's defaults, as the rendered LimitRange has them
    ({"limits": {"ephemeral-storage": "1Gi"}}, GI, GI),  # a written limit is the request too
    ({"requests": {"ephemeral-storage": "2Gi"}}, 2 * GI, 4 * GI),
])
def test_every_container_gets_an_ephemeral_storage_request_and_limit(inventory, write, written, scratch_request,
                                                                     scratch_limit):
    env = load_environment(write(inventory))
    requests, limits = defaulted(Workload.model_validate({"replicas": 1, **written}), env.cluster.tenants["svc"])
    assert (requests["ephemeral-storage"], limits["ephemeral-storage"]) == (scratch_request, scratch_limit)


def test_a_limit_range_without_default_request_defaults_it_to_default_then_to_max(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["svc"]["limit_range"] = {"default": {"cpu": "2"}, "max": {"memory": "8Gi"}}
    env = load_environment(write(inventory))
    requests, limits = defaulted(Workload(replicas=1), env.cluster.tenants["svc"])
    assert requests == {"cpu": Decimal(2), "memory": Decimal(8 * GI), "ephemeral-storage": Decimal(256 * 2**20)}
    assert limits == {"cpu": Decimal(2), "memory": Decimal(8 * GI), "ephemeral-storage": Decimal(4 * GI)}


# ---------------------------------------------------------------- one GPU resource per need


def test_a_gpu_need_names_one_resource_and_the_pools_that_offer_it(inventory, write):
    inventory["group_vars"]["all"]["tenants"]["infer"]["pools"] = ["gpu", "t4", "cpu"]
    env = load_environment(write(with_workloads(inventory, {"infer": {
        "mig": {"replicas": 1, "gpu": {"type": "mig", "profile": "1g.10gb", "count": 2}},
        "big": {"replicas": 1, "gpu": {"type": "memory", "memory_gib": 10}},
        "t4": {"replicas": 1, "gpu": {"type": "whole", "model": "T4-16GB"}},
        "plain": {"replicas": 1},
    }})))
    view = resolve(env)
    offers = [offer for pool in env.pools.values() for offer in pool_offers(view, pool)]
    found = {d.name: d for d in demands(env, offers)}
    assert (found["mig"].gpu_resource, found["mig"].pools) == ("nvidia.com/mig-1g.10gb", ("gpu",))
    assert found["mig"].requests["nvidia.com/mig-1g.10gb"] == 2
    assert (found["big"].gpu_resource, found["big"].pools) == ("nvidia.com/mig-1g.10gb", ("gpu",))
    assert (found["t4"].gpu_resource, found["t4"].pools) == ("nvidia.com/gpu", ())  # the T4s are time-sliced
    assert found["plain"].pools == ("cpu",)  # no GPU asked: the tenant's CPU and memory pools only
    assert found["plain"].priority == 1000  # the tenant's class, high


def test_memory_picks_the_smallest_device_with_enough_memory_mig_first():
    from infra.model.workloads import Offer

    offers = [Offer("a", "nvidia.com/gpu", "A100-40GB", 40), Offer("b", "nvidia.com/mig-3g.40gb", "A100-80GB", 40),
              Offer("b", "nvidia.com/mig-4g.40gb", "A100-80GB", 40), Offer("b", "nvidia.com/mig-7g.80gb", "A100-80GB", 80),
              Offer("c", "nvidia.com/gpu.shared", "T4-16GB", None)]
    assert resolve_gpu(GpuNeed(type="memory", memory_gib=40), offers) == "nvidia.com/mig-3g.40gb"
    assert resolve_gpu(GpuNeed(type="memory", memory_gib=41), offers) == "nvidia.com/mig-7g.80gb"
    assert resolve_gpu(GpuNeed(type="memory", memory_gib=40, model="A100-40GB"), offers) == "nvidia.com/gpu"
    assert resolve_gpu(GpuNeed(type="memory", memory_gib=81), offers) is None


# ---------------------------------------------------------------- one cause, one finding


@pytest.mark.parametrize("cause, mutate", [
    ("GPU-MIG-PROFILE", lambda data: data["group_vars"]["gpu"]["gpu_sharing"].update(mig_devices={"1g.5gb": 7})),
    ("REF-POOL", lambda data: data["group_vars"]["all"]["tenants"]["infer"].update(pools=["gpx"])),
    ("REF-MACHINE", lambda data: data["group_vars"]["gpu"].update(machine="nosuch")),
])
def test_a_broken_pool_is_reported_once_not_again_for_its_workloads(inventory, findings, cause, mutate):
    with_workloads(inventory, {"infer": {"llm": {"replicas": 1, "gpu": {"type": "mig", "profile": "1g.10gb"}}}})
    mutate(inventory)
    assert [f.code for f in findings(inventory)] == [cause]


def test_an_unknown_tenant_is_reported_once_for_all_its_workloads(inventory, findings):
    with_workloads(inventory, {"ghost": {"a": {"replicas": 1, "priority_class": "nope"}, "b": {"replicas": 2}}})
    [finding] = findings(inventory)
    assert (finding.code, finding.field) == ("WORKLOAD-TENANT", "workloads.ghost")
    assert "2 workload(s)" in finding.message


def test_workload_findings_name_the_file_that_holds_them(inventory, write):
    from infra.checks import run_checks

    cluster = inventory["group_vars"].pop("all")
    path = write(inventory)
    write_text(path, "group_vars/all/cluster.yml", yaml.safe_dump(cluster))
    write_text(path, "group_vars/all/workloads.yml",
               yaml.safe_dump({"workloads": {"svc": {"web": {"replicas": 1, "priority_class": "nope"}}}}))
    [finding] = run_checks(load_environment(path))
    assert finding.file == f"{path}/group_vars/all/workloads.yml"
    assert finding.field == "workloads.svc.web.priority_class"


WRONG = [None, "", "x", -1, 0, 10**12, 1.5, True, [], ["x"], {}, {"x": "y"}]
FIELDS = ["kind", "replicas", "requests", "limits", "gpu", "gang", "numa_aligned", "storage", "priority_class",
          "description"]


@pytest.mark.parametrize("field", FIELDS)
def test_wrong_values_in_a_workload_are_refused_or_checked_never_crash(inventory, write, field):
    from infra.checks import has_errors, run_checks
    from infra.planning.fit import fit

    for value in WRONG:
        base = {"kind": "job", "replicas": 2, "gang": 2, "requests": {"cpu": "1"},
                "gpu": {"type": "mig", "profile": "1g.10gb"}, "storage": {"storage_class": "nfs", "size": "1Gi"}}
        for nested in ("requests", "gpu", "storage"):
            if field == nested and isinstance(value, dict):
                value = {**base[nested], **value}
        base[field] = value
        try:
            env = load_environment(write(with_workloads(inventory, {"infer": {"w": base}})))
        except SpecError as error:
            assert error.problems
            continue
        if not has_errors(run_checks(env)):
            fit(env)
