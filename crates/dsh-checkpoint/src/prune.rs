//! Pruning (to come).
