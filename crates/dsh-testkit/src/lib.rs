//! Test doubles for dsh (work in progress).
