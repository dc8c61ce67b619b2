"""CSI drivers (csi_drivers.yml): which pinned component deploys a driver, and whether it snapshots.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache

from pydantic import Field

from infra.knowledge.base import Fact, load
from infra.knowledge.versions import Component, https_url, no_branch, versions

_CSI_DRIVER_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")


class CsiDriver(Fact):
    component: str | None = Field(description="the versions.yml component that deploys the driver; None if external")
    snapshots: bool = Field(description="the controller implements CREATE_DELETE_SNAPSHOT")
    source: str


def validate_csi_drivers(raw: object, components: Mapping[str, Component]) -> dict[str, CsiDriver]:
    """Validate the parsed csi_drivers.yml: driver names as CSI names them, components that versions.yml pins."""
    if not isinstance(raw, dict):
        raise ValueError("csi_drivers.yml must map CSI driver names to entries")
    drivers: dict[str, CsiDriver] = {}
    for name, entry in raw.items():
        if not _CSI_DRIVER_NAME.match(str(name)) or len(str(name)) > 63:
            raise ValueError(f"{name!r} is not a CSI driver name (a DNS-1123 subdomain of at most 63 characters)")
        driver = CsiDriver.model_validate(entry)
        if driver.component is not None and driver.component not in components:
            raise ValueError(f"CSI driver {name}: component {driver.component!r} is not pinned in versions.yml")
        no_branch(https_url(driver.source, "source"), "source")
        drivers[str(name)] = driver
    return drivers


@cache
def csi_drivers() -> dict[str, CsiDriver]:
    """Known CSI drivers by driver name (a StorageClass's provisioner)."""
    return validate_csi_drivers(load("csi_drivers.yml"), versions())
