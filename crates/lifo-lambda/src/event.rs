//! Parsing an invocation's event in the function, not in the runtime.
//!
//! lambda_runtime deserializes each event into the handler's type with
//! serde_json, whose parser refuses nesting deeper than 127 levels; that
//! refusal happens before the handler runs and reaches the caller as
//! errorType `&lambda_runtime::deserializer::DeserializeError`. The functions
//! therefore take the event as a [`RawValue`] (checked for syntax only, with
//! no depth limit) and parse it here, so a too-deep event gets the
//! function's own precise error (create: `InvalidRequest`).

use serde_json::Value;
use serde_json::value::RawValue;

/// The event as the runtime hands it over: raw JSON.
pub type RawEvent = Box<RawValue>;

/// The deepest nesting of objects and arrays an event may have (the JSON
/// parser's own limit: its 128th level is refused).
pub const MAX_EVENT_DEPTH: usize = 127;

/// An event that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    #[error(
        "nested deeper than {MAX_EVENT_DEPTH} levels of objects and arrays \
         (line {line}, column {column})"
    )]
    TooDeep { line: usize, column: usize },
    /// An object names a key twice (JSON allows it; which one a reader keeps
    /// is up to the reader, so the sender's meaning is unknown).
    #[error("{path} is given twice (line {line}, column {column})")]
    DuplicateKey {
        path: String,
        line: usize,
        column: usize,
    },
    #[error("not valid JSON")]
    Syntax(#[source] serde_json::Error),
}

/// Parses the raw event.
pub fn parse(raw: &RawValue) -> Result<Value, EventError> {
    parse_str(raw.get())
}

/// Parses JSON text: a [`Value`], refusing a key given twice in one object
/// and naming the limit when it is nested too deep.
pub fn parse_str(text: &str) -> Result<Value, EventError> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = Strict {
        path: String::new(),
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    parsed.map_err(|e| {
        let message = e.to_string();
        // serde_json reports its depth limit only through the message.
        if message.starts_with("recursion limit exceeded") {
            EventError::TooDeep {
                line: e.line(),
                column: e.column(),
            }
        } else if let Some(rest) = message.strip_prefix(DUPLICATE) {
            let path = rest.split(DUPLICATE_END).next().unwrap_or("").to_owned();
            EventError::DuplicateKey {
                path,
                line: e.line(),
                column: e.column(),
            }
        } else {
            EventError::Syntax(e)
        }
    })
}

const DUPLICATE: &str = "duplicate key ";
const DUPLICATE_END: &str = " in one object";

/// A [`Value`], built as serde_json builds one, but a duplicate key is an
/// error naming its path (`tasks`, `tasks[0].payload.x`).
struct Strict {
    path: String,
}

impl Strict {
    fn at(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict {
            path: format!("{}[{}]", self.path, out.len()),
        })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = self.at(&key);
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "{DUPLICATE}{path}{DUPLICATE_END}"
                )));
            }
            let v = map.next_value_seed(Strict { path })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifo_core::testing::nested_json;

    fn raw(text: &str) -> RawEvent {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn the_runtime_type_takes_any_depth_and_we_name_the_limit() {
        // What lambda_runtime does with our handler's type: no depth limit.
        let deep: RawEvent = serde_json::from_str(&nested_json(10_000)).unwrap();
        let err = parse(&deep).unwrap_err();
        assert_eq!(
            err.to_string(),
            "nested deeper than 127 levels of objects and arrays (line 1, column 636)"
        );
        // A plain Value (what the runtime would otherwise parse into) fails.
        assert!(serde_json::from_str::<Value>(&nested_json(10_000)).is_err());
        assert!(parse(&raw(&nested_json(MAX_EVENT_DEPTH))).is_ok());
        assert!(matches!(
            parse(&raw(&nested_json(MAX_EVENT_DEPTH + 1))),
            Err(EventError::TooDeep { .. })
        ));
        assert_eq!(parse(&raw(r#"{"count": 2}"#)).unwrap()["count"], 2);
    }

    #[test]
    fn a_key_given_twice_is_refused_by_its_path() {
        let e = parse_str(r#"{"tasks": [{"payload": {"x": 1, "x": 2}}]}"#).unwrap_err();
        assert!(
            matches!(&e, EventError::DuplicateKey { path, .. } if path == "tasks[0].payload.x"),
            "{e}"
        );
        let e = parse_str(r#"{"tasks": [], "tasks": [1]}"#).unwrap_err();
        assert_eq!(e.to_string(), "tasks is given twice (line 1, column 21)");
        let v = parse_str(r#"{"a": [1, -2, 2.5, "s", null, true, {"b": {}}]}"#).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": [1, -2, 2.5, "s", null, true, {"b": {}}]})
        );
        assert!(matches!(parse_str("{} x"), Err(EventError::Syntax(_))));
    }
}
