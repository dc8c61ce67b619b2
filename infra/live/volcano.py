"""Volcano on the local control plane: its scheduler and queue controller, built from volcano.sh/volcano
(tools/volcano, v1.14.1: the pinned chart's v1.15.1 cannot be built here, tools/volcano/go.mod says why), run
with the scheduler configuration the cluster layer deploys (infra.cluster.scheduling.scheduler_conf), so
that gangs are placed by the real vc-scheduler.

What runs is what the chart runs, less what placement does not need: the chart's CRDs (from the same module
version), vc-scheduler, and vc-controller-manager with only its queue controller (it opens the queues, and a
closed queue schedules nothing). Not run: the admission webhooks (a PodGroup is created with the queue the
podgroup mutation would give it) and the job, PodGroup and garbage-collection controllers (the PodGroups are
created explicitly, as fit builds them).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import TracebackType

import yaml

from infra.cluster.scheduling import scheduler_conf
from infra.live.controlplane import LocalCluster, free_port
from infra.live.kubeapi import ApiError, Kube, wait_for

FAMILY = "volcano"
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"
QUEUES = f"{VOLCANO_API}/queues"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def volcano_bin(root: Path) -> Path:
    """The folder of the built vc-scheduler, vc-controller-manager and crd/ (tools/build.sh builds it)."""
    printed = subprocess.run([str(root / "tools" / "build.sh"), "--print-path"], check=True, capture_output=True,
                             text=True, env={**os.environ, "TOOLS_FAMILIES": FAMILY}).stdout.strip()
    folder = Path(printed)
    if not (folder / "vc-scheduler").is_file():
        raise FileNotFoundError(f"Volcano is not built ({folder}): run `TOOLS_FAMILIES=volcano ./dev.sh tools`")
    return folder


@dataclass
class Volcano:
    """`with Volcano(cluster):` installs the CRDs, starts the queue controller and the scheduler, and waits until
    the scheduler has created its `default` queue and the controller has opened it; on exit both stop and the
    CRDs (with every Volcano object) are deleted again. Logs: .state/cluster/vc-*.log."""

    cluster: LocalCluster
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    crds: list[str] = field(default_factory=list)

    def __enter__(self) -> Volcano:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    @property
    def kube(self) -> Kube:
        return self.cluster.api()

    def _start(self) -> None:
        folder = volcano_bin(self.cluster.root)
        for path in sorted((folder / "crd").glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            self.kube.create(CRDS, crd)
            self.crds.append(crd["metadata"]["name"])
        for name in self.crds:
            wait_for(f"CRD {name} established", partial(self._established, name), 30)
        logs = self.cluster.kubeconfig.parent
        conf = logs / "volcano-scheduler.conf"  # beside the logs, as the cluster's scheduler-config.yaml
        conf.write_text(scheduler_conf())
        common = [f"--kubeconfig={self.cluster.kubeconfig}", "--leader-elect=false",
                  f"--listen-address=127.0.0.1:{free_port()}", f"--healthz-address=127.0.0.1:{free_port()}"]
        self._run(folder / "vc-controller-manager", logs / "vc-controller-manager.log",
                  *common, "--controllers=queue-controller")
        self._run(folder / "vc-scheduler", logs / "vc-scheduler.log", *common, f"--scheduler-conf={conf}")
        wait_for("Volcano's default queue open", self._default_queue_open, 60, every=0.5)

    def _established(self, name: str) -> bool | None:
        conditions = self.kube.get(f"{CRDS}/{name}").get("status", {}).get("conditions", [])
        return True if any(c["type"] == "Established" and c["status"] == "True" for c in conditions) else None

    def _run(self, binary: Path, log: Path, *args: str) -> None:
        with log.open("wb") as out:
            self.processes[binary.name] = subprocess.Popen([str(binary), *args], stdout=out, stderr=subprocess.STDOUT)

    def _default_queue_open(self) -> bool | None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} exited with {process.returncode}; see .state/cluster/{name}.log")
        try:
            state = self.kube.get(f"{QUEUES}/default").get("status", {}).get("state")
        except ApiError as error:
            if error.code == 404:
                return None
            raise
        return True if state == "Open" else None

    def stop(self) -> None:
        for process in self.processes.values():
            process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()
        for name in self.crds:
            self.kube.delete(f"{CRDS}/{name}")
        self.crds.clear()
