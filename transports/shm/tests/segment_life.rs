//! Segments across real processes: the owner is another process, which is
//! killed with SIGKILL while a peer maps its segment.
//!
//! The owner is this test binary run again with `RUCX_SEGMENT_LIFE_CHILD`
//! set, selecting what the `child_entry` test does; without the variable
//! that test does nothing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rucx_shm::proc_id::ProcessId;
use rucx_shm::segment::{Backend, PosixConfig, Segment};
use uct::ucs::Error;

const CHILD_VAR: &str = "RUCX_SEGMENT_LIFE_CHILD";
const MARK: &str = "RUCX_SEGMENT_CHILD";
const LEN: usize = 64 << 10;

/// What the owner writes at the start of its segment.
fn pattern(i: usize) -> u8 {
    0xc0 ^ (i as u8)
}

/// Child side: makes a segment (or plants a file), says where it is on
/// stdout, then waits to be killed. It leaves by itself after a minute or
/// when its parent goes, so a failed test leaves no process behind.
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var(CHILD_VAR) else {
        return;
    };
    let me = ProcessId::current().unwrap();
    let (_seg, fd, len) = if let Some(dir) = mode.strip_prefix("plant:") {
        // A process stopped between open and unlink, as a kill would leave it.
        let name = format!("rucx-{}-{}-0", me.pid, me.start_time);
        std::fs::write(Path::new(dir).join(name), b"").unwrap();
        (None, 0, 0)
    } else {
        let config = match mode.strip_prefix("file:") {
            Some(dir) => PosixConfig {
                dir: dir.to_string(),
                backend: Backend::File,
            },
            None => PosixConfig {
                backend: Backend::Memfd,
                ..PosixConfig::default()
            },
        };
        let seg = Segment::create(LEN, &config).unwrap();
        for i in 0..16 {
            // SAFETY: in bounds of the live mapping; no one else writes yet.
            unsafe { seg.as_ptr().as_ptr().add(i).write_volatile(pattern(i)) };
        }
        let fd = seg.fd().unwrap();
        (Some(seg), fd, LEN)
    };
    println!("\n{MARK} {} {} {fd} {len}", me.pid, me.start_time);
    let parent = std::os::unix::process::parent_id();
    for _ in 0..600 {
        if std::os::unix::process::parent_id() != parent {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An owner process, killed and reaped on drop.
struct Owner {
    child: Child,
    id: ProcessId,
    fd: u32,
    len: usize,
}

impl Owner {
    fn spawn(mode: &str) -> Owner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(CHILD_VAR, mode)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        for line in out.lines() {
            let line = line.unwrap();
            let Some(at) = line.find(MARK) else {
                continue;
            };
            let f: Vec<u64> = line[at + MARK.len()..]
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
            let id = ProcessId {
                pid: f[0] as u32,
                start_time: f[1],
            };
            assert_eq!(id.pid, child.id());
            return Owner {
                child,
                id,
                fd: f[2] as u32,
                len: f[3] as usize,
            };
        }
        let status = child.wait().unwrap();
        panic!("owner process ({mode}) ended without a segment: {status}");
    }

    /// SIGKILL, then reap the process.
    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        assert!(!self.id.is_alive());
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory (under /dev/shm when there is one), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("rucx_life_{tag}_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn segment_files(&self) -> Vec<String> {
        std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("rucx-"))
            .collect()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn read(seg: &Segment, at: usize) -> u8 {
    assert!(at < seg.len());
    // SAFETY: in bounds of a live mapping; volatile, as it is shared.
    unsafe { seg.as_ptr().as_ptr().add(at).read_volatile() }
}

fn write(seg: &Segment, at: usize, v: u8) {
    assert!(at < seg.len());
    // SAFETY: as in `read`.
    unsafe { seg.as_ptr().as_ptr().add(at).write_volatile(v) }
}

/// Sees the owner's pattern, then writes and reads back every byte.
fn exercise(seg: &Segment, salt: u8) {
    for i in 0..16 {
        assert_eq!(read(seg, i), pattern(i));
    }
    for i in 16..seg.len() {
        write(seg, i, (i as u8) ^ salt);
    }
    for i in 16..seg.len() {
        assert_eq!(read(seg, i), (i as u8) ^ salt);
    }
}

fn assert_unreachable(owner: &Owner) {
    match Segment::attach(owner.id, owner.fd, owner.len) {
        Err(Error::Unreachable(_)) => {}
        other => panic!("attach to a dead owner: expected Unreachable, got {other:?}"),
    }
}

#[test]
fn kill9_of_file_owner_leaves_no_file_and_the_mapping_works() {
    let dir = TempDir::new("kill9");
    let mut owner = Owner::spawn(&format!("file:{}", dir.path()));
    assert!(dir.segment_files().is_empty(), "unlinked at create");
    let seg = Segment::attach(owner.id, owner.fd, owner.len).unwrap();
    exercise(&seg, 1);
    owner.kill9();
    // The memory lives on while mapped: no SIGBUS, same bytes.
    exercise(&seg, 2);
    assert!(dir.segment_files().is_empty());
    assert_unreachable(&owner);
}

#[test]
fn memfd_owner_gone_leaves_nothing_to_attach() {
    let mut owner = Owner::spawn("memfd");
    let link = std::fs::read_link(format!("/proc/{}/fd/{}", owner.id.pid, owner.fd)).unwrap();
    assert!(
        link.to_string_lossy().starts_with("/memfd:"),
        "{}",
        link.display()
    );
    let seg = Segment::attach(owner.id, owner.fd, owner.len).unwrap();
    exercise(&seg, 3);
    owner.kill9();
    exercise(&seg, 4);
    assert_unreachable(&owner);
}

#[test]
fn file_of_a_killed_owner_is_reaped_by_the_next_create() {
    let dir = TempDir::new("reap");
    let config = PosixConfig {
        dir: dir.path().to_string(),
        backend: Backend::File,
    };
    let mut owner = Owner::spawn(&format!("plant:{}", dir.path()));
    let name = format!("rucx-{}-{}-0", owner.id.pid, owner.id.start_time);
    assert_eq!(dir.segment_files(), std::slice::from_ref(&name));
    // Its process lives: the file may be about to be unlinked by it.
    let _a = Segment::create(4096, &config).unwrap();
    assert_eq!(dir.segment_files(), [name]);
    owner.kill9();
    let _b = Segment::create(4096, &config).unwrap();
    assert!(dir.segment_files().is_empty());
}
