"""What `verify` says about each GPU of a real host, from one nvidia-smi query.

The host layer can install a driver and write a MIG layout without a card; only a real host shows whether
the card runs the pinned driver, is in the MIG mode its pool wants, and sits on a full-width PCIe link (a
x16 card at x8, from a wrong slot, riser or BIOS setting, halves host-to-device bandwidth and shows nowhere
else). `ansible/verify.yml` runs QUERY on each GPU host and hands the result to `host_report` through its
filter plugin; the parsing is here so that it is tested on real nvidia-smi output without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

FIELDS = ("name", "driver_version", "mig.mode.current", "pcie.link.width.current", "pcie.link.width.max")
QUERY = ("nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader")
_NOT_AVAILABLE = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", ""}


@dataclass(frozen=True)
class Gpu:
    """One card as nvidia-smi reports it; None where nvidia-smi says N/A (MIG mode of a card without MIG)."""

    index: int
    name: str
    driver: str
    mig_mode: str | None  # "Enabled" / "Disabled"; None: the card has no MIG
    link_width: int | None
    link_width_max: int | None
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        mig = self.mig_mode or "not supported"
        width = f"x{self.link_width}" if self.link_width is not None else "?"
        width_max = f"x{self.link_width_max}" if self.link_width_max is not None else "?"
        text = f"GPU {self.index}: {self.name}, driver {self.driver}, MIG {mig}, PCIe {width} of {width_max}"
        return text + "".join(f"; WARNING: {warning}" for warning in self.warnings)


def _optional(value: str) -> str | None:
    return None if value.strip() in _NOT_AVAILABLE else value.strip()


def _width(value: str) -> int | None:
    text = _optional(value)
    if text is None:
        return None
    try:
        return int(text.removeprefix("x"))
    except ValueError as error:
        raise ValueError(f"PCIe link width {value!r} is not a number") from error


def parse(text: str, expected_driver: str | None = None, expected_mig: bool | None = None) -> list[Gpu]:
    """The cards in `nvidia-smi --query-gpu=<FIELDS> --format=csv,noheader` output, one line each, with
    a warning for a link narrower than the card's maximum, a driver other than expected_driver, and a MIG
    mode other than expected_mig (True: enabled, False: disabled or no MIG, None: not checked)."""
    gpus = []
    for index, line in enumerate(row for row in text.splitlines() if row.strip()):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(FIELDS):
            raise ValueError(f"nvidia-smi line {line!r} has {len(cells)} fields, "
                             f"expected {len(FIELDS)} ({', '.join(FIELDS)})")
        name, driver, mig, width, width_max = cells
        gpu = Gpu(index, name, driver, _optional(mig), _width(width), _width(width_max))
        if gpu.link_width is not None and gpu.link_width_max is not None and gpu.link_width < gpu.link_width_max:
            gpu.warnings.append(f"PCIe link runs at x{gpu.link_width} of the card's x{gpu.link_width_max}: check the "
                                "slot, riser and BIOS lane settings (host-to-device bandwidth is cut accordingly)")
        if expected_driver and driver != expected_driver:
            gpu.warnings.append(f"driver {driver} is not the pool's pinned {expected_driver}")
        if expected_mig is not None and (gpu.mig_mode == "Enabled") != expected_mig:
            wanted = "enabled" if expected_mig else "disabled"
            gpu.warnings.append(f"MIG mode is {gpu.mig_mode or 'not supported'}, the pool's layout wants it {wanted}")
        gpus.append(gpu)
    return gpus


def host_report(host: str, rc: int, stdout: str, stderr: str = "", expected_driver: str | None = None,
                expected_mig: bool | None = None) -> dict[str, Any]:
    """The report of one host from the query's exit code and output: usable or not (with nvidia-smi's own
    reason), each GPU's line and warnings. A host without a usable GPU is reported, not raised."""
    if rc != 0:
        output = " ".join(part.strip() for part in (stdout, stderr) if part.strip())
        reason = f"{output}, exit code {rc}" if output else f"exit code {rc}"
        return {"host": host, "usable": False, "gpus": [], "warnings": [],
                "lines": [f"{host}: no usable GPU: nvidia-smi failed ({reason})"]}
    try:
        gpus = parse(stdout, expected_driver, expected_mig)
    except ValueError as error:
        return {"host": host, "usable": False, "gpus": [], "warnings": [],
                "lines": [f"{host}: unreadable nvidia-smi output: {error}"]}
    if not gpus:
        return {"host": host, "usable": False, "gpus": [], "warnings": [],
                "lines": [f"{host}: no usable GPU: nvidia-smi lists no card"]}
    warnings = [f"GPU {gpu.index}: {warning}" for gpu in gpus for warning in gpu.warnings]
    return {"host": host, "usable": True,
            "gpus": [{"index": g.index, "name": g.name, "driver": g.driver, "mig_mode": g.mig_mode,
                      "link_width": g.link_width, "link_width_max": g.link_width_max, "warnings": g.warnings}
                     for g in gpus],
            "warnings": warnings, "lines": [f"{host}: {gpu.line()}" for gpu in gpus]}
