#![allow(clippy::unwrap_used)]

use super::*;

fn create(fs: &SimFs, path: &str) -> Box<dyn Io> {
    let how = OpenFile {
        create: true,
        direct: false,
    };
    fs.open(Path::new(path), how).unwrap().io
}

fn contents(fs: &SimFs, path: &str) -> Option<Vec<u8>> {
    fs.read_file(Path::new(path))
}

#[test]
fn a_synced_write_survives_and_an_unsynced_one_may_not() {
    let fs = SimFs::new(SimOptions::default());
    let f = create(&fs, "/f");
    fs.sync_dir(Path::new("/")).unwrap();
    f.write_at(b"durable", 0).unwrap();
    f.sync().unwrap();
    f.write_at(b"VOLATILE", 0).unwrap();
    assert_eq!(contents(&fs, "/f").unwrap(), b"VOLATILE");
    fs.reboot_losing_unsynced();
    assert_eq!(contents(&fs, "/f").unwrap(), b"durable");
    // The handle from before the power loss is dead.
    assert!(f.read_at(&mut [0u8; 1], 0).is_err());
}

#[test]
fn a_new_name_needs_its_directory_fsync_under_posix() {
    for linux in [false, true] {
        let fs = SimFs::new(SimOptions {
            names_with_file_sync: linux,
        });
        fs.create_dir(Path::new("/d")).unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        let f = create(&fs, "/d/f");
        f.write_at(b"x", 0).unwrap();
        f.sync().unwrap();
        fs.reboot_losing_unsynced();
        // Strict POSIX loses the name (and the file); Linux's file fsync kept it.
        assert_eq!(contents(&fs, "/d/f").is_some(), linux, "linux {linux}");
        let g = create(&fs, "/d/g");
        g.sync().unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        fs.reboot_losing_unsynced();
        assert!(contents(&fs, "/d/g").is_some());
    }
}

#[test]
fn a_directory_whose_name_is_lost_vanishes_with_its_files() {
    let fs = SimFs::new(SimOptions::default());
    fs.create_dir(Path::new("/d")).unwrap();
    let f = create(&fs, "/d/f");
    f.sync().unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    fs.reboot_losing_unsynced();
    assert!(!fs.exists(Path::new("/d")).unwrap());
    assert!(!fs.exists(Path::new("/d/f")).unwrap());
}

#[test]
fn a_rename_is_atomic_and_kept_with_everything_before_it() {
    let renamed_file = || {
        let fs = SimFs::new(SimOptions::default());
        let f = create(&fs, "/new");
        f.write_at(b"whole", 0).unwrap();
        f.sync().unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        fs.rename(Path::new("/new"), Path::new("/final")).unwrap();
        fs
    };
    let (mut renamed, mut not) = (0, 0);
    for seed in 0..64 {
        let fs = renamed_file();
        fs.reboot(seed);
        match (contents(&fs, "/new"), contents(&fs, "/final")) {
            (None, Some(b)) if b == b"whole" => renamed += 1,
            (Some(b), None) if b == b"whole" => not += 1,
            other => panic!("seed {seed}: a rename half done: {other:?}"),
        }
    }
    assert!(renamed > 0 && not > 0, "{renamed} renamed, {not} not");
    let fs = renamed_file();
    fs.reboot_keeping_unsynced();
    assert_eq!(contents(&fs, "/final").unwrap(), b"whole");
}

#[test]
fn an_unsynced_write_is_kept_lost_or_torn_at_sectors() {
    let (mut whole, mut lost, mut torn) = (0, 0, 0);
    for seed in 0..200 {
        let fs = SimFs::new(SimOptions::default());
        let f = create(&fs, "/f");
        f.write_at(&[1u8; 2048], 0).unwrap();
        f.sync().unwrap();
        fs.sync_dir(Path::new("/")).unwrap();
        f.write_at(&[2u8; 2048], 0).unwrap();
        fs.reboot(seed);
        let bytes = contents(&fs, "/f").unwrap();
        assert_eq!(bytes.len(), 2048);
        let sectors: Vec<u8> = bytes.chunks(SECTOR as usize).map(|c| c[0]).collect();
        for (c, &first) in bytes.chunks(SECTOR as usize).zip(&sectors) {
            assert!(
                c.iter().all(|&b| b == first),
                "seed {seed}: a sector torn inside"
            );
        }
        match (sectors.contains(&1), sectors.contains(&2)) {
            (false, true) => whole += 1,
            (true, false) => lost += 1,
            _ => torn += 1,
        }
    }
    assert!(whole > 0 && lost > 0 && torn > 0, "{whole} {lost} {torn}");
}

#[test]
fn the_file_system_dies_at_the_armed_change_and_reboots() {
    let fs = SimFs::new(SimOptions::default());
    let f = create(&fs, "/f");
    fs.crash_after(2);
    f.write_at(b"a", 0).unwrap();
    f.sync().unwrap();
    assert!(f.write_at(b"b", 1).is_err());
    assert!(fs.is_dead());
    assert!(f.read_at(&mut [0u8; 1], 0).is_err());
    assert!(fs.exists(Path::new("/f")).is_err());
    fs.reboot(7);
    assert!(!fs.is_dead());
    // The name was never synced: gone or not, but the store works again.
    let g = create(&fs, "/g");
    g.write_at(b"ok", 0).unwrap();
}

#[test]
fn a_lock_is_exclusive_until_dropped_or_a_power_loss() {
    let fs = SimFs::new(SimOptions::default());
    let owner = Path::new("/");
    let held = fs.lock(Path::new("/LOCK"), owner).unwrap();
    assert!(matches!(
        fs.lock(Path::new("/LOCK"), owner),
        Err(Error::Locked { .. })
    ));
    drop(held);
    let held = fs.lock(Path::new("/LOCK"), owner).unwrap();
    fs.reboot(1);
    let again = fs.lock(Path::new("/LOCK"), owner).unwrap();
    // The lock from before the power loss releases nothing of the new one.
    drop(held);
    assert!(fs.lock(Path::new("/LOCK"), owner).is_err());
    drop(again);
}

#[test]
fn injected_faults_fire_once_on_their_file() {
    let fs = SimFs::new(SimOptions::default());
    let f = create(&fs, "/f");
    fs.inject(Path::new("/f"), Fault::FailSync);
    fs.inject(Path::new("/f"), Fault::ShortWrite(2));
    assert!(f.write_at(b"abcd", 0).is_err());
    assert_eq!(contents(&fs, "/f").unwrap(), b"ab");
    assert!(f.sync().is_err());
    f.sync().unwrap();
    fs.inject(Path::new("/f"), Fault::FlipBit(0));
    let mut b = [0u8; 2];
    f.read_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"`b");
}
