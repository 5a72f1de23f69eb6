//! Throughput of the streaming pipeline (work in progress).
fn main() {}
