//! The editor side of the file and terminal capabilities, as a test client plays it: buffers
//! that may differ from the disk, writes recorded instead of saved, and terminals that run a
//! real `bash` process with a bounded output, each step logged in order.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use parking_lot::Mutex;
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, watch};

/// One terminal: its output so far and, once known, how it ended.
struct Term {
    output: Arc<Mutex<Vec<u8>>>,
    limit: Option<u64>,
    exit: watch::Receiver<Option<TerminalExitStatus>>,
    pid: Option<u32>,
    kill: Arc<Notify>,
}

/// The editor's state.
#[derive(Default)]
pub struct Editor {
    /// Unsaved buffers by path: a read returns these instead of the disk.
    pub buffers: Mutex<HashMap<PathBuf, String>>,
    /// Every `fs/write_text_file`, in order.
    pub writes: Mutex<Vec<(PathBuf, String)>>,
    /// Every file and terminal request, in order (`read <path>`, `create`, `wait`, ...).
    pub log: Mutex<Vec<String>>,
    /// Variables the editor's own environment gives every terminal (before the request's).
    pub inherited: Mutex<Vec<(String, String)>>,
    /// Notified when a terminal has been created.
    pub created: Notify,
    /// Notified when a terminal has been released.
    pub released: Notify,
    terms: Mutex<HashMap<String, Term>>,
    next: Mutex<u32>,
}

fn not_found(what: &str) -> Error {
    Error::new(
        agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND,
        what.to_owned(),
    )
}

impl Editor {
    fn note(&self, entry: String) {
        self.log.lock().push(entry);
    }

    /// The log entries' first words, in order.
    pub fn steps(&self) -> Vec<String> {
        self.log
            .lock()
            .iter()
            .map(|e| e.split(' ').next().unwrap().to_owned())
            .collect()
    }

    /// Pids of the processes of every terminal created so far.
    pub fn pids(&self) -> Vec<u32> {
        self.terms.lock().values().filter_map(|t| t.pid).collect()
    }

    pub fn read(&self, r: &ReadTextFileRequest) -> Result<ReadTextFileResponse, Error> {
        self.note(format!("read {}", r.path.display()));
        if let Some(text) = self.buffers.lock().get(&r.path) {
            return Ok(ReadTextFileResponse::new(text.clone()));
        }
        std::fs::read_to_string(&r.path)
            .map(ReadTextFileResponse::new)
            .map_err(|e| not_found(&e.to_string()))
    }

    pub fn write(&self, r: &WriteTextFileRequest) -> Result<WriteTextFileResponse, Error> {
        self.note(format!("write {}", r.path.display()));
        self.writes.lock().push((r.path.clone(), r.content.clone()));
        self.buffers
            .lock()
            .insert(r.path.clone(), r.content.clone());
        Ok(WriteTextFileResponse::new())
    }

    pub fn create(&self, r: &CreateTerminalRequest) -> Result<CreateTerminalResponse, Error> {
        self.note(format!("create {} {:?}", r.command, r.args));
        let mut command = tokio::process::Command::new(&r.command);
        command
            .args(&r.args)
            .envs(self.inherited.lock().clone())
            .envs(r.env.iter().map(|v| (v.name.clone(), v.value.clone())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(cwd) = &r.cwd {
            command.current_dir(cwd);
        }
        let mut child = command.spawn().map_err(|e| not_found(&e.to_string()))?;
        let output: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (exit_tx, exit) = watch::channel(None);
        let kill = Arc::new(Notify::new());
        let pid = child.id();
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (o1, o2) = (output.clone(), output.clone());
        let pump_out = async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                o1.lock().extend_from_slice(&buf[..n]);
            }
        };
        let pump_err = async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                o2.lock().extend_from_slice(&buf[..n]);
            }
        };
        let killed = kill.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status,
                () = killed.notified() => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            tokio::join!(pump_out, pump_err);
            use std::os::unix::process::ExitStatusExt;
            let status = status.unwrap();
            let exit = match status.code() {
                Some(code) => TerminalExitStatus::new().exit_code(code as u32),
                None => TerminalExitStatus::new().signal(format!("{:?}", status.signal())),
            };
            let _ = exit_tx.send(Some(exit));
        });
        let mut next = self.next.lock();
        *next += 1;
        let id = format!("term-{next}");
        self.terms.lock().insert(
            id.clone(),
            Term {
                output,
                limit: r.output_byte_limit,
                exit,
                pid,
                kill,
            },
        );
        self.created.notify_one();
        Ok(CreateTerminalResponse::new(id))
    }

    fn term<T>(&self, id: &str, f: impl FnOnce(&Term) -> T) -> Result<T, Error> {
        self.terms
            .lock()
            .get(id)
            .map(f)
            .ok_or_else(|| not_found("no such terminal"))
    }

    pub fn output(&self, r: &TerminalOutputRequest) -> Result<TerminalOutputResponse, Error> {
        self.note(format!("output {}", r.terminal_id.0));
        self.term(&r.terminal_id.0, |t| {
            let bytes = t.output.lock().clone();
            let limit = t.limit.map_or(bytes.len(), |l| l as usize);
            let truncated = bytes.len() > limit;
            let tail = &bytes[bytes.len().saturating_sub(limit)..];
            TerminalOutputResponse::new(String::from_utf8_lossy(tail).into_owned(), truncated)
                .exit_status(t.exit.borrow().clone())
        })
    }

    pub async fn wait(
        &self,
        r: &WaitForTerminalExitRequest,
    ) -> Result<WaitForTerminalExitResponse, Error> {
        self.note(format!("wait {}", r.terminal_id.0));
        let mut exit = self.term(&r.terminal_id.0, |t| t.exit.clone())?;
        let status = exit
            .wait_for(Option::is_some)
            .await
            .map_err(|_| not_found("terminal gone"))?
            .clone()
            .unwrap();
        Ok(WaitForTerminalExitResponse::new(status))
    }

    pub fn kill(&self, r: &KillTerminalRequest) -> Result<KillTerminalResponse, Error> {
        self.note(format!("kill {}", r.terminal_id.0));
        self.term(&r.terminal_id.0, |t| t.kill.notify_one())?;
        Ok(KillTerminalResponse::new())
    }

    pub fn release(&self, r: &ReleaseTerminalRequest) -> Result<ReleaseTerminalResponse, Error> {
        self.note(format!("release {}", r.terminal_id.0));
        let term = self
            .terms
            .lock()
            .remove(&*r.terminal_id.0)
            .ok_or_else(|| not_found("no such terminal"))?;
        term.kill.notify_one();
        self.released.notify_one();
        Ok(ReleaseTerminalResponse::new())
    }
}
