//! `SimFs`: a file system in memory that can lose power, for crash tests of everything above
//! [`Vfs`] (the model of ALICE, OSDI 2014, and of SQLite's crash tests; the seeded, replayable
//! runs of FoundationDB's and TigerBeetle's simulators).
//!
//! Every file keeps two images: the *volatile* one that reads see (the OS page cache) and the
//! *durable* one that a power loss leaves, plus the changes (writes, length changes) made since
//! its last fsync, in order. Every directory likewise keeps its volatile names, its durable ones
//! and the changes since its last fsync (creations, removals, renames).
//!
//! **A power loss** ([`SimFs::reboot`], armed ahead or not by [`SimFs::crash_after`]) rebuilds
//! every image from the durable one, each change since the last fsync decided by a generator
//! seeded from the caller's seed:
//! - a write is kept, lost, or *torn*: each 512-byte sector it covers kept or lost on its own;
//!   a lost sector past the old end may still leave the file longer, reading zeros (the size
//!   reached the disk, the data did not);
//! - a length change is kept or lost;
//! - a directory keeps a prefix of its unsynced changes, in order (a rename is one change:
//!   atomic), so a file created since the directory's last fsync may vanish with its contents;
//!   a directory whose own name was lost vanishes with everything in it.
//!
//! That is strict POSIX. [`SimOptions::names_with_file_sync`] switches to the behaviour of Linux
//! journaling file systems, where a file's fsync commits every pending name change too.
//!
//! After a power loss every file handle and lock from before it fails with an I/O error (the
//! process that held them is gone). [`SimFs::crash_after`] makes the file system die after `n`
//! more changes: that call and every later one fails, so a crash lands inside any operation of
//! the code above, its recovery included; [`SimFs::inject`] arms one-shot faults of the
//! [`Fault`] kinds on one file. The same seed and the same sequence of calls give the same
//! files, so a failing run replays from its seed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::vfs::{LockGuard, OpenFile, Opened, Vfs};
use super::{Fault, Io};
use crate::error::{Error, Result};

/// The sector size of torn writes.
pub const SECTOR: u64 = 512;

/// How a [`SimFs`] behaves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimOptions {
    /// A file's fsync also makes every pending name change durable (Linux ext4, XFS), instead of
    /// strict POSIX where only a directory's fsync does.
    pub names_with_file_sync: bool,
}

/// A simulated file system; clones share it. See the module docs.
#[derive(Clone, Default)]
pub struct SimFs {
    sim: Arc<Mutex<Sim>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir,
}

/// One atomic change to a directory: names set (`Some`) or removed (`None`).
type DirChange = Vec<(OsString, Option<Node>)>;

#[derive(Default)]
struct Dir {
    names: BTreeMap<OsString, Node>,
    durable: BTreeMap<OsString, Node>,
    pending: Vec<DirChange>,
}

enum Change {
    Write(u64, Vec<u8>),
    Len(u64),
}

#[derive(Default)]
struct Inode {
    volatile: Vec<u8>,
    durable: Vec<u8>,
    pending: Vec<Change>,
}

#[derive(Default)]
struct Sim {
    options: SimOptions,
    dirs: BTreeMap<PathBuf, Dir>,
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Bumped by every power loss: handles and locks of an older generation are dead.
    generation: u64,
    locks: HashSet<PathBuf>,
    /// Changes made so far (every call that changes a file or a directory, fsyncs included).
    changes: u64,
    /// The file system dies at this change count.
    die_at: Option<u64>,
    dead: bool,
    faults: Vec<(PathBuf, Fault)>,
}

fn io_error(path: &Path, kind: std::io::ErrorKind, what: &str) -> Error {
    Error::Io {
        path: Some(path.to_path_buf()),
        source: std::io::Error::new(kind, what.to_string()),
    }
}

fn power_lost(path: &Path) -> Error {
    io_error(
        path,
        std::io::ErrorKind::Other,
        "simulated power loss: the file system is gone",
    )
}

fn write_into(bytes: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    if bytes.len() < start + data.len() {
        bytes.resize(start + data.len(), 0);
    }
    bytes[start..start + data.len()].copy_from_slice(data);
}

/// SplitMix64: the crash decisions, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

impl Sim {
    /// Counts a change, dying if it is the one armed by `crash_after`.
    fn change(&mut self, path: &Path) -> Result<()> {
        if self.dead {
            return Err(power_lost(path));
        }
        if self.die_at == Some(self.changes) {
            self.dead = true;
            return Err(power_lost(path));
        }
        self.changes += 1;
        Ok(())
    }

