"""Device names: ``/job:J/replica:R/task:T/device:TYPE:N`` and TensorFlow's short forms.

A DeviceSpec may be partial (any field None); ``merge`` fills the missing fields from another spec,
as ``with tf.device(...)`` blocks nest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from tensorgrid.core import errors

_PART = re.compile(r"^(job|replica|task|device|cpu|gpu|CPU|GPU):?(.*)$")


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str | None) -> DeviceSpec:
        """Parse a full or partial device name.

        Raises:
            InvalidArgumentError: the string is not a device name.
        """
        if not spec:
            return cls()
        job = replica = task = dtype = dindex = None
        for part in spec.strip("/").split("/"):
            if not part:
                continue
            m = _PART.match(part)
            if m is None:
                # a bare "CPU:0" / "GPU:1"
                raise errors.InvalidArgumentError(f"Malformed device name {spec!r} (at {part!r})")
            key, rest = m.group(1), m.group(2)
            try:
                if key == "job":
                    job = rest or None
                elif key == "replica":
                    replica = int(rest)
                elif key == "task":
                    task = int(rest)
                elif key == "device":
                    t, _, idx = rest.partition(":")
                    dtype = t.upper() or None
                    dindex = None if idx in ("", "*") else int(idx)
                else:  # cpu:0, gpu:1, CPU:0
                    dtype = key.upper()
                    dindex = None if rest in ("", "*") else int(rest)
            except ValueError as exc:
                raise errors.InvalidArgumentError(
                    f"Malformed device name {spec!r} (at {part!r})"
                ) from exc
        return cls(job, replica, task, dtype, dindex)

    def merge(self, other: DeviceSpec) -> DeviceSpec:
        """Fields of self win; missing ones come from other."""
        return DeviceSpec(
            self.job if self.job is not None else other.job,
            self.replica if self.replica is not None else other.replica,
            self.task if self.task is not None else other.task,
            self.device_type if self.device_type is not None else other.device_type,
            self.device_index if self.device_index is not None else other.device_index,
        )

    def with_(self, **kw: Any) -> DeviceSpec:
        return replace(self, **kw)

    @property
    def task_name(self) -> str:
        """'/job:J/replica:0/task:T' (the task part only)."""
        return f"/job:{self.job}/replica:{self.replica or 0}/task:{self.task or 0}"

    def to_string(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            idx = "*" if self.device_index is None else str(self.device_index)
            parts.append(f"/device:{self.device_type}:{idx}")
        return "".join(parts)

    def matches(self, full: DeviceSpec) -> bool:
        """True if every field this spec sets equals that field of ``full``."""
        return all(
            mine is None or mine == theirs
            for mine, theirs in (
                (self.job, full.job), (self.replica, full.replica), (self.task, full.task),
                (self.device_type, full.device_type), (self.device_index, full.device_index),
            )
        )

    def __str__(self) -> str:
        return self.to_string()


def canonical(spec: str | DeviceSpec | None) -> str:
    """The canonical string of a device name ('' for none)."""
    if spec is None:
        return ""
    ds = spec if isinstance(spec, DeviceSpec) else DeviceSpec.from_string(spec)
    return ds.to_string()


def full_name(job: str, task: int, device_type: str = "CPU", index: int = 0, replica: int = 0) -> str:
    return f"/job:{job}/replica:{replica}/task:{task}/device:{device_type}:{index}"


def task_of(device: str) -> str:
    """'/job:J/replica:R/task:T' of a full device name."""
    return DeviceSpec.from_string(device).task_name
