//! Calibration of the probe model (`sylva calibrate`): raw 4 KiB random I/O on a scratch file
//! through [`Uring`], at several read shares and queue depths, probed at random moments; each
//! probe is a sample of the features `T` (outstanding reads and writes by submission slice)
//! and of the completions it found, and [`fit`] gives β from them (the paper trains the same
//! model offline, IV.A). Each point also reports its IOPS, mean latency and CPU per I/O: the
//! bare one-thread io_uring loop to set against `fio` at the same depth.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fit::{fit, Sample};
use super::sched::{IoKind, LatencyModel, ProbePolicy, Prober};
use super::{Backend, Completion, Request, Uring};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, OpenFile, OsFs, Vfs};

/// What a calibration runs.
#[derive(Debug, Clone)]
pub struct CalibrateOptions {
    /// The scratch file's size (written once, then read and overwritten at random).
    pub file_bytes: u64,
    /// How long each point runs.
    pub per_point: Duration,
    /// Reads in percent of the I/Os, one point per value and depth.
    pub read_percents: Vec<u32>,
    /// Requests kept in flight, one point per value and read share.
    pub depths: Vec<u32>,
    /// The longest random pause before a probe (the samples see completions of every age).
    pub max_pause: Duration,
}

impl Default for CalibrateOptions {
    fn default() -> Self {
        CalibrateOptions {
            file_bytes: 256 << 20,
            per_point: Duration::from_millis(500),
            read_percents: vec![100, 90, 50],
            depths: vec![1, 2, 4, 8, 16, 32, 64],
            max_pause: Duration::from_micros(200),
        }
    }
}

/// One point's figures.
#[derive(Debug, Clone)]
pub struct Point {
    /// Reads in percent.
    pub read_percent: u32,
    /// Requests in flight.
    pub depth: u32,
    /// I/Os completed a second.
    pub iops: f64,
    /// Mean time from submission to the probe that saw the completion (µs).
    pub mean_latency_us: f64,
    /// This thread's CPU time per I/O (µs).
    pub cpu_us_per_io: f64,
}

/// What a calibration found.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// Per read share and depth.
    pub points: Vec<Point>,
    /// β fitted to every probe's sample.
    pub model: LatencyModel,
    /// How many samples the fit used.
    pub samples: usize,
}

const BLOCK: usize = 4096;

