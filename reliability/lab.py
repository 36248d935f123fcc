"""One scenario from start to verdict: fresh state, supervised processes, the workload,
the faults, the drain, the checks, and everything stopped whatever happened."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.workers import WorkerSpec
from reliability import checks, config, ledger, logscan
from reliability.load import Load, Workload
from reliability.processes import Supervisor, Unit, base_env
from reliability.services import Postgres, Redis, admin


@dataclasses.dataclass(frozen=True)
class Context:
    quick: bool
    seed: int
    #: Runs still open this long after the last fault count as stuck.
    drain_limit: float
    #: Seconds watched after the drain for errors that keep coming back.
    quiet_seconds: float
    #: Clock offset of the skewed workers (the clock scenario).
    skew_seconds: float
    run_dir: pathlib.Path
    results_dir: pathlib.Path
    #: The soak's size and length.
    soak_workflows: int = 10_000
    soak_seconds: float = 15 * 60

    def log(self, message: str) -> None:
        print(f"  · {message}", flush=True)


@dataclasses.dataclass(frozen=True)
class Fault:
    at: float
    kind: str
    detail: str = ""
    #: Processes the fault killed.
    pids: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    workload: Callable[[Context], Workload]
    #: The fault phase: returns when the last fault is done (services back up).
    inject: Callable[[Lab], None]
    workers: Callable[[Context], list[tuple[str, str, int | None]]] = lambda ctx: [
        ("solo-a", "solo", None),
        ("solo-b", "solo", None),
        ("pre", "prefork", 2),
    ]
    #: Engine settings that differ from the defaults (stated in the report).
    engine_settings: Callable[[Context], dict[str, Any]] = lambda ctx: {}
    #: Clock offsets by worker name (seconds), for the clock scenario.
    clock_offsets: Callable[[Context], dict[str, float]] = lambda ctx: {}
    #: More supervised processes (schedule tickers, celery beat).
    extra_units: Callable[[Lab], None] | None = None
    #: Scenario-specific figures, and failures judged from them.
    extra_checks: Callable[[Lab, Any], dict[str, Any]] | None = None
    judge: Callable[[dict[str, Any]], list[str]] | None = None
    #: What to report without failing the scenario (documented behaviour worth seeing).
    warn: Callable[[dict[str, Any]], list[str]] | None = None
    #: Workflow types whose runs may stay open by design (e.g. a parked poison run).
    expected_open: tuple[str, ...] = ()
    #: Doctor checks expected to be raised by design (the parked poison run): the
    #: doctor runs after the scenario whatever its outcome, and these lines are marked.
    expected_doctor: tuple[str, ...] = ()
    #: Overrides the run's drain limit (a long backlog drains longer).
    drain_limit: float | None = None
    in_quick: bool = True


class Lab:
    """What a scenario's fault phase works with."""

    def __init__(self, ctx: Context, scenario: Scenario, postgres: Postgres, redis: Redis) -> None:
        self.ctx = ctx
        self.scenario = scenario
        self.postgres = postgres
        self.redis = redis
        self.rng = random.Random(ctx.seed)
        self.log_dir = ctx.results_dir / "logs" / scenario.name
        self.supervisor = Supervisor(ctx.run_dir, self.log_dir)
        self.faults: list[Fault] = []
        self.load: Load | None = None
        self.started = time.time()
        #: What a scenario keeps between its fault phase and its checks.
        self.notes: dict[str, Any] = {}

    def fault(self, kind: str, detail: str = "", pids: tuple[int, ...] = ()) -> None:
        self.faults.append(Fault(time.time(), kind, detail, pids))
        self.ctx.log(f"fault: {kind} {detail}".rstrip())

    def env(self, role: str) -> dict[str, str]:
        extra = {"DW_CHAOS_ENGINE_SETTINGS": json.dumps(self.engine_settings)}
        return base_env(role, **extra)

    def add_worker(self, name: str, pool: str, concurrency: int | None) -> Unit:
        env = self.env(f"worker:{name}")
        offset = self.scenario.clock_offsets(self.ctx).get(name)
        if offset:
            env["DW_CHAOS_CLOCK_OFFSET"] = str(offset)
        spec = WorkerSpec(
            name=name,
            app="reliability.celery_app",
            settings="reliability.settings",
            pool=pool,
            concurrency=concurrency,
            loglevel="--loglevel=WARNING",
            quiet=False,
            env=tuple(env.items()),
        )
        return self.supervisor.add_worker(spec)

    def add_command(self, name: str, args: list[str], **env: str) -> Unit:
        """A supervised ``manage.py`` command (``python -m django ...``)."""
        return self.add_program(name, ["-m", "django", *args], **env)

    def add_program(self, name: str, argv: list[str], **env: str) -> Unit:
        return self.supervisor.add_program(name, argv, env={**self.env(name), **env})

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def until(self, seconds_from_start: float) -> None:
        self.sleep(self.started + seconds_from_start - time.time())

    @property
    def engine_settings(self) -> dict[str, Any]:
        return self.scenario.engine_settings(self.ctx)

    @property
    def drain_limit(self) -> float:
        return max(self.scenario.drain_limit or 0.0, self.ctx.drain_limit)

    def elapsed(self) -> float:
        """Seconds since the workload began."""
        return time.time() - self.started

    def ensure_services(self) -> None:
        if not self.postgres.running():
            self.postgres.start()
            self.fault("restore", "postgresql was down after the fault phase")
        if not self.redis.ping():
            self.redis.start()
            self.fault("restore", "redis was down after the fault phase")


