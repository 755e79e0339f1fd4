//! Sizes in bytes as people write them: `"16MiB"`, `"512 KiB"`, `"1GB"`.
//! Scenario files set limits in them and the client quotes those limits in
//! its errors, so the one spelling lives here, below both.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A size in bytes, written as a number of bytes or with a unit: `"16MiB"`,
/// `"512 KiB"`, `"1GB"` (KiB, MiB, GiB are powers of 1024; KB, MB, GB of 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

/// Units a size may be written in, largest first within each kind.
const SIZE_UNITS: [(&str, u64); 7] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

impl ByteSize {
    /// Mebibytes.
    pub const fn mib(n: u64) -> Self {
        ByteSize(n << 20)
    }

    /// Bytes.
    pub fn get(self) -> u64 {
        self.0
    }

    /// Read `"16MiB"`, `"16 MiB"`, `"1.5GB"` or `"4096"` (units case-insensitive).
    pub fn parse(text: &str) -> Result<Self, SizeError> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = (&t[..split], t[split..].trim());
        let scale = if unit.is_empty() {
            Some(1)
        } else {
            SIZE_UNITS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(unit))
                .map(|(_, scale)| *scale)
        };
        let bad = || SizeError(text.to_string());
        let scale = scale.ok_or_else(bad)?;
        let value: f64 = number.parse().map_err(|_| bad())?;
        let bytes = value * scale as f64;
        if !bytes.is_finite() || bytes >= u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

/// A size [`ByteSize::parse`] cannot read (the text given), with how to write one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size \"{0}\"; write it like \"16MiB\", \"512KiB\", \"1GB\" or a number of bytes")]
pub struct SizeError(pub String);

/// The largest unit that divides the size exactly (`16MiB`, `1500B`).
impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, scale) = SIZE_UNITS
            .iter()
            .find(|(_, scale)| self.0 > 0 && self.0.is_multiple_of(*scale))
            .copied()
            .unwrap_or(("B", 1));
        write!(f, "{}{name}", self.0 / scale)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size such as \"16MiB\", \"512KiB\" or a number of bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                ByteSize::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("a size cannot be negative, got {v}")))
            }
        }
        d.deserialize_any(V)
    }
}
