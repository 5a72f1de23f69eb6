//! Mounting a write-behind store on a kernel context: the wiring both stores' plugins share.

use std::future::Future;
use std::sync::Arc;

use dsh_kernel::{BoxError, Context};
use dsh_session::{
    Persistence, PersistenceError, Session, SessionDisposed, SessionEventFired, SessionFlush,
    SessionFollow,
};
use tokio::runtime::Handle;

/// A session store that persists live sessions through write-behind writers: what its plugin
/// drives through [`mount`] (the front ends and the loop only see `dyn Persistence` and the
/// `session/flush` barrier).
pub trait Store: Persistence + SessionFollow + 'static {
    /// Names the store in messages (`JSONL`, `PostgreSQL`).
    const NAME: &'static str;

    /// Starts accepting events, spawning writers on `runtime`.
    fn open(&self, runtime: Handle);

    /// A committed event of `session`: opens its batching window.
    fn admit(&self, session: &Arc<Session>);

    /// The session was disposed: its writer drains once more and lets it go.
    fn release(&self, session: &Arc<Session>);

    /// The flush barrier for one session.
    fn flush_session(
        &self,
        session: &Arc<Session>,
    ) -> impl Future<Output = Result<(), PersistenceError>> + Send;

    /// Stops admission, drains every writer and waits for them.
    fn close(&self) -> impl Future<Output = Result<(), PersistenceError>> + Send;
}

/// Mounts `store` on `ctx`: provides it as `dyn Persistence` and `dyn SessionFollow`, feeds every committed session
/// event to its session's writer (`session/event`), answers the `session/flush` barrier,
/// drains and releases a session's writer on `session/disposed`, and on unmount stops
/// admission and drains every writer.
pub fn mount<S: Store>(ctx: &Context, store: &Arc<S>) -> Result<(), BoxError> {
    let runtime = Handle::try_current().map_err(|e| {
        format!(
            "the {} persistence plugin needs a tokio runtime: {e}",
            S::NAME
        )
    })?;
    // Registered first so it is undone last: the listeners are gone (admission stopped)
    // before every writer drains.
    let closing = store.clone();
    ctx.scope().defer_async(move || async move {
        if let Err(error) = closing.close().await {
            tracing::error!(%error, "draining session writers at unmount failed");
        }
    })?;
    store.open(runtime);
    ctx.provide::<dyn Persistence>(store.clone())?;
    // Front ends that show a session another process holds read and follow it through this.
    ctx.provide::<dyn SessionFollow>(store.clone())?;
    // Persistence hears every session, whatever scope the plugin was mounted in.
    let global = ctx.global();
    let s = store.clone();
    let _ = global.on::<SessionEventFired>(move |notice| s.admit(&notice.session))?;
    let s = store.clone();
    let _ = global.on::<SessionDisposed>(move |session| s.release(session))?;
    let s = store.clone();
    let _ = global.on_parallel::<SessionFlush, _>(move |session| {
        let s = s.clone();
        async move { s.flush_session(&session).await.map_err(BoxError::from) }
    })?;
    Ok(())
}
