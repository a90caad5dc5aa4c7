-- Webhooks out (issue 38): the events a backend is told of, written in the
-- transaction that logs what made them, so none is lost or made twice;
-- delivered (and retried) from here by any node, in order per chat, each
-- with the same id every time.
CREATE TABLE webhook_outbox (
    id           TEXT PRIMARY KEY,      -- the webhook-id: msg_<chat>_<seq>
    chat_id      TEXT NOT NULL,
    seq          BIGINT  NOT NULL,
    event        TEXT NOT NULL,         -- run.completed, run.failed, …
    created_at   BIGINT  NOT NULL,      -- unix ms
    attempts     BIGINT  NOT NULL DEFAULT 0,
    next_at      BIGINT  NOT NULL,      -- unix ms: when to try (again)
    lease_until  BIGINT ,               -- unix ms: a node is sending it
    delivered_at BIGINT ,
    last_error   TEXT
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_at) WHERE delivered_at IS NULL;
CREATE INDEX webhook_outbox_chat ON webhook_outbox (chat_id, seq) WHERE delivered_at IS NULL;
