-- When each chunk was staged: what an upload left when its node died
-- (never recorded as a blob's) is swept once it is old (issue 36).
-- SQLite needs none: one process owns its file and drops them at opening.
ALTER TABLE blob_chunks ADD COLUMN staged_at TIMESTAMPTZ NOT NULL DEFAULT now();
