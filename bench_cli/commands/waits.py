"""Delivery states and waits: `bench mail sent`, `bench mail status`, `bench mail wait`
(added to the mail group by bench_cli.commands.mail) and `bench job wait`."""

import re
from collections.abc import Callable
from typing import TypeVar

import click
import msgspec

from bench_cli import output
from bench_cli.context import Ctx, ask, common, complete_handles, complete_sessions, done, examples
from bench_cli.group import Group
from bench_wire import messages as m

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)?")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
SLACK_S = 10.0
FC = TypeVar(
    "FC", bound=Callable[..., object]
)  # the client waits this much longer than the daemon's timeout


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`30`, `30s`, `250ms`, `5m`, `1h` -> seconds."""
    if value is None:
        return None
    found = _DURATION.fullmatch(value.strip())
    if found is None or float(found.group(1)) <= 0:
        raise click.BadParameter(f"{value!r} is not a duration (30s, 5m, 1h, 250ms)")
    return float(found.group(1)) * _UNIT[found.group(2)]


def timeout_option(default: str) -> Callable[[FC], FC]:
    return click.option(
        "--timeout",
        callback=duration,
        default=default,
        metavar="DURATION",
        help="give up after this long (30s, 5m, 1h): exit 6, code timeout",
    )


def sent_text(a: m.SentListOk) -> str:
    """A header row and one row per message, like `mail list`'s: id, recipient, state
    (with its reason), the state's time, subject."""
    if not a.messages:
        return f"no sent mail from {a.sender}"
    states = [r.state + (f" ({r.reason})" if r.reason else "") for r in a.messages]
    tw = max(2, *(len(r.to) for r in a.messages))
    sw = max(5, *(len(s) for s in states))
    lines = [f"{'ID':<25}  {'TO':<{tw}}  {'STATE':<{sw}}  {'AT':<24}  SUBJECT"]
    for r, state in zip(a.messages, states, strict=True):
        lines.append(f"{r.mail_id:<25}  {r.to:<{tw}}  {state:<{sw}}  {r.at:<24}  {r.subject}")
    if a.truncated:
        lines.append("(more: raise --limit)")
    return "\n".join(lines)


# What `mail status` says of a state besides its name and time, in this order.
MARK_DETAILS = ("reason", "until", "by", "reader", "reply", "node")


def status_text(a: m.StatusOk) -> str:
    head = [f"id:    {a.mail_id}", f"from:  {a.sender}", f"to:    {a.to}"]
    head.append(f"state: {a.state}")
    lines = []
    for s in a.states:
        extra = [f"{k} {v}" for k in MARK_DETAILS if (v := getattr(s, k))]
        lines.append(f"  {s.state:<10} {s.at}" + ("  " + ", ".join(extra) if extra else ""))
    return "\n".join(head) + "\n" + "\n".join(lines)


@click.command("sent")
@common
@click.option("--to", metavar="ADDR", shell_complete=complete_handles, help="only mail to ADDR")
@click.option("--state", type=click.Choice(m.STATES), help="only mail in this state now")
@click.option("--limit", type=click.IntRange(1, 500), default=50, help="at most this many")
@click.option("--from", "sender", metavar="ADDR", help="whose sent mail (operator only)")
def mail_sent(
    bench_dir: str | None,
    as_json: bool,
    to: str | None,
    state: str | None,
    limit: int,
    sender: str | None,
) -> None:
    """List the mail you sent with its delivery state, newest first."""
    a = ask(bench_dir, m.MailSentList(to=to, state=state, limit=limit, sender=sender))
    done(Ctx(bench_dir, as_json), a, sent_text(a))


mail_sent.epilog = examples(
    "bench mail sent",
    "bench mail sent --to bob --state woken --limit 5",
    "bench mail sent --from alice  # the operator: anyone's",
)


@click.command("status")
@common
@click.argument("mail_id", metavar="ID")
def mail_status(bench_dir: str | None, as_json: bool, mail_id: str) -> None:
    """Show one message's delivery states with their times."""
    a = ask(bench_dir, m.MailStatus(mail_id=mail_id))
    done(Ctx(bench_dir, as_json), a, status_text(a))


mail_status.epilog = examples("bench mail status 20261130T045611.123Z-0001")


@click.command("wait")
@common
@click.option("--from", "sender", metavar="ADDR", help="only mail from ADDR")
@click.option("--reply-to", "reply_to", metavar="ID", help="only a reply to message ID")
@timeout_option("5m")
def mail_wait(
    bench_dir: str | None,
    as_json: bool,
    sender: str | None,
    reply_to: str | None,
    timeout: float,
) -> None:
    """Block until matching mail arrives, then read it (retiring it), as `mail read` does.

    At the timeout: exit 6 with the code `timeout`. A wait that would close a cycle of
    waits (you wait on bob while bob waits on you) is refused at once: would-deadlock."""
    req = m.MailWait(sender=sender, reply_to=reply_to, timeout=timeout)
    a = ask(bench_dir, req, timeout=timeout + SLACK_S)
    done(Ctx(bench_dir, as_json), a, output.message(msgspec.to_builtins(a)))


mail_wait.epilog = examples(
    "bench mail wait --from bob --timeout 10m",
    "bench mail wait --reply-to 20261130T045611.123Z-0001",
)


@click.group(cls=Group)
def job() -> None:
    """Jobs you started: wait for one to settle."""


@job.command("wait")
@common
@click.argument("handle", metavar="HANDLE", shell_complete=complete_sessions)
@timeout_option("30m")
def job_wait(bench_dir: str | None, as_json: bool, handle: str, timeout: float) -> None:
    """Block until the job of HANDLE (a handle or session id) settles; print its reply.

    The reply is the job's last `bench report` (or how its session ended); the reply
    mail itself is delivered as usual. At the timeout: exit 6, code timeout."""
    a = ask(bench_dir, m.JobWait(session=handle, timeout=timeout), timeout=timeout + SLACK_S)
    done(Ctx(bench_dir, as_json), a, job_wait_text(a))


def job_wait_text(a: m.JobWaitOk) -> str:
    """`job w (s1a2b3c4d) interrupted (deadline): <path>`, then the reply: the outcome
    and reason as the reply mail's subject says them."""
    head = f"job {a.handle} ({a.session}) {a.outcome}" + (f" ({a.reason})" if a.reason else "")
    if a.path:
        head += f": {a.path}"
    return f"{head}\n\n{a.reply}"


job_wait.epilog = examples("bench job wait worker --timeout 1h")
job.epilog = examples("bench job wait worker --timeout 1h")
