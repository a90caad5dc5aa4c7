-- A chat's tree (src/session/tree.rs) is read from its chat.branch envelopes
-- alone: found by this index without reading the rest of the chat's log.
-- Partial, so no other envelope pays for it on append. Built CONCURRENTLY
-- (outside a transaction: the one statement of this file), so a deploy does
-- not stop the writers while it reads a large table.
CREATE INDEX CONCURRENTLY IF NOT EXISTS envelopes_branch ON envelopes (chat_id, seq) WHERE type = 'chat.branch';
