"""Run the benchmarks of docs/performance.md and print the table (and JSON to $BENCH_RESULTS).

    python -m tools.perf.run [--quick] [--only NAME,...]

Every target is a ratio against a baseline measured in the same run. A missed target is
printed as MISS and does not fail the run; a benchmark that crashes does (exit 1).
"""

import argparse
import os
import sys
import time
import traceback

from tools.perf import (
    agents,
    bridge,
    cpu,
    dash,
    doors,
    fleet,
    mail,
    sandboxed,
    scale,
    search,
    spawn,
    states,
)
from tools.perf.harness import Context, Result, compile_product, crashed, table, write_json

# name -> function, in the order of docs/performance.md (the table's order).
BENCHMARKS = {
    "cli-send": mail.cli_send,
    "send-1": mail.send_1,
    "send-16": mail.send_16,
    "send-cpu": cpu.send_cpu,
    "send-noisy": mail.send_noisy,
    "list-scale": scale.list_scale,
    "send-scale": scale.send_scale,
    "wake": agents.wake,
    "wake-states": states.wake_states,
    "relay": agents.relay,
    "fanout": agents.fanout,
    "restart": scale.restart,
    "rss": scale.rss,
    "bridge": bridge.bridge,
    "search-scale": search.search_scale,
    "dash-idle": dash.dash_idle,
    "fleet": fleet.fleet,
    "spawn": spawn.spawn,
    "cli-send-sandboxed": sandboxed.cli_send_sandboxed,
    "door": doors.door,
    "reports": doors.reports,
    "hook": doors.hook,
}
# The order they run in: fanout uses send-16's figure; send-scale adds messages to the
# shared filled directory, so it runs after the others that use it (search-scale too).
RUN_ORDER = [
    "cli-send",
    "send-1",
    "send-16",
    "send-cpu",
    "send-noisy",
    "list-scale",
    "restart",
    "rss",
    "search-scale",
    "send-scale",
    "wake",
    "wake-states",
    "fanout",
    "relay",
    "dash-idle",
    "fleet",
    "bridge",
    "spawn",
    "cli-send-sandboxed",
    "door",
    "reports",
    "hook",
]


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m tools.perf.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="CI-sized runs (seconds each)")
    p.add_argument("--only", metavar="NAME,...", help=f"run only these ({', '.join(BENCHMARKS)})")
    args = p.parse_args(argv)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BENCHMARKS]
        if unknown:
            p.error(f"unknown benchmark(s): {', '.join(unknown)}")
        args.names = names
    else:
        args.names = list(BENCHMARKS)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    for k in [k for k in os.environ if k.startswith("BENCH_") and k != "BENCH_RESULTS"]:
        del os.environ[k]  # inside a bench session, its token would be refused by our daemons
    ctx = Context(args.quick, log=lambda s: print(s, flush=True))
    mode = "quick" if args.quick else "full"
    print(f"bench benchmarks ({mode}), python {sys.executable}", flush=True)
    compile_product()  # every row measures bytecode, as an install runs
    results: dict[str, list[Result]] = {}
    took: dict[str, float] = {}
    t_all = time.monotonic()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        todo = [n for n in RUN_ORDER if n in args.names]
        for i, name in enumerate(todo, 1):
            at = time.monotonic() - t_all
            print(f"- [{i}/{len(todo)}] {name} ... ({at / 60:.1f} min in)", flush=True)
            t0 = time.monotonic()
            try:
                results[name] = BENCHMARKS[name](ctx)
            except Exception as err:  # noqa: BLE001 - one crash must not hide the others
                traceback.print_exc()
                results[name] = [crashed(name, f"{type(err).__name__}: {err}")]
            took[name] = time.monotonic() - t0
            for r in results[name]:
                status = "CRASHED" if r.error else ("pass" if r.passed else "MISS")
                ratio = "" if r.ratio is None else f" ratio {r.ratio:.3g}x"
                print(
                    f"  {r.name}: {status}{ratio} ({took[name]:.1f} s = {took[name] / 60:.1f} min)",
                    flush=True,
                )
    finally:
        ctx.cleanup()
    rows = [r for name in BENCHMARKS if name in results for r in results[name]]
    for name in results:
        for r in results[name]:
            r.params.setdefault("mode", mode)
            r.params.setdefault("run_started", started)
            r.params.setdefault("bench_seconds", round(took[name], 1))
    print()
    print(table(rows))
    print()
    notes(rows)
    print(f"total {time.monotonic() - t_all:.0f} s")
    out = os.environ.get("BENCH_RESULTS")
    if out:
        write_json(out, rows)
        print(f"results written to {out}")
    n_crash = sum(r.error is not None for r in rows)
    n_miss = sum(r.error is None and not r.passed for r in rows)
    print(f"{len(rows) - n_crash - n_miss} passed, {n_miss} missed, {n_crash} crashed")
    return 1 if n_crash else 0