def reset(ctx: Context, redis: Redis) -> None:
    """Empty the engine's tables, the audit, the ledger and the broker; the harness's own
    connections (maybe broken by the previous scenario's faults) are opened afresh."""
    from django.db import connections

    connections.close_all()
    with admin() as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND "
                "(tablename LIKE 'durable\\_workflow\\_%' OR tablename LIKE 'chaos\\_%')"
            ).fetchall()
        ]
        conn.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
    redis.flush()
    ledger.clear(ctx.run_dir)


def execute(ctx: Context, scenario: Scenario, postgres: Postgres, redis: Redis) -> dict[str, Any]:
    reset(ctx, redis)
    lab = Lab(ctx, scenario, postgres, redis)
    shutil.rmtree(lab.log_dir, ignore_errors=True)
    lab.log_dir.mkdir(parents=True)
    workload = scenario.workload(ctx)
    try:
        for name, pool, concurrency in scenario.workers(ctx):
            lab.add_worker(name, pool, concurrency)
        lab.add_command("repair-loop", ["workflow_repair", "--loop"], DW_CHAOS_ENGINE_LOG="INFO")
        if scenario.extra_units:
            scenario.extra_units(lab)
        lab.supervisor.wait_ready()
        lab.supervisor.start()
        lab.started = time.time()
        lab.load = Load(workload, seed=ctx.seed, give_up_after=lab.drain_limit)
        lab.load.begin()
        scenario.inject(lab)
        lab.ensure_services()
        return _verdict(lab, workload, phase_end=time.time())
    finally:
        lab.supervisor.stop()


def _drain(lab: Lab, deadline: float) -> float | None:
    """Wait until every run is closed and the client is done; when that happened."""
    assert lab.load is not None
    while time.time() < deadline:
        try:
            with admin() as conn:
                open_runs = checks.open_runs(conn, lab.scenario.expected_open)
        except Exception:
            open_runs = -1
        if open_runs == 0 and lab.load.done():
            return time.time()
        time.sleep(0.5)
    return None