    fn alive(&self, path: &Path, generation: u64) -> Result<()> {
        if self.dead || generation != self.generation {
            return Err(power_lost(path));
        }
        Ok(())
    }

    fn take_fault(&mut self, path: &Path, pick: impl Fn(&Fault) -> bool) -> Option<Fault> {
        let i = self.faults.iter().position(|(p, f)| p == path && pick(f))?;
        Some(self.faults.remove(i).1)
    }

    fn split(path: &Path) -> Result<(PathBuf, OsString)> {
        if !path.is_absolute() {
            return Err(io_error(
                path,
                std::io::ErrorKind::InvalidInput,
                "SimFs takes absolute paths",
            ));
        }
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => Ok((parent.to_path_buf(), name.to_os_string())),
            _ => Err(io_error(
                path,
                std::io::ErrorKind::InvalidInput,
                "not a file path",
            )),
        }
    }

    fn dir_mut(&mut self, dir: &Path) -> Result<&mut Dir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| io_error(dir, std::io::ErrorKind::NotFound, "no such directory"))
    }

    fn lookup(&self, path: &Path) -> Option<Node> {
        if path == Path::new("/") {
            return Some(Node::Dir);
        }
        let (parent, name) = Self::split(path).ok()?;
        self.dirs.get(&parent)?.names.get(&name).copied()
    }

    /// Applies an atomic change to `dir`'s names (volatile; pending until its fsync).
    fn change_names(&mut self, dir: &Path, change: DirChange) -> Result<()> {
        let d = self.dir_mut(dir)?;
        for (name, node) in &change {
            match node {
                Some(n) => d.names.insert(name.clone(), *n),
                None => d.names.remove(name),
            };
        }
        d.pending.push(change);
        Ok(())
    }

    /// A journal commit: every pending name change becomes durable.
    fn commit_names(&mut self) {
        for d in self.dirs.values_mut() {
            d.durable = d.names.clone();
            d.pending.clear();
        }
    }

    fn power_loss(&mut self, loss: Loss) {
        let mut rng = Rng(match loss {
            Loss::Random(seed) => seed ^ 0x005E_ED0F_C4A5,
            _ => 0,
        });
        for d in self.dirs.values_mut() {
            let keep = match loss {
                Loss::Random(_) => rng.below(d.pending.len() as u64 + 1) as usize,
                Loss::All => 0,
                Loss::None => d.pending.len(),
            };
            let mut names = std::mem::take(&mut d.durable);
            for change in d.pending.drain(..).take(keep) {
                for (name, node) in change {
                    match node {
                        Some(n) => names.insert(name, n),
                        None => names.remove(&name),
                    };
                }
            }
            d.durable = names.clone();
            d.names = names;
        }
        // A directory exists only if its parent still names it (parents sort first).
        let paths: Vec<PathBuf> = self.dirs.keys().cloned().collect();
        for path in paths {
            if path == Path::new("/") {
                continue;
            }
            let named = match (path.parent(), path.file_name()) {
                (Some(parent), Some(name)) => self
                    .dirs
                    .get(parent)
                    .is_some_and(|d| d.names.get(name) == Some(&Node::Dir)),
                _ => false,
            };
            if !named {
                self.dirs.remove(&path);
            }
        }
        let live: HashSet<u64> = self
            .dirs
            .values()
            .flat_map(|d| d.names.values())
            .filter_map(|n| match n {
                Node::File(ino) => Some(*ino),
                Node::Dir => None,
            })
            .collect();
        self.inodes.retain(|ino, _| live.contains(ino));
        let mut inos: Vec<u64> = self.inodes.keys().copied().collect();
        inos.sort_unstable();
        for ino in inos {
            let Some(inode) = self.inodes.get_mut(&ino) else {
                continue;
            };
            let mut bytes = std::mem::take(&mut inode.durable);
            for change in inode.pending.drain(..) {
                match (change, loss) {
                    (_, Loss::All) => {}
                    (Change::Len(len), Loss::None) => bytes.resize(len as usize, 0),
                    (Change::Write(offset, data), Loss::None) => {
                        write_into(&mut bytes, offset, &data)
                    }
                    (Change::Len(len), Loss::Random(_)) => {
                        if rng.below(2) == 0 {
                            bytes.resize(len as usize, 0);
                        }
                    }
                    (Change::Write(offset, data), Loss::Random(_)) => {
                        apply_lossy(&mut bytes, offset, &data, &mut rng)
                    }
                }
            }
            inode.volatile = bytes.clone();
            inode.durable = bytes;
        }
        self.end_process();
    }

    /// The process dies: its handles and locks with it; the files stay as they are.
    fn end_process(&mut self) {
        self.generation += 1;
        self.locks.clear();
        self.faults.clear();
        self.die_at = None;
        self.dead = false;
    }
}

