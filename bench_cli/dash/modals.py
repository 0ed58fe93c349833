"""The dashboard's dialogs: fields of input (`Ask`), or a text and the keys that answer
it (`Choice`: a confirmation, a thread, the help).

Every dialog's text is written to fit an 80-column terminal (a dialog there has 66
columns inside); a longer prompt wraps instead of being cut (`.dialog Label` in the
app's CSS), and each says which keys answer it. A dialog's `name` says which it is.
"""

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


class Ask(ModalScreen[list[str] | None]):
    """Fields under a prompt, each (value, placeholder): Enter moves to the next field
    and on the last gives every field's value; Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, name: str, prompt: str, keys: str, *fields: tuple[str, str]):
        super().__init__(name=name)
        self.prompt, self.keys, self.fields = prompt, keys, fields

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.prompt)
            for value, placeholder in self.fields:
                yield Input(value=value, placeholder=placeholder)
            yield Label(self.keys, classes="keys")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        fields = list(self.query(Input))
        if event.input is fields[-1]:
            self.dismiss([f.value for f in fields])
        else:
            self.focus_next()

    def action_cancel(self) -> None:
        self.dismiss(None)


class Choice(ModalScreen[str | None]):
    """A text and a line of the keys that answer it: `answers` gives each key's answer
    (None: closed with none); other keys do nothing. `scroll`: the text scrolls, top
    aligned (a thread); `wide`: the dialog takes most of the screen."""

    BINDINGS = [
        Binding(key, f"answer('{key}')", show=False)
        for key in ("y", "n", "r", "q", "escape", "question_mark")
    ]

    def __init__(
        self,
        name: str,
        text: str,
        hint: str,
        answers: dict[str, str | None],
        wide: bool = False,
        scroll: bool = False,
    ):
        super().__init__(name=name)
        self.text, self.hint, self.answers = text, hint, answers
        self.wide, self.scroll = wide, scroll

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide" if self.wide else "dialog"):
            text = Static(self.text, markup=False)
            yield VerticalScroll(text) if self.scroll else text
            if self.hint:
                yield Label(self.hint)

    def action_answer(self, key: str) -> None:
        if key in self.answers:
            self.dismiss(self.answers[key])


# At most 64 columns a line: the dialog's inside at 80 columns.
HELP = """bench dash: keys

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
