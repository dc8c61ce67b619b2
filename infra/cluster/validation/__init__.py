"""Offline validation of the objects the cluster layer renders: the target Kubernetes minor's OpenAPI
schemas in strict mode and the project's CRD schemas (validate), then the project's own checks of what
the API server enforces beyond its schemas (rules, gathering syntax, fields, enums and kinds).
"""
