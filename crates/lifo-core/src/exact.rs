//! JSON kept digit for digit. serde_json's `Value` holds a number as an
//! `i64`, `u64` or `f64`, so `18446744073709551616` (2^64) comes back as
//! `1.8446744073709552e19`, and an order number sent as a JSON number
//! comes back different. A payload is therefore kept as its JSON text
//! ([`Payload`]), and walked as a [`Json`] tree whose numbers are their
//! text, into DynamoDB's `N` (a decimal string, 38 significant digits) and
//! back.
//!
//! Why not serde_json's `arbitrary_precision`: features unify across the
//! workspace, and with it every `Number` serializes to any other format as
//! a private map (`{"$serde_json::private::Number": "…"}`): serde_dynamo
//! would store that map instead of an `N`, and `#[serde(flatten)]` or
//! untagged types of other crates (aws_lambda_events) stop reading
//! numbers. Keeping the payload's text changes nothing outside it.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;

/// A JSON value whose numbers are kept as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number's JSON text.
    Number(String),
    String(String),
    Array(Vec<Json>),
    /// Keys sorted, as serde_json's `Map` keeps them.
    Object(BTreeMap<String, Json>),
}

impl Json {
    /// Parses JSON text. Each object or array is read as raw values, then
    /// each of those in turn, so a number is never converted.
    pub fn parse(text: &str) -> serde_json::Result<Self> {
        let text = text.trim();
        Ok(match text.as_bytes().first() {
            Some(b'{') => {
                let map: BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
                let mut out = BTreeMap::new();
                for (k, v) in map {
                    out.insert(k, Self::parse(v.get())?);
                }
                Self::Object(out)
            }
            Some(b'[') => {
                let items: Vec<&RawValue> = serde_json::from_str(text)?;
                Self::Array(
                    items
                        .into_iter()
                        .map(|v| Self::parse(v.get()))
                        .collect::<Result<_, _>>()?,
                )
            }
            Some(b'"') => Self::String(serde_json::from_str(text)?),
            Some(b't' | b'f') => Self::Bool(serde_json::from_str(text)?),
            Some(b'n') => {
                serde_json::from_str::<()>(text)?;
                Self::Null
            }
            _ => {
                // Checks the syntax; the text is what is kept.
                serde_json::from_str::<serde::de::IgnoredAny>(text)?;
                Self::Number(text.to_owned())
            }
        })
    }

    /// Compact JSON text.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Null => s.serialize_unit(),
            Self::Bool(b) => s.serialize_bool(*b),
            // serde_json writes a raw value's text as it is.
            Self::Number(n) => RawValue::from_string(n.clone())
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
            Self::String(t) => s.serialize_str(t),
            Self::Array(items) => items.serialize(s),
            Self::Object(map) => map.serialize(s),
        }
    }
}

/// A task's payload: a JSON object, kept as compact JSON text with its
/// numbers as the producer wrote them. Serialized to JSON (the API's
/// answers, a runner's request), it is that text; stored in DynamoDB, its
/// numbers are `N` strings ([`crate::store::item`]). Read it whole with
/// [`Payload::json`], as your own type with [`Payload::parse`] (a `u128`
/// or a decimal type keeps every digit), or as serde_json values with
/// [`Payload::to_map`] (numbers past `u64` then become `f64`).
#[derive(Clone, PartialEq, Eq)]
pub struct Payload(String);

impl Payload {
    /// The empty object.
    pub fn new() -> Self {
        Self("{}".to_owned())
    }

    /// The payload of JSON `text`, which must hold an object (made compact).
    pub fn from_json(text: &str) -> Result<Self, String> {
        match Json::parse(text) {
            Ok(tree @ Json::Object(_)) => Ok(Self(tree.to_text())),
            Ok(_) => Err("is not a JSON object".to_owned()),
            Err(e) => Err(format!("is not JSON: {e}")),
        }
    }

    /// The payload of an object tree (anything else is the empty object).
    pub fn from_tree(tree: &Json) -> Self {
        match tree {
            Json::Object(_) => Self(tree.to_text()),
            _ => Self::new(),
        }
    }

    /// Its compact JSON text.
    pub fn json(&self) -> &str {
        &self.0
    }

    /// Its size as compact JSON, bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `{}`.
    pub fn is_empty(&self) -> bool {
        self.0 == "{}"
    }

    /// Its tree, numbers as text.
    pub fn tree(&self) -> Json {
        Json::parse(&self.0).unwrap_or_else(|_| Json::Object(BTreeMap::new()))
    }

    /// Read as `T`.
    pub fn parse<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }

    /// As serde_json values: a number past `u64` (or with more digits than
    /// an `f64` holds) is rounded to an `f64`.
    pub fn to_map(&self) -> Map<String, Value> {
        self.parse().unwrap_or_default()
    }
}

