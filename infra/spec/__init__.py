"""The environment spec: typed models of the inventory files and the loader that reads them."""

from infra.spec.loader import Environment, Host, Pool, SpecError, load_environment

__all__ = ["Environment", "Host", "Pool", "SpecError", "load_environment"]
