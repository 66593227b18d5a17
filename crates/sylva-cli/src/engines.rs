//! The engine registry: names and options of everything `sylva bench` can run.
//!
//! An engine spec is `NAME` or `NAME:KEY=VALUE,KEY=VALUE`; the options are checked when the
//! command line is parsed, so a typo fails before any work starts, with a message listing what is
//! valid. Each spec becomes an [`Opener`] that builds a fresh instance in a directory.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use sylva::{
    BTree, BTreeOptions, BaselineOptions, BpTreeOptions, BpTreeStore, Db, DbOptions, KvStore,
    MemMap, NbTree, NbTreeOptions, PaDb, PaOptions, Stats, SyncMode, TreeLine, TreeLineOptions,
};
use ycsb::runner::{Session, Shared, Target};

/// The engine `sylva bench` runs when none is named: the durable database.
pub const DEFAULT_ENGINE: &str = "db";

/// The memory budget of every engine with a cache in `sylva bench` unless its spec sets
/// `cache_bytes` (the fair settings of `docs/benchmarking.md`: `db` and the peers alike).
pub const BENCH_CACHE_BYTES: u64 = 64 << 20;
/// Writes per group-commit batch of the durable engines in `sylva bench` (`sync=batch`, the
/// default) unless the spec sets `batch_ops`.
pub const BENCH_BATCH_OPS: u64 = 1024;
/// Longest time between durable points under `sync=batch`, in milliseconds, unless the spec sets
/// `batch_ms`.
pub const BENCH_BATCH_MS: u64 = 10;

/// Every engine name, for error messages and help.
pub const ENGINE_NAMES: &[&str] = &[
    "db",
    "patree",
    "nbtree",
    "treeline",
    "memmap",
    "btreemap",
    "btree",
    "bptree",
    "bptree-baseline",
    "rocksdb",
    "lmdb",
    "redb",
    "fjall",
    "sled",
];

/// The peers: engines people use today, built only with `--features peers`.
pub const PEER_ENGINES: &[&str] = &["rocksdb", "lmdb", "redb", "fjall", "sled"];

/// Whether the engine named `name` keeps its data in files (`db` and every peer): the engines a
/// larger-than-memory set runs and `--recovery` kills and reopens.
pub fn is_durable(name: &str) -> bool {
    name == "db"
        || name == "patree"
        || name == "nbtree"
        || name == "treeline"
        || PEER_ENGINES.contains(&name)
}

/// A parsed `NAME[:KEY=VALUE,...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// The spec as given (it labels results).
    pub text: String,
    /// The engine name.
    pub name: String,
    /// Its options, in order.
    pub options: Vec<(String, String)>,
}

impl EngineSpec {
    /// Parses a spec.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (name, rest) = text.split_once(':').unwrap_or((text, ""));
        let mut options = Vec::new();
        for pair in rest.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("engine option `{pair}` in `{text}` is not KEY=VALUE"))?;
            options.push((k.trim().to_owned(), v.trim().to_owned()));
        }
        Ok(EngineSpec {
            text: text.to_owned(),
            name: name.to_owned(),
            options,
        })
    }
}

/// Builds a fresh engine instance in a directory (which durable engines use and memory engines
/// ignore).
pub type Opener = Box<dyn Fn(&Path) -> Result<Box<dyn Target>, String>>;

fn no_options(spec: &EngineSpec) -> Result<(), String> {
    match spec.options.first() {
        None => Ok(()),
        Some((k, _)) => Err(format!(
            "engine `{}` has no option `{k}` (it takes no options)",
            spec.name
        )),
    }
}

pub(crate) fn shared(store: impl KvStore + 'static) -> Result<Box<dyn Target>, String> {
    Ok(Box::new(Shared(Box::new(store))))
}

