//! Worker addresses as hex text, for the lines between the benchmark's
//! processes.

/// `bytes` as lowercase hex.
pub(crate) fn encode(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of hex text `s`; `None` if it is not an even run of hex digits.
pub(crate) fn decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if s.len() % 2 != 0 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16);
    s.chunks(2)
        .map(|p| Some((digit(p[0])? * 16 + digit(p[1])?) as u8))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        let b = [0u8, 1, 0xab, 0xff];
        assert_eq!(encode(&b), "0001abff");
        assert_eq!(decode("0001abff").as_deref(), Some(&b[..]));
        assert_eq!(decode("abc"), None);
        assert_eq!(decode("zz"), None);
    }
}
