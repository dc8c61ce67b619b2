"""A small client of the Kubernetes API for the local control plane (tools/cluster.sh): the admin
kubeconfig's client certificate over TLS, JSON in and out, nothing else.

Stdlib only, so that the real-cluster stages and their tests need no client library the project does
not otherwise pin. Reads the kubeconfig shape cluster.sh writes (file paths, not inline data).
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


class ApiError(Exception):
    """A request the API server answered with an error status: `code` and the Status `message`."""

    def __init__(self, method: str, path: str, code: int, message: str) -> None:
        super().__init__(f"{method} {path}: HTTP {code}: {message}")
        self.code = code
        self.message = message


class Kube:
    """The API server of one kubeconfig (its first cluster and first user)."""

    def __init__(self, kubeconfig: Path) -> None:
        doc = yaml.safe_load(kubeconfig.read_text())
        cluster = doc["clusters"][0]["cluster"]
        user = doc["users"][0]["user"]
        self.server: str = cluster["server"]
        self._tls = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self._tls.load_cert_chain(user["client-certificate"], user["client-key"])
        self._plurals: dict[tuple[str, str], str] = {}

    def request(self, method: str, path: str, body: Any = None,
                content_type: str = "application/json", timeout: float = 30) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body); errors are returned, not raised."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.server + path, data=data, method=method,
                                         headers={"Content-Type": content_type, "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self._tls, timeout=timeout) as response:
                return int(response.status), json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                answer = json.loads(raw or b"null")
            except ValueError:
                answer = {"message": raw.decode(errors="replace")}
            return int(error.code), answer

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        """The decoded answer of a successful request; ApiError otherwise."""
        code, answer = self.request(method, path, body, content_type)
        if code >= 300:
            message = answer.get("message", "") if isinstance(answer, dict) else str(answer)
            raise ApiError(method, path, code, message)
        return answer

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def exists(self, path: str) -> bool:
        code, answer = self.request("GET", path)
        if code == 404:
            return False
        if code >= 300:
            raise ApiError("GET", path, code, str(answer))
        return True

    def create(self, path: str, body: Any, dry_run: bool = False) -> Any:
        return self.call("POST", path + ("?dryRun=All" if dry_run else ""), body)

    def create_namespace(self, name: str, timeout: float = 60) -> None:
        """A Namespace, once pods can be created in it: the ServiceAccount admission refuses a pod until its
        namespace's default account exists, which the controller manager creates a moment later."""
        self.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        account = f"/api/v1/namespaces/{name}/serviceaccounts/default"
        wait_for(f"the default ServiceAccount of {name}", lambda: True if self.exists(account) else None, timeout)

    def merge_patch(self, path: str, patch: Any) -> Any:
        return self.call("PATCH", path, patch, "application/merge-patch+json")

    def delete(self, path: str, grace_seconds: int | None = None) -> None:
        body = None if grace_seconds is None else {"kind": "DeleteOptions", "apiVersion": "v1",
                                                   "gracePeriodSeconds": grace_seconds}
        code, answer = self.request("DELETE", path, body)
        if code >= 300 and code != 404:
            raise ApiError("DELETE", path, code, str(answer))


    def plural(self, api_version: str, kind: str) -> str:
        """The resource name of a kind, from API discovery (CRDs included once they are served)."""
        if (api_version, kind) not in self._plurals:
            base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            for resource in self.get(base)["resources"]:
                if "/" not in resource["name"]:
                    self._plurals[(api_version, resource["kind"])] = resource["name"]
        return self._plurals[(api_version, kind)]

    def path(self, o: dict[str, Any], name: bool = True) -> str:
        """The REST path of an object (its collection when `name` is False)."""
        return object_path(o, self.plural(o["apiVersion"], o["kind"]), name)


def object_path(o: dict[str, Any], plural: str, name: bool = True) -> str:
    """The REST path of an object (its collection when `name` is False), from apiVersion and namespace."""
    api_version = o["apiVersion"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    namespace = o["metadata"].get("namespace")
    path = base + (f"/namespaces/{namespace}" if namespace else "") + f"/{plural}"
    return path + (f"/{urllib.parse.quote(o['metadata']['name'])}" if name else "")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 60, every: float = 0.25,
             seen: Callable[[], object] | None = None) -> T:
    """Poll `probe` until it returns something other than None; TimeoutError naming `what` after `timeout` s,
    with what `seen` then reports (the state the probe looked at) when given."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s" + (f"; last seen: {seen()}" if seen else ""))
        time.sleep(every)
