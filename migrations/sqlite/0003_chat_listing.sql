-- Archived chats keep their history but take no new turns (DELETE /v1/chats/{id}).
ALTER TABLE chats ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
-- GET /v1/chats: a user's chats, newest first.
CREATE INDEX chats_owner_created ON chats (owner, created_at DESC, id DESC);
