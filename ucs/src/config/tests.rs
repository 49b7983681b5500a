//! Tests of the table macro, loading and printing.

use super::*;
use std::collections::HashMap;

crate::config_enum! {
    /// A test enum.
    enum Mode {
        /// First.
        Fast = "fast",
        /// Second.
        Safe = "safe",
    }
}

crate::config_table! {
    /// A table exercising every value type.
    #[derive(PartialEq)]
    struct TestConfig in TEST_TABLE ("test", "TEST_") {
        /// Turn the thing on.
        ENABLE enable: bool = "y",
        /// Segment size.
        ///
        /// Second paragraph.
        SEG_SIZE seg_size: MemUnits = "64k",
        /// How long to wait.
        TIMEOUT timeout: Time = "10ms",
        /// Which transports.
        TLS tls: AllowList = "all",
        /// How many.
        COUNT count: u32 = "16",
        /// A factor.
        FACTOR factor: f64 = "0.5",
        /// A name.
        NAME name: String = "",
        /// The mode.
        MODE mode: Mode = "fast",
    }
}

crate::config_table! {
    /// A table whose default is broken.
    struct BadConfig in BAD_TABLE ("bad", "BAD_") {
        /// Not a number.
        COUNT count: u32 = "lots",
    }
}

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

#[test]
fn table_describes_fields() {
    TEST_TABLE.check_defaults().unwrap();
    assert_eq!(TEST_TABLE.name, "test");
    assert_eq!(TEST_TABLE.prefix, "TEST_");
    let names: Vec<_> = TEST_TABLE.fields.iter().map(|f| f.name).collect();
    assert_eq!(
        names,
        ["ENABLE", "SEG_SIZE", "TIMEOUT", "TLS", "COUNT", "FACTOR", "NAME", "MODE"]
    );
    let f = &TEST_TABLE.fields[0];
    assert_eq!(
        (f.default, f.doc, f.kind),
        ("y", "Turn the thing on.", "bool")
    );
    let seg = TEST_TABLE.field("SEG_SIZE").unwrap();
    assert_eq!(seg.kind, "memunits");
    assert_eq!(seg.summary(), "Segment size.");
    let lines: Vec<_> = seg.doc_lines().collect();
    assert_eq!(lines, ["Segment size.", "", "Second paragraph."]);
    assert_eq!(TEST_TABLE.field("MODE").unwrap().kind, "[fast|safe]");
    assert_eq!(TEST_TABLE.field("TLS").unwrap().kind, "allow-list");
    assert_eq!(TEST_TABLE.var_name(f), "RUCX_TEST_ENABLE");
    assert!(TEST_TABLE.has_var("RUCX_TEST_COUNT"));
    assert!(!TEST_TABLE.has_var("RUCX_TEST_NOPE"));
    assert!(!TEST_TABLE.has_var("TEST_COUNT"));
    assert!(std::ptr::eq(TestConfig::table(), &TEST_TABLE));
}

#[test]
fn defaults() {
    let c = TestConfig::default();
    assert!(c.enable);
    assert_eq!(c.seg_size, MemUnits::Bytes(65536));
    assert_eq!(c.timeout, Time(std::time::Duration::from_millis(10)));
    assert!(c.tls.is_all());
    assert_eq!(c.count, 16);
    assert_eq!(c.factor, 0.5);
    assert_eq!(c.name, "");
    assert_eq!(c.mode, Mode::Fast);
    assert_eq!(TestConfig::from_lookup(|_| None), Ok(c));
}

#[test]
fn values_from_lookup() {
    let c = TestConfig::from_lookup(lookup(&[
        ("RUCX_TEST_ENABLE", "no"),
        ("RUCX_TEST_SEG_SIZE", "inf"),
        ("RUCX_TEST_TLS", "^tcp"),
        ("RUCX_TEST_MODE", "SAFE"),
        ("RUCX_TEST_NAME", "x"),
        // Not this table's: ignored.
        ("RUCX_ENABLE", "maybe"),
        ("TEST_COUNT", "x"),
    ]))
    .unwrap();
    assert!(!c.enable);
    assert!(c.seg_size.is_inf());
    assert!(!c.tls.allows("tcp") && c.tls.allows("shm"));
    assert_eq!(c.mode, Mode::Safe);
    assert_eq!(c.name, "x");
    assert_eq!(c.count, 16);
}

#[test]
fn bad_value_is_an_error() {
    let e = TestConfig::from_lookup(lookup(&[("RUCX_TEST_COUNT", "-3")])).unwrap_err();
    assert_eq!(e.name, "TEST_COUNT");
    assert_eq!(e.value, "-3");
    assert!(e.to_string().starts_with("RUCX_TEST_COUNT=\"-3\": "), "{e}");
    let e = TestConfig::from_lookup(lookup(&[("RUCX_TEST_MODE", "slow")])).unwrap_err();
    assert_eq!(e.reason, "expected one of [fast|safe]");
    let errors = TEST_TABLE.check(&lookup(&[
        ("RUCX_TEST_COUNT", "x"),
        ("RUCX_TEST_ENABLE", "y"),
        ("RUCX_TEST_SEG_SIZE", "1q"),
    ]));
    let names: Vec<_> = errors.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["TEST_SEG_SIZE", "TEST_COUNT"]);
}

