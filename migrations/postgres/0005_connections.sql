-- A user's database connections (seed 003). `spec` is the connection as JSON
-- (driver, host, port, database, username, or a file path); `secret` its
-- password sealed with AES-256-GCM under the master key, never in clear.
CREATE TABLE connections (
    id         UUID PRIMARY KEY,
    owner      TEXT NOT NULL,
    spec       TEXT NOT NULL,
    secret     BYTEA,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX connections_by_owner ON connections (owner, created_at);
