//! Naming a stored session without its full id: a unique prefix of the id (`dsh sessions show
//! session-17a3`), or "the newest one here" (`dsh run -c`, `dsh chat -c`).
//!
//! Both read the store's listing (headers and file times), never a whole log.

use std::path::Path;

use dsh_session::SessionId;

use crate::error::HarnessError;
use crate::store::{OriginFilter, Store};

/// The stored session `reference` names: the session with exactly that id, else the only one
/// whose id starts with it. More than one match is an error naming them. With no match the
/// reference is taken as the id itself, so the store reports what is wrong with it (no such
/// session, or a file it cannot list because it is broken) in its own specific words.
pub async fn resolve(store: &Store, reference: &str) -> Result<SessionId, HarnessError> {
    let reference = reference.trim();
    if reference.is_empty() {
        return Err(HarnessError::Reference(
            "the session id is empty".to_owned(),
        ));
    }
    let listings = store.listings().await?;
    let ids: Vec<&SessionId> = listings.iter().map(|l| &l.header.id).collect();
    pick(&ids, reference)
}

fn pick(ids: &[&SessionId], reference: &str) -> Result<SessionId, HarnessError> {
    if let Some(exact) = ids.iter().find(|id| id.as_str() == reference) {
        return Ok((*exact).clone());
    }
    let matching: Vec<&&SessionId> = ids
        .iter()
        .filter(|id| id.as_str().starts_with(reference))
        .collect();
    match matching.as_slice() {
        [one] => Ok((**one).clone()),
        [] => Ok(SessionId::new(reference)),
        many => {
            let shown: Vec<&str> = many.iter().take(5).map(|id| id.as_str()).collect();
            let more = if many.len() > shown.len() {
                ", …"
            } else {
                ""
            };
            Err(HarnessError::Reference(format!(
                "`{reference}` is ambiguous: {} sessions start with it ({}{more}); give more of \
                 the id",
                many.len(),
                shown.join(", ")
            )))
        }
    }
}

/// The most recently active top-level session started in `cwd` (subagent sessions, which a
/// person did not start, are skipped). The store filters (the database, for PostgreSQL).
pub async fn newest_in(store: &Store, cwd: &Path) -> Result<SessionId, HarnessError> {
    let listings = store
        .listings_where(Some(cwd), Some(OriginFilter::Top))
        .await?;
    let newest = listings.iter().max_by_key(|l| l.last_activity);
    match newest {
        Some(l) => Ok(l.header.id.clone()),
        None => Err(HarnessError::Reference(format!(
            "no session to continue in {} (dsh sessions list shows every stored session)",
            cwd.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_exact_id_wins_then_a_unique_prefix_ambiguity_is_an_error_and_no_match_is_verbatim() {
        let a = SessionId::new("session-abc");
        let ab = SessionId::new("session-abcd");
        let x = SessionId::new("session-xyz");
        let ids = [&a, &ab, &x];
        assert_eq!(pick(&ids, "session-abc").unwrap(), a);
        assert_eq!(pick(&ids, "session-x").unwrap(), x);
        let ambiguous = pick(&ids, "session-a").unwrap_err().to_string();
        assert!(ambiguous.contains("ambiguous: 2 sessions"), "{ambiguous}");
        assert_eq!(pick(&ids, "nope").unwrap(), SessionId::new("nope"));
    }
}
