-- Webhooks' reminders (issue 38): the waits for a person (an input request,
-- an approval) still open, written and closed in the transaction that logs
-- what opens and closes them; a node that finds one open past
-- `webhook_remind_seconds` puts another event in the outbox.
CREATE TABLE webhook_waits (
    chat_id    TEXT   NOT NULL,
    seq        BIGINT NOT NULL,         -- the envelope that opened it
    event      TEXT   NOT NULL,         -- input.requested, approval.requested
    wait_key   TEXT   NOT NULL,         -- its request_id, or the call's corr
    opened_at  BIGINT NOT NULL,         -- unix ms
    reminders  BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (chat_id, seq)
);
CREATE INDEX webhook_waits_opened ON webhook_waits (opened_at);
