//! Files through the editor: the [`FileAccess`] route of a session whose client offered
//! `fs.readTextFile` and `fs.writeTextFile`.
//!
//! `read` then sees the editor's unsaved buffers, and `write`/`edit` land in the editor, which
//! tracks (and can undo) the change. The tools keep their own policy (paths, read-before-write);
//! only the text travels over ACP.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, WriteTextFileRequest};
use async_trait::async_trait;
use dsh_session::SessionId;
use dsh_tools::{FileAccess, FileAccessError};

use crate::record::wire_id;

/// `fs/read_text_file` and `fs/write_text_file` for one session.
pub(crate) struct EditorFiles {
    pub(crate) session: SessionId,
    pub(crate) conn: ConnectionTo<Client>,
}

fn refused(error: &agent_client_protocol::Error) -> FileAccessError {
    FileAccessError::new(format!("the editor refused: {}", error.message))
}

#[async_trait]
impl FileAccess for EditorFiles {
    async fn read_text(&self, path: &Path) -> Result<String, FileAccessError> {
        let request = ReadTextFileRequest::new(wire_id(&self.session), path.to_path_buf());
        let response = self
            .conn
            .send_request(request)
            .block_task()
            .await
            .map_err(|e| refused(&e))?;
        Ok(response.content)
    }

    async fn write_text(&self, path: &Path, text: &str) -> Result<(), FileAccessError> {
        let request =
            WriteTextFileRequest::new(wire_id(&self.session), path.to_path_buf(), text.to_owned());
        self.conn
            .send_request(request)
            .block_task()
            .await
            .map(|_| ())
            .map_err(|e| refused(&e))
    }
}
