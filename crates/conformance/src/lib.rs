//! The conformance suite every sylva engine passes before it is called done.
//!
//! Three parts, each a generic function over a [`Subject`] (something that opens stores):
//! - [`edge_cases`]: deterministic scenarios (empty store, first and last key, scans starting
//!   before, between and after keys, limit 0, overwrite, delete then scan, keys that are
//!   prefixes of each other, binary keys with 0x00 and 0xFF, the size limits and one byte past
//!   them);
//! - [`model_test`]: proptest sequences of put/delete/get/scan/map_range (and reopen, for
//!   durable engines) run against the engine and a [`sylva::MemMap`] model, comparing every answer;
//! - [`stress()`]: writers and readers on several threads, every scan checked sorted, duplicate-free
//!   and complete with respect to records no writer touches, then a full comparison.
//!
//! An engine joins with one line in a test file:
//!
//! ```ignore
//! sylva_conformance::conformance_tests!(memmap, sylva_conformance::Fresh(sylva::MemMap::new));
//! ```
//!
//! Engines with fixed-size keys or values (the BP-tree's u64 adapter) are handled: keys and values
//! are generated to fit the engine's [`sylva::Limits`], and scenarios that need variable-length
//! keys are skipped for them.
//!
//! Durable engines implement [`Subject::reopen`] (close and open the same store); the model test
//! then inserts reopen points into its sequences. Crash points come with the durable engine.

mod edge;
mod keys;
mod model;
mod stress;

pub use edge::{edge_cases, sizes_around, LARGEST_TESTED_VALUE};
pub use keys::{num_key, value_for, KeyShape};
pub use model::{model_test, model_test_with_cases};
pub use stress::{stress, StressConfig};

use sylva::KvStore;

/// Something that opens stores for the suite.
pub trait Subject {
    /// The store type under test.
    type Store: KvStore + 'static;

    /// Opens a fresh, empty store.
    fn open(&mut self) -> Self::Store;

    /// Closes `store` and opens it again with the same contents. In-memory engines keep the
    /// default, which returns the store unchanged and tells the model test not to bother.
    fn reopen(&mut self, store: Self::Store) -> Self::Store {
        store
    }

    /// Whether [`Subject::reopen`] really closes and reopens.
    fn reopens(&self) -> bool {
        false
    }

    /// The longest value the engine stores one way when longer ones are stored another (`Db`:
    /// the longest value a leaf holds; longer ones go out of line). The edge cases and the
    /// model test then use values of 0, 1, that − 1, that, that + 1, 64 KiB and 1 MiB bytes
    /// ([`sizes_around`]). `None` (the default): every value is stored alike.
    fn value_size_limit(&self) -> Option<usize> {
        None
    }
    /// A structural check of the store (an engine's `check()`), run after every model-test
    /// sequence and at the end of the stress test. `Err` carries what is wrong.
    fn check(&mut self, _store: &Self::Store) -> Result<(), String> {
        Ok(())
    }
}

/// A [`Subject`] made from a function that returns a fresh store.
pub struct Fresh<F>(pub F);

impl<F, S> Subject for Fresh<F>
where
    F: FnMut() -> S,
    S: KvStore + 'static,
{
    type Store = S;

    fn open(&mut self) -> S {
        (self.0)()
    }
}

/// Declares the conformance tests for one engine: a module `$name` with `edge_cases`,
/// `model` and `stress` tests, each opening stores with the subject expression `$subject`.
#[macro_export]
macro_rules! conformance_tests {
    ($name:ident, $subject:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn edge_cases() {
                $crate::edge_cases(&mut $subject);
            }

            #[test]
            fn model() {
                $crate::model_test(&mut $subject);
            }

            #[test]
            fn stress() {
                $crate::stress(&mut $subject, $crate::StressConfig::default());
            }
        }
    };
}
