//! The files a message attaches (issue 36): checked and looked up by the
//! node that takes the request, so the chat's actor logs them as they are.

use uuid::Uuid;

use super::{Caller, Registry};
use crate::protocol::Attachment;
use crate::session::SessionError;

impl Registry {
    /// The files `caller` attaches to a message of `chat_id`, as the log
    /// records them: each must be one the caller uploaded to this chat
    /// (another user's, another chat's or an unknown id is
    /// `FILE_NOT_FOUND`, the same answer for all three). A file named twice
    /// counts once. `None` when the caller names none.
    pub async fn attachments(
        &self,
        chat_id: Uuid,
        caller: Caller<'_>,
    ) -> Result<Option<Vec<Attachment>>, SessionError> {
        let Some(refs) = caller.attachments else {
            return Ok(None);
        };
        let max = self.inner.ctx.files.max_per_message;
        if refs.len() > max {
            return Err(SessionError::TooLarge(format!(
                "{} files attached; a message may attach at most {max} (max_files_per_message)",
                refs.len()
            )));
        }
        let mut out: Vec<Attachment> = Vec::with_capacity(refs.len());
        for r in refs {
            if out.iter().any(|a| a.file_id == r.file_id) {
                continue;
            }
            match self.inner.ctx.store.file(r.file_id).await? {
                Some(f) if f.owner == caller.user && f.chat_id == chat_id => {
                    out.push(Attachment {
                        file_id: f.id,
                        name: f.name,
                        media_type: f.media_type,
                        size: f.size,
                    });
                }
                _ => return Err(SessionError::FileNotFound(r.file_id)),
            }
        }
        Ok(Some(out))
    }
}
