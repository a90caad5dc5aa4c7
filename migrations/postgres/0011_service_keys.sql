-- Service keys (issue 38): credentials for backends, with scopes. Only a
-- key's SHA-256 is stored; the key itself is printed once when created.
CREATE TABLE service_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    hash        TEXT NOT NULL UNIQUE,   -- hex SHA-256 of the whole key
    scopes      TEXT NOT NULL,          -- comma-separated
    created_at  BIGINT NOT NULL,        -- unix ms
    revoked_at  BIGINT                  -- unix ms; revoked keys stay listed
);
-- A name names one live key.
CREATE UNIQUE INDEX service_keys_live_name ON service_keys (name) WHERE revoked_at IS NULL;
