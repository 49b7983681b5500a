//! Configuration of the `self` transport: the size of each iface's mailbox.

use super::MAX_MSG;
use crate::ucs;
use crate::ucs::config::{ConfigError, MemUnits};
use crate::Result;

/// Limits of the mailbox every `self` iface receives into.
///
/// A sender whose target mailbox is full gets [`Posted::NoResource`]; its
/// pending tokens come back once the target has drained to half of both
/// limits, so that any message fits again.
///
/// [`Posted::NoResource`]: crate::Posted::NoResource
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelfConfig {
    /// Most payload bytes queued in one mailbox. At least
    /// [`SelfConfig::MIN_MAILBOX_BYTES`].
    pub mailbox_bytes: usize,
    /// Most messages queued in one mailbox, in
    /// `MIN_MAILBOX_MSGS..=MAX_MAILBOX_MSGS`.
    pub mailbox_msgs: usize,
}

impl SelfConfig {
    /// The defaults: 8 MiB and 1024 messages.
    pub const DEFAULT: SelfConfig = SelfConfig {
        mailbox_bytes: 8 << 20,
        mailbox_msgs: 1024,
    };
    /// Smallest `mailbox_bytes` (4 MiB): at least two of the largest
    /// message, so that a mailbox drained to half takes any message.
    pub const MIN_MAILBOX_BYTES: usize = 4 << 20;
    /// Largest `mailbox_bytes` (1 GiB).
    pub const MAX_MAILBOX_BYTES: usize = 1 << 30;
    /// Smallest `mailbox_msgs`.
    pub const MIN_MAILBOX_MSGS: usize = 2;
    /// Largest `mailbox_msgs`.
    pub const MAX_MAILBOX_MSGS: usize = 1 << 20;

    /// Reads `RUCX_SELF_MAILBOX_SIZE` and `RUCX_SELF_MAILBOX_MSGS`; unset
    /// variables keep their defaults.
    pub fn from_env() -> Result<SelfConfig> {
        SelfConfig::from_vars(&SelfEnvConfig::from_env()?)
    }

    /// Checks and converts the parsed variables. `auto` sizes take the
    /// default; `inf` is refused.
    pub fn from_vars(vars: &SelfEnvConfig) -> Result<SelfConfig> {
        let bytes = match vars.mailbox_size {
            MemUnits::Auto => Some(SelfConfig::DEFAULT.mailbox_bytes),
            MemUnits::Inf => None,
            MemUnits::Bytes(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        }
        .ok_or_else(|| config_error("MAILBOX_SIZE", "inf", "must be finite"))?;
        SelfConfig {
            mailbox_bytes: bytes,
            mailbox_msgs: vars.mailbox_msgs,
        }
        .validate()
    }

    /// Checks both limits against their ranges.
    pub fn validate(self) -> Result<SelfConfig> {
        check_range(
            "MAILBOX_SIZE",
            self.mailbox_bytes,
            Self::MIN_MAILBOX_BYTES,
            Self::MAX_MAILBOX_BYTES,
        )?;
        check_range(
            "MAILBOX_MSGS",
            self.mailbox_msgs,
            Self::MIN_MAILBOX_MSGS,
            Self::MAX_MAILBOX_MSGS,
        )?;
        Ok(self)
    }
}

const _: () = assert!(SelfConfig::MIN_MAILBOX_BYTES >= 2 * MAX_MSG);

impl Default for SelfConfig {
    fn default() -> SelfConfig {
        SelfConfig::DEFAULT
    }
}

ucs::config_table! {
    /// The `RUCX_SELF_*` variables as parsed; [`SelfConfig::from_vars`]
    /// checks them.
    pub struct SelfEnvConfig in CONFIG_TABLE ("self", "SELF_") {
        /// Most payload bytes queued for one self iface before its senders
        /// get no-resource; at least 4m.
        MAILBOX_SIZE mailbox_size: MemUnits = "8m",
        /// Most messages queued for one self iface before its senders get
        /// no-resource; 2 to 1048576.
        MAILBOX_MSGS mailbox_msgs: usize = "1024",
    }
}

fn config_error(name: &str, value: &str, reason: impl Into<String>) -> crate::Error {
    crate::Error::Config(ConfigError {
        name: format!("{}{}", CONFIG_TABLE.prefix, name),
        value: value.to_owned(),
        reason: reason.into(),
    })
}

fn check_range(name: &str, v: usize, min: usize, max: usize) -> Result<()> {
    if v < min || v > max {
        return Err(config_error(
            name,
            &v.to_string(),
            format!("must be between {min} and {max}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    #[test]
    fn table_defaults_are_the_defaults() {
        CONFIG_TABLE.check_defaults().unwrap();
        let vars = SelfEnvConfig::from_lookup(|_| None).unwrap();
        assert_eq!(SelfConfig::from_vars(&vars).unwrap(), SelfConfig::DEFAULT);
    }

    #[test]
    fn variables_are_read_and_checked() {
        let get = |size: &'static str, msgs: &'static str| {
            SelfEnvConfig::from_lookup(move |v| match v {
                "RUCX_SELF_MAILBOX_SIZE" => Some(size.to_string()),
                "RUCX_SELF_MAILBOX_MSGS" => Some(msgs.to_string()),
                _ => None,
            })
        };
        let c = SelfConfig::from_vars(&get("16m", "8").unwrap()).unwrap();
        assert_eq!((c.mailbox_bytes, c.mailbox_msgs), (16 << 20, 8));
        let c = SelfConfig::from_vars(&get("auto", "8").unwrap()).unwrap();
        assert_eq!(c.mailbox_bytes, SelfConfig::DEFAULT.mailbox_bytes);
        assert!(get("12x", "8").is_err());
        assert!(get("4m", "-1").is_err());
        for (size, msgs) in [("inf", "8"), ("1m", "8"), ("8m", "1"), ("8m", "2000000")] {
            let e = SelfConfig::from_vars(&get(size, msgs).unwrap()).unwrap_err();
            assert_eq!(e.status(), Status::InvalidParam, "{size} {msgs}");
        }
    }

    #[test]
    fn ranges_are_checked() {
        assert!(SelfConfig::DEFAULT.validate().is_ok());
        let small = SelfConfig {
            mailbox_bytes: SelfConfig::MIN_MAILBOX_BYTES - 1,
            ..SelfConfig::DEFAULT
        };
        assert!(small.validate().is_err());
        let few = SelfConfig {
            mailbox_msgs: 1,
            ..SelfConfig::DEFAULT
        };
        let e = few.validate().unwrap_err();
        assert!(e.to_string().contains("RUCX_SELF_MAILBOX_MSGS"), "{e}");
    }
}