NOTE_KEYS = {
    "cli-send": [
        "fastpath_import_ms",
        "cpu_ratio",
        "runs",
        "bench_p90_ms",
        "floor_p90_ms",
        "imports_trio",
        "modules_imported",
    ],
    "spawn": ["samples", "sandboxed_p90_ms", "unsandboxed_p90_ms"],
    "cli-send-sandboxed": ["runs", "bench_p90_ms", "floor_p90_ms", "processes_visible"],
    "send-1": ["ratios", "spread", "latency_p50_ms", "latency_p99_ms"],
    "send-16": ["ratios", "spread", "rates", "baseline_rates"],
    "send-cpu": ["cpu_us_1", "rounds_us_16"],
    "bridge-cpu": ["daemon1_us", "daemon2_us", "bridge1_us", "bridge2_us", "messages"],
    "send-noisy": ["sends", "rounds", "p50_ms", "baseline_p50_ms"],
    "list-scale": ["big", "small", "calls", "big_p50_ms", "small_p50_ms"],
    "list-scale/scan": ["scans"],
    "send-scale": ["ratios", "spread", "sends", "big_p50_ms", "empty_p50_ms"],
    "wake": ["samples", "overhead_p50_ms", "ack_to_submitted_p50_ms", "enter_retries"],
    "wake-states/woken": ["messages", "agents", "woken_p50_ms", "active_p50_ms", "active_p99_ms"],
    "wake-states/success": ["woken", "not_woken"],
    "relay": ["sessions", "bytes_each", "reps"],
    "fanout": [
        "ratios",
        "spread",
        "jobs",
        "rate_by_event_ts",
        "settle_span_s",
        "spawn_s",
        "baseline",
    ],
    "restart": ["restarts", "empty_dir_ready_s", "baseline_runs"],
    "bridge/p99": [
        "samples",
        "latency_p50_ms",
        "latency_p99_ms",
        "bare_p99_ms",
        "local1_p99_ms",
        "local2_p99_ms",
        "floor_p99_ms",
    ],
    "bridge/sends": ["senders", "messages", "local_sends_16"],
    "bridge-idle": [
        "quiet_spells",
        "spells_with_idle_closes",
        "idle_timeout_s",
        "cold_ms",
        "warm_p50_ms",
        "warm_max_ms",
    ],
    "rss": [
        "sessions",
        "messages",
        "daemon_VmHWM_MB",
        "daemon_no_sessions_VmRSS_MB",
        "baseline_VmHWM_MB",
    ],
    "search-scale": [
        "big",
        "queries",
        "big_p50_ms",
        "small_p50_ms",
        "common_word_p99_ms",
    ],
    "search-scale/grep": ["grep_runs"],
    "dash-idle": ["sessions", "window_s", "events"],
    "dash-idle/latency": ["samples", "p50_ms", "in_order_ms"],
    "fleet/send": [
        "sends_busy",
        "busy_p50_ms",
        "idle_p50_ms",
        "reached_kb_s_each",
        "daemon_cpu_busy_pct",
        "daemon_cpu_idle_pct",
    ],
    "fleet/wake": ["wakes_busy", "idle_p99_ms", "busy_ms"],
}


def _short(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def notes(rows: list[Result]) -> None:
    """The N behind each figure, and the shared directory."""
    shared = None
    for r in rows:
        if r.error is not None:
            print(f"  {r.name}: {r.error}")
            continue
        keys = NOTE_KEYS.get(r.name, [])
        bits = [f"{k}={_short(r.params[k])}" for k in keys if k in r.params]
        bits.append(f"{r.params.get('bench_seconds')} s")
        print(f"  {r.name}: " + ", ".join(bits))
        if "shared_dir" in r.params:
            shared = r.params
    if shared:
        print(
            f"  note: {shared['shared_dir']}; filled through the daemon by "
            f"{shared.get('fill_clients', 32)} concurrent clients "
            f"({shared.get('fill_processes', 1)} processes) in {shared['fill_s']} s ({shared['fill_rate']} sends/s)"
        )


if __name__ == "__main__":
    sys.exit(main())
