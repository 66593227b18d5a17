//! Fault injection under an [`NbTree`] ([`FaultyIo`] under the page file and both log
//! segments): a failed write, a short write or a failed fsync at each call in turn of a run that
//! spans several commits (so each fault lands at each commit step: d-tree writes, the manifest,
//! its head, the fsyncs, the meta page, the log's rotation and the dropping of its old segment).
//! The call that meets the fault fails (or, for a torn write, the next `check()` finds the
//! damage), the store is poisoned, and reopening either the bytes the OS held at that moment (a
//! `kill -9`) or only the synced ones (a power cut) finds every acknowledged write (under
//! `SyncMode::Always`), as a prefix of the writes run, and passes `check()`. A torn meta page
//! write falls back to the previous checkpoint and its manifest, which are intact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sylva::io::{Fault, FaultHandle, FaultyIo, Io};
use sylva::{NbTree, NbTreeOptions, Result, SyncMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A file in memory: what reads see, and what the last sync made durable.
#[derive(Default)]
struct DiskState {
    current: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Clone)]
struct Disk {
    state: Arc<Mutex<DiskState>>,
    path: PathBuf,
}

impl Disk {
    fn new(name: &str, bytes: Vec<u8>) -> Disk {
        Disk {
            state: Arc::new(Mutex::new(DiskState {
                current: bytes.clone(),
                durable: bytes,
            })),
            path: PathBuf::from(name),
        }
    }
    fn snapshot(&self) -> (Vec<u8>, Vec<u8>) {
        let s = self.state.lock().expect("disk");
        (s.current.clone(), s.durable.clone())
    }
}

fn eof(offset: u64, len: usize) -> sylva::Error {
    sylva::Error::Io {
        path: None,
        source: std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{len} bytes at {offset} past the end"),
        ),
    }
}

