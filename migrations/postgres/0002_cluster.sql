-- Several nodes on one database: who they are, which node owns which chat,
-- and the commands one node forwards to another.

-- A node is alive while it holds the advisory lock (class 1634170740, its id)
-- on a session of its own. Its X25519 public key seals what is sent to it.
CREATE TABLE nodes (
    id          BIGSERIAL PRIMARY KEY,
    public_key  BYTEA NOT NULL,
    started_at  BIGINT NOT NULL                -- unix ms
);

-- The node running a chat's actor. `epoch` goes up at every change of hands;
-- an append carries the epoch it was granted and is refused once it moved.
CREATE TABLE chat_leases (
    chat_id  UUID PRIMARY KEY,
    node_id  BIGINT NOT NULL,
    epoch    BIGINT NOT NULL
);

-- A command for the owner of a chat, sealed to that node's public key.
-- `NOTIFY agentwire_node_<node_id>` tells the node; it deletes what it takes.
CREATE TABLE node_commands (
    id          UUID PRIMARY KEY,
    node_id     BIGINT NOT NULL,
    sender      BIGINT NOT NULL,
    body        BYTEA NOT NULL,
    created_at  BIGINT NOT NULL                -- unix ms
);

CREATE INDEX node_commands_created ON node_commands (created_at);
