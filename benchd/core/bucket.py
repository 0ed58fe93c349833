"""The courier's token bucket: `burst` tokens, one back every `refill` seconds. Pure."""


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

    def take(self, now: float) -> bool:
        """Spend one token if there is one."""
        self._top_up(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

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