def _verdict(lab: Lab, workload: Workload, phase_end: float) -> dict[str, Any]:
    ctx = lab.ctx
    last_fault = max((f.at for f in lab.faults), default=phase_end)
    drained = _drain(lab, phase_end + lab.drain_limit)
    ctx.log("drained" if drained else f"not drained {lab.drain_limit:.0f} s after the faults")
    quiet_from = drained or time.time()
    lab.sleep(quiet_from + ctx.quiet_seconds - time.time())
    with admin() as conn:
        figures: dict[str, Any] = {
            "orders": checks.orders(conn, workload),
            "runs": checks.run_counts(conn),
            "duplicates": checks.duplicates(conn),
            "events_after_terminal": checks.events_after_terminal(conn),
            "stuck": checks.stuck_runs(conn, lab.scenario.expected_open),
            "executions": checks.executions(conn, ctx.run_dir),
            "timing": checks.timing(conn),
            "recovery": checks.recovery(conn, [(f.at, f.pids) for f in lab.faults if f.pids]),
        }
        if lab.scenario.extra_checks:
            figures.update(lab.scenario.extra_checks(lab, conn))
    assert lab.load is not None
    figures["drain_seconds"] = round(drained - last_fault, 1) if drained else None
    figures["faults"] = [dataclasses.asdict(f) for f in lab.faults]
    figures["client"] = {
        "errors_retried": sum(lab.load.client_errors.values()),
        "errors": dict(lab.load.client_errors.most_common(5)),
        "unsent": lab.load.unsent,
    }
    figures["process_exits"] = _exits(lab)
    figures["logs"] = logscan.scan(lab.log_dir, quiet_from)
    figures["engine_settings"] = lab.engine_settings
    scenario = lab.scenario
    if scenario.expected_doctor:  # judged with the rest
        figures["doctor"] = doctor(lab)
    figures["failures"] = judge(figures) + (scenario.judge(figures) if scenario.judge else [])
    figures["warnings"] = warnings(figures) + (scenario.warn(figures) if scenario.warn else [])
    figures["status"] = "FAIL" if figures["failures"] else "warn" if figures["warnings"] else "ok"
    if figures["failures"] and "doctor" not in figures:
        figures["doctor"] = doctor(lab)
    for check in figures.get("doctor", {}).get("checks", []):
        check["expected"] = check["id"] in scenario.expected_doctor
    return figures


def _exits(lab: Lab) -> dict[str, Any]:
    killed, own = {}, {}
    for exit_ in lab.supervisor.exits:
        bucket = killed if exit_.expected else own
        bucket[exit_.unit] = bucket.get(exit_.unit, 0) + 1
    codes = sorted({e.returncode for e in lab.supervisor.unexpected_exits()}, key=str)
    return {"killed_by_harness": killed, "exited_on_their_own": own, "own_exit_codes": codes}


def doctor(lab: Lab) -> dict[str, Any]:
    """What ``workflow_doctor --json`` says: the checks that are not ok."""
    env = {**os.environ, **lab.env("doctor")}
    result = subprocess.run(
        [sys.executable, "-m", "django", "workflow_doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=config.ROOT,
    )
    try:
        document = json.loads(result.stdout)
    except ValueError:
        return {"error": (result.stderr or result.stdout)[-1000:]}
    return {
        "status": document.get("status"),
        "checks": [
            {"id": c.get("id"), "status": c.get("status"), "message": c.get("message")}
            for c in document.get("checks", [])
            if c.get("status") != "ok"
        ],
    }


def warnings(f: dict[str, Any]) -> list[str]:
    """Allowed, but worth a look: processes that died without being killed."""
    own = f["process_exits"]["exited_on_their_own"]
    return [f"{name} exited on its own {n} time(s)" for name, n in own.items()]


def judge(f: dict[str, Any]) -> list[str]:
    """What every scenario must show, whatever its faults."""
    failures = []
    orders = f["orders"]
    if orders["completed"] < orders["total"]:
        failures.append(
            f"{orders['total'] - orders['completed']} of {orders['total']} not completed"
        )
    if orders["wrong_outputs"]:
        failures.append(f"{orders['wrong_outputs']} wrong outputs")
    failures += [f"{n} x {name}" for name, n in f["duplicates"].items() if n]
    if f["events_after_terminal"]:
        failures.append(f"{f['events_after_terminal']} events after a terminal event")
    if f["stuck"]["count"]:
        failures.append(f"{f['stuck']['count']} runs stuck")
    timing = f["timing"]
    if timing["timers_fired_early"]:
        failures.append(f"{timing['timers_fired_early']} timers fired early")
    for kind, n in timing["leases_taken_before_expiry"].items():
        failures.append(f"{n} {kind} leases taken before they expired")
    if timing["leases_taken_from_live_holders"]:
        failures.append(
            f"{timing['leases_taken_from_live_holders']} leases taken from live holders"
        )
    for repeat in f["logs"]["repeating_after_faults"]:
        failures.append(f"{repeat['log']} kept logging: {repeat['error'][:120]}")
    if f["client"]["unsent"]:
        failures.append(f"{len(f['client']['unsent'])} client calls never went through")
    return failures