#[test]
fn bad_default_is_caught() {
    let e = BAD_TABLE.check_defaults().unwrap_err();
    assert_eq!(e.name, "BAD_COUNT");
    assert!(e.reason.contains("default"), "{e}");
    // An explicit value works around it; without one, loading fails.
    let c = BadConfig::from_lookup(lookup(&[("RUCX_BAD_COUNT", "3")])).unwrap();
    assert_eq!(c.count, 3);
    assert!(BadConfig::from_lookup(|_| None).is_err());
    assert!(std::panic::catch_unwind(BadConfig::default).is_err());
}

#[test]
fn check_defaults_rejects_bad_names() {
    static FIELDS: [ConfigField; 2] = [
        ConfigField {
            name: "A",
            default: "1",
            doc: "",
            kind: "unsigned",
            syntax: "",
            validate: validate::<u32>,
        },
        ConfigField {
            name: "A",
            default: "2",
            doc: "",
            kind: "unsigned",
            syntax: "",
            validate: validate::<u32>,
        },
    ];
    let dup = ConfigTable {
        name: "dup",
        prefix: "DUP_",
        fields: &FIELDS,
    };
    assert!(dup.check_defaults().unwrap_err().reason.contains("twice"));
    let lower = ConfigTable {
        name: "lower",
        prefix: "",
        fields: &[ConfigField {
            name: "lower",
            default: "1",
            doc: "",
            kind: "unsigned",
            syntax: "",
            validate: validate::<u32>,
        }],
    };
    assert!(lower.check_defaults().is_err());
}

#[test]
fn print_like_ucx_info() {
    let mut out = Vec::new();
    let env = lookup(&[("RUCX_TEST_COUNT", "3"), ("RUCX_TEST_ENABLE", "bogus")]);
    TEST_TABLE.print_to(&mut out, &env).unwrap();
    let text = String::from_utf8(out).unwrap();
    let expected_start = "\
#
# Turn the thing on.
#
# syntax:    <y|n> (also yes/no, on/off, 1/0, true/false)
#
# invalid value (expected y/yes/on/1/true or n/no/off/0/false); default: y
RUCX_TEST_ENABLE=bogus

#
# Segment size.
#
# Second paragraph.
#
# syntax:    memory units: <number>[b|kb|mb|gb|tb] (powers of 1024), \"inf\", or \"auto\"
#
RUCX_TEST_SEG_SIZE=64k
";
    assert!(text.starts_with(expected_start), "{text}");
    assert!(text.contains("\nRUCX_TEST_COUNT=3\n"), "{text}");
    assert!(
        text.contains("# syntax:    [fast|safe]\n#\nRUCX_TEST_MODE=fast\n"),
        "{text}"
    );

    let mut out = Vec::new();
    TEST_TABLE.print_values_to(&mut out, &|_| None).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), TEST_TABLE.fields.len());
    assert!(text.starts_with("RUCX_TEST_ENABLE=y\nRUCX_TEST_SEG_SIZE=64k\n"));
}

#[test]
fn value_source() {
    let f = TEST_TABLE.field("COUNT").unwrap();
    assert_eq!(
        TEST_TABLE.value_of(f, &|_| None),
        ("16".to_string(), ValueSource::Default)
    );
    assert_eq!(
        TEST_TABLE.value_of(f, &lookup(&[("RUCX_TEST_COUNT", "7")])),
        ("7".to_string(), ValueSource::Set(Ok(())))
    );
    assert!(matches!(
        TEST_TABLE
            .value_of(f, &lookup(&[("RUCX_TEST_COUNT", "z")]))
            .1,
        ValueSource::Set(Err(_))
    ));
}

#[test]
fn enum_macro() {
    assert_eq!(Mode::ALL, [Mode::Fast, Mode::Safe]);
    assert_eq!(Mode::parse(" fast "), Ok(Mode::Fast));
    assert!(Mode::parse("").is_err());
    assert_eq!(Mode::Safe.to_string(), "safe");
    assert_eq!(Mode::parse(&Mode::Safe.to_text()), Ok(Mode::Safe));
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    proptest! {
        #[test]
        fn parsers_never_panic(s in ".{0,40}") {
            let _ = bool::parse(&s);
            let _ = u64::parse(&s);
            let _ = i32::parse(&s);
            let _ = f64::parse(&s);
            let _ = MemUnits::parse(&s);
            let _ = Time::parse(&s);
            let _ = AllowList::parse(&s);
            let _ = Mode::parse(&s);
        }

        #[test]
        fn unit_like_text_never_panics(s in "[0-9.]{0,30}(|b|k|kb|m|mb|g|gb|t|tb|s|ms|us|ns|x)") {
            let _ = MemUnits::parse(&s);
            let _ = Time::parse(&s);
        }

        #[test]
        fn memunits_round_trip(n in any::<u64>(), shift in 0u32..41) {
            let m = MemUnits::Bytes(n.checked_shl(shift).unwrap_or(n));
            prop_assert_eq!(MemUnits::parse(&m.to_text()), Ok(m));
        }

        #[test]
        fn time_round_trip(secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
            let t = Time(Duration::new(secs, nanos));
            prop_assert_eq!(Time::parse(&t.to_text()), Ok(t));
        }

        #[test]
        fn allow_list_round_trip(names in proptest::collection::vec("[a-z][a-z0-9_]{0,8}", 1..5), neg in any::<bool>()) {
            // "all" alone is the keyword, not a name.
            prop_assume!(names.iter().all(|n| n != "all"));
            let l = if neg { AllowList::except(&names) } else { AllowList::only(&names) };
            prop_assert_eq!(AllowList::parse(&l.to_text()), Ok(l));
        }
    }
}
