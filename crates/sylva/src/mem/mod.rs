//! In-memory engines.

pub mod bptree;
