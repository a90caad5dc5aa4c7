-- The list of one's chats (GET /v1/chats): a title (the chat's last
-- chat.title), pinned first, the last message's first words and when it was
-- said. `title` and `preview` are set by the append that logs the envelope
-- they come from, in its transaction, so they never disagree with the log.
ALTER TABLE chats
    ADD COLUMN title TEXT,
    ADD COLUMN title_seq BIGINT,                  -- the chat.title it comes from
    ADD COLUMN pinned BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN preview TEXT,
    ADD COLUMN active_at BIGINT NOT NULL DEFAULT 0;
UPDATE chats SET active_at = updated_at;
CREATE INDEX chats_owner_list ON chats (owner, archived, pinned DESC, active_at DESC, id DESC);

-- Search (GET /v1/chats?q=): every chat.text (the user's and the agents'
-- words) and chat.title of the log, as a tsvector, written by the append
-- that logs it, in the same transaction. Nothing is ever deleted from it: a
-- title hit counts only while it is the chat's title (`title_seq`). Built here from the
-- log as it stands (an operator with a large log may fill it beforehand
-- with the same INSERT; the primary key makes this one skip what is there).
CREATE TABLE chat_search (
    chat_id  UUID NOT NULL,
    seq      BIGINT NOT NULL,
    kind     TEXT NOT NULL,                  -- 'text' or 'title'
    tsv      TSVECTOR NOT NULL,
    PRIMARY KEY (chat_id, seq)
);
CREATE INDEX chat_search_tsv ON chat_search USING gin (tsv);
-- (A payload holding an escaped NUL cannot be read as jsonb: skipped. The
-- words are split as the server splits them: runs of letters and digits.)
INSERT INTO chat_search (chat_id, seq, kind, tsv)
    SELECT chat_id, seq, 'text', to_tsvector('simple', lower(regexp_replace(
               left(payload::jsonb ->> 'content', 100000), '[^[:alnum:]]+', ' ', 'g')))
    FROM envelopes WHERE type = 'chat.text' AND strpos(payload, '\u0000') = 0
    ON CONFLICT DO NOTHING;
UPDATE chats c SET preview = left(t.content, 160)
FROM (
    SELECT DISTINCT ON (chat_id) chat_id, payload::jsonb ->> 'content' AS content
    FROM envelopes WHERE type = 'chat.text' AND strpos(payload, '\u0000') = 0
    ORDER BY chat_id, seq DESC
) AS t
WHERE t.chat_id = c.id;
