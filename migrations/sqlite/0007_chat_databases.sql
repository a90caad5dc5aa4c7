-- The database a chat talks to (seed 003): its connection, the schema
-- snapshot the model is grounded on, and the last SQL result.
CREATE TABLE chat_databases (
    chat_id       TEXT PRIMARY KEY,
    connection_id TEXT NOT NULL,
    db_schema     TEXT NOT NULL,
    sql_result    TEXT
);
