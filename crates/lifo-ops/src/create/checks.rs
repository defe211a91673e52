//! The checks of a request's fields that need more than serde: payloads
//! DynamoDB would refuse, dates, producer-chosen ids and keys.

use lifo_core::model::MAX_TASK_ID_LEN;
use serde_json::{Map, Value};

/// Deepest nesting of a payload: DynamoDB allows 32 levels in an item and
/// the payload itself is one level below the item.
pub const MAX_PAYLOAD_DEPTH: usize = 31;

/// What DynamoDB would refuse inside a payload, found before anything is
/// written: nesting deeper than 32 levels, numbers outside DynamoDB's range
/// (magnitude 1e-130 to 1e126), empty keys. `path` names the place.
pub(crate) fn check_payload(
    map: &Map<String, Value>,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    if depth > MAX_PAYLOAD_DEPTH {
        return Err((
            path.clone(),
            format!("is nested more than {MAX_PAYLOAD_DEPTH} levels deep"),
        ));
    }
    for (key, value) in map {
        if key.is_empty() {
            return Err((path.clone(), "has an empty key".into()));
        }
        let len = path.len();
        path.push('.');
        path.push_str(key);
        check_value(value, path, depth)?;
        path.truncate(len);
    }
    Ok(())
}

fn check_value(value: &Value, path: &mut String, depth: usize) -> Result<(), (String, String)> {
    match value {
        Value::Object(m) => check_payload(m, path, depth + 1),
        Value::Array(items) => {
            if depth + 1 > MAX_PAYLOAD_DEPTH {
                return Err((
                    path.clone(),
                    format!("is nested more than {MAX_PAYLOAD_DEPTH} levels deep"),
                ));
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_value(item, path, depth + 1)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if f == 0.0 || (1e-130..1e126).contains(&f.abs()) => Ok(()),
            _ => Err((
                path.clone(),
                format!("{n} is outside the range DynamoDB stores (1e-130 to 1e126)"),
            )),
        },
        _ => Ok(()),
    }
}

/// A strict `YYYY-MM-DD` date.
pub(crate) fn parse_date(text: &str) -> Result<chrono::NaiveDate, String> {
    let shape_ok = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !shape_ok {
        return Err(format!("{text:?} is not a date of the form YYYY-MM-DD"));
    }
    chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|e| format!("{text:?} is not a valid date: {e}"))
}

/// A task or user id, which travels in URL paths (`/tasks/{taskId}`,
/// `/users/{userId}/tasks`): 1 to 128 characters from
/// `A-Z a-z 0-9 - _ . : @`. No `/`: API Gateway decodes `%2F` before the
/// function sees the path, so such an id could be created but never named
/// over HTTP. Not only dots (`.` and `..` are path segments a browser or an
/// HTTP client resolves away), and not a word of the API's routes
/// ([`crate::path_id::ROUTE_WORDS`]).
pub fn check_id(id: &str) -> Result<(), String> {
    if crate::path_id::ROUTE_WORDS.contains(&id) {
        return Err(format!(
            "{id:?} is a word of the API's routes (POST /tasks/{id}), so /tasks/{id} could not \
             name the task"
        ));
    }
    check_chars(id, "-_.:@", "- _ . : @").map_err(|m| {
        if id.contains('/') {
            format!(
                "{m} ('/' cannot travel in a URL path: API Gateway decodes %2F before the \
                 function sees it)"
            )
        } else {
            m
        }
    })
}

/// A tenant or `supersedeKey`, never in a path: the same rules, and `/`
/// allowed as well.
pub fn check_key(key: &str) -> Result<(), String> {
    check_chars(key, "-_.:/@", "- _ . : / @")
}

fn check_chars(id: &str, punctuation: &str, said: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("must not be empty".into());
    }
    if id.bytes().all(|b| b == b'.') {
        return Err(format!("{id:?} is only dots, which no URL can name"));
    }
    if id.len() > MAX_TASK_ID_LEN {
        return Err(format!(
            "is {} characters; the limit is {MAX_TASK_ID_LEN}",
            id.len()
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || punctuation.contains(*c)))
    {
        return Err(format!(
            "contains {bad:?}; allowed are letters, digits and {said}"
        ));
    }
    Ok(())
}
