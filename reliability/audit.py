"""The suite's instruments in the engine's database: triggers that write down, with the
database server's own clock, when each timer was created and fired and when each task
lease was taken, renewed and given up.

They let the suite judge "fired early" and "lease taken away before it expired" in real
time, whatever the clocks of the processes that wrote the engine's rows. They only read
the engine's rows (AFTER triggers, no change to what the engine's statements see).
"""

from __future__ import annotations

INSTALL = """
CREATE TABLE chaos_timer_audit (
    timer_id uuid PRIMARY KEY,
    run_id uuid NOT NULL,
    sequence integer NOT NULL,
    delay_seconds double precision NOT NULL,
    created_db timestamptz NOT NULL,
    created_by text,
    fired_db timestamptz,
    fired_by text,
    fire_count integer NOT NULL DEFAULT 0
);

CREATE FUNCTION chaos_timer_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chaos_timer_audit
            (timer_id, run_id, sequence, delay_seconds, created_db, created_by)
        VALUES (NEW.id, NEW.run_id, NEW.sequence, NEW.delay_seconds, clock_timestamp(),
                current_setting('application_name'))
        ON CONFLICT DO NOTHING;
    ELSIF NEW.status = 'fired' AND OLD.status IS DISTINCT FROM 'fired' THEN
        UPDATE chaos_timer_audit
        SET fired_db = coalesce(fired_db, clock_timestamp()), fire_count = fire_count + 1,
            fired_by = coalesce(fired_by, current_setting('application_name'))
        WHERE timer_id = NEW.id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER chaos_timer_audit AFTER INSERT OR UPDATE ON durable_workflow_timer
FOR EACH ROW EXECUTE FUNCTION chaos_timer_audit();

CREATE TABLE chaos_lease_audit (
    task_id uuid NOT NULL,
    generation integer NOT NULL,
    task_type text NOT NULL,
    owner text,
    lease_seconds double precision,
    claimed_db timestamptz NOT NULL,
    renewed_db timestamptz,
    released_db timestamptz,
    released_as text,
    released_by text,
    PRIMARY KEY (task_id, generation)
);

CREATE FUNCTION chaos_lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'leased' AND (TG_OP = 'INSERT' OR OLD.status <> 'leased'
                                  OR NEW.lease_generation <> OLD.lease_generation) THEN
        INSERT INTO chaos_lease_audit
            (task_id, generation, task_type, owner, lease_seconds, claimed_db)
        VALUES (NEW.id, NEW.lease_generation, NEW.task_type, NEW.lease_owner,
                extract(epoch FROM NEW.lease_expires_at - NEW.leased_at), clock_timestamp())
        ON CONFLICT DO NOTHING;
    ELSIF TG_OP = 'UPDATE' AND OLD.status = 'leased' AND NEW.status = 'leased'
          AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at THEN
        UPDATE chaos_lease_audit SET renewed_db = clock_timestamp()
        WHERE task_id = NEW.id AND generation = NEW.lease_generation;
    ELSIF TG_OP = 'UPDATE' AND OLD.status = 'leased' AND NEW.status <> 'leased' THEN
        UPDATE chaos_lease_audit
        SET released_db = clock_timestamp(),
            released_as = CASE WHEN NEW.status = 'ready' THEN 'reopened' ELSE NEW.status END,
            released_by = current_setting('application_name')
        WHERE task_id = NEW.id AND generation = OLD.lease_generation;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER chaos_lease_audit AFTER INSERT OR UPDATE ON durable_workflow_task
FOR EACH ROW EXECUTE FUNCTION chaos_lease_audit();
"""

CLEAR = "TRUNCATE chaos_timer_audit, chaos_lease_audit"

#: Slack for "early": the database stamps a timer when its row is inserted, a little after
#: the workflow task read the clock it computed the fire time from.
EARLY_TOLERANCE_SECONDS = 1.0

#: Early fires by who scheduled and who fired the timer (roles, without their pids).
TIMERS_FIRED_EARLY = """
SELECT regexp_replace(created_by, ':[0-9]+$', ''), regexp_replace(fired_by, ':[0-9]+$', ''),
       count(*), max(extract(epoch FROM created_db) + delay_seconds
                     - extract(epoch FROM fired_db))
FROM chaos_timer_audit
WHERE fired_db < created_db + make_interval(secs => delay_seconds - %(tolerance)s)
GROUP BY 1, 2 ORDER BY 3 DESC
"""

TIMERS_FIRED_TWICE = "SELECT count(*) FROM chaos_timer_audit WHERE fire_count > 1"

#: A task made ready again by another process than its holder (the holder's pid is in
#: ``lease_owner``, host:pid:suffix; the releaser's in its application name, role:pid):
#: a reclaim. Its holder giving it back (after a failed settle) is a hand-back.
RECLAIMED = """released_as = 'reopened'
  AND split_part(released_by, ':', -1) <> split_part(owner, ':', 2)"""

#: A lease reclaimed before it expired in real time: its expiry is the claim's or the last
#: renewal's database time plus the lease's length.
LEASES_TAKEN_EARLY = f"""
SELECT task_type, count(*),
       coalesce(max(extract(epoch FROM coalesce(renewed_db, claimed_db)) + lease_seconds
                    - extract(epoch FROM released_db)), 0)
FROM chaos_lease_audit
WHERE {RECLAIMED}
  AND released_db < coalesce(renewed_db, claimed_db)
                    + make_interval(secs => lease_seconds - %(tolerance)s)
GROUP BY task_type
"""

LEASES_RECLAIMED = f"""
SELECT task_type, count(*) FROM chaos_lease_audit WHERE {RECLAIMED} GROUP BY task_type
"""

LEASES_HANDED_BACK = """
SELECT task_type, count(*) FROM chaos_lease_audit
WHERE released_as = 'reopened' AND split_part(released_by, ':', -1) = split_part(owner, ':', 2)
GROUP BY task_type
"""


def install(conn) -> None:  # type: ignore[no-untyped-def]
    conn.execute(INSTALL)


def clear(conn) -> None:  # type: ignore[no-untyped-def]
    conn.execute(CLEAR)
