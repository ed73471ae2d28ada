//! Sizes and durations with units, as a user writes them in a spec.
//!
//! Sizes: an integer number of bytes, or a string `"<number><unit>"` with the
//! unit K, M, G or T (powers of 1024, as the kernel's `memparse` reads them),
//! optionally followed by `B` or `iB`: `"200M"`, `"4KiB"`, `"1G"`. Decimal
//! fractions are allowed when they give a whole number of bytes: `"1.5G"`.
//! Durations: an integer number of nanoseconds, or `"<number><unit>"` with
//! the unit ns, us, ms or s: `"5s"`, `"250ms"`.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

pub const PAGE_SIZE: u64 = 4096;

/// A size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
    /// Whole 4 KiB pages, rounding up as mmap rounds a length.
    pub fn pages(self) -> u64 {
        self.0.div_ceil(PAGE_SIZE)
    }
}

/// A cgroup limit: a size or `"max"` (no limit), as memory.max takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Max,
    Bytes(u64),
}

impl Limit {
    pub fn pages(self) -> Option<u64> {
        match self {
            Limit::Max => None,
            // The kernel rounds a written limit down to whole pages.
            Limit::Bytes(b) => Some(b / PAGE_SIZE),
        }
    }
}

/// A duration in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub u64);

pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(size_expectation(s)),
    };
    scale(&num, mult).ok_or_else(|| size_expectation(s))
}

fn size_expectation(found: &str) -> String {
    format!(
        "found \"{found}\", expected a size: bytes as an integer, or a number with a unit K, M, G or T (powers of 1024), e.g. \"200M\""
    )
}

pub fn parse_duration(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let mult: u64 = match unit.trim() {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(duration_expectation(s)),
    };
    scale(&num, mult).ok_or_else(|| duration_expectation(s))
}

fn duration_expectation(found: &str) -> String {
    format!(
        "found \"{found}\", expected a duration: nanoseconds as an integer, or a number with a unit ns, us, ms or s, e.g. \"250ms\""
    )
}

/// `num` (decimal, maybe with a fraction) times `mult`, if it is a whole number.
fn scale(num: &str, mult: u64) -> Option<u64> {
    if num.is_empty() {
        return None;
    }
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let int_v: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = int_v.checked_mul(mult)?;
    if !frac.is_empty() {
        let digits: u32 = frac.len() as u32;
        let frac_v: u128 = frac.parse().ok()?;
        let denom = 10u128.checked_pow(digits)?;
        let part = frac_v * mult as u128;
        if !part.is_multiple_of(denom) {
            return None;
        }
        total = total.checked_add(u64::try_from(part / denom).ok()?)?;
    }
    Some(total)
}

struct SizeVisitor;

impl Visitor<'_> for SizeVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size such as 4096 or \"200M\"")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("found {v}, expected a size of at least 0 bytes")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_size(v).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SizeVisitor).map(Size)
    }
}

struct LimitVisitor;

impl Visitor<'_> for LimitVisitor {
    type Value = Limit;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a size such as \"100M\" or \"max\"")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
        SizeVisitor.visit_i64(v).map(Limit::Bytes)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
        Ok(Limit::Bytes(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
        if v.trim() == "max" {
            return Ok(Limit::Max);
        }
        parse_size(v).map(Limit::Bytes).map_err(|_| {
            E::custom(format!(
                "found \"{v}\", expected a size such as \"100M\" or \"max\""
            ))
        })
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LimitVisitor)
    }
}

struct DurationVisitor;

impl Visitor<'_> for DurationVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a duration such as \"250ms\"")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v)
            .map_err(|_| E::custom(format!("found {v}, expected a duration of at least 0 ns")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_duration(v).map_err(E::custom)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurationVisitor).map(Duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("200M"), Ok(200 << 20));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("512"), Ok(512));
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("1.0000000001K").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(5_000_000_000));
        assert_eq!(parse_duration("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration("1.5us"), Ok(1500));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5 min").is_err());
    }
}
