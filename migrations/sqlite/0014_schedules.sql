-- Schedules (issue 38): an agent or template started for a user on a cron
-- expression in a time zone. `next_at` is the next due time: a node fires
-- it (the chat's id is made from the schedule and the due time, so two
-- nodes firing the same time start one chat) and moves it on with a
-- conditional update.
CREATE TABLE schedules (
    id          TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    agent       TEXT NOT NULL,
    message     TEXT,
    context     TEXT,                -- a JSON object
    cron        TEXT NOT NULL,
    time_zone   TEXT NOT NULL,
    missed      TEXT NOT NULL,       -- skip | run_once
    paused      INTEGER NOT NULL DEFAULT 0,
    next_at     INTEGER NOT NULL,    -- unix ms
    last_at     INTEGER,             -- unix ms: the last due time fired
    last_chat   TEXT,
    created_by  TEXT NOT NULL,       -- `user`, or `key:<name>`
    created_at  INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0;
CREATE INDEX schedules_owner ON schedules (owner, created_at);
