-- The state of a template conversation (seed 004 §4); NULL for other chats.
ALTER TABLE chats ADD COLUMN conversation_state TEXT;