impl Io for Disk {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let s = self.state.lock().expect("disk");
        let at = offset as usize;
        let src = s
            .current
            .get(at..at + buf.len())
            .ok_or_else(|| eof(offset, buf.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut s = self.state.lock().expect("disk");
        let end = offset as usize + buf.len();
        if s.current.len() < end {
            s.current.resize(end, 0);
        }
        s.current[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        let mut s = self.state.lock().expect("disk");
        s.durable = s.current.clone();
        Ok(())
    }
    fn file_len(&self) -> Result<u64> {
        Ok(self.state.lock().expect("disk").current.len() as u64)
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.state
            .lock()
            .expect("disk")
            .current
            .resize(len as usize, 0);
        Ok(())
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Call {
    Write,
    Sync,
}

/// The images of all three files when a fault fired: (current, durable) each.
type Images = Vec<(Vec<u8>, Vec<u8>)>;

/// Arms `fault` just before the `skip + 1`-th call of its kind, and snapshots every file then.
struct Probe {
    inner: FaultyIo<Disk>,
    handle: FaultHandle,
    plan: Plan,
    index: usize,
    disks: Vec<Disk>,
    fired: Arc<Mutex<Option<Images>>>,
    /// Tear the next meta page write: snapshot every file's synced bytes with that meta page
    /// half old, half new, as a power cut in the middle of its write leaves them.
    tear_meta: Arc<Mutex<bool>>,
}

impl Probe {
    fn around<T>(&self, call: Call, f: impl FnOnce() -> T) -> T {
        {
            let mut plan = self.plan.lock().expect("plan");
            if let Some((file, fault, c, skip)) = *plan {
                if file == self.index && c == call {
                    if skip == 0 {
                        *plan = None;
                        *self.fired.lock().expect("fired") =
                            Some(self.disks.iter().map(Disk::snapshot).collect());
                        self.handle.arm(fault);
                    } else {
                        *plan = Some((file, fault, c, skip - 1));
                    }
                }
            }
        }
        f()
    }
}

impl Io for Probe {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if self.index == 0 && offset < 2 * 4096 && buf.len() == 4096 {
            let mut tear = self.tear_meta.lock().expect("tear");
            if *tear {
                *tear = false;
                let mut images: Images = self.disks.iter().map(Disk::snapshot).collect();
                let page = &mut images[0].1;
                let at = offset as usize;
                // The first sector as it was, the rest new.
                page[at + 512..at + 4096].copy_from_slice(&buf[512..]);
                *self.fired.lock().expect("fired") = Some(images);
            }
        }
        self.around(Call::Write, || self.inner.write_at(buf, offset))
    }
    fn sync(&self) -> Result<()> {
        self.around(Call::Sync, || self.inner.sync())
    }
    fn file_len(&self) -> Result<u64> {
        self.inner.file_len()
    }
    fn set_file_len(&self, len: u64) -> Result<()> {
        self.inner.set_file_len(len)
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

fn options() -> NbTreeOptions {
    NbTreeOptions {
        sync: SyncMode::Always,
        sigma: Some(64 << 10),
        fanout: 3,
        deamortize: false,
        ..NbTreeOptions::default()
    }
}

type Plan = Arc<Mutex<Option<(usize, Fault, Call, usize)>>>;

fn open(
    images: &[Vec<u8>],
    plan: &Plan,
    fired: &Arc<Mutex<Option<Images>>>,
) -> (Result<NbTree>, Vec<Disk>) {
    open_tearing(images, plan, fired, &Arc::new(Mutex::new(false)))
}

fn open_tearing(
    images: &[Vec<u8>],
    plan: &Plan,
    fired: &Arc<Mutex<Option<Images>>>,
    tear_meta: &Arc<Mutex<bool>>,
) -> (Result<NbTree>, Vec<Disk>) {
    let names = ["data.sylva", "wal.log", "wal.2.log"];
    let disks: Vec<Disk> = names
        .iter()
        .zip(images)
        .map(|(n, b)| Disk::new(n, b.clone()))
        .collect();
    let probe = |i: usize| -> Box<dyn Io> {
        let (inner, handle) = FaultyIo::new(disks[i].clone());
        Box::new(Probe {
            inner,
            handle,
            plan: plan.clone(),
            index: i,
            disks: disks.clone(),
            fired: fired.clone(),
            tear_meta: tear_meta.clone(),
        })
    };
    let nb = NbTree::open_io(probe(0), [probe(1), probe(2)], options());
    (nb, disks)
}

fn key(i: u64) -> Vec<u8> {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 5000)
        .to_be_bytes()
        .to_vec()
}

fn contents(nb: &NbTree) -> Result<Model> {
    let mut m = Model::new();
    nb.scan(&[], usize::MAX, &mut |k, v| {
        m.insert(k.to_vec(), v.to_vec());
        true
    })?;
    Ok(m)
}

/// Runs writes until the fault (or `OPS`); returns the model of the acknowledged writes, the
/// write in flight when it failed, and whether a call failed.
const OPS: u64 = 4000;

fn scenario(
    file: usize,
    fault: Fault,
    call: Call,
    skip: usize,
) -> std::result::Result<bool, String> {
    let plan: Plan = Arc::new(Mutex::new(None));
    let fired = Arc::new(Mutex::new(None));
    let empty = vec![Vec::new(), Vec::new(), Vec::new()];
    let (nb, _disks) = open(&empty, &plan, &fired);
    let nb = nb.map_err(|e| format!("open: {e}"))?;
    *plan.lock().expect("plan") = Some((file, fault, call, skip));
    let mut model = Model::new();
    let mut in_flight = None;
    let mut failed = false;
    for i in 0..OPS {
        let (k, v) = (key(i), i.to_le_bytes().repeat(1 + (i % 12) as usize));
        let r = if i % 9 == 8 {
            nb.delete(&k).map(drop)
        } else {
            nb.put(&k, &v)
        };
        match r {
            Ok(()) => {
                if i % 9 == 8 {
                    model.remove(&k);
                } else {
                    model.insert(k, v);
                }
            }
            Err(_) => {
                in_flight = Some((k, (i % 9 != 8).then_some(v)));
                failed = true;
                break;
            }
        }
    }
    if failed && nb.put(b"after", b"x").is_ok() {
        return Err("a write after the failed one was accepted (not poisoned)".into());
    }
    let images = fired.lock().expect("fired").take();
    nb.simulate_crash();
    let Some(images) = images else {
        return Ok(false); // the run never reached that call
    };
    for (what, pick) in [("OS-held", 0), ("synced", 1)] {
        let bytes: Vec<Vec<u8>> = images
            .iter()
            .map(|(c, d)| if pick == 0 { c.clone() } else { d.clone() })
            .collect();
        let quiet: Plan = Arc::new(Mutex::new(None));
        let (nb, _) = open(&bytes, &quiet, &Arc::new(Mutex::new(None)));
        let nb = nb.map_err(|e| format!("reopening the {what} bytes: {e}"))?;
        let got = contents(&nb).map_err(|e| format!("{what}: scan: {e}"))?;
        // Everything acknowledged before the fault fired; the fault fired inside the write
        // in flight or before it, so the model minus at most that write.
        let mut with = model.clone();
        if let Some((k, v)) = &in_flight {
            match v {
                Some(v) => with.insert(k.clone(), v.clone()),
                None => with.remove(k),
            };
        }
        if got != model && got != with {
            let missing = model
                .iter()
                .filter(|(k, v)| got.get(*k) != Some(*v))
                .count();
            return Err(format!(
                "{what} bytes: {missing} acknowledged records missing or wrong ({} found, {} acknowledged)",
                got.len(),
                model.len()
            ));
        }
        nb.check().map_err(|e| format!("{what}: check: {e}"))?;
        nb.put(b"later", b"y")
            .map_err(|e| format!("{what}: a write after reopening: {e}"))?;
    }
    Ok(true)
}

#[test]
fn each_fault_at_each_call_of_a_run_loses_nothing_acknowledged() {
    let mut failures = Vec::new();
    let mut fired = 0;
    let faults = [
        (Fault::FailWrite, Call::Write),
        (Fault::ShortWrite(100), Call::Write),
        (Fault::FailSync, Call::Sync),
    ];
    for file in 0..3 {
        for (fault, call) in faults {
            // Every call of the page file (a run of 4000 writes makes a few hundred, over
            // several commits); every tenth of the logs' (one sync per write under `Always`).
            let step = if file == 0 { 1 } else { 37 };
            let mut skip = 0;
            loop {
                match scenario(file, fault, call, skip) {
                    Ok(true) => fired += 1,
                    Ok(false) => break,
                    Err(e) => failures.push(format!("file {file} {fault:?} at call {skip}: {e}")),
                }
                skip += step;
            }
        }
    }
    assert!(fired > 300, "only {fired} scenarios met their fault");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn a_torn_meta_page_falls_back_to_the_previous_checkpoint() {
    let plan: Plan = Arc::new(Mutex::new(None));
    let fired = Arc::new(Mutex::new(None));
    let tear = Arc::new(Mutex::new(false));
    let empty = vec![Vec::new(), Vec::new(), Vec::new()];
    let (nb, _disks) = open_tearing(&empty, &plan, &fired, &tear);
    let nb = nb.expect("open");
    let mut model = Model::new();
    for i in 0..2000u64 {
        nb.put(&key(i), &i.to_le_bytes()).expect("put");
        model.insert(key(i), i.to_le_bytes().to_vec());
    }
    nb.checkpoint().expect("checkpoint");
    for i in 2000..2100u64 {
        nb.put(&key(i), &i.to_le_bytes()).expect("put");
        model.insert(key(i), i.to_le_bytes().to_vec());
    }
    // The power fails in the middle of the next checkpoint's meta page write.
    *tear.lock().expect("tear") = true;
    nb.checkpoint().expect("checkpoint");
    let images = fired
        .lock()
        .expect("fired")
        .take()
        .expect("the meta page was written");
    nb.simulate_crash();
    let durable: Vec<Vec<u8>> = images.into_iter().map(|(_, d)| d).collect();
    let quiet: Plan = Arc::new(Mutex::new(None));
    let (nb, _) = open(&durable, &quiet, &Arc::new(Mutex::new(None)));
    let nb = nb.expect("reopen with a torn meta page");
    // The meta page's new bytes are all in its first sector (header, owner area, free-space
    // directory), so this tear leaves the previous meta page whole: recovery starts from the
    // previous checkpoint (its manifest and runs intact) and redoes the 100 writes since.
    assert!(
        nb.recovery().records_redone >= 100,
        "recovery did not fall back to the previous checkpoint: {:?}",
        nb.recovery()
    );
    assert_eq!(contents(&nb).expect("scan"), model);
    nb.check().expect("check");
}
