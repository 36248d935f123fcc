"""Faults the scenarios share: each does one thing to a real process or service and
writes it down in the lab's fault log."""

from __future__ import annotations

from reliability import services
from reliability.lab import Lab
from reliability.processes import Unit


def _lease_holders() -> set[int]:
    """Pids of the processes that hold a task lease right now (``lease_owner`` is
    ``host:pid:suffix``)."""
    with services.admin() as conn:
        owners = conn.execute(
            "SELECT DISTINCT lease_owner FROM durable_workflow_task WHERE status = 'leased'"
        ).fetchall()
    parts = [str(owner).split(":") for (owner,) in owners if owner]
    return {int(p[1]) for p in parts if len(p) > 1 and p[1].isdigit()}


def kill_worker(lab: Lab) -> None:
    """SIGKILL one worker process: most often one that holds a lease (work in flight),
    else any: a solo worker, a prefork pool process, or a prefork worker's main process
    (its pool goes with it, as ``KillMode=control-group`` does). The fault names every
    process that died, so the checks can time how long their leases stranded work."""
    units = [u for u in lab.supervisor.workers() if u.alive() and u.process.ready()]
    busy = _lease_holders() if lab.rng.random() < 0.7 else set()
    for unit in units:
        victims = sorted(busy & set(unit.pids()[1:]))
        if victims and lab.supervisor.kill_pid(unit, victim := lab.rng.choice(victims)):
            lab.fault("sigkill", f"pool process of {unit.name} holding a lease", (victim,))
            return
        if unit.pid in busy:
            _kill_main(lab, unit, "holding a lease")
            return
    if not units:
        return
    unit = lab.rng.choice(units)
    if unit.spec is not None and unit.spec.pool == "prefork" and lab.rng.random() < 0.5:
        pid = lab.supervisor.kill_child(unit, lab.rng)
        if pid is not None:
            lab.fault("sigkill", f"pool process of {unit.name}", (pid,))
            return
    _kill_main(lab, unit)


def _kill_main(lab: Lab, unit: Unit, why: str = "") -> None:
    dying = tuple(unit.pids())  # a prefork worker's pool goes with its main process
    if lab.supervisor.kill(unit):
        lab.fault("sigkill", f"main process of {unit.name} {why}".rstrip(), dying)


def restart_redis(lab: Lab, down_seconds: float) -> None:
    lab.redis.kill()
    lab.fault("redis-crash", f"down {down_seconds:.0f} s")
    lab.sleep(down_seconds)
    lab.redis.start()


def flush_redis(lab: Lab) -> None:
    lab.redis.flush()
    lab.fault("redis-flushall", "every message lost")


def crash_postgres(lab: Lab, down_seconds: float) -> None:
    lab.postgres.crash()
    lab.fault("postgres-crash", f"pg_ctl stop -m immediate, down {down_seconds:.0f} s")
    lab.sleep(down_seconds)
    lab.postgres.start()


def terminate_worker_connections(lab: Lab) -> None:
    n = services.terminate_backends("worker:")
    lab.fault("pg-terminate-backend", f"{n} worker connections")
