"""What the daemon's frames look like on the dashboard: a screen frame as Rich text with
its colours, and a message's delivery states on one line."""

from rich.text import Text

from bench_cli.dash.model import Answer, printable

_PYTE_COLOURS = {"brown": "yellow", "brightbrown": "bright_yellow"}


def colour(name: str) -> str | None:
    if name == "default":
        return None
    if len(name) == 6 and all(c in "0123456789abcdefABCDEF" for c in name):
        return "#" + name
    name = _PYTE_COLOURS.get(name, name)
    if name.startswith("bright") and not name.startswith("bright_"):
        name = "bright_" + name[6:]
    return name


def screen_lines(frame: Answer) -> list[Text]:
    """A screen frame as Rich text, one per row, with the colours the daemon's model keeps
    (trailing blank rows left out)."""
    lines = frame["lines"]
    styles = frame.get("styles") or []
    last = len(lines)
    while last > 0 and not lines[last - 1]:
        last -= 1
    out = []
    for y, line in enumerate(lines[:last]):
        t = Text(printable(line), no_wrap=True, overflow="crop")
        for start, length, fg, bg, flags in styles[y] if y < len(styles) else []:
            parts = []
            if "b" in flags:
                parts.append("bold")
            if "i" in flags:
                parts.append("italic")
            if "u" in flags:
                parts.append("underline")
            if "r" in flags:
                parts.append("reverse")
            f, b = colour(fg), colour(bg)
            if f:
                parts.append(f)
            if b:
                parts.append("on " + b)
            if parts:
                t.stylize(" ".join(parts), start, start + length)
        out.append(t)
    return out


def delivery_text(st: Answer) -> str:
    """A message's delivery states on one line: `woken 05:44:11.448, active ...`."""
    out = []
    for x in st["states"]:
        why = x.get("reason") or x.get("by") or ""
        out.append(f"{x['state']}{f' ({why})' if why else ''} {x['at'][11:23]}")
    return ", ".join(out)
