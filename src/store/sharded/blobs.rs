//! File contents over several databases: each owner's in the owner's.

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use super::place;
use crate::store::files::Blobs;
use crate::store::{PgStore, Store as _, StoreError};

/// [`Blobs`] routed by owner.
pub(super) struct ShardedBlobs {
    names: Vec<String>,
    stores: Vec<Arc<PgStore>>,
}

impl ShardedBlobs {
    pub(super) fn new(names: Vec<String>, stores: Vec<Arc<PgStore>>) -> Self {
        Self { names, stores }
    }

    fn of(&self, owner: &str) -> &dyn Blobs {
        self.stores[place(&self.names, owner.as_bytes())].blobs()
    }
}

#[async_trait]
impl Blobs for ShardedBlobs {
    async fn stage_chunk(
        &self,
        owner: &str,
        upload: Uuid,
        idx: u32,
        data: &[u8],
    ) -> Result<(), StoreError> {
        self.of(owner).stage_chunk(owner, upload, idx, data).await
    }

    async fn discard(&self, owner: &str, upload: Uuid) -> Result<(), StoreError> {
        self.of(owner).discard(owner, upload).await
    }

    async fn chunk(
        &self,
        owner: &str,
        sha256: &str,
        idx: u32,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.of(owner).chunk(owner, sha256, idx).await
    }

    async fn has(&self, owner: &str, sha256: &str) -> Result<bool, StoreError> {
        self.of(owner).has(owner, sha256).await
    }

    async fn owner_bytes(&self, owner: &str) -> Result<u64, StoreError> {
        self.of(owner).owner_bytes(owner).await
    }
}
