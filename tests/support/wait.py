"""One wait helper: poll a condition against a deadline, never a fixed sleep."""

import time


def wait_for(
    fn,
    timeout: float = 30.0,
    what: str = "condition",
    *,
    error: type[Exception] = AssertionError,
    pause: float = 0.01,
    max_pause: float = 0.2,
):
    """Poll fn until it returns something truthy and return that value; at the deadline
    raise `error` naming `what`. The pause between polls doubles up to max_pause, so a
    quick condition is seen at once and a slow one does not spin a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, max_pause)