/// What a power loss does with the changes made since their file's (or directory's) last fsync.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// Each decided by a generator with this seed (module docs).
    Random(u64),
    /// All lost: the worst case.
    All,
    /// All kept, as after the process alone died (`kill -9`: the OS wrote everything back).
    None,
}

/// One unsynced write as a power loss leaves it: whole, lost, or torn at sector boundaries.
fn apply_lossy(bytes: &mut Vec<u8>, offset: u64, data: &[u8], rng: &mut Rng) {
    let end = offset + data.len() as u64;
    match rng.below(4) {
        0 => write_into(bytes, offset, data),
        1 => {}
        _ => {
            let mut at = offset;
            while at < end {
                let next = ((at / SECTOR) + 1) * SECTOR;
                let to = next.min(end);
                if rng.below(2) == 0 {
                    let range = (at - offset) as usize..(to - offset) as usize;
                    write_into(bytes, at, &data[range]);
                }
                at = to;
            }
        }
    }
    // The size may have reached the disk without the data.
    if (bytes.len() as u64) < end && rng.below(4) == 0 {
        bytes.resize(end as usize, 0);
    }
}

impl SimFs {
    /// An empty file system (only `/`) with the given behaviour.
    pub fn new(options: SimOptions) -> SimFs {
        let mut sim = Sim {
            options,
            next_ino: 1,
            ..Sim::default()
        };
        sim.dirs.insert(PathBuf::from("/"), Dir::default());
        SimFs {
            sim: Arc::new(Mutex::new(sim)),
        }
    }

    /// Changes made so far: writes, length changes, fsyncs and name changes, each one. A crash
    /// point is a number below this.
    pub fn changes(&self) -> u64 {
        self.sim.lock().changes
    }

    /// Arms a power loss: the file system dies when `n` more changes have been made; that call
    /// and every later one fails until [`SimFs::reboot`].
    pub fn crash_after(&self, n: u64) {
        let mut sim = self.sim.lock();
        sim.die_at = Some(sim.changes + n);
    }

    /// Takes back a power loss armed by [`SimFs::crash_after`] that has not happened.
    pub fn disarm(&self) {
        self.sim.lock().die_at = None;
    }

    /// Injected faults that have not fired yet.
    pub fn faults_pending(&self) -> usize {
        self.sim.lock().faults.len()
    }

    /// Whether the armed power loss has happened.
    pub fn is_dead(&self) -> bool {
        self.sim.lock().dead
    }

    /// Power is lost (now, or already by [`SimFs::crash_after`]) and comes back: every file and
    /// directory as the power loss left it (module docs), decided by `seed`.
    pub fn reboot(&self, seed: u64) {
        self.sim.lock().power_loss(Loss::Random(seed));
    }

    /// The process dies (`kill -9`), the power stays on: handles and locks from before fail,
    /// and every unsynced change stays as unsynced as it was (a power loss later decides it).
    pub fn kill_process(&self) {
        self.sim.lock().end_process();
    }

    /// Like [`SimFs::reboot`], with every unsynced change lost (the worst case).
    pub fn reboot_losing_unsynced(&self) {
        self.sim.lock().power_loss(Loss::All);
    }

    /// Like [`SimFs::reboot`], with every unsynced change kept: what the process's death alone
    /// (`kill -9`) leaves, the OS having written everything back.
    pub fn reboot_keeping_unsynced(&self) {
        self.sim.lock().power_loss(Loss::None);
    }

    /// Arms `fault` for the next matching call on the file at `path` (the same kinds as
    /// `FaultyIo` injects).
    pub fn inject(&self, path: &Path, fault: Fault) {
        self.sim.lock().faults.push((path.to_path_buf(), fault));
    }

    /// The volatile contents of the file at `path` (what reads see), if it exists.
    pub fn read_file(&self, path: &Path) -> Option<Vec<u8>> {
        let sim = self.sim.lock();
        match sim.lookup(path)? {
            Node::File(ino) => sim.inodes.get(&ino).map(|i| i.volatile.clone()),
            Node::Dir => None,
        }
    }

