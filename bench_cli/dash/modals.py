"""The dashboard's dialogs: a line of input, a confirmation, a message to send, a thread.

Every dialog's text is written to fit an 80-column terminal (a dialog there has 66
columns inside); a longer prompt wraps instead of being cut (`.dialog Label` in the
app's CSS), and each says which keys answer it.
"""

from typing import TypedDict

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


class Ask(ModalScreen[str | None]):
    """One line of input; Enter gives it, Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, prompt: str, value: str = "", keys: str = "Enter: done   Escape: cancel"):
        super().__init__()
        self.prompt, self.value, self.keys = prompt, value, keys

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.prompt)
            yield Input(value=self.value, id="answer")
            yield Label(self.keys, classes="keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    """y confirms; anything else (n, Escape) does not."""

    BINDINGS = [Binding("y", "yes", "yes"), Binding("n,escape", "no", "no")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question)
            yield Label("y: yes    n / Escape: no")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)


class Draft(TypedDict):
    """A message the operator wrote in Compose: the recipient as typed (stripped)."""

    to: str
    subject: str
    body: str


class Compose(ModalScreen[Draft | None]):
    """A message from the operator: to, subject, body (Enter moves on; Enter on the body sends)."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, to: str = ""):
        super().__init__()
        self.to = to

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Send mail as operator")
            yield Input(value=self.to, placeholder="to (a handle)", id="to")
            yield Input(placeholder="subject (one line, optional)", id="subject")
            yield Input(placeholder="body", id="body")
            yield Label("Enter: next field, on the body: send   Escape: cancel", classes="keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "body":
            self.dismiss(
                Draft(
                    to=self.query_one("#to", Input).value.strip(),
                    subject=self.query_one("#subject", Input).value,
                    body=event.value,
                )
            )
        else:
            self.focus_next()

    def action_cancel(self) -> None:
        self.dismiss(None)


class Thread(ModalScreen[str | None]):
    """A message and its thread, bodies shown; r retires the message, Escape closes."""

    BINDINGS = [Binding("escape,q", "close", "close"), Binding("r", "retire", "retire")]

    def __init__(self, text: str, unread: bool):
        super().__init__()
        self.text, self.unread = text, unread

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            with VerticalScroll():
                yield Static(self.text, markup=False)
            hint = "r: retire (mark read)   " if self.unread else ""
            yield Label(hint + "Escape: close (nothing is retired)")

    def action_close(self) -> None:
        self.dismiss(None)

    def action_retire(self) -> None:
        self.dismiss("retire" if self.unread else None)


class Help(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    # At most 64 columns a line: the dialog's inside at 80 columns.
    TEXT = """bench dash: keys

  up/down  move in the focused pane       Tab  next pane
  Enter    on a session: follow it; on a mail: open its thread
  a        attach to the session (Ctrl-] comes back here)
  t        type a line into the session (Enter follows)
  m        send mail as operator
  k        kill the session (asks first)
  /        search mail (every word must occur; word* a prefix)
  b        mail pane: the session's mailbox / the operator's
  f        filter events: a kind prefix (mail/) and/or a handle
  Escape   close a dialog or this help; leave a search
  ?        this help                      q, Ctrl-C  quit

Opening a mail never retires it: r in its thread retires it."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static(self.TEXT, markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
