//! `dsh sessions import` / `export`: sessions moved between the JSONL files under
//! `$DSH_HOME/sessions` and the PostgreSQL store, byte for byte (a session exported back is
//! the file it was imported from).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use dsh_session::persistence::SessionLocation;
use dsh_session::{Persistence as _, PersistenceError, SessionHeader};
use dsh_store_jsonl::JsonlStore;

use dsh_harness::{Settings, Store};

/// Imports each source (a session file, or the id of a session under `$DSH_HOME/sessions`)
/// into the PostgreSQL store; returns one line per imported session. Stops at the first
/// failure: the sessions before it are imported, the failed one is not (an import is one
/// transaction).
pub async fn import(
    store: &Store,
    settings: &Settings,
    sources: &[String],
) -> anyhow::Result<String> {
    let postgres = store.postgres("dsh sessions import")?;
    let files = Store::Jsonl(JsonlStore::new(settings.sessions_root()));
    let mut out = String::new();
    for source in sources {
        let path = match Path::new(source).is_file() {
            true => PathBuf::from(source),
            false => locate(&files, source).await?,
        };
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let header = postgres
            .import_jsonl(&bytes)
            .await
            .with_context(|| format!("cannot import {}", path.display()))?;
        let _ = writeln!(out, "{} imported from {}", header.id, path.display());
    }
    Ok(out)
}

/// `import --all`: every session under `$DSH_HOME/sessions`, oldest activity first. Sessions
/// already in the database are skipped; a failure is reported and the rest go on, and the
/// command fails at the end if any did.
pub async fn import_all(store: &Store, settings: &Settings) -> anyhow::Result<String> {
    let postgres = store.postgres("dsh sessions import")?;
    let files = JsonlStore::new(settings.sessions_root());
    let mut listings = files
        .listings()
        .await
        .with_context(|| format!("cannot list the sessions under {}", files.root().display()))?;
    listings.reverse();
    let (mut out, mut failed) = (String::new(), 0);
    for listing in listings {
        let id = listing.header.id;
        let outcome = match files.locate(&id).await {
            Ok(SessionLocation::File(path)) => match std::fs::read(&path) {
                Ok(bytes) => postgres.import_jsonl(&bytes).await.map(|_| ()),
                Err(e) => Err(PersistenceError::Io {
                    context: format!("cannot read {}", path.display()),
                    source: e,
                }),
            },
            Ok(_) => continue,
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => {
                let _ = writeln!(out, "{id} imported");
            }
            Err(PersistenceError::AlreadyExists { .. }) => {
                let _ = writeln!(out, "{id} skipped: already in the database");
            }
            Err(e) => {
                failed += 1;
                eprintln!("dsh: {id} not imported: {:#}", anyhow::Error::new(e));
            }
        }
    }
    if failed > 0 {
        crate::print_out(&out);
        anyhow::bail!("{failed} sessions could not be imported (see above)");
    }
    Ok(out)
}

/// The file of the JSONL session `reference` names.
async fn locate(files: &Store, reference: &str) -> anyhow::Result<PathBuf> {
    let id = files.resolve(reference).await?;
    match files.locate(&id).await {
        Ok(SessionLocation::File(path)) => Ok(path),
        Ok(_) => Err(anyhow!("session {id} is not stored in a file")),
        Err(e) => Err(e).with_context(|| {
            format!(
                "`{reference}` is neither a file nor a session under {}",
                files.describe()
            )
        }),
    }
}

/// Exports the PostgreSQL session `reference` names as a JSONL session file: to `out` (`-` for
/// stdout), else where the JSONL store keeps it. Never overwrites a file. Returns what to
/// print (the path written), empty when the file went to stdout.
pub async fn export(
    store: &Store,
    settings: &Settings,
    reference: &str,
    out: Option<&Path>,
) -> anyhow::Result<String> {
    let postgres = store.postgres("dsh sessions export")?;
    let id = store.resolve(reference).await?;
    let bytes = postgres.export_jsonl(&id).await?;
    let path = match out {
        Some(path) if path == Path::new("-") => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(&bytes)
                .and_then(|()| stdout.flush())
                .context("cannot write to stdout")?;
            return Ok(String::new());
        }
        Some(path) => path.to_path_buf(),
        None => {
            let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
            let header: SessionHeader = serde_json::from_slice(first)
                .with_context(|| format!("session {id} has an unreadable header"))?;
            JsonlStore::new(settings.sessions_root()).path_for(&header)?
        }
    };
    write_new(&path, &bytes)?;
    Ok(format!("{}\n", path.display()))
}

/// Writes `bytes` to a new file at `path`, whole or not at all: into a temporary file beside
/// it first, then linked into place, which fails rather than replace a file that exists.
fn write_new(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write in {}", dir.display()))?;
    temp.write_all(bytes)
        .and_then(|()| temp.as_file().sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    temp.persist_noclobber(path)
        .map_err(|e| anyhow!(e.error).context(format!("cannot write {}", path.display())))?;
    Ok(())
}
