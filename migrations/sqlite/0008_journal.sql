-- The journal (src/store/sqlite/journal.rs): appends spread thin over many
-- chats land here first, in insertion order, and are moved into `envelopes`
-- in per-chat runs by later commits. Start-up moves whatever is left.
CREATE TABLE journal (
    id             INTEGER PRIMARY KEY,    -- insertion order, given by the writer
    chat_id        TEXT NOT NULL REFERENCES chats (id),
    seq            INTEGER NOT NULL,
    type           TEXT NOT NULL,
    ts             INTEGER NOT NULL,
    corr           TEXT,
    client_msg_id  TEXT,
    payload        TEXT NOT NULL
);
