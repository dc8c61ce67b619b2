"""infra.hosts.ansible_run reads ansible-playbook's output the way the host checks need it: the recap per host,
and the tasks that changed, by name, per host (so a failed idempotence check says what to fix)."""

from infra.hosts.ansible_run import PlaybookRun, TaskResult, parse_recap, parse_results

# The default callback's text, as the project's ansible.cfg prints it (profile_roles lines included).
OUTPUT = """\
PLAY [Check the environment spec and derive each host's settings.] *************

TASK [Run the preflight rules and derive the host settings on the controller.] ***
Wednesday 02 December 2026  16:47:54 +0000 (0:00:00.018)       0:00:00.018 ****
ok: [sb-cpu-1 -> localhost]

PLAY [Prepare the base of every node host.] ************************************

TASK [base : Write the sysctl drop-in.] ****************************************
--- before: /etc/sysctl.d/90-k8s-node-pools.conf
+++ after: /root/.ansible/tmp/sysctl.conf.j2
@@ -1 +1 @@
-vm.max_map_count = 7
+vm.max_map_count = 262144
changed: [sb-mem-1]
ok: [sb-cpu-1]

TASK [base : Load the kernel modules.] *****************************************
skipping: [sb-cpu-1] => (item=overlay)
changed: [sb-mem-1] => (item=overlay)
changed: [sb-mem-1] => (item=br_netfilter)
fatal: [sb-gpu-1]: FAILED! => changed=false

RUNNING HANDLER [base : Apply the sysctls.] ************************************
changed: [sb-mem-1]

PLAY RECAP *********************************************************************
sb-cpu-1                   : ok=2    changed=0    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
sb-gpu-1                   : ok=0    changed=0    unreachable=0    failed=1    skipped=0    rescued=0    ignored=0
sb-mem-1                   : ok=3    changed=3    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0

ROLES RECAP ********************************************************************
base -------------------------------------------------------------------- 1.02s
"""


def run() -> PlaybookRun:
    return PlaybookRun(2, OUTPUT, parse_recap(OUTPUT), 1.0, parse_results(OUTPUT))


def test_the_recap_is_read_per_host():
    recap = parse_recap(OUTPUT)
    assert set(recap) == {"sb-cpu-1", "sb-gpu-1", "sb-mem-1"}
    assert recap["sb-mem-1"]["changed"] == 3
    assert run().changed() == {"sb-mem-1": 3}
    assert run().failed() == {"sb-gpu-1": 1}


def test_each_result_belongs_to_its_play_and_task():
    results = parse_results(OUTPUT)
    assert results[0] == TaskResult("Check the environment spec and derive each host's settings.",
                                    "Run the preflight rules and derive the host settings on the controller.",
                                    "sb-cpu-1", "ok")
    assert TaskResult("Prepare the base of every node host.", "base : Load the kernel modules.", "sb-gpu-1",
                      "fatal") in results
    assert len(results) == 8


def test_the_changed_tasks_are_named_once_per_host_in_run_order():
    assert run().changed_tasks() == {"sb-mem-1": ["base : Write the sysctl drop-in.", "base : Load the kernel modules.",
                                                  "base : Apply the sysctls."]}
    assert run().describe_changes() == ("  sb-mem-1: changed base : Write the sysctl drop-in.; "
                                        "base : Load the kernel modules.; base : Apply the sysctls.")


def test_a_run_without_changes_describes_none():
    quiet = OUTPUT.replace("changed: [", "ok: [")
    assert PlaybookRun(0, quiet, {}, 0.0, parse_results(quiet)).changed_tasks() == {}


def test_the_tail_names_each_failed_task_before_the_recap():
    run = PlaybookRun(rc=2, output=OUTPUT, recap=parse_recap(OUTPUT))
    tail = run.tail(lines=3)
    assert tail.startswith("TASK [base : Load the kernel modules.]\nfatal: [sb-gpu-1]: FAILED! => changed=false\n...\n")
    assert tail.endswith("base -------------------------------------------------------------------- 1.02s")
    clean = OUTPUT.replace("fatal: [sb-gpu-1]: FAILED! => changed=false\n", "")
    assert PlaybookRun(rc=0, output=clean, recap={}).tail(lines=3) == "\n".join(clean.splitlines()[-3:])
