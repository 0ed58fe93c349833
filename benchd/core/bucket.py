"""A token bucket: `burst` tokens, one back every `refill` seconds. Pure.

The courier's wake bucket (one per recipient) and the send bucket (one per sender,
benchd.core.limits) are both one of these."""


class TokenBucket:
    def __init__(self, burst: int, refill: float, now: float):
        self.burst = burst
        self.refill = refill
        self.tokens = float(burst)
        self.stamp = now

    def _top_up(self, now: float) -> None:
        if now > self.stamp:
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) / self.refill)
        self.stamp = now

    def take(self, now: float, n: int = 1) -> bool:
        """Spend `n` tokens if there are that many (else spend none)."""
        self._top_up(now)
        if self.tokens >= n:
            self.tokens -= n
            return True
        return False

    def seconds_until(self, n: int, now: float) -> float:
        """How long until `n` tokens are there (0 if they are; never more than burst)."""
        self._top_up(now)
        return max(0.0, (n - self.tokens) * self.refill)

    def give_back(self, now: float) -> None:
        """Return a token that bought nothing (its mail was read before the wake)."""
        self._top_up(now)
        self.tokens = min(self.burst, self.tokens + 1.0)

    def next_token_at(self, now: float) -> float:
        """When the next whole token will be there (now, if one is)."""
        self._top_up(now)
        if self.tokens >= 1.0:
            return now
        return now + (1.0 - self.tokens) * self.refill
