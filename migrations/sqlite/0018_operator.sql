-- The operator's page (issue 39): recent errors across chats read by time
-- (only `chat.error` rows pay for the index), and what operators did.
CREATE INDEX envelopes_errors ON envelopes (ts) WHERE type = 'chat.error';
CREATE TABLE operator_acts (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       INTEGER NOT NULL,            -- unix ms
    actor    TEXT    NOT NULL,            -- `user:<id>` or `key:<name>`
    action   TEXT    NOT NULL,            -- `cancel`, `end_wait`
    chat_id  TEXT    NOT NULL,
    target   TEXT                         -- the wait ended, if any
);
