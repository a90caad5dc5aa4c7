-- A chat's tree (src/session/tree.rs) is read from its chat.branch envelopes
-- alone: found by this index without reading the rest of the chat's log.
-- Partial, so no other envelope pays for it on append. Built in the
-- migration's transaction (writes to envelopes wait while it reads the
-- table): an operator with a large table creates it beforehand with
--   CREATE INDEX CONCURRENTLY envelopes_branch ON envelopes (chat_id, seq) WHERE type = 'chat.branch';
-- and this finds it there. (CONCURRENTLY cannot run here: it would wait for
-- the other nodes holding the migration lock while they wait for it.)
CREATE INDEX IF NOT EXISTS envelopes_branch ON envelopes (chat_id, seq) WHERE type = 'chat.branch';
