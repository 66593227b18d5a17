//! The record cache's arena: each entry's key and value bytes in one chunk of a size class, the
//! chunks carved out of 64 KiB blocks with a free list per class (the parent's module docs say
//! why, and how the arena is charged and compacted).

use super::{Slot, BLOCK, CHUNK_UNIT, LIVE};
use crate::btree::store::Zeroed;
use crate::error::{Error, Result};

/// A block of the arena, mapped for it alone: a block given back returns to the kernel at once,
/// where one from the heap would stay in the process as the allocator's free memory (64 KiB is
/// below glibc's threshold for mapping an allocation of its own).
struct Block(Zeroed);

impl std::ops::Deref for Block {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: the mapping is this block's alone, `len` bytes, written only through
        // `deref_mut`, which borrows the block exclusively.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.0.len()) }
    }
}

impl std::ops::DerefMut for Block {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` excludes every other view of the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr(), self.0.len()) }
    }
}

/// One size class of the arena: fixed-size chunks in 64 KiB blocks.
#[derive(Default)]
struct Class {
    blocks: Vec<Block>,
    /// Chunks handed out so far (the next fresh one).
    next: u32,
    free: Vec<u32>,
    /// Chunks of live entries.
    live: u32,
}

/// Chunks of key and value bytes (the parent's module docs).
pub(super) struct Arena {
    classes: Vec<Class>,
    /// Bytes of the chunks of live entries.
    pub(super) used: usize,
    /// Bytes of the blocks the arena holds.
    pub(super) held: usize,
    /// How far `held` may exceed `used` before [`Arena::compact`] is due (the parent's module
    /// docs).
    pub(super) slack: usize,
}

impl Arena {
    /// An empty arena that may hold `slack` bytes of blocks beyond its live chunks.
    pub(super) fn new(slack: usize) -> Self {
        Self {
            classes: Vec::new(),
            used: 0,
            held: 0,
            slack,
        }
    }

    pub(super) const fn class_of(len: usize) -> u16 {
        let len = if len == 0 { 1 } else { len };
        (len.div_ceil(CHUNK_UNIT) - 1) as u16
    }

    pub(super) const fn chunk_size(class: u16) -> usize {
        (class as usize + 1) * CHUNK_UNIT
    }

    fn per_block(class: u16) -> usize {
        (BLOCK / Self::chunk_size(class)).max(1)
    }

    pub(super) fn alloc(&mut self, class: u16) -> Result<u32> {
        let c = class as usize;
        if self.classes.len() <= c {
            self.classes.resize_with(c + 1, Class::default);
        }
        let size = Self::chunk_size(class);
        let per = Self::per_block(class);
        let cl = &mut self.classes[c];
        let chunk = match cl.free.pop() {
            Some(n) => n,
            None => {
                let n = cl.next;
                if n as usize / per >= cl.blocks.len() {
                    let block = (per * size).max(size);
                    cl.blocks.push(Block(Zeroed::new(block)));
                    self.held += block;
                }
                cl.next = n.checked_add(1).ok_or_else(|| Error::InvalidArgument {
                    what: "more record cache entries of one size than a u32 counts".into(),
                    limit: u32::MAX as usize,
                })?;
                n
            }
        };
        cl.live += 1;
        self.used += size;
        Ok(chunk)
    }

    pub(super) fn release(&mut self, class: u16, chunk: u32) {
        if let Some(cl) = self.classes.get_mut(class as usize) {
            cl.free.push(chunk);
            cl.live -= 1;
            self.used -= Self::chunk_size(class);
        }
    }

    /// What the arena costs: the blocks it holds, or its live chunks and the slack if more
    /// (so that each entry evicted lowers it while the blocks are within the slack), and its
    /// free lists.
    pub(super) fn charged(&self) -> usize {
        self.held.max(self.used + self.slack)
            + self
                .classes
                .iter()
                .map(|c| c.free.capacity() * 4)
                .sum::<usize>()
    }

    /// Blocks a class could give back: those beyond what its live chunks fill.
    fn spare_blocks(&self, class: u16) -> usize {
        let cl = &self.classes[class as usize];
        cl.blocks
            .len()
            .saturating_sub((cl.live as usize).div_ceil(Self::per_block(class)))
    }

    /// Whether [`Arena::compact`] would give back memory that [`Arena::charged`] counts.
    pub(super) fn loose(&self) -> bool {
        self.held > self.used + self.slack
            && (0..self.classes.len()).any(|c| self.spare_blocks(c as u16) > 0)
    }

    /// Moves the live chunks of each class into its first blocks and frees the rest; `slots`
    /// are updated to where their chunks went.
    pub(super) fn compact(&mut self, slots: &mut [Slot]) {
        for class in 0..self.classes.len() as u16 {
            if self.spare_blocks(class) == 0 {
                continue;
            }
            let (size, per) = (Self::chunk_size(class), Self::per_block(class));
            let cl = &mut self.classes[class as usize];
            let keep = (cl.live as usize).div_ceil(per);
            let limit = (keep * per) as u32;
            // Every chunk below `limit` was handed out (the class has blocks beyond it), so
            // those not live are on the free list, at least as many as the live ones above it.
            let mut holes: Vec<u32> = cl.free.iter().copied().filter(|&n| n < limit).collect();
            let moves = |s: &Slot| s.has(LIVE) && s.class() == class && s.chunk >= limit;
            let above: Vec<usize> = (0..slots.len()).filter(|&i| moves(&slots[i])).collect();
            debug_assert!(
                above.len() <= holes.len(),
                "a class's free list lost chunks"
            );
            if above.len() > holes.len() {
                continue;
            }
            for i in above {
                let to = holes.pop().unwrap_or_default();
                Self::copy_chunk(&mut cl.blocks, per, size, slots[i].chunk, to);
                slots[i].chunk = to;
            }
            for b in cl.blocks.drain(keep..) {
                self.held -= b.len();
            }
            holes.shrink_to_fit();
            cl.free = holes;
            cl.next = limit;
        }
    }

    fn copy_chunk(blocks: &mut [Block], per: usize, size: usize, from: u32, to: u32) {
        let (fb, fi) = (from as usize / per, from as usize % per * size);
        let (tb, ti) = (to as usize / per, to as usize % per * size);
        if fb == tb {
            blocks[fb].copy_within(fi..fi + size, ti);
        } else {
            let (lo, hi) = blocks.split_at_mut(fb.max(tb));
            let (src, dst) = if fb < tb {
                (&lo[fb], &mut hi[0])
            } else {
                (&hi[0], &mut lo[tb])
            };
            dst[ti..ti + size].copy_from_slice(&src[fi..fi + size]);
        }
    }

    pub(super) fn bytes(&self, class: u16, chunk: u32, len: usize) -> &[u8] {
        let size = Self::chunk_size(class);
        let per = Self::per_block(class);
        let (b, i) = (chunk as usize / per, chunk as usize % per);
        &self.classes[class as usize].blocks[b][i * size..i * size + len]
    }

    pub(super) fn bytes_mut(&mut self, class: u16, chunk: u32, len: usize) -> &mut [u8] {
        let size = Self::chunk_size(class);
        let per = Self::per_block(class);
        let (b, i) = (chunk as usize / per, chunk as usize % per);
        &mut self.classes[class as usize].blocks[b][i * size..i * size + len]
    }
}
