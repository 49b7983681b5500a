//! Parsing and printing one configuration value.

/// A type a configuration variable can hold.
///
/// `parse` and `to_text` round-trip: `T::parse(&v.to_text()) == Ok(v)`.
/// Texts come from the environment, so `parse` rejects anything it does not
/// understand with a short reason and never panics.
pub trait ConfigValue: Sized + Clone + std::fmt::Debug {
    /// Type name shown by `rucx-info -c`, e.g. `"bool"`, `"memunits"`.
    const KIND: &'static str;
    /// What the parser accepts, for the `# syntax:` line of `rucx-info -c`.
    const SYNTAX: &'static str = Self::KIND;

    /// Parses a value; the error says why the text was rejected.
    fn parse(text: &str) -> Result<Self, String>;

    /// The value as text that [`ConfigValue::parse`] accepts.
    fn to_text(&self) -> String;
}

impl ConfigValue for bool {
    const KIND: &'static str = "bool";
    const SYNTAX: &'static str = "<y|n> (also yes/no, on/off, 1/0, true/false)";

    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        const YES: [&str; 5] = ["y", "yes", "on", "1", "true"];
        const NO: [&str; 5] = ["n", "no", "off", "0", "false"];
        if YES.iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(true)
        } else if NO.iter().any(|w| t.eq_ignore_ascii_case(w)) {
            Ok(false)
        } else {
            Err("expected y/yes/on/1/true or n/no/off/0/false".to_string())
        }
    }

    fn to_text(&self) -> String {
        if *self { "y" } else { "n" }.to_string()
    }
}

/// Splits an optional `0x`/`0X` prefix off an integer text.
fn radix_of(t: &str) -> (&str, u32) {
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (t, 10),
    }
}

macro_rules! unsigned_value {
    ($($ty:ty => $syntax:literal),+ $(,)?) => {$(
        impl ConfigValue for $ty {
            const KIND: &'static str = "unsigned";
            const SYNTAX: &'static str = $syntax;

            fn parse(text: &str) -> Result<Self, String> {
                let (digits, radix) = radix_of(text.trim());
                // from_str_radix accepts a leading '+'; a configuration
                // value has no sign.
                if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                    return Err(format!("expected {}", $syntax));
                }
                <$ty>::from_str_radix(digits, radix)
                    .map_err(|_| format!("out of range: expected {}", $syntax))
            }

            fn to_text(&self) -> String {
                self.to_string()
            }
        }
    )+};
}

unsigned_value! {
    u16 => "unsigned integer up to 65535",
    u32 => "unsigned integer up to 4294967295",
    u64 => "unsigned integer up to 18446744073709551615",
    usize => "unsigned integer",
}

macro_rules! signed_value {
    ($($ty:ty => $syntax:literal),+ $(,)?) => {$(
        impl ConfigValue for $ty {
            const KIND: &'static str = "integer";
            const SYNTAX: &'static str = $syntax;

            fn parse(text: &str) -> Result<Self, String> {
                let t = text.trim();
                let digits = t.strip_prefix('-').unwrap_or(t);
                if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(format!("expected {}", $syntax));
                }
                t.parse::<$ty>()
                    .map_err(|_| format!("out of range: expected {}", $syntax))
            }

            fn to_text(&self) -> String {
                self.to_string()
            }
        }
    )+};
}

signed_value! {
    i32 => "integer from -2147483648 to 2147483647",
    i64 => "integer from -9223372036854775808 to 9223372036854775807",
}

impl ConfigValue for f64 {
    const KIND: &'static str = "float";
    const SYNTAX: &'static str = "floating-point number";

    fn parse(text: &str) -> Result<Self, String> {
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            Ok(_) => Err("expected a finite number".to_string()),
            Err(_) => Err("expected a floating-point number".to_string()),
        }
    }

    fn to_text(&self) -> String {
        // `{:?}` keeps a fractional part ("1.0"), so the text reads as a float
        // and parses back to the same value.
        format!("{self:?}")
    }
}

impl ConfigValue for String {
    const KIND: &'static str = "string";

    fn parse(text: &str) -> Result<Self, String> {
        Ok(text.to_string())
    }

    fn to_text(&self) -> String {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bool_words() {
        for t in ["y", "Y", "yes", "YES", "on", "1", "true", "True", " y "] {
            assert_eq!(bool::parse(t), Ok(true), "{t:?}");
        }
        for t in ["n", "N", "no", "off", "OFF", "0", "false", "FALSE"] {
            assert_eq!(bool::parse(t), Ok(false), "{t:?}");
        }
        for t in ["", "2", "yess", "maybe", "nope", "-1"] {
            assert!(bool::parse(t).is_err(), "{t:?}");
        }
        assert_eq!(true.to_text(), "y");
        assert_eq!(false.to_text(), "n");
    }

    #[test]
    fn unsigned() {
        assert_eq!(u32::parse("0"), Ok(0));
        assert_eq!(u32::parse(" 42 "), Ok(42));
        assert_eq!(u32::parse("4294967295"), Ok(u32::MAX));
        assert_eq!(u32::parse("0x10"), Ok(16));
        assert_eq!(u64::parse("0XfF"), Ok(255));
        assert_eq!(u16::parse("65535"), Ok(65535));
        assert_eq!(usize::parse("7"), Ok(7));
        assert!(u32::parse("4294967296")
            .unwrap_err()
            .contains("out of range"));
        assert!(u16::parse("65536").is_err());
        for t in ["", "-1", "+1", "1.5", "abc", "0x", "0xg", "1k", " "] {
            assert!(u64::parse(t).is_err(), "{t:?}");
        }
        assert_eq!(u64::MAX.to_text(), "18446744073709551615");
    }

    #[test]
    fn signed() {
        assert_eq!(i32::parse("-5"), Ok(-5));
        assert_eq!(i64::parse("12"), Ok(12));
        assert_eq!(i32::parse("-2147483648"), Ok(i32::MIN));
        for t in ["", "-", "--1", "+1", "2147483648", "1e3"] {
            assert!(i32::parse(t).is_err(), "{t:?}");
        }
    }

    #[test]
    fn float() {
        assert_eq!(f64::parse("1.5"), Ok(1.5));
        assert_eq!(f64::parse("-2"), Ok(-2.0));
        assert_eq!(f64::parse("1e3"), Ok(1000.0));
        for t in ["", "x", "inf", "NaN", "1e999"] {
            assert!(f64::parse(t).is_err(), "{t:?}");
        }
        for v in [0.0, 1.0, 0.1, 2.5e-9] {
            assert_eq!(f64::parse(&v.to_text()), Ok(v));
        }
    }

    #[test]
    fn string_is_verbatim() {
        assert_eq!(String::parse(" a b "), Ok(" a b ".to_string()));
        assert_eq!(String::parse(""), Ok(String::new()));
        assert_eq!("x".to_string().to_text(), "x");
    }
}
