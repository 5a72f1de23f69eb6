//! The plugin kernel of dsh.
