//! `RUCX_POSIX_*` options: where segment memory comes from.

use uct::ucs;

ucs::config_enum! {
    /// Where the memory of a segment comes from.
    pub enum Backend {
        /// An anonymous memfd; a file in the directory if `memfd_create`
        /// fails (an old kernel, or a seccomp filter that forbids it).
        Auto = "auto",
        /// An anonymous memfd only. It never has a name in a file system,
        /// so nothing can be left behind, whatever way the process ends.
        Memfd = "memfd",
        /// A file in the directory, unlinked as soon as it is created.
        File = "file",
    }
}

ucs::config_table! {
    /// Options of POSIX shared-memory segments, from `RUCX_POSIX_*`.
    pub struct PosixConfig in POSIX_TABLE ("posix", "POSIX_") {
        /// Directory of segment files for the file backend; it should be
        /// a tmpfs (RAM-backed) mount. Files are unlinked right after they
        /// are created; a process killed in between leaves one that the
        /// next segment created in the directory removes.
        DIR dir: String = "/dev/shm",
        /// Where segment memory comes from: memfd (anonymous, nothing to
        /// clean up ever), file (in the directory) or auto (memfd, the file
        /// if memfd is not available).
        BACKEND backend: Backend = "auto",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uct::ucs::config::ConfigValue;

    #[test]
    fn defaults_parse() {
        POSIX_TABLE.check_defaults().unwrap();
        let c = PosixConfig::default();
        assert_eq!(c.dir, "/dev/shm");
        assert_eq!(c.backend, Backend::Auto);
    }

    #[test]
    fn from_variables() {
        let c = PosixConfig::from_lookup(|var| match var {
            "RUCX_POSIX_DIR" => Some("/run/rucx".to_string()),
            "RUCX_POSIX_BACKEND" => Some("FILE".to_string()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.dir, "/run/rucx");
        assert_eq!(c.backend, Backend::File);
        let bad = PosixConfig::from_lookup(|var| {
            (var == "RUCX_POSIX_BACKEND").then(|| "sysv".to_string())
        });
        assert!(bad.is_err());
        for b in Backend::ALL {
            assert_eq!(Backend::parse(&b.to_text()), Ok(*b));
        }
    }
}
