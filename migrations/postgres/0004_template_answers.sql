-- The answer key of template questions the model wrote (seed 004 §5): kept
-- on the server, never sent to a client.
CREATE TABLE template_answers (
    chat_id  UUID NOT NULL,
    corr     TEXT NOT NULL,
    answer   TEXT NOT NULL,          -- JSON: an option, or a list of options
    PRIMARY KEY (chat_id, corr)
);