/// Checks a spec and returns its opener; an unknown engine or option is an error listing the valid ones.
pub fn opener(spec: &EngineSpec) -> Result<Opener, String> {
    match spec.name.as_str() {
        "memmap" => {
            no_options(spec)?;
            Ok(Box::new(|_| shared(MemMap::new())))
        }
        "btreemap" => {
            no_options(spec)?;
            Ok(Box::new(|_| Ok(Box::new(BareBTreeMap::default()))))
        }
        "db" => db_opener(spec),
        "patree" => patree_opener(spec),
        "nbtree" => nbtree_opener(spec),
        "treeline" => treeline_opener(spec),
        "btree" => {
            // `btree:layout=baseline|prefix|heads|hints|fingerprint|semidense|dense|adaptive,
            // page_size=N,redistribute=BOOL`.
            let mut options = BTreeOptions::default();
            for (k, v) in &spec.options {
                options.set(k, v)?;
            }
            Ok(Box::new(move |_| {
                shared(BTree::new(options).map_err(|e| e.to_string())?)
            }))
        }
        "bptree" => {
            let mut options = BpTreeOptions::default();
            for (k, v) in &spec.options {
                options.set(k, v)?;
            }
            Ok(Box::new(move |_| {
                shared(BpTreeStore::new(&options).map_err(|e| e.to_string())?)
            }))
        }
        "bptree-baseline" => {
            let mut options = BaselineOptions::default();
            for (k, v) in &spec.options {
                options.set(k, v)?;
            }
            Ok(Box::new(move |_| {
                shared(BpTreeStore::baseline(&options).map_err(|e| e.to_string())?)
            }))
        }
        #[cfg(feature = "peers-no-rocksdb")]
        peer if PEER_ENGINES.contains(&peer) => {
            let settings = peer_settings(spec)?;
            let name = peer.to_owned();
            Ok(Box::new(move |dir| {
                Ok(Box::new(Shared(crate::peers::open_peer(&name, dir, &settings)?)) as Box<dyn Target>)
            }))
        }
        #[cfg(not(feature = "peers-no-rocksdb"))]
        peer if PEER_ENGINES.contains(&peer) => Err(format!(
            "engine `{peer}` is a peer, built only with `cargo build --release -p sylva-cli --features peers` (see README)"
        )),
        other => Err(format!(
            "unknown engine `{other}`; valid: {}",
            ENGINE_NAMES.join(", ")
        )),
    }
}

/// The options of a `db` spec (`db:sync=always|batch|never,batch_ops=N,batch_ms=N,
/// cache_bytes=N,page_size=N,layout=NAME,checkpoint_bytes=N,direct_io=BOOL,redistribute=BOOL`,
/// the keys of [`sylva::DB_OPTION_KEYS`], parsed by [`DbOptions::set`]): the fair defaults, then
/// the spec's options in order.
pub fn db_options(spec: &EngineSpec) -> Result<DbOptions, String> {
    let mut options = DbOptions {
        sync: SyncMode::Batch {
            ops: BENCH_BATCH_OPS,
            interval: Duration::from_millis(BENCH_BATCH_MS),
        },
        cache_bytes: BENCH_CACHE_BYTES,
        ..DbOptions::default()
    };
    for (k, v) in &spec.options {
        options
            .set(k, v)
            .map_err(|e| format!("engine `{}`: {e}", spec.name))?;
    }
    Ok(options)
}

/// The opener of a `db` spec.
pub fn db_opener(spec: &EngineSpec) -> Result<Opener, String> {
    let options = db_options(spec)?;
    Ok(Box::new(move |dir| {
        shared(Db::open(dir, options).map_err(|e| e.to_string())?)
    }))
}

/// The options of a `patree` spec (the PA-Tree mode, issue 20): `db`'s fair settings and
/// options, and the worker's `inflight`, `probe`, `yield`, `priority`, `persist`, `backend`
/// ([`sylva::PA_OPTION_KEYS`], parsed by [`PaOptions::set`]).
pub fn patree_options(spec: &EngineSpec) -> Result<PaOptions, String> {
    let mut options = PaOptions {
        db: db_options(&EngineSpec::parse("db").expect("a bare name parses"))?,
        ..PaOptions::default()
    };
    for (k, v) in &spec.options {
        options
            .set(k, v)
            .map_err(|e| format!("engine `{}`: {e}", spec.name))?;
    }
    Ok(options)
}