    /// Replaces the contents of the file at `path`, durably (a test damaging a file on disk).
    pub fn write_file(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut sim = self.sim.lock();
        let Some(Node::File(ino)) = sim.lookup(path) else {
            return Err(io_error(path, std::io::ErrorKind::NotFound, "no such file"));
        };
        if let Some(inode) = sim.inodes.get_mut(&ino) {
            inode.volatile = bytes.to_vec();
            inode.durable = bytes.to_vec();
            inode.pending.clear();
        }
        Ok(())
    }
}

struct SimFile {
    sim: Arc<Mutex<Sim>>,
    ino: u64,
    path: PathBuf,
    generation: u64,
}

impl SimFile {
    fn with<T>(&self, f: impl FnOnce(&mut Sim, &mut Inode) -> Result<T>) -> Result<T> {
        let mut sim = self.sim.lock();
        sim.alive(&self.path, self.generation)?;
        let mut inode = sim.inodes.remove(&self.ino).unwrap_or_default();
        let r = f(&mut sim, &mut inode);
        sim.inodes.insert(self.ino, inode);
        r
    }
}

fn injected(path: &Path, what: &str) -> Error {
    io_error(
        path,
        std::io::ErrorKind::Other,
        &format!("injected fault: {what}"),
    )
}

impl Io for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.with(|sim, inode| {
            if sim
                .take_fault(&self.path, |f| matches!(f, Fault::FailRead))
                .is_some()
            {
                return Err(injected(&self.path, "failed read"));
            }
            let start = offset as usize;
            let src = start
                .checked_add(buf.len())
                .and_then(|end| inode.volatile.get(start..end))
                .ok_or_else(|| {
                    io_error(
                        &self.path,
                        std::io::ErrorKind::UnexpectedEof,
                        &format!("{} bytes at {offset} are past the end", buf.len()),
                    )
                })?;
            buf.copy_from_slice(src);
            if let Some(Fault::FlipBit(bit)) =
                sim.take_fault(&self.path, |f| matches!(f, Fault::FlipBit(_)))
            {
                if let Some(byte) = buf.get_mut(bit / 8) {
                    *byte ^= 1 << (bit % 8);
                }
            }
            Ok(())
        })
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.with(|sim, inode| {
            sim.change(&self.path)?;
            let fault = sim.take_fault(&self.path, |f| {
                matches!(
                    f,
                    Fault::FailWrite | Fault::ShortWrite(_) | Fault::TornWrite(_)
                )
            });
            let (data, result) = match fault {
                Some(Fault::FailWrite) => return Err(injected(&self.path, "failed write")),
                Some(Fault::ShortWrite(n)) => (
                    &buf[..n.min(buf.len())],
                    Err(injected(&self.path, "short write")),
                ),
                Some(Fault::TornWrite(n)) => (&buf[..n.min(buf.len())], Ok(())),
                _ => (buf, Ok(())),
            };
            write_into(&mut inode.volatile, offset, data);
            inode.pending.push(Change::Write(offset, data.to_vec()));
            result
        })
    }

    fn sync(&self) -> Result<()> {
        self.with(|sim, inode| {
            sim.change(&self.path)?;
            if sim
                .take_fault(&self.path, |f| matches!(f, Fault::FailSync))
                .is_some()
            {
                // As on Linux, the failed writes stay unsynced: a power loss decides them.
                return Err(injected(&self.path, "failed fsync"));
            }
            for change in inode.pending.drain(..) {
                match change {
                    Change::Write(offset, data) => write_into(&mut inode.durable, offset, &data),
                    Change::Len(len) => inode.durable.resize(len as usize, 0),
                }
            }
            if sim.options.names_with_file_sync {
                sim.commit_names();
            }
            Ok(())
        })
    }

    fn file_len(&self) -> Result<u64> {
        self.with(|_, inode| Ok(inode.volatile.len() as u64))
    }

    fn set_file_len(&self, len: u64) -> Result<()> {
        self.with(|sim, inode| {
            sim.change(&self.path)?;
            inode.volatile.resize(len as usize, 0);
            inode.pending.push(Change::Len(len));
            Ok(())
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

struct SimLock {
    sim: Arc<Mutex<Sim>>,
    path: PathBuf,
    generation: u64,
}

impl LockGuard for SimLock {}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut sim = self.sim.lock();
        if sim.generation == self.generation {
            sim.locks.remove(&self.path);
        }
    }
}

impl SimFs {
    fn create_file(sim: &mut Sim, path: &Path) -> Result<u64> {
        let (parent, name) = Sim::split(path)?;
        sim.change(path)?;
        let ino = sim.next_ino;
        sim.next_ino += 1;
        sim.change_names(&parent, vec![(name, Some(Node::File(ino)))])?;
        sim.inodes.insert(ino, Inode::default());
        Ok(ino)
    }
}

impl Vfs for SimFs {
    fn open(&self, path: &Path, how: OpenFile) -> Result<Opened> {
        let mut sim = self.sim.lock();
        if sim.dead {
            return Err(power_lost(path));
        }
        let ino = match sim.lookup(path) {
            Some(Node::File(ino)) => ino,
            Some(Node::Dir) => {
                return Err(io_error(
                    path,
                    std::io::ErrorKind::IsADirectory,
                    "is a directory",
                ))
            }
            None if how.create => Self::create_file(&mut sim, path)?,
            None => return Err(io_error(path, std::io::ErrorKind::NotFound, "no such file")),
        };
        Ok(Opened {
            io: Box::new(SimFile {
                sim: self.sim.clone(),
                ino,
                path: path.to_path_buf(),
                generation: sim.generation,
            }),
            direct: how.direct,
        })
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let sim = self.sim.lock();
        if sim.dead {
            return Err(power_lost(path));
        }
        Ok(sim.lookup(path).is_some())
    }

    fn list(&self, dir: &Path) -> Result<Vec<OsString>> {
        let sim = self.sim.lock();
        if sim.dead {
            return Err(power_lost(dir));
        }
        let d = sim
            .dirs
            .get(dir)
            .ok_or_else(|| io_error(dir, std::io::ErrorKind::NotFound, "no such directory"))?;
        Ok(d.names.keys().cloned().collect())
    }

    fn create_dir(&self, dir: &Path) -> Result<()> {
        let mut sim = self.sim.lock();
        let (parent, name) = Sim::split(dir)?;
        if sim.lookup(dir).is_some() {
            return Err(io_error(dir, std::io::ErrorKind::AlreadyExists, "exists"));
        }
        sim.change(dir)?;
        sim.change_names(&parent, vec![(name, Some(Node::Dir))])?;
        sim.dirs.insert(dir.to_path_buf(), Dir::default());
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut sim = self.sim.lock();
        let (parent, name) = Sim::split(path)?;
        if !matches!(sim.lookup(path), Some(Node::File(_))) {
            return Err(io_error(path, std::io::ErrorKind::NotFound, "no such file"));
        }
        sim.change(path)?;
        sim.change_names(&parent, vec![(name, None)])
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut sim = self.sim.lock();
        let (parent, from_name) = Sim::split(from)?;
        let (to_parent, to_name) = Sim::split(to)?;
        if parent != to_parent {
            return Err(io_error(
                from,
                std::io::ErrorKind::Unsupported,
                "SimFs renames within one directory only",
            ));
        }
        let Some(node @ Node::File(_)) = sim.lookup(from) else {
            return Err(io_error(from, std::io::ErrorKind::NotFound, "no such file"));
        };
        sim.change(from)?;
        sim.change_names(&parent, vec![(from_name, None), (to_name, Some(node))])
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut sim = self.sim.lock();
        sim.change(dir)?;
        let d = sim.dir_mut(dir)?;
        d.durable = d.names.clone();
        d.pending.clear();
        Ok(())
    }

    fn lock(&self, path: &Path, owner: &Path) -> Result<Box<dyn LockGuard>> {
        let mut sim = self.sim.lock();
        match sim.lookup(path) {
            Some(Node::File(_)) => {
                if sim.dead {
                    return Err(power_lost(path));
                }
            }
            Some(Node::Dir) => {
                return Err(io_error(
                    path,
                    std::io::ErrorKind::IsADirectory,
                    "is a directory",
                ))
            }
            None => drop(Self::create_file(&mut sim, path)?),
        }
        if !sim.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: owner.to_path_buf(),
            });
        }
        Ok(Box::new(SimLock {
            sim: self.sim.clone(),
            path: path.to_path_buf(),
            generation: sim.generation,
        }))
    }
}

#[cfg(test)]
mod tests;
