//! Ordered scans: one iterator per source, newest first (the active root, the frozen roots,
//! then one per s-tree level chaining that level's d-trees in key order), merged by key; the
//! newest record of a key wins and a tombstone hides it. The paper has no range queries.

use std::sync::Arc;

use super::dtree::{Cursor, DTree};
use super::stree::{is_put, RootTree, SNode, Version};
use crate::error::Result;

/// Records a root-tree source copies per walk.
const BATCH: usize = 64;

/// A level's d-trees in key order: (d-tree, first key to read, end of the s-node's range
/// (empty: none)).
type LevelNodes = Vec<(Arc<DTree>, Vec<u8>, Vec<u8>)>;

enum Source {
    Root {
        tree: Arc<RootTree>,
        batch: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
        /// Where the next batch starts (`None`: the tree is exhausted).
        next: Option<Vec<u8>>,
    },
    Level {
        nodes: LevelNodes,
        at: usize,
        cursor: Option<(Cursor, Vec<u8>)>,
    },
}

struct Head {
    source: Source,
    cur: Option<(Vec<u8>, Vec<u8>)>,
}

impl Head {
    fn advance(&mut self) -> Result<()> {
        self.cur = match &mut self.source {
            Source::Root { tree, batch, next } => {
                if batch.is_empty() {
                    if let Some(from) = next.take() {
                        let mut last = None;
                        tree.tree.walk(&from, None, BATCH, &mut |k, v| {
                            batch.push_back((k.to_vec(), v.to_vec()));
                            last = Some(k.to_vec());
                            true
                        })?;
                        if batch.len() == BATCH {
                            *next = last.map(|mut k| {
                                k.push(0);
                                k
                            });
                        }
                    }
                }
                batch.pop_front()
            }
            Source::Level { nodes, at, cursor } => loop {
                if cursor.is_none() {
                    let Some((d, from, end)) = nodes.get(*at) else {
                        break None;
                    };
                    *cursor = Some((d.cursor(from, false)?, end.clone()));
                    *at += 1;
                }
                let Some((c, end)) = cursor.as_mut() else {
                    break None;
                };
                match c.next_record()? {
                    Some((k, v)) if end.is_empty() || k < end.as_slice() => {
                        break Some((k.to_vec(), v.to_vec()))
                    }
                    _ => *cursor = None,
                }
            },
        };
        Ok(())
    }
}

/// Collects, per level, the d-trees whose range reaches `from` or beyond.
fn collect(n: &SNode, level: usize, lo: &[u8], hi: &[u8], from: &[u8], out: &mut Vec<LevelNodes>) {
    if !hi.is_empty() && hi <= from {
        return;
    }
    if out.len() <= level {
        out.push(Vec::new());
    }
    if let Some(d) = &n.dtree {
        let first = [from, lo, n.start.as_slice()]
            .into_iter()
            .max()
            .unwrap_or(from)
            .to_vec();
        out[level].push((d.clone(), first, hi.to_vec()));
    }
    for (i, c) in n.children.iter().enumerate() {
        let clo = if i == 0 { lo } else { n.keys[i - 1].as_slice() };
        let chi = n.keys.get(i).map_or(hi, |k| k.as_slice());
        collect(c, level + 1, clo, chi, from, out);
    }
}

/// Visits live records with keys in `[start, end)` (`end` empty: no end) in key order, at
/// most `limit`; stops early when `visitor` returns false. Returns the number visited.
pub(crate) fn scan(
    v: &Version,
    start: &[u8],
    end: &[u8],
    limit: usize,
    visitor: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<usize> {
    let mut heads = Vec::new();
    for t in std::iter::once(&v.active).chain(v.frozen.iter()) {
        heads.push(Head {
            source: Source::Root {
                tree: t.clone(),
                batch: Default::default(),
                next: Some(start.to_vec()),
            },
            cur: None,
        });
    }
    let mut levels = Vec::new();
    collect(&v.root, 0, &[], &[], start, &mut levels);
    for nodes in levels {
        heads.push(Head {
            source: Source::Level {
                nodes,
                at: 0,
                cursor: None,
            },
            cur: None,
        });
    }
    for h in &mut heads {
        h.advance()?;
    }
    let mut n = 0;
    while n < limit {
        let mut best: Option<usize> = None;
        for (i, h) in heads.iter().enumerate() {
            if let Some((k, _)) = &h.cur {
                if best.is_none_or(|b| heads[b].cur.as_ref().is_some_and(|(bk, _)| k < bk)) {
                    best = Some(i);
                }
            }
        }
        let Some(b) = best else { break };
        let Some((key, value)) = heads[b].cur.take() else {
            break;
        };
        if !end.is_empty() && key.as_slice() >= end {
            break;
        }
        heads[b].advance()?;
        for h in heads.iter_mut() {
            if h.cur.as_ref().is_some_and(|(k, _)| *k == key) {
                h.advance()?;
            }
        }
        if is_put(&value) {
            n += 1;
            if !visitor(&key, &value[1..]) {
                break;
            }
        }
    }
    Ok(n)
}
