-- The databases chats are spread over (`[[databases]]`), as this database
-- was told at its first start in the spread: a chat's database is chosen by
-- its id and these names, so a list that changed would look for chats in
-- the wrong place. Empty for a database used alone.
CREATE TABLE spread (
    position  INTEGER PRIMARY KEY,
    name      TEXT NOT NULL
);
