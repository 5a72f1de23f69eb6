//! Live output: the bytes of a foreground command as they arrive, for a front end to show
//! while the command runs.
//!
//! The executor already reads every byte into its tail (see [`crate::capture`]); a
//! [`LiveOutput`] is one more reader of the same pump, called with each chunk in arrival order
//! (stdout and stderr interleaved as they were read). It is a plain callback so the shell
//! stays free of any notion of sessions or front ends: the caller (the `bash` tool) decides
//! how to batch and where to publish. The callback runs on the pump's task and must not
//! block; what it sees never changes the result, which the tail alone decides.

use std::fmt;
use std::sync::Arc;

/// The callback behind a [`LiveOutput`].
type ChunkFn = dyn Fn(&[u8]) + Send + Sync;

/// A callback fed every chunk of a foreground command's output as it is read.
#[derive(Clone)]
pub struct LiveOutput(Arc<ChunkFn>);

impl LiveOutput {
    /// Wraps `f`, which must return quickly (it runs on the output pump).
    pub fn new(f: impl Fn(&[u8]) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Hands one chunk to the callback.
    pub(crate) fn accept(&self, chunk: &[u8]) {
        (self.0)(chunk);
    }
}

impl fmt::Debug for LiveOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LiveOutput(..)")
    }
}
