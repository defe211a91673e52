//! Optional fields of a JSON request, read as the API's OpenAPI document
//! (JSON Schema) says them, so that a client generated from the document
//! and the server agree:
//! - a field that is present holds its type: `"reason": null` is refused
//!   (serde's `Option` would read it as absent);
//! - an `integer` is a whole number however it is written: `60` and
//!   `60.0` are the same (JSON Schema counts numbers, not their spelling),
//!   while `60.5`, a negative number or one past the type's range is
//!   refused.
//!
//! Use with `#[serde(default, deserialize_with = "…")]`.

use serde::de::{self, Deserialize, Deserializer, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// An optional field that, when present, holds a `T`: null is refused.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// An optional whole number that, when present, is an integer or a number
/// with no fractional part, within `T`'s range: null is refused.
pub fn whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<u64>,
{
    d.deserialize_any(Whole(PhantomData)).map(Some)
}

struct Whole<T>(PhantomData<T>);

impl<T: TryFrom<u64>> Whole<T> {
    fn of<E: de::Error>(n: u64, shown: de::Unexpected) -> Result<T, E> {
        T::try_from(n).map_err(|_| E::invalid_value(shown, &"a whole number in range"))
    }
}

impl<'de, T: TryFrom<u64>> Visitor<'de> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        Self::of(v, de::Unexpected::Unsigned(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        match u64::try_from(v) {
            Ok(n) => Self::of(n, de::Unexpected::Signed(v)),
            Err(_) => Err(E::invalid_value(
                de::Unexpected::Signed(v),
                &"a non-negative whole number",
            )),
        }
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Below 2^64 and with no fraction: exactly a u64.
        if v.is_finite() && v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
            Self::of(v as u64, de::Unexpected::Float(v))
        } else {
            Err(E::invalid_value(
                de::Unexpected::Float(v),
                &"a non-negative whole number",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        #[serde(default, deserialize_with = "present")]
        reason: Option<String>,
        #[serde(default, deserialize_with = "whole")]
        ttl: Option<u64>,
        #[serde(default, deserialize_with = "whole")]
        days: Option<u32>,
    }

    fn parse(json: &str) -> Result<Request, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn a_present_field_holds_its_type_and_null_is_refused() {
        assert_eq!(parse(r#"{}"#).unwrap().reason, None);
        assert_eq!(
            parse(r#"{"reason": "x"}"#).unwrap().reason.as_deref(),
            Some("x")
        );
        let e = parse(r#"{"reason": null}"#).unwrap_err();
        assert!(
            e.starts_with("invalid type: null, expected a string"),
            "{e}"
        );
        let e = parse(r#"{"ttl": null}"#).unwrap_err();
        assert!(
            e.starts_with("invalid type: null, expected a whole number"),
            "{e}"
        );
    }

    #[test]
    fn an_integer_is_a_whole_number_however_it_is_written() {
        assert_eq!(parse(r#"{"ttl": 60}"#).unwrap().ttl, Some(60));
        assert_eq!(parse(r#"{"ttl": 60.0}"#).unwrap().ttl, Some(60));
        assert_eq!(parse(r#"{"ttl": 6e1}"#).unwrap().ttl, Some(60));
        assert_eq!(
            parse(r#"{"days": 4294967295}"#).unwrap().days,
            Some(u32::MAX)
        );
        for bad in [
            r#"{"ttl": 60.5}"#,
            r#"{"ttl": -1}"#,
            r#"{"ttl": -1.0}"#,
            r#"{"ttl": 1e30}"#,
            r#"{"days": 4294967296}"#,
            r#"{"days": 4294967296.0}"#,
            r#"{"ttl": "60"}"#,
            r#"{"ttl": true}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse(r#"{"ttl": 60.5}"#).unwrap_err();
        assert!(e.contains("invalid value: floating point `60.5`"), "{e}");
    }
}
