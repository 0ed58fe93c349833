"""`bench service install`: a systemd user unit that runs `bench daemon`."""

import os
import re
import shutil
import subprocess
import sys

import click

from bench_cli.context import Ctx, DaemonOption, common, daemon_options, done, examples, option_args
from bench_cli.group import Group
from bench_wire.client import resolve_dir, socket_path


@click.group(cls=Group)
def service() -> None:
    """Run benchd as a systemd user service."""


UNIT_HELP = "the unit's name: systemctl --user status NAME"


def unit_text(bench_dir: str, name: str, bench: str, options: list[str]) -> str:
    """The systemd user unit that runs `bench daemon` for one BENCH_DIR."""
    argv = " ".join(_unit_quote(w) for w in [bench, "daemon", "--dir", bench_dir, *options])
    return (
        f"# Written by `bench service install`: benchd for BENCH_DIR={bench_dir}\n"
        f"# socket: {bench_dir}/benchd.sock; its structured log: {bench_dir}/benchd.log;\n"
        f"# its output: journalctl --user -u {name}; state: systemctl --user status {name}\n"
        "[Unit]\n"
        f"Description=bench daemon (benchd) for {bench_dir}\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"Environment={_unit_quote('BENCH_DIR=' + bench_dir)}\n"
        f"ExecStart={argv}\n"
        "# benchd ends its sessions itself on SIGTERM; the rest of the group only after.\n"
        "KillMode=mixed\n"
        "TimeoutStopSec=30\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def _unit_quote(word: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_@%+=:,./-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _bench_program() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "bench")
    return here if os.access(here, os.X_OK) else os.path.abspath(sys.argv[0])


@service.command("install")
@common
@click.option("--print", "print_only", is_flag=True, help="print the unit; write nothing")
@click.option("--name", default="bench", metavar="NAME", help=UNIT_HELP)
@daemon_options
def service_install(
    bench_dir: str | None, as_json: bool, print_only: bool, name: str, **kw: DaemonOption
) -> None:
    """Write a systemd user unit that runs `bench daemon` for BENCH_DIR."""
    if not re.fullmatch(r"[A-Za-z0-9_.@-]+", name):
        raise click.BadParameter("letters, digits and _ . @ - only", param_hint="--name")
    d = resolve_dir(bench_dir)
    socket_path(d)
    text = unit_text(d, name, _bench_program(), option_args(kw))
    if print_only:
        click.echo(text, nl=False)
        return
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    unit_dir = os.path.join(config, "systemd", "user")
    os.makedirs(unit_dir, exist_ok=True)
    path = os.path.join(unit_dir, f"{name}.service")
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        note = (
            "systemctl was not found: nothing will run this unit here. Without systemd, "
            f"start the daemon with `bench up --dir {d}`, or run `bench daemon --dir {d}` "
            "under your own supervisor"
        )
    else:
        r = subprocess.run([systemctl, "--user", "daemon-reload"], capture_output=True, text=True)
        if r.returncode != 0:
            why = (r.stderr.strip().splitlines() or ["no reason given"])[-1]
            note = (
                f"systemctl --user daemon-reload failed ({why}): is a user systemd "
                f"running? Until it is, start the daemon with `bench up --dir {d}`"
            )
        else:
            note = (
                f"start it now and at login: systemctl --user enable --now {name}; "
                f"status: systemctl --user status {name}; logs: journalctl --user -u {name}"
            )
    done(
        Ctx(d, as_json),
        {
            "ok": True,
            "type": "service/install",
            "path": path,
            "unit": name,
            "systemctl": systemctl is not None,
            "note": note,
        },
        f"wrote {path}\n{note}",
    )


service_install.epilog = examples(
    "bench service install --print",
    "bench service install --dir ~/work/bench --idle-gate 1.5",
    "systemctl --user enable --now bench",
)
