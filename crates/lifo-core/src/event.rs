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
    #[error("not valid JSON")]
    Syntax(#[source] serde_json::Error),
}

/// Parses the raw event.
pub fn parse(raw: &RawValue) -> Result<Value, EventError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        // serde_json reports its depth limit only through the message.
        if e.to_string().starts_with("recursion limit exceeded") {
            EventError::TooDeep {
                line: e.line(),
                column: e.column(),
            }
        } else {
            EventError::Syntax(e)
        }
    })
}

/// `{"a": {"a": … }}` nested `depth` levels deep, as text.
pub fn nested_json(depth: usize) -> String {
    format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
