-- The model a chat switched to (POST /v1/chats/{id}/model); NULL: the agent's.
ALTER TABLE chats ADD COLUMN model TEXT;
