-- The list of one's chats (GET /v1/chats): a title (the chat's last
-- chat.title), pinned first, the last message's first words and when it was
-- said. `title` and `preview` are set by the append that logs the envelope
-- they come from, so they never disagree with the log.
ALTER TABLE chats ADD COLUMN title TEXT;
ALTER TABLE chats ADD COLUMN title_seq INTEGER;          -- the chat.title it comes from
ALTER TABLE chats ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
ALTER TABLE chats ADD COLUMN preview TEXT;
ALTER TABLE chats ADD COLUMN active_at INTEGER NOT NULL DEFAULT 0;
UPDATE chats SET active_at = updated_at;
CREATE INDEX chats_owner_list ON chats (owner, archived, pinned DESC, active_at DESC, id DESC);

-- Search (GET /v1/chats?q=): every chat.text (the user's and the agents'
-- words) and chat.title of the log, indexed by the append that logs it, in
-- the same transaction. `owner` holds one token, `o` and the owner's bytes
-- in hex, so a search intersects the user's rows inside the index. Nothing is ever deleted from it: a title hit counts
-- only while it is the chat's title (`title_seq`). Built here from the log
-- as it stands.
CREATE VIRTUAL TABLE chat_search USING fts5(
    body,
    owner,
    chat_id UNINDEXED,
    seq UNINDEXED,
    kind UNINDEXED,
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO chat_search (body, owner, chat_id, seq, kind)
    SELECT substr(json_extract(t.payload, '$.content'), 1, 100000), 'o' || hex(c.owner),
           t.chat_id, t.seq, 'text'
    FROM (
        SELECT chat_id, seq, payload FROM envelopes WHERE type = 'chat.text'
        UNION ALL
        SELECT chat_id, seq, payload FROM journal WHERE type = 'chat.text'
    ) AS t JOIN chats c ON c.id = t.chat_id;
UPDATE chats SET preview = (
    SELECT substr(json_extract(t.payload, '$.content'), 1, 160) FROM (
        SELECT seq, payload FROM envelopes WHERE chat_id = chats.id AND type = 'chat.text'
        UNION ALL
        SELECT seq, payload FROM journal WHERE chat_id = chats.id AND type = 'chat.text'
    ) AS t ORDER BY t.seq DESC LIMIT 1
);
