"""containerd's recommended releases per Kubernetes minor (containerd.yml), and the verdict on one release."""

from __future__ import annotations

from functools import cache

from pydantic import field_validator

from infra.knowledge.base import Fact, load, version_key


class ContainerdSupport(Fact):
    source: str
    kubernetes: dict[str, list[str]]

    @field_validator("kubernetes")
    @classmethod
    def _one_minimum_per_line(cls, rows: dict[str, list[str]]) -> dict[str, list[str]]:
        for minor, minimums in rows.items():
            lines = [version_key(release)[:2] for release in minimums]
            if any(len(version_key(release)) != 3 for release in minimums) or len(set(lines)) != len(lines):
                raise ValueError(f"{minor}: name one major.minor.patch release per containerd line, got {minimums}")
        return rows

    def recommended(self, kube_minor: str) -> list[str] | None:
        """The lowest recommended release of each containerd line for KUBE_MINOR ("1.34"), newest line first;
        None where the table has no row for it."""
        row = self.kubernetes.get(kube_minor)
        return None if row is None else sorted(row, key=version_key, reverse=True)

    def refusal(self, kube_minor: str, release: str) -> str | None:
        """Why RELEASE ("2.3.7") is not recommended for KUBE_MINOR, or None when it is (or the minor has no row:
        see `recommended`)."""
        row = self.recommended(kube_minor)
        if row is None:
            return None
        line = version_key(release)[:2]
        newest = version_key(row[0])
        if line > newest[:2]:
            return None  # a line newer than every listed one
        for minimum in row:
            if version_key(minimum)[:2] == line:
                if version_key(release) >= version_key(minimum):
                    return None
                return f"containerd {release} is below {minimum}, the lowest {minimum.rsplit('.', 1)[0]} release " \
                       f"containerd recommends for Kubernetes {kube_minor}"
        return f"containerd {release}'s line {'.'.join(map(str, line))} is not among those containerd recommends " \
               f"for Kubernetes {kube_minor} ({', '.join(m + '+' for m in row)})"


@cache
def containerd_support() -> ContainerdSupport:
    return ContainerdSupport.model_validate(load("containerd.yml"))
