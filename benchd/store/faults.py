"""Test-only fault injection: make a named I/O point fail with a chosen errno.

Armed through the `debug/fault` verb, which the daemon refuses unless started with
`--test-hooks`. Production code calls `check(point)` just before the real I/O; with
nothing armed it is one dict lookup.
"""

import errno as _errno
import os

_armed: dict[str, list[int]] = {}


def arm(point: str, err: str, count: int) -> None:
    code = getattr(_errno, err, None)
    if not isinstance(code, int):
        raise ValueError(f"unknown errno name {err!r}")
    if count <= 0:
        _armed.pop(point, None)
    else:
        _armed[point] = [code, count]


def check(point: str) -> None:
    slot = _armed.get(point)
    if slot is None:
        return
    slot[1] -= 1
    if slot[1] <= 0:
        del _armed[point]
    raise OSError(slot[0], os.strerror(slot[0]) + f" (injected at {point})")


def clear() -> None:
    _armed.clear()
