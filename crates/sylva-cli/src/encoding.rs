//! How the database tools (`sylva put`, `get`, `delete`, `scan`) read keys and values from the
//! command line and write them to stdout: UTF-8 text by default, hex with `--hex`.
//!
//! Text mode passes bytes through unchanged in both directions: a command-line argument's UTF-8
//! bytes are the key, and a stored value is written to stdout byte for byte (so `sylva get` of a
//! binary value still reproduces it exactly). Hex mode makes every key reachable, including keys
//! that are not UTF-8, and keeps `scan`'s `key<TAB>value` lines unambiguous when records hold
//! tabs or newlines.

/// Text or hex, for input and output alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8 text in, bytes out unchanged.
    Text,
    /// Hex digits in (either case, an even number, optionally after `0x`), lowercase hex out.
    Hex,
}

impl Encoding {
    /// `Hex` when `hex` is set.
    pub fn from_flag(hex: bool) -> Self {
        if hex {
            Encoding::Hex
        } else {
            Encoding::Text
        }
    }

    /// The bytes a command-line argument stands for; `what` names it in the error.
    pub fn decode(self, what: &str, arg: &str) -> Result<Vec<u8>, String> {
        match self {
            Encoding::Text => Ok(arg.as_bytes().to_vec()),
            Encoding::Hex => decode_hex(arg).map_err(|e| format!("{what} `{arg}` is not hex: {e}")),
        }
    }

    /// Appends `bytes` as this encoding writes them.
    pub fn encode_into(self, bytes: &[u8], out: &mut Vec<u8>) {
        match self {
            Encoding::Text => out.extend_from_slice(bytes),
            Encoding::Hex => {
                const DIGITS: &[u8; 16] = b"0123456789abcdef";
                for b in bytes {
                    out.push(DIGITS[usize::from(b >> 4)]);
                    out.push(DIGITS[usize::from(b & 0xf)]);
                }
            }
        }
    }
}

fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text)
        .as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("an odd number of digits ({})", digits.len()));
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!("`{}` is not a hex digit", char::from(c))),
    };
    digits
        .chunks_exact(2)
        .map(|pair| Ok(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_every_byte_and_refuses_bad_digits() {
        let all: Vec<u8> = (0..=255).collect();
        let mut text = Vec::new();
        Encoding::Hex.encode_into(&all, &mut text);
        let text = String::from_utf8(text).expect("hex is ascii");
        assert_eq!(&text[..6], "000102");
        assert_eq!(Encoding::Hex.decode("key", &text).expect("decode"), all);
        assert_eq!(
            Encoding::Hex.decode("key", "0xFF0a").expect("decode"),
            [0xff, 0x0a]
        );
        assert_eq!(Encoding::Hex.decode("key", "").expect("empty"), b"");
        let err = Encoding::Hex.decode("key", "abc").expect_err("odd");
        assert!(err.contains("odd") && err.contains("key `abc`"), "{err}");
        let err = Encoding::Hex.decode("value", "zz").expect_err("not hex");
        assert!(err.contains("`z` is not a hex digit"), "{err}");
    }

    #[test]
    fn text_passes_bytes_through() {
        assert_eq!(
            Encoding::Text.decode("key", "héllo").expect("text"),
            "héllo".as_bytes()
        );
        let mut out = Vec::new();
        Encoding::Text.encode_into(&[0, 9, 255], &mut out);
        assert_eq!(out, [0, 9, 255]);
    }
}
