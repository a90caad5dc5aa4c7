//! Opening a spread: every database opened and migrated, and the list of
//! names each recorded checked before any records it.

use super::ShardedStore;
use crate::store::{PgStore, StoreError};

impl ShardedStore {
    /// Opens (and migrates) each of `databases` (name, URL), the first the
    /// home, and checks that each was spread over these names before, or
    /// that all are new to the spread and hold no chat.
    ///
    /// # Errors
    /// A database cannot be reached or migrated, or the list changed
    /// ([`StoreError::Spread`]'s message names the databases).
    pub async fn open(databases: &[(String, String)], pool_size: u32) -> Result<Self, StoreError> {
        let names: Vec<String> = databases.iter().map(|(n, _)| n.clone()).collect();
        let mut parts = Vec::with_capacity(databases.len());
        let (mut recorded, mut chats) = (Vec::new(), false);
        for (name, url) in databases {
            let store = PgStore::open(url, pool_size).await?;
            let (known, holds) = store.join_spread(name, &names, false).await?;
            if known {
                recorded.push(name.as_str());
            }
            chats |= holds;
            parts.push((name.clone(), store));
        }
        // A database new to a spread that holds chats was replaced (its
        // chats are gone): refused, not started empty. (A first start cut
        // before it recorded the list everywhere holds none: it goes on.)
        if let (true, Some(known), Some((new, _))) = (
            chats,
            recorded.first(),
            parts.iter().find(|(n, _)| !recorded.contains(&n.as_str())),
        ) {
            return Err(StoreError::Respread(
                format!(
                    "database `{new}` is new to the spread that `{known}` recorded: \
                     a database of a spread cannot be replaced by an empty one"
                )
                .into(),
            ));
        }
        for (name, store) in &parts {
            store.join_spread(name, &names, true).await?;
        }
        Ok(Self::new(parts))
    }
}
