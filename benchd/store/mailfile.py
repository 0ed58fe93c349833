"""Reading one stored mail file, the one reader every mailroom path goes through: never
through a link, never blocked on a FIFO (a mail directory is the user's to touch)."""

from bench_wire.errors import WireError
from benchd.core import frontmatter
from benchd.core.frontmatter import FrontMatter
from benchd.store.statedir import read_regular


def load(path: str) -> bytes | None:
    """The file's bytes; None when it is gone (moved by a read, or removed by hand)."""
    try:
        return read_regular(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise WireError("bad-mail-file", f"{path} cannot be read: {err.strerror}") from None


def _left(path: str, why: str) -> WireError:
    return WireError("bad-mail-file", f"{path}{why}; it was left where it is")


def read(path: str, data: bytes) -> tuple[FrontMatter, bytes]:
    """The front matter and body of a mail file; `bad-mail-file` when it is not one bench
    can read (the file is left where it is: a person may mean to mend it)."""
    try:
        meta, body = frontmatter.parse(data)
    except (frontmatter.BadMailFile, UnicodeDecodeError) as err:
        raise _left(path, f" is not a mail file bench can read ({err})") from None
    for name in ("from", "to", "date", "key", "subject"):
        if not isinstance(meta.get(name), str):
            raise _left(path, f": its {name} is not a string")
    try:
        return FrontMatter.of(meta), body
    except frontmatter.BadMailFile as err:
        raise _left(path, f": {err}") from None
