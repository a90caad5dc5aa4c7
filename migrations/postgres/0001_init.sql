-- Chats and their append-only envelope logs (PostgreSQL).
CREATE TABLE chats (
    id          UUID PRIMARY KEY,
    owner       TEXT NOT NULL,
    agent       TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'idle',
    context     TEXT,                          -- JSON object from chat.start
    model       TEXT,                          -- the model the chat switched to
    archived    BOOLEAN NOT NULL DEFAULT FALSE,
    created_at  BIGINT NOT NULL,               -- unix ms
    updated_at  BIGINT NOT NULL                -- unix ms
);

CREATE INDEX chats_running ON chats (state) WHERE state <> 'idle';
CREATE INDEX chats_owner_created ON chats (owner, created_at DESC, id DESC);

CREATE TABLE envelopes (
    chat_id        UUID NOT NULL REFERENCES chats (id),
    seq            BIGINT NOT NULL,
    type           TEXT NOT NULL,
    ts             BIGINT NOT NULL,            -- unix ms
    corr           TEXT,
    client_msg_id  TEXT,
    payload        TEXT NOT NULL,              -- the whole envelope, JSON text as sent
    PRIMARY KEY (chat_id, seq)
);

CREATE INDEX envelopes_corr ON envelopes (chat_id, corr) WHERE corr IS NOT NULL;
CREATE INDEX envelopes_client_msg ON envelopes (chat_id, client_msg_id) WHERE client_msg_id IS NOT NULL;
CREATE INDEX envelopes_text ON envelopes (chat_id, seq) WHERE type = 'chat.text';
