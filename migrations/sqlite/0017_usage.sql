-- Usage and cost (issue 39): what each user's runs of each agent used, per
-- model and day (UTC), added in the transaction that logs a run's
-- `chat.usage_summary`. Kept when a chat is deleted: it was spent.
CREATE TABLE usage_daily (
    owner             TEXT   NOT NULL,
    agent             TEXT   NOT NULL,
    model             TEXT   NOT NULL,            -- the run's own model ('' unknown)
    day               TEXT   NOT NULL,            -- YYYY-MM-DD, UTC
    runs              INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_nanos        INTEGER NOT NULL DEFAULT 0,  -- the priced runs' cost, in 1e-9
    unpriced_runs     INTEGER NOT NULL DEFAULT 0,  -- runs that used tokens at no known price
    PRIMARY KEY (owner, agent, model, day)
);
CREATE INDEX usage_daily_day ON usage_daily (day);
