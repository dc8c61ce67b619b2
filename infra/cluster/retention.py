"""What a `pulumi destroy`, or a removal from the inventory, leaves in the cluster: whatever users' data
lives in or is defined by.

- A tenant's Namespace: its claims, secrets and workloads are the tenant's, and deleting a namespace
  deletes everything in it. Removing a tenant removes the project's objects in the namespace (quota,
  limits, bindings, networks), never the namespace.
- Every CustomResourceDefinition: deleting one deletes every object of its kind cluster-wide (Volcano
  jobs and PodGroups, snapshots, network attachments). The project's own are kept by Pulumi
  (`retained`); those a chart renders as templates (Volcano's, the NFS driver's snapshot CRDs) would be
  deleted by `helm uninstall`, so every release runs through the post-renderer below, which marks them
  `helm.sh/resource-policy: keep` in the release's manifest, where Helm looks for it.
- Every StorageClass: volumes and claims that outlive the stack name it, and a local class's volumes
  hold data on the node's disks.

What is left is re-adopted by the next `pulumi up` that declares it (server-side apply creates by
applying, so an object that exists is taken over, not refused). Run as a program, this module is that
post-renderer: a Helm release's rendered manifests on stdin, the same manifests on stdout.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from infra.cluster.objects import Obj
from infra.cluster.tenancy import TENANT_LABEL

HELM_RESOURCE_POLICY = "helm.sh/resource-policy"
HELM_KEEP = "keep"
POST_RENDERER = "tools/helm-post-render"
"""The post-renderer every Helm release names, relative to the project folder (the provider's working
folder); it runs this module with the project's virtualenv."""


def retained(o: Obj) -> bool:
    """Whether destroying the stack, or dropping `o` from the inventory, leaves `o` in the cluster."""
    kind = o["kind"]
    if kind in ("CustomResourceDefinition", "StorageClass"):
        return True
    return kind == "Namespace" and TENANT_LABEL in (o["metadata"].get("labels") or {})


def keep_custom_resource_definitions(manifests: str) -> str:
    """The rendered manifests with every CustomResourceDefinition annotated `helm.sh/resource-policy: keep`;
    every other document exactly as it came."""
    out = []
    for document in _documents(manifests):
        try:
            parsed: Any = yaml.safe_load(document)
        except yaml.YAMLError as error:
            raise ValueError(f"a rendered manifest is not YAML: {error}") from None
        if isinstance(parsed, dict) and parsed.get("kind") == "CustomResourceDefinition":
            metadata = parsed.setdefault("metadata", {})
            metadata["annotations"] = {**(metadata.get("annotations") or {}), HELM_RESOURCE_POLICY: HELM_KEEP}
            document = _leading_comments(document) + yaml.safe_dump(parsed, sort_keys=False)
        out.append(document)
    return "---\n" + "---\n".join(d if d.endswith("\n") else d + "\n" for d in out) if out else ""


def _documents(stream: str) -> list[str]:
    """The documents of a YAML stream, split on `---` lines (Helm writes one per template, after a
    `# Source:` comment); empty ones dropped."""
    documents: list[str] = []
    current: list[str] = []
    for line in stream.splitlines(keepends=True):
        if line.rstrip() == "---" or line.startswith("--- "):
            documents.append("".join(current))
            current = [line[4:]] if line.startswith("--- ") else []
        else:
            current.append(line)
    documents.append("".join(current))
    return [d for d in documents if any(line.strip() and not line.lstrip().startswith("#")
                                        for line in d.splitlines())]


def _leading_comments(document: str) -> str:
    """The comment lines a document starts with (Helm's `# Source: <chart>/templates/<file>`)."""
    lines = []
    for line in document.splitlines(keepends=True):
        if not line.lstrip().startswith("#"):
            break
        lines.append(line)
    return "".join(lines)


def main() -> int:
    try:
        sys.stdout.write(keep_custom_resource_definitions(sys.stdin.read()))
    except ValueError as error:
        print(f"{POST_RENDERER}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
