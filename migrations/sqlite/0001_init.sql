-- Chats and their append-only envelope logs.
CREATE TABLE chats (
    id          TEXT PRIMARY KEY,          -- UUID, hyphenated
    owner       TEXT NOT NULL,             -- the authenticated user
    agent       TEXT NOT NULL,             -- agent id
    state       TEXT NOT NULL DEFAULT 'idle',
    context     TEXT,                      -- JSON object from chat.start
    created_at  INTEGER NOT NULL,          -- unix ms
    updated_at  INTEGER NOT NULL           -- unix ms
);

CREATE INDEX chats_running ON chats (state) WHERE state <> 'idle';

CREATE TABLE envelopes (
    chat_id        TEXT NOT NULL REFERENCES chats (id),
    seq            INTEGER NOT NULL,
    type           TEXT NOT NULL,
    ts             INTEGER NOT NULL,       -- unix ms
    corr           TEXT,
    client_msg_id  TEXT,
    payload        TEXT NOT NULL,          -- the whole envelope, JSON
    PRIMARY KEY (chat_id, seq)
) WITHOUT ROWID;

CREATE INDEX envelopes_corr ON envelopes (chat_id, corr) WHERE corr IS NOT NULL;
CREATE INDEX envelopes_client_msg ON envelopes (chat_id, client_msg_id) WHERE client_msg_id IS NOT NULL;
CREATE INDEX envelopes_text ON envelopes (chat_id, seq) WHERE type = 'chat.text';
