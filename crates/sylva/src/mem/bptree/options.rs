//! Option structs for building trees from a CLI engine spec such as
//! `bptree:log_size=32,block_size=32,num_blocks=32,internal_size=1024` or
//! `bptree-baseline:node_size=1024`.

use crate::error::{Error, Result};

use super::bpa::BpaShape;

/// Options of the BP-tree (`bptree`): the BPA leaf's shape in slots and the internal node size in
/// bytes. Defaults are the paper's (section 6): 32-slot log, header (`num_blocks`) and blocks,
/// 1,024-byte internal nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BpTreeOptions {
    /// Slots in each leaf's log (1..=4096).
    pub log_size: usize,
    /// Slots per block (2..=4096).
    pub block_size: usize,
    /// Blocks per leaf, which is also the header size in slots (1..=4096).
    pub num_blocks: usize,
    /// Bytes per internal node (64..=65536).
    pub internal_size: usize,
}

impl Default for BpTreeOptions {
    fn default() -> Self {
        let shape = BpaShape::default();
        BpTreeOptions {
            log_size: shape.log_size,
            block_size: shape.block_size,
            num_blocks: shape.num_blocks,
            internal_size: 1024,
        }
    }
}

const BPTREE_KEYS: &str = "log_size, block_size, num_blocks, internal_size";
const BASELINE_KEYS: &str = "node_size, internal_size";

fn parse(key: &str, value: &str, min: usize, max: usize) -> Result<usize, String> {
    match value.parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "option {key}={value}: expected an integer from {min} to {max}"
        )),
    }
}

impl BpTreeOptions {
    /// Sets one option from its text form; an unknown key or a bad value is an `Err` naming the
    /// valid keys or range.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "log_size" => self.log_size = parse(key, value, 1, 4096)?,
            "block_size" => self.block_size = parse(key, value, 2, 4096)?,
            "num_blocks" => self.num_blocks = parse(key, value, 1, 4096)?,
            "internal_size" => self.internal_size = parse(key, value, 64, 65536)?,
            _ => {
                return Err(format!(
                    "unknown bptree option {key:?}; valid: {BPTREE_KEYS}"
                ))
            }
        }
        Ok(())
    }

    /// The leaf shape, checked (options set through fields rather than [`Self::set`] may be out
    /// of range).
    pub(crate) fn shape(&self) -> Result<BpaShape> {
        let check = |what: &str, n: usize, min: usize, max: usize| {
            if n < min || n > max {
                Err(Error::InvalidArgument {
                    what: format!("bptree {what} of {n} is outside {min}..={max}"),
                    limit: if n < min { min } else { max },
                })
            } else {
                Ok(())
            }
        };
        check("log_size", self.log_size, 1, 4096)?;
        check("block_size", self.block_size, 2, 4096)?;
        check("num_blocks", self.num_blocks, 1, 4096)?;
        check("internal_size", self.internal_size, 64, 65536)?;
        let shape = BpaShape {
            log_size: self.log_size,
            num_blocks: self.num_blocks,
            block_size: self.block_size,
        };
        // A split must leave elements on both sides.
        check("num_blocks * block_size", shape.capacity(), 2, 1 << 22)?;
        Ok(shape)
    }
}

/// Options of the baseline B+tree (`bptree-baseline`): sorted-array leaves of `node_size` bytes
/// and internal nodes of `internal_size` bytes (by default the same as `node_size`, as in the
/// paper's B-tree, which uses one node size for both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaselineOptions {
    /// Bytes per leaf (256..=65536).
    pub node_size: usize,
    /// Bytes per internal node (64..=65536); `None` means `node_size`.
    pub internal_size: Option<usize>,
}

impl Default for BaselineOptions {
    fn default() -> Self {
        BaselineOptions {
            node_size: 1024,
            internal_size: None,
        }
    }
}

impl BaselineOptions {
    /// Sets one option from its text form; an unknown key or a bad value is an `Err` naming the
    /// valid keys or range.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "node_size" => self.node_size = parse(key, value, 256, 65536)?,
            "internal_size" => self.internal_size = Some(parse(key, value, 64, 65536)?),
            _ => {
                return Err(format!(
                    "unknown bptree-baseline option {key:?}; valid: {BASELINE_KEYS}"
                ))
            }
        }
        Ok(())
    }

    /// Internal node size in bytes.
    pub fn internal_bytes(&self) -> usize {
        self.internal_size.unwrap_or(self.node_size)
    }

    /// Checks the ranges (options set through fields may be out of range).
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |what: String, limit: usize| Err(Error::InvalidArgument { what, limit });
        if !(256..=65536).contains(&self.node_size) {
            return bad(
                format!(
                    "bptree-baseline node_size of {} is outside 256..=65536",
                    self.node_size
                ),
                if self.node_size < 256 { 256 } else { 65536 },
            );
        }
        let i = self.internal_bytes();
        if !(64..=65536).contains(&i) {
            return bad(
                format!("bptree-baseline internal_size of {i} is outside 64..=65536"),
                if i < 64 { 64 } else { 65536 },
            );
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    #[test]
    fn set_accepts_valid_and_names_valid_keys() {
        let mut o = BpTreeOptions::default();
        o.set("log_size", "8").unwrap();
        o.set("num_blocks", "4").unwrap();
        assert_eq!((o.log_size, o.num_blocks), (8, 4));
        let e = o.set("nope", "1").unwrap_err();
        assert!(e.contains("log_size") && e.contains("internal_size"), "{e}");
        assert!(o.set("block_size", "1").is_err());
        assert!(o.set("block_size", "x").is_err());

        let mut b = BaselineOptions::default();
        b.set("node_size", "4096").unwrap();
        assert_eq!(b.internal_bytes(), 4096);
        b.set("internal_size", "1024").unwrap();
        assert_eq!(b.internal_bytes(), 1024);
        assert!(b.set("node_size", "128").is_err());
        assert!(b.set("log_size", "8").unwrap_err().contains("node_size"));
    }
}
