"""What the spec means for each host, pool and workload: pure arithmetic over the environment and the facts.

Each host's effective machine and GPU model (resolve), what its kubelet reserves and evicts (kubelet), its
allocatable, GPU resources and cost (capacity), its conntrack table (conntrack), MIG placements (mig),
driver verdicts (drivers), address blocks (network), and what one replica of a workload asks (workloads).
Everything above reads these; nothing here knows about checks, objects, hosts or clusters.
"""