/// This thread's CPU time (user and system).
fn thread_cpu() -> Duration {
    // SAFETY: getrusage writes the struct we pass; zeroed is a valid initial value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a plain syscall filling `usage`.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// A small generator for offsets, kinds and pauses.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Runs the calibration on a scratch file in `dir` (removed afterwards).
pub fn calibrate(dir: &Path, options: &CalibrateOptions) -> Result<Calibration> {
    let blocks = options.file_bytes / BLOCK as u64;
    if blocks == 0 || options.depths.iter().any(|&d| d == 0 || d > 1024) {
        return Err(Error::InvalidArgument {
            what: "calibration file size (at least 4 KiB) or depth (1 to 1024)".into(),
            limit: 1024,
        });
    }
    if options.read_percents.iter().any(|&r| r > 100) {
        return Err(Error::InvalidArgument {
            what: "read share over 100 percent".into(),
            limit: 100,
        });
    }
    let path = dir.join("sylva-calibrate.tmp");
    let opened = OsFs.open(
        &path,
        OpenFile {
            create: true,
            direct: true,
        },
    )?;
    let io: Arc<dyn crate::io::Io> = Arc::from(opened.io);
    let result = (|| {
        // Written whole first, so reads find data on the device, not holes.
        let chunk = AlignedBuf::new(1 << 20);
        let mut at = 0;
        while at < options.file_bytes {
            let n = (options.file_bytes - at).min(chunk.len() as u64) as usize;
            io.write_at(&chunk[..n], at)?;
            at += n as u64;
        }
        io.sync()?;
        let mut samples = Vec::new();
        let mut points = Vec::new();
        for &read_percent in &options.read_percents {
            for &depth in &options.depths {
                let point = run_point(&io, blocks, read_percent, depth, options, &mut samples)?;
                points.push(point);
            }
        }
        let model = fit(&samples)?;
        Ok(Calibration {
            points,
            model,
            samples: samples.len(),
        })
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// One point: `depth` requests kept in flight for `options.per_point`.
fn run_point(
    io: &Arc<dyn crate::io::Io>,
    blocks: u64,
    read_percent: u32,
    depth: u32,
    options: &CalibrateOptions,
    samples: &mut Vec<Sample>,
) -> Result<Point> {
    // Declared before the ring, so dropped after it (the ring's drop waits for the kernel).
    let mut bufs: Vec<AlignedBuf> = (0..depth).map(|_| AlignedBuf::new(BLOCK)).collect();
    let mut ring = Uring::new(depth.next_power_of_two())?;
    let file = ring.register(io.clone())?;
    // Per slot: when its request was submitted and what it is (`None`: free).
    let mut slots: Vec<Option<(u64, IoKind)>> = vec![None; depth as usize];
    let mut prober = Prober::new(ProbePolicy::Every);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ u64::from(read_percent << 8 | depth));
    let start = Instant::now();
    let now = |start: Instant| start.elapsed().as_nanos() as u64;
    let cpu_before = thread_cpu();
    let (mut done, mut latency_ns) = (0u64, 0u64);
    let mut completions: Vec<Completion> = Vec::new();
    let result = (|| -> Result<()> {
        while start.elapsed() < options.per_point {
            for (slot, state) in slots.iter_mut().enumerate() {
                if state.is_some() {
                    continue;
                }
                let offset = (rng.next() % blocks) * BLOCK as u64;
                let kind = if rng.next() % 100 < u64::from(read_percent) {
                    IoKind::Read
                } else {
                    IoKind::Write
                };
                let buf = &mut bufs[slot];
                let request = match kind {
                    IoKind::Read => Request::Read {
                        file,
                        buf: buf.as_mut_ptr(),
                        len: BLOCK as u32,
                        offset,
                    },
                    IoKind::Write => Request::Write {
                        file,
                        buf: buf.as_ptr(),
                        len: BLOCK as u32,
                        offset,
                        sync: false,
                    },
                };
                // SAFETY: the slot's buffer is not touched again until its completion is
                // collected (the slot stays taken), and the ring is drained before `bufs` drops.
                unsafe { ring.submit(slot as u64, request) }?;
                let t = now(start);
                prober.submitted(t, kind);
                *state = Some((t, kind));
            }
            // Submit, then probe after a random pause.
            ring.complete(0, None, &mut completions)?;
            let pause =
                Duration::from_nanos(rng.next() % (options.max_pause.as_nanos() as u64 + 1));
            let until = Instant::now() + pause;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
            let t = now(start);
            let features = prober.features(t);
            ring.complete(0, None, &mut completions)?;
            let mut found = [0.0; 2];
            for c in completions.drain(..) {
                c.result?;
                let Some((submitted, kind)) = slots[c.tag as usize].take() else {
                    continue;
                };
                prober.completed(submitted, t, kind);
                found[if kind == IoKind::Write { 0 } else { 1 }] += 1.0;
                done += 1;
                latency_ns += t - submitted;
            }
            samples.push((features, found));
        }
        Ok(())
    })();
    // Drain what is in flight before the buffers go.
    while ring.outstanding() > 0 {
        if ring
            .complete(
                ring.outstanding(),
                Some(Duration::from_secs(1)),
                &mut completions,
            )
            .is_err()
        {
            break;
        }
        completions.clear();
    }
    result?;
    let seconds = start.elapsed().as_secs_f64();
    let cpu = thread_cpu().saturating_sub(cpu_before);
    let per = |x: f64| if done == 0 { 0.0 } else { x / done as f64 };
    Ok(Point {
        read_percent,
        depth,
        iops: done as f64 / seconds,
        mean_latency_us: per(latency_ns as f64) / 1000.0,
        cpu_us_per_io: per(cpu.as_secs_f64() * 1e6),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_calibration_measures_every_point_and_fits_a_model() {
        if Uring::new(8).is_err() {
            return eprintln!("skipped: io_uring unavailable here");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let options = CalibrateOptions {
            file_bytes: 4 << 20,
            per_point: Duration::from_millis(30),
            read_percents: vec![100, 50],
            depths: vec![1, 8],
            max_pause: Duration::from_micros(50),
        };
        let c = calibrate(dir.path(), &options).expect("calibrate");
        assert_eq!(c.points.len(), 4);
        for p in &c.points {
            assert!(p.iops > 0.0 && p.mean_latency_us > 0.0, "{p:?}");
        }
        assert!(c.samples > 10);
        assert_eq!(c.model.beta.len(), super::super::sched::FEATURES);
        assert!(
            !dir.path().join("sylva-calibrate.tmp").exists(),
            "scratch file removed"
        );
        let bad = CalibrateOptions {
            depths: vec![0],
            ..options
        };
        assert!(calibrate(dir.path(), &bad).is_err());
    }
}
