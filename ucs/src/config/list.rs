//! Name lists with exclusion: `RUCX_TLS=tcp,self`, `RUCX_TLS=^tcp`.

use super::ConfigValue;

/// Which names (transports, devices, ...) are allowed.
///
/// Text, like UCX's allow-lists:
/// * `all` or an empty text: every name;
/// * `a,b,c`: only these names;
/// * `^a,b`: every name except these.
///
/// Items are trimmed; an empty item (`a,,b`, `^`) is an error. Names match
/// exactly (case-sensitive), as UCX's do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllowList {
    mode: Mode,
    items: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Mode {
    All,
    Only,
    Except,
}

impl AllowList {
    /// Every name is allowed.
    pub fn all() -> AllowList {
        AllowList {
            mode: Mode::All,
            items: Vec::new(),
        }
    }

    /// Only these names are allowed (none if `names` is empty; such a list
    /// has no text form: [`ConfigValue::to_text`] gives `""`, which reads
    /// back as `all`).
    pub fn only<S: AsRef<str>>(names: &[S]) -> AllowList {
        AllowList {
            mode: Mode::Only,
            items: names.iter().map(|s| s.as_ref().to_string()).collect(),
        }
    }

    /// Every name except these is allowed.
    pub fn except<S: AsRef<str>>(names: &[S]) -> AllowList {
        AllowList {
            mode: Mode::Except,
            items: names.iter().map(|s| s.as_ref().to_string()).collect(),
        }
    }

    /// Whether `name` is allowed.
    pub fn allows(&self, name: &str) -> bool {
        let listed = self.items.iter().any(|i| i == name);
        match self.mode {
            Mode::All => true,
            Mode::Only => listed,
            Mode::Except => !listed,
        }
    }

    /// Whether every name is allowed (`all` or empty).
    pub fn is_all(&self) -> bool {
        self.mode == Mode::All
    }

    /// Whether the list names exclusions (`^a,b`).
    pub fn is_negated(&self) -> bool {
        self.mode == Mode::Except
    }

    /// The listed names (allowed ones, or excluded ones when negated), in
    /// the order given.
    pub fn items(&self) -> &[String] {
        &self.items
    }
}

impl Default for AllowList {
    fn default() -> AllowList {
        AllowList::all()
    }
}

impl ConfigValue for AllowList {
    const KIND: &'static str = "allow-list";
    const SYNTAX: &'static str =
        "comma-separated list of names, \"all\", or \"^\" followed by names to exclude";

    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("all") {
            return Ok(AllowList::all());
        }
        let (mode, rest) = match t.strip_prefix('^') {
            Some(rest) => (Mode::Except, rest),
            None => (Mode::Only, t),
        };
        let mut items = Vec::new();
        for item in rest.split(',').map(str::trim) {
            if item.is_empty() {
                return Err("empty name in list".to_string());
            }
            if item.starts_with('^') {
                return Err(format!(
                    "\"^\" only at the start of the list, not in {item:?}"
                ));
            }
            items.push(item.to_string());
        }
        Ok(AllowList { mode, items })
    }

    fn to_text(&self) -> String {
        match self.mode {
            Mode::All => "all".to_string(),
            Mode::Only => self.items.join(","),
            Mode::Except => format!("^{}", self.items.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_semantics() {
        let l = AllowList::parse("tcp,self").unwrap();
        assert!(l.allows("tcp") && l.allows("self"));
        assert!(!l.allows("shm") && !l.allows("tc"));
        assert!(!l.is_all() && !l.is_negated());
        assert_eq!(l.items(), ["tcp", "self"]);

        let l = AllowList::parse("^tcp").unwrap();
        assert!(!l.allows("tcp"));
        assert!(l.allows("shm") && l.allows("self"));
        assert!(l.is_negated());

        for t in ["all", "ALL", "", "  "] {
            let l = AllowList::parse(t).unwrap();
            assert!(l.is_all() && l.allows("anything"), "{t:?}");
        }
        let l = AllowList::parse(" tcp , shm ").unwrap();
        assert_eq!(l.items(), ["tcp", "shm"]);
        assert!(!AllowList::parse("TCP").unwrap().allows("tcp"));
    }

    #[test]
    fn allow_list_errors() {
        for t in ["^", "a,,b", ",a", "a,", "^a,,b", "^ ", "a,^b", "^^a"] {
            assert!(AllowList::parse(t).is_err(), "{t:?}");
        }
    }

    #[test]
    fn allow_list_round_trips() {
        for l in [
            AllowList::all(),
            AllowList::only(&["tcp", "self"]),
            AllowList::except(&["shm"]),
        ] {
            assert_eq!(AllowList::parse(&l.to_text()), Ok(l.clone()), "{l:?}");
        }
        assert_eq!(AllowList::except(&["a", "b"]).to_text(), "^a,b");
        assert_eq!(AllowList::default(), AllowList::all());
    }
}
