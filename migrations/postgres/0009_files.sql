-- Files users upload and tools hand back (issue 36). A file is a record —
-- who owns it, the chat it came in, its name and sniffed media type — over a
-- blob: the content, stored once per owner by its SHA-256, in chunks, so an
-- upload or a download never holds a whole file in memory.
CREATE TABLE files (
    id          UUID PRIMARY KEY,
    owner       TEXT NOT NULL,
    chat_id     UUID NOT NULL,
    name        TEXT NOT NULL,
    media_type  TEXT NOT NULL,
    size        BIGINT NOT NULL,
    sha256      TEXT NOT NULL,          -- hex: the blob
    created_at  BIGINT NOT NULL         -- unix ms
);
CREATE INDEX files_chat ON files (chat_id);
CREATE INDEX files_blob ON files (owner, sha256);

-- One row per stored content of an owner; `chunks` names its chunks (the
-- upload that brought it: chunks are never renamed, so sealing a large file
-- does not rewrite it).
CREATE TABLE blobs (
    owner   TEXT NOT NULL,
    sha256  TEXT NOT NULL,
    chunks  TEXT NOT NULL,
    size    BIGINT NOT NULL,
    PRIMARY KEY (owner, sha256)
);

-- A blob's bytes, `idx` from 0, under `blob = 'upload:<id>'`: staged while
-- the upload is written, then the blob's (or dropped, when the owner has that
-- content already).
CREATE TABLE blob_chunks (
    owner  TEXT NOT NULL,
    blob   TEXT NOT NULL,
    idx    INTEGER NOT NULL,
    data   BYTEA NOT NULL,
    PRIMARY KEY (owner, blob, idx)
);