/// `spec` fitted to a benchmark thread's window of `window` operations in flight
/// (`sylva bench --inflight`): a `patree` worker admits at most its `inflight` tasks, and the
/// rest of a larger window would wait in the benchmark thread while the run's JSON said
/// `window` were in flight. A spec that does not set `inflight` gets `window` slots when that
/// is more than its default; one that sets fewer is refused. Other engines, and the
/// synchronous baselines (`mode=`), are returned as they are.
pub fn fit_window(mut spec: EngineSpec, window: u64) -> Result<EngineSpec, String> {
    if spec.name != "patree" {
        return Ok(spec);
    }
    let options = patree_options(&spec)?;
    let slots = options.worker.inflight as u64;
    if options.baseline.is_some() || window <= slots {
        return Ok(spec);
    }
    if spec.options.iter().any(|(k, _)| k == "inflight") {
        return Err(format!(
            "--inflight {window} is more than engine `{}`'s {slots} task slots (its `inflight`): \
             raise `inflight` to at least {window}, or lower --inflight",
            spec.text
        ));
    }
    spec.options.push(("inflight".into(), window.to_string()));
    Ok(spec)
}

/// The opener of a `patree` spec. `mode=dedicated|shared` opens the paper's synchronous
/// baselines instead: `db` with its page reads through io_uring (`sylva::exec::RingVfs`), one
/// blocking operation per benchmark thread.
pub fn patree_opener(spec: &EngineSpec) -> Result<Opener, String> {
    let options = patree_options(spec)?;
    if let Some(mode) = options.baseline {
        return Ok(Box::new(move |dir| {
            let vfs = sylva::exec::RingVfs::new(std::sync::Arc::new(sylva::vfs::OsFs), mode);
            shared(Db::open_in(&vfs, dir, options.db).map_err(|e| e.to_string())?)
        }));
    }
    Ok(Box::new(move |dir| {
        let db = PaDb::open(dir, options.clone()).map_err(|e| e.to_string())?;
        Ok(Box::new(crate::patree::PaTarget(db)) as Box<dyn Target>)
    }))
}

/// The options of an `nbtree` spec (`nbtree:sigma=BYTES,fanout=N,bloom_bits=N,
/// deamortize=on|off,step_bytes=N` and `db`'s `sync`, `batch_ops`, `batch_ms`, `cache_bytes`,
/// `page_size`: the keys of [`sylva::NBTREE_OPTION_KEYS`]): the fair defaults (σ an eighth of
/// `cache_bytes` unless set), then the spec's options in order.
pub fn nbtree_options(spec: &EngineSpec) -> Result<NbTreeOptions, String> {
    let mut options = NbTreeOptions {
        sync: SyncMode::Batch {
            ops: BENCH_BATCH_OPS,
            interval: Duration::from_millis(BENCH_BATCH_MS),
        },
        cache_bytes: BENCH_CACHE_BYTES,
        ..NbTreeOptions::default()
    };
    for (k, v) in &spec.options {
        options
            .set(k, v)
            .map_err(|e| format!("engine `{}`: {e}", spec.name))?;
    }
    options
        .validate()
        .map_err(|e| format!("engine `{}`: {e}", spec.name))?;
    Ok(options)
}

/// The opener of an `nbtree` spec.
pub fn nbtree_opener(spec: &EngineSpec) -> Result<Opener, String> {
    let options = nbtree_options(spec)?;
    Ok(Box::new(move |dir| {
        shared(NbTree::open(dir, options).map_err(|e| e.to_string())?)
    }))
}

/// The options of a `treeline` spec (the keys of [`sylva::TREELINE_OPTION_KEYS`], parsed by
/// [`TreeLineOptions::set`]: `db`'s fair settings, then `goal`, `epsilon`, `grouping`,
/// `record_cache`, `forecast`, `bins`, `forecast_epochs`, `fill_floor`, `radius`, `prefetch`, ...).
pub fn treeline_options(spec: &EngineSpec) -> Result<TreeLineOptions, String> {
    let mut options = TreeLineOptions {
        sync: SyncMode::Batch {
            ops: BENCH_BATCH_OPS,
            interval: Duration::from_millis(BENCH_BATCH_MS),
        },
        cache_bytes: BENCH_CACHE_BYTES,
        ..TreeLineOptions::default()
    };
    for (k, v) in &spec.options {
        options
            .set(k, v)
            .map_err(|e| format!("engine `{}`: {e}", spec.name))?;
    }
    Ok(options)
}

/// The opener of a `treeline` spec.
pub fn treeline_opener(spec: &EngineSpec) -> Result<Opener, String> {
    let options = treeline_options(spec)?;
    Ok(Box::new(move |dir| {
        shared(TreeLine::open(dir, options).map_err(|e| e.to_string())?)
    }))
}

