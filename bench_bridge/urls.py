"""Which NATS URLs the bridge accepts, and the names it uses in NATS. Pure."""

import ipaddress
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from bench_wire.errors import WireError

STREAM = "BENCH_MAIL"
SUBJECT_ROOT = "bench.mail"
DIRECTORY = "BENCH_NODES"
KV_STREAM = f"KV_{DIRECTORY}"  # the stream behind the directory bucket


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(url: str, tls: bool, insecure: bool) -> str:
    """The URL, or bad-url / insecure-url with the reason."""
    parts = urlsplit(url)
    if parts.scheme not in ("nats", "tls", "ws", "wss") or not parts.hostname:
        raise WireError("bad-url", f"{url!r} is not a NATS URL (nats://HOST:PORT or tls://...)")
    secure = tls or parts.scheme in ("tls", "wss")
    if not secure and not insecure and not is_loopback(parts.hostname):
        raise WireError(
            "insecure-url",
            f"{parts.scheme}://{parts.hostname} is another host and the connection has no "
            "TLS: mail would cross the network in clear text; use tls:// or --tls-ca, "
            "or --insecure to accept that",
        )
    return url


def shown(url: str) -> str:
    """The URL as logged: a password in it is replaced by `***`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{parts.username}:***@{host}").geturl()


def token(name: str) -> str:
    """A node or handle as one NATS subject token: `.` separates tokens, so it becomes
    `~` (never in a name), which keeps node `a` from matching node `a.b`'s subjects."""
    return name.replace(".", "~")


def subject(to_node: str, from_node: str, handle: str) -> str:
    """Where mail to `handle@to_node` from `from_node` is published: the origin is in the
    subject so NATS permissions can bind it (docs/nodes.md, "Authentication")."""
    return f"{SUBJECT_ROOT}.{token(to_node)}.{token(from_node)}.{token(handle)}"


# The last token of a subject that carries receipts, not mail: never a handle, and under
# the sender's own name, so it needs no permission mail does not have (docs/nodes.md).
RECEIPTS = "@receipts"


def receipt_subject(to_node: str, from_node: str) -> str:
    """Where `from_node` sends receipts for mail `to_node` sent it."""
    return f"{SUBJECT_ROOT}.{token(to_node)}.{token(from_node)}.{RECEIPTS}"


def is_receipts(subject: str) -> bool:
    return subject.rpartition(".")[2] == RECEIPTS


def origin_of(subject: str) -> str | None:
    """The origin node named by a mail subject; None when it is not one."""
    parts = subject.split(".")
    if len(parts) != 5 or ".".join(parts[:2]) != SUBJECT_ROOT or not parts[3]:
        return None
    return parts[3].replace("~", ".")


def inbox_prefix(node: str) -> str:
    return f"_INBOX_{token(node)}"


def consumer(node: str) -> str:
    return f"bench-{token(node)}"


def msg_id(origin: str, sender: str, key: str, digest: str) -> str:
    """JetStream's dedup id: a key is unique per sender, and a sender belongs to its
    origin node; the digest of the message keeps anyone else from claiming the id first."""
    return f"{origin} {sender} {key} {digest}"


@dataclass(frozen=True)
class Connection:
    """How to reach NATS, the same for `bench bridge` and `bench nodes init`."""

    url: str
    creds: str | None = None
    token: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False

    def check(self) -> None:
        """bad-url / insecure-url (check_url) for this URL and its TLS."""
        check_url(self.url, bool(self.tls_ca or self.tls_cert), self.insecure)

    def tls(self) -> ssl.SSLContext | None:
        """The TLS context (None without one), made once: a bad file is an error of the
        command line (bad-tls), not something to retry."""
        if not (self.tls_ca or self.tls_cert):
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.tls_ca)
            if self.tls_cert:
                ctx.load_cert_chain(self.tls_cert, self.tls_key)
        except (OSError, ValueError) as err:
            raise WireError("bad-tls", f"the TLS files could not be used: {err}") from None
        return ctx

    def auth(self, tls: ssl.SSLContext | None) -> dict[str, object]:
        """nats.connect's keywords for the credentials and TLS (the rest is the caller's)."""
        opts: dict[str, object] = {}
        if self.creds:
            opts["user_credentials"] = self.creds
        if self.token:
            opts["token"] = self.token
        if tls is not None:
            opts["tls"] = tls
        return opts
