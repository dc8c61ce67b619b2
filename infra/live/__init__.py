"""The live-cluster edge: a local control plane built from the pinned Go tools, the real Pulumi CLI run
against it, the objects read back, and probe pods that prove placement and admission. Nothing below
imports it; only the CLI's `run --real-cluster` and the tests reach it.
"""
