-- A user's database connections (seed 003). `spec` is the connection as JSON
-- (driver, host, port, database, username, or a file path); `secret` its
-- password sealed with AES-256-GCM under the master key, never in clear.
CREATE TABLE connections (
    id         TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    secret     BLOB,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX connections_by_owner ON connections (owner, created_at);
