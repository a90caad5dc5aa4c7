//! What the store's upkeep calls report.

/// What is left after the store's `tidy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tidy {
    /// Nothing: no need to call again before the next append.
    Done,
    /// Some work was done and more may be due: call again when still idle.
    Again,
    /// Work is waiting but not due yet: call again in a while.
    Later,
}

/// What the store's `reindex` rebuilt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reindexed {
    /// Chats whose title, preview and last activity were set again.
    pub chats: u64,
    /// Rows of the search index written (texts and titles).
    pub rows: u64,
}