/// A peer's settings from its spec: `cache_bytes=N`, `sync=never|batch|always`, `batch_ops=N`,
/// `batch_ms=N`, `lmdb_map_size=N` (defaults: `PeerSettings::default()`, documented in
/// docs/benchmarking.md).
#[cfg(feature = "peers-no-rocksdb")]
fn peer_settings(spec: &EngineSpec) -> Result<crate::peers::PeerSettings, String> {
    use crate::peers::{PeerSettings, PeerSync};
    let mut s = PeerSettings::default();
    let (mut ops, mut interval) = match s.sync {
        PeerSync::Batch { ops, interval } => (ops, interval),
        _ => (BENCH_BATCH_OPS, Duration::from_millis(BENCH_BATCH_MS)),
    };
    let mut mode = "batch".to_owned();
    let number = |k: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| format!("engine option `{k}={v}` of `{}` is not a number", spec.name))
    };
    for (k, v) in &spec.options {
        match k.as_str() {
            "cache_bytes" => s.cache_bytes = number(k, v)?,
            "lmdb_map_size" => s.lmdb_map_size = number(k, v)?,
            "batch_ops" => ops = number(k, v)?.max(1),
            "batch_ms" => interval = Duration::from_millis(number(k, v)?),
            "sync" if ["never", "batch", "always"].contains(&v.as_str()) => mode = v.clone(),
            _ => {
                return Err(format!(
                    "engine `{}` has no option `{k}={v}`; valid: cache_bytes=N, sync=never|batch|always, batch_ops=N, batch_ms=N, lmdb_map_size=N",
                    spec.name
                ))
            }
        }
    }
    s.sync = match mode.as_str() {
        "never" => PeerSync::Never,
        "always" => PeerSync::Always,
        _ => PeerSync::Batch { ops, interval },
    };
    Ok(s)
}

/// std `BTreeMap<Vec<u8>, Vec<u8>>` with no lock at all: the single-threaded floor.
#[derive(Default)]
pub struct BareBTreeMap {
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Target for BareBTreeMap {
    fn sessions(&mut self, n: usize) -> Result<Vec<Box<dyn Session + '_>>, String> {
        if n != 1 {
            return Err(format!(
                "engine `btreemap` is single-threaded; it cannot run {n} threads"
            ));
        }
        Ok(vec![Box::new(BareSession(&mut self.map))])
    }
    fn sync(&self) -> sylva::Result<()> {
        Ok(())
    }
    fn stats(&self) -> Stats {
        Stats {
            records: self.map.len() as u64,
            bytes_used: None,
            counters: Vec::new(),
        }
    }
}

/// The one session of a [`BareBTreeMap`].
struct BareSession<'a>(&'a mut BTreeMap<Vec<u8>, Vec<u8>>);

