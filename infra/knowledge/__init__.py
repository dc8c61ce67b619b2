"""Facts as data: GPU models, platform defaults, pinned components, chart values and CSI drivers, one
module per YAML file beside it (gpus, platform, versions, chart_values, csi_drivers), each with a loader
named like its file; and Kubernetes' quantity and CPU-list notations (units).

The files are validated on load, so a typo in a new GPU entry fails the unit tests, not a plan.
"""
