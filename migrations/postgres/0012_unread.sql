-- Unread counts (issue 38): the agents' texts since the owner last read
-- the chat (said something in it, or marked it read up to `read_seq`).
ALTER TABLE chats ADD COLUMN read_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE chats ADD COLUMN unread BIGINT NOT NULL DEFAULT 0;