impl Session for BareSession<'_> {
    fn get_into(&mut self, key: &[u8], out: &mut Vec<u8>) -> sylva::Result<bool> {
        match self.0.get(key) {
            Some(v) => {
                out.clear();
                out.extend_from_slice(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }
    fn put(&mut self, key: &[u8], value: &[u8]) -> sylva::Result<()> {
        match self.0.get_mut(key) {
            Some(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            None => {
                self.0.insert(key.to_vec(), value.to_vec());
            }
        }
        Ok(())
    }
    fn delete(&mut self, key: &[u8]) -> sylva::Result<bool> {
        Ok(self.0.remove(key).is_some())
    }
    fn scan(
        &mut self,
        start: &[u8],
        limit: usize,
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        let mut n = 0;
        for (k, v) in self
            .0
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take(limit)
        {
            n += 1;
            if !visitor(k, v) {
                break;
            }
        }
        Ok(n)
    }
    fn map_range(
        &mut self,
        start: &[u8],
        end: &[u8],
        visitor: &mut sylva::Visitor<'_>,
    ) -> sylva::Result<usize> {
        if start >= end {
            return Ok(0);
        }
        let mut n = 0;
        for (k, v) in self
            .0
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
        {
            n += 1;
            if !visitor(k, v) {
                break;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_unknown_names_and_options_are_refused() {
        let s = EngineSpec::parse("bptree:log_size=32, block_size=64").expect("parse");
        assert_eq!(s.name, "bptree");
        assert_eq!(
            s.options,
            vec![
                ("log_size".into(), "32".into()),
                ("block_size".into(), "64".into())
            ]
        );
        assert!(EngineSpec::parse("x:novalue").is_err());
        let err = opener(&EngineSpec::parse("nosuch").expect("parse"))
            .err()
            .expect("unknown engine");
        assert!(err.contains("memmap") && err.contains("btreemap"), "{err}");
        let err = opener(&EngineSpec::parse("memmap:foo=1").expect("parse"))
            .err()
            .expect("unknown option");
        assert!(err.contains("foo"), "{err}");
        assert!(
            opener(&EngineSpec::parse("btree:layout=dense,page_size=8192").expect("parse")).is_ok()
        );
        let err = opener(&EngineSpec::parse("btree:colour=red").expect("parse"))
            .err()
            .expect("unknown btree option");
        assert!(err.contains("layout") && err.contains("page_size"), "{err}");
        for good in [
            "bptree",
            "bptree:log_size=16,block_size=64",
            "bptree-baseline:node_size=4096",
        ] {
            assert!(
                opener(&EngineSpec::parse(good).expect("parse")).is_ok(),
                "{good}"
            );
        }
        let err = opener(&EngineSpec::parse("bptree:node_size=1").expect("parse"))
            .err()
            .expect("unknown bptree option");
        assert!(
            err.contains("log_size") && err.contains("internal_size"),
            "{err}"
        );
        let err = opener(&EngineSpec::parse("bptree-baseline:node_size=100").expect("parse"))
            .err()
            .expect("node_size out of range");
        assert!(err.contains("256"), "{err}");
    }

    #[test]
    fn btreemap_refuses_more_than_one_thread() {
        let mut t = BareBTreeMap::default();
        assert!(t.sessions(2).is_err());
        assert_eq!(t.sessions(1).expect("one session").len(), 1);
    }

    #[test]
    fn db_specs_start_from_the_fair_settings_and_refuse_unknown_options() {
        let o = db_options(&EngineSpec::parse("db").expect("parse")).expect("defaults");
        assert_eq!(o.cache_bytes, BENCH_CACHE_BYTES);
        assert_eq!(
            o.sync,
            SyncMode::Batch {
                ops: BENCH_BATCH_OPS,
                interval: Duration::from_millis(BENCH_BATCH_MS)
            }
        );
        let spec = "db:sync=always,cache_bytes=1048576,page_size=8192,layout=hints,checkpoint_bytes=2097152,direct_io=false";
        let o = db_options(&EngineSpec::parse(spec).expect("parse")).expect("options");
        assert_eq!(o.sync, SyncMode::Always);
        assert_eq!((o.cache_bytes, o.page_size), (1 << 20, 8192));
        assert_eq!(o.checkpoint_bytes, 2 << 20);
        assert!(!o.direct_io);
        let o = db_options(&EngineSpec::parse("db:batch_ops=10,batch_ms=3").expect("parse"))
            .expect("batch");
        assert_eq!(
            o.sync,
            SyncMode::Batch {
                ops: 10,
                interval: Duration::from_millis(3)
            }
        );
        let err = db_options(&EngineSpec::parse("db:colour=red").expect("parse"))
            .expect_err("unknown option");
        for key in sylva::DB_OPTION_KEYS {
            assert!(err.contains(key), "{key} missing from {err}");
        }
        assert!(db_options(&EngineSpec::parse("db:sync=sometimes").expect("parse")).is_err());
    }

    #[test]
    fn nbtree_specs_take_their_options_and_refuse_bad_ones() {
        let o = nbtree_options(&EngineSpec::parse("nbtree").expect("parse")).expect("defaults");
        assert_eq!(o.sigma_bytes(), BENCH_CACHE_BYTES / 8);
        let spec = "nbtree:cache_bytes=268435456,sync=never,sigma=1048576,fanout=15,bloom_bits=0,deamortize=off,step_bytes=65536";
        let o = nbtree_options(&EngineSpec::parse(spec).expect("parse")).expect("options");
        assert_eq!(
            (
                o.sigma_bytes(),
                o.fanout,
                o.bloom_bits,
                o.deamortize,
                o.step_bytes,
                o.sync
            ),
            (1 << 20, 15, 0, false, 65536, SyncMode::Never)
        );
        let err = nbtree_options(&EngineSpec::parse("nbtree:colour=red").expect("parse"))
            .expect_err("unknown option");
        assert!(err.contains("sigma") && err.contains("fanout"), "{err}");
        let err = nbtree_options(&EngineSpec::parse("nbtree:fanout=2").expect("parse"))
            .expect_err("fanout 2");
        assert!(err.contains("fanout"), "{err}");
        assert!(is_durable("nbtree"));
    }

    #[test]
    fn a_patree_window_larger_than_its_slots_raises_them_or_is_refused() {
        let slots = |text: &str, window: u64| {
            fit_window(EngineSpec::parse(text).expect("parse"), window)
                .and_then(|s| patree_options(&s))
                .map(|o| o.worker.inflight)
        };
        // The default's 64 slots hold windows up to 64; a larger one raises them.
        assert_eq!(slots("patree", 1), Ok(64));
        assert_eq!(slots("patree", 32), Ok(64));
        assert_eq!(slots("patree:probe=every", 128), Ok(128));
        assert_eq!(slots("patree:inflight=256", 128), Ok(256));
        let err = slots("patree:inflight=64", 128).expect_err("fewer slots than the window");
        assert!(
            err.contains("--inflight 128") && err.contains("64"),
            "{err}"
        );
        // The label stays the spec as given; baselines and other engines are left alone.
        let spec = fit_window(EngineSpec::parse("patree").expect("parse"), 128).expect("fits");
        assert_eq!(spec.text, "patree");
        let spec = fit_window(EngineSpec::parse("patree:mode=shared").expect("parse"), 128);
        assert!(spec
            .expect("baseline")
            .options
            .iter()
            .all(|(k, _)| k != "inflight"));
        let spec = fit_window(EngineSpec::parse("db").expect("parse"), 128).expect("db");
        assert!(spec.options.is_empty());
    }

    #[test]
    fn patree_specs_take_db_and_worker_options_and_refuse_bad_ones() {
        let o = patree_options(&EngineSpec::parse("patree").expect("parse")).expect("defaults");
        let db = db_options(&EngineSpec::parse("db").expect("parse")).expect("defaults");
        assert_eq!(o.db, db, "patree starts from db's fair settings");
        assert_eq!(o.worker.inflight, 64);
        let spec = "patree:inflight=32,persist=strong,backend=inline,yield=off,priority=fifo,probe=fixed:50,cache_bytes=1048576";
        let o = patree_options(&EngineSpec::parse(spec).expect("parse")).expect("options");
        assert_eq!(o.worker.inflight, 32);
        assert_eq!(o.db.sync, SyncMode::Always);
        assert_eq!(o.db.cache_bytes, 1 << 20);
        assert_eq!(o.backend, sylva::BackendKind::Inline);
        assert_eq!(o.worker.yield_for, None);
        assert_eq!(
            o.worker.probe,
            sylva::ProbePolicy::Fixed(Duration::from_micros(50))
        );
        let err = patree_options(&EngineSpec::parse("patree:colour=red").expect("parse"))
            .expect_err("unknown option");
        for key in sylva::PA_OPTION_KEYS.iter().chain(&sylva::DB_OPTION_KEYS) {
            assert!(err.contains(key), "{key} missing from {err}");
        }
        for bad in [
            "inflight=0",
            "inflight=5000",
            "backend=spdk",
            "persist=maybe",
            "mode=threads",
        ] {
            let spec = format!("patree:{bad}");
            assert!(
                patree_options(&EngineSpec::parse(&spec).expect("parse")).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            o.baseline, None,
            "the PA-Tree mode unless a baseline is named"
        );
        for (mode, want) in [
            ("dedicated", Some(sylva::exec::BlockingMode::Dedicated)),
            ("shared", Some(sylva::exec::BlockingMode::Shared)),
            ("async", None),
        ] {
            let spec = EngineSpec::parse(&format!("patree:mode={mode}")).expect("parse");
            assert_eq!(patree_options(&spec).expect(mode).baseline, want, "{mode}");
        }
        assert!(is_durable("patree"));
    }

    #[cfg(feature = "peers-no-rocksdb")]
    #[test]
    fn db_and_the_peers_start_from_the_same_fair_settings() {
        use crate::peers::{PeerSettings, PeerSync};
        let peer = PeerSettings::default();
        let db = db_options(&EngineSpec::parse("db").expect("parse")).expect("defaults");
        assert_eq!(peer.cache_bytes, db.cache_bytes);
        let PeerSync::Batch { ops, interval } = peer.sync else {
            panic!("peers default to batch")
        };
        assert_eq!(db.sync, SyncMode::Batch { ops, interval });
    }
}
