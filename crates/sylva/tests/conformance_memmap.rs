//! `MemMap` passes the conformance suite: it is the model, so this checks the suite as much as
//! the map.

use sylva::{Limits, MemMap};
use sylva_conformance::{conformance_tests, Fresh};

conformance_tests!(memmap, Fresh(MemMap::new));
// The same map restricted to fixed 8-byte keys and values exercises the suite's fixed-size paths
// (the BP-tree's u64 adapter takes that shape).
conformance_tests!(
    memmap_fixed_u64,
    Fresh(|| MemMap::with_limits(Limits::fixed(8, 8)))
);
conformance_tests!(
    memmap_small_limits,
    Fresh(|| MemMap::with_limits(Limits::variable(100, 1000)))
);
