use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// A fresh directory (under /dev/shm when there is one), removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let base = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!(
            "rucx_unit_seg_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).unwrap();
        TempDir(dir)
    }

    fn config(&self, backend: Backend) -> PosixConfig {
        PosixConfig {
            dir: self.0.to_str().unwrap().to_string(),
            backend,
        }
    }

    fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn me() -> ProcessId {
    ProcessId::current().unwrap()
}

/// The identity of a process that has exited.
fn dead_process() -> ProcessId {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let id = ProcessId::of(child.id()).unwrap();
    child.wait().unwrap();
    id
}

fn write(seg: &Segment, at: usize, v: u8) {
    assert!(at < seg.len());
    // SAFETY: in bounds (checked above) of a live mapping; volatile, as
    // the memory is shared.
    unsafe { seg.as_ptr().as_ptr().add(at).write_volatile(v) }
}

fn read(seg: &Segment, at: usize) -> u8 {
    assert!(at < seg.len());
    // SAFETY: as in `write`.
    unsafe { seg.as_ptr().as_ptr().add(at).read_volatile() }
}

fn page() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn link_of(seg: &Segment) -> String {
    let fd = seg.fd().unwrap();
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn unreachable_err(r: Result<Segment>) -> String {
    match r {
        Err(Error::Unreachable(msg)) => msg,
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[test]
fn two_mappings_share_bytes_with_every_backend() {
    let dir = TempDir::new();
    for backend in Backend::ALL {
        let len = 3 * page() + 100;
        let owner = Segment::create(len, &dir.config(*backend)).unwrap();
        assert_eq!(owner.len(), len);
        assert!(!owner.is_empty());
        assert_eq!(owner.as_ptr().as_ptr() as usize % page(), 0);
        let fd = owner.fd().unwrap();
        let peer = Segment::attach(me(), fd, len).unwrap();
        assert_eq!(peer.fd(), None);
        assert_ne!(owner.as_ptr(), peer.as_ptr());
        assert_eq!(peer.as_ptr().as_ptr() as usize % page(), 0);
        // Zero-filled, then writes on either side show on the other.
        assert_eq!(read(&peer, len - 1), 0);
        write(&owner, 0, 0xa5);
        write(&peer, len - 1, 0x5a);
        assert_eq!(read(&peer, 0), 0xa5);
        assert_eq!(read(&owner, len - 1), 0x5a);
        // A shorter view is fine.
        let part = Segment::attach(me(), fd, 10).unwrap();
        assert_eq!(read(&part, 0), 0xa5);
        // The peer's mapping outlives the owner.
        drop(owner);
        write(&peer, 1, 7);
        assert_eq!(read(&peer, 1), 7);
        assert_eq!(read(&part, 1), 7);
    }
    assert!(dir.names().is_empty());
}

#[test]
fn backends_are_what_they_say() {
    let dir = TempDir::new();
    let memfd = Segment::create(100, &dir.config(Backend::Memfd)).unwrap();
    assert!(link_of(&memfd).starts_with("/memfd:rucx-segment"));
    let auto = Segment::create(100, &dir.config(Backend::Auto)).unwrap();
    assert!(link_of(&auto).starts_with("/memfd:"), "{}", link_of(&auto));
    let file = Segment::create(100, &dir.config(Backend::File)).unwrap();
    let link = link_of(&file);
    assert!(link.starts_with(dir.0.to_str().unwrap()), "{link}");
    assert!(link.contains("/rucx-"), "{link}");
    assert!(link.ends_with(" (deleted)"), "{link}");
    // Nothing is left in the directory, right after create.
    assert!(dir.names().is_empty());
}

#[test]
fn memfd_size_is_sealed() {
    let seg = Segment::create(page(), &PosixConfig::default_memfd()).unwrap();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/proc/self/fd/{}", seg.fd().unwrap()))
        .unwrap();
    assert!(f.set_len(1).is_err(), "a memfd segment must not shrink");
    assert!(f.set_len(2 * page() as u64).is_err());
    assert_eq!(f.metadata().unwrap().len(), page() as u64);
}

impl PosixConfig {
    fn default_memfd() -> PosixConfig {
        PosixConfig {
            backend: Backend::Memfd,
            ..PosixConfig::default()
        }
    }
}

#[test]
fn bad_lengths_are_refused() {
    let cfg = PosixConfig::default_memfd();
    assert!(matches!(
        Segment::create(0, &cfg),
        Err(Error::InvalidParam(_))
    ));
    assert!(matches!(
        Segment::create(usize::MAX, &cfg),
        Err(Error::InvalidParam(_))
    ));
    let seg = Segment::create(page(), &cfg).unwrap();
    let fd = seg.fd().unwrap();
    assert!(matches!(
        Segment::attach(me(), fd, 0),
        Err(Error::InvalidParam(_))
    ));
    // Longer than the file: mapping it would raise SIGBUS past the end.
    match Segment::attach(me(), fd, page() + 1) {
        Err(Error::InvalidAddr(msg)) => assert!(msg.contains("bytes"), "{msg}"),
        other => panic!("expected InvalidAddr, got {other:?}"),
    }
}

#[test]
fn attach_checks_the_owner() {
    let seg = Segment::create(page(), &PosixConfig::default_memfd()).unwrap();
    let fd = seg.fd().unwrap();
    // A process that exited.
    let msg = unreachable_err(Segment::attach(dead_process(), fd, page()));
    assert!(msg.contains("gone"), "{msg}");
    // Our pid with another start time: what a recycled pid looks like.
    // The descriptor opens fine, but it belongs to another process.
    let recycled = ProcessId {
        start_time: me().start_time + 1,
        ..me()
    };
    let msg = unreachable_err(Segment::attach(recycled, fd, page()));
    assert!(msg.contains("gone"), "{msg}");
    // A descriptor the owner does not have.
    let msg = unreachable_err(Segment::attach(me(), 999_999, page()));
    assert!(msg.contains("no descriptor"), "{msg}");
}

#[test]
fn attach_refuses_what_is_not_a_segment() {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let r = Segment::attach(me(), fds[0] as u32, 1);
    assert!(matches!(r, Err(Error::InvalidAddr(_))), "{r:?}");
    for fd in fds {
        // SAFETY: the pipe's descriptors are ours and closed once.
        unsafe { libc::close(fd) };
    }
}

#[test]
fn missing_directory_is_a_clear_error() {
    let dir = TempDir::new();
    let missing = dir.0.join("nope");
    let cfg = PosixConfig {
        dir: missing.to_str().unwrap().to_string(),
        backend: Backend::File,
    };
    match Segment::create(100, &cfg) {
        Err(Error::Unsupported(msg)) => {
            assert!(msg.contains(cfg.dir.as_str()), "{msg}");
            assert!(msg.contains("missing"), "{msg}");
            assert!(msg.contains("RUCX_POSIX_DIR"), "{msg}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    std::fs::write(&missing, b"x").unwrap();
    match Segment::create(100, &cfg) {
        Err(Error::Unsupported(msg)) => assert!(msg.contains("not a directory"), "{msg}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // With auto, memfd works and the directory is not needed.
    let auto = PosixConfig {
        backend: Backend::Auto,
        ..cfg
    };
    Segment::create(100, &auto).unwrap();
}

#[test]
fn full_tmpfs_is_no_memory_at_create() {
    let dir = TempDir::new();
    if !is_tmpfs(&dir.0) {
        // Elsewhere posix_fallocate may emulate by writing every block.
        return;
    }
    let (_, total) = create::free_space(&dir.0).unwrap();
    // More than the whole file system: refused at create, not at touch.
    let len = (total as usize).saturating_mul(2).max(1 << 40);
    match Segment::create(len, &dir.config(Backend::File)) {
        Err(Error::NoMemory(msg)) => {
            assert!(msg.contains(dir.0.to_str().unwrap()), "{msg}");
            assert!(msg.contains(&len.to_string()), "{msg}");
            assert!(msg.contains("bytes free"), "{msg}");
        }
        other => panic!("expected NoMemory, got {other:?}"),
    }
    assert!(dir.names().is_empty());
}

fn is_tmpfs(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: path is NUL-terminated; st has room for one statfs.
    if unsafe { libc::statfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: statfs returned 0 and filled st.
    let st = unsafe { st.assume_init() };
    st.f_type == libc::TMPFS_MAGIC
}

#[test]
fn stale_files_are_reaped_live_ones_kept() {
    let dir = TempDir::new();
    let dead = dead_process();
    let recycled = ProcessId {
        start_time: me().start_time + 1,
        ..me()
    };
    let stale = [reap::file_name(dead, 0), reap::file_name(recycled, 3)];
    let kept = [
        reap::file_name(me(), 12_345),
        "rucx-not-ours".to_string(),
        "unrelated".to_string(),
    ];
    for name in stale.iter().chain(&kept) {
        std::fs::write(dir.0.join(name), b"").unwrap();
    }
    let _seg = Segment::create(100, &dir.config(Backend::File)).unwrap();
    let mut expect = kept.to_vec();
    expect.sort();
    assert_eq!(dir.names(), expect);
    // Reaping again finds nothing more.
    assert_eq!(reap::reap_stale(&dir.0), 0);
}

#[test]
fn a_hole_is_reserved_only_where_a_peer_asks() {
    use std::os::unix::fs::MetadataExt;
    let p = page();
    let seg = Segment::create_with_hole(64 * p, p..63 * p, &PosixConfig::default_memfd()).unwrap();
    let blocks = || {
        std::fs::metadata(format!("/proc/self/fd/{}", seg.fd().unwrap()))
            .unwrap()
            .blocks()
            * 512
    };
    assert_eq!(blocks(), 2 * p as u64, "the first and last pages only");
    let me = crate::proc_id::ProcessId::current().unwrap();
    let (peer, ()) = Segment::attach_with(me, seg.fd().unwrap(), 64 * p, |_, r| {
        r.reserve(10 * p + 8, 32)?;
        r.reserve(10 * p + 100, 32)
    })
    .unwrap();
    assert_eq!(blocks(), 3 * p as u64, "one more page, once");
    drop(peer);
}
