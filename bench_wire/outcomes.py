"""A job's ending in one vocabulary: its outcome and the reason for it.

The same two words are in `bench ps` (and --json), the `job/settled` event, the
dashboard and the reply mail's header, so a reader never has to translate:

- `completed`: the child exited with code 0 (no reason);
- `failed`: the child ended by itself, unsuccessfully: reason `exit-code` or `signal`;
- `interrupted`: something ended the work: reason `killed` (`bench kill`), `deadline`
  (its `--deadline` passed) or `daemon-stopped` (the daemon stopped or died under it);
- `cancelled`: `bench kill --cancel`: no reply is sent.

Records written by earlier versions said `outcome_unknown` for a job whose daemon died
under it: `current` reads it as `interrupted` with reason `daemon-stopped`.

No imports: the CLI and the daemon both read it.
"""

OUTCOMES = ("completed", "failed", "interrupted", "cancelled")
REASONS = ("exit-code", "signal", "killed", "deadline", "daemon-stopped")

# Words earlier versions stored, and what they mean now.
_OLD = {"outcome_unknown": ("interrupted", "daemon-stopped")}


def current(outcome: str | None, reason: str | None = None) -> tuple[str | None, str | None]:
    """(outcome, reason) in today's words, for a record of any version."""
    if outcome in _OLD:
        new, why = _OLD[outcome]
        return new, reason or why
    return outcome, reason


def upgrade_event(record: dict[str, object]) -> dict[str, object]:
    """A `job/settled` record from the log in today's words (others unchanged)."""
    if record.get("kind") != "job/settled" or record.get("outcome") not in _OLD:
        return record
    old, why = record.get("outcome"), record.get("reason")
    outcome, reason = current(str(old), why if isinstance(why, str) else None)
    return dict(record, outcome=outcome, reason=reason)