impl Default for Payload {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Map<String, Value>> for Payload {
    /// The payload of serde_json values, its keys sorted as every payload's
    /// (a `Map` keeps insertion order when serde_json's `preserve_order`
    /// is on somewhere in the build).
    fn from(map: Map<String, Value>) -> Self {
        let text = Value::Object(map).to_string();
        Self::from_json(&text).unwrap_or(Self(text))
    }
}

impl Serialize for Payload {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RawValue::from_string(self.0.clone())
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Self::from_json(raw.get()).map_err(|e| D::Error::custom(format!("payload {e}")))
    }
}

/// The most significant digits a DynamoDB number holds.
pub const MAX_DIGITS: usize = 38;

/// Whether DynamoDB stores the number `text` (JSON syntax) as it is: zero,
/// or at most 38 significant digits with a magnitude from 1e-130 to
/// 9.9999999999999999999999999999999999999e125. Leading and trailing
/// zeros are not significant (DynamoDB trims them).
pub fn check_number(text: &str) -> Result<(), String> {
    let unsigned = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(i) => (&unsigned[..i], &unsigned[i + 1..]),
        None => (unsigned, "0"),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = int.chars().chain(frac.chars()).collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text} is not a number"));
    }
    let significant = digits.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(());
    }
    let leading_zeros = digits.len() - significant.len();
    let significant = significant.trim_end_matches('0');
    if significant.len() > MAX_DIGITS {
        return Err(format!(
            "{text} has {} significant digits; DynamoDB keeps {MAX_DIGITS} (send more as a string)",
            significant.len()
        ));
    }
    // The power of ten of the first significant digit: its place in the
    // mantissa plus the exponent (saturating: a huge exponent is out of
    // range whatever it is exactly).
    let exponent: i64 =
        exponent
            .trim_start_matches('+')
            .parse()
            .unwrap_or(if exponent.starts_with('-') {
                i64::MIN / 2
            } else {
                i64::MAX / 2
            });
    let place = int.len() as i64 - 1 - leading_zeros as i64;
    let magnitude = exponent.saturating_add(place);
    if !(-130..=125).contains(&magnitude) {
        return Err(format!(
            "{text} is outside the range DynamoDB stores (magnitude 1e-130 to \
             9.9999999999999999999999999999999999999e125)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_every_digit_through_text_and_tree() {
        let text = r#"{"n": 18446744073709551616, "d": 1.50, "e": 1E-130, "s": "x\u0000", "a": [1, {"b": null, "c": true}]}"#;
        let p = Payload::from_json(text).unwrap();
        assert_eq!(
            p.json(),
            r#"{"a":[1,{"b":null,"c":true}],"d":1.50,"e":1E-130,"n":18446744073709551616,"s":"x\u0000"}"#
        );
        assert_eq!(serde_json::to_string(&p).unwrap(), p.json());
        let back: Payload = serde_json::from_str(p.json()).unwrap();
        assert_eq!(back, p);
        assert_eq!(Payload::from_tree(&p.tree()), p);
        // What serde_json's Value does to it.
        assert_eq!(p.to_map()["n"].to_string(), "1.8446744073709552e+19");
        assert!(Payload::from_json("[1]").is_err());
        assert!(Payload::from_json("{").is_err());
        assert!(Json::parse("01").is_err());
        assert_eq!(Payload::from(Map::new()), Payload::new());
        let mut unsorted = Map::new();
        unsorted.insert("b".into(), Value::from(1));
        unsorted.insert("a".into(), Value::from(2));
        assert_eq!(Payload::from(unsorted).json(), r#"{"a":2,"b":1}"#);
    }

    #[test]
    fn dynamodb_keeps_38_significant_digits_from_1e_130_to_under_1e126() {
        for ok in [
            "0",
            "-0.0",
            "18446744073709551616",
            "12345678901234567890123456789012345678",
            "1234567890123456789012345678901234567800000",
            "0.00012345678901234567890123456789012345678",
            "1e-130",
            "1E-130",
            "-1e-130",
            "9.9e125",
            "9.9999999999999999999999999999999999999e125",
            "99999999999999999999999999999999999999e88",
            "0.1e-129",
            "10e124",
        ] {
            assert_eq!(check_number(ok), Ok(()), "{ok}");
        }
        for bad in [
            "123456789012345678901234567890123456789",
            "1.23456789012345678901234567890123456789",
            "9.99999999999999999999999999999999999999e125",
            "1e126",
            "10e125",
            "9.999999999999999e-131",
            "0.01e-129",
            "1e-131",
            "-1e126",
            "1e99999999999999999999999",
            "1e-99999999999999999999999",
        ] {
            assert!(check_number(bad).is_err(), "{bad}");
        }
    }
}
