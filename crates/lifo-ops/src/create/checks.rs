//! The checks of a request's fields that need more than serde: payloads
//! DynamoDB would refuse, dates, producer-chosen ids and keys.

use lifo_core::exact::Json;
use lifo_core::model::MAX_TASK_ID_LEN;

/// Deepest nesting of a payload: DynamoDB allows 32 levels in an item and
/// the payload itself is one level below the item.
pub const MAX_PAYLOAD_DEPTH: usize = 31;

/// What DynamoDB would refuse inside a payload, found before anything is
/// written: nesting deeper than 32 levels, numbers it cannot store as
/// written (more than 38 significant digits, a magnitude outside 1e-130 to
/// 9.9999999999999999999999999999999999999e125; checked on their text,
/// [`lifo_core::exact::check_number`]), empty keys. `path` names the
/// place (`tasks[0].payload.a.b[2]`); `depth` is the levels above `value`.
pub(crate) fn check_payload(
    value: &Json,
    path: &mut String,
    depth: usize,
) -> Result<(), (String, String)> {
    let nested = |path: &String| {
        Err((
            path.clone(),
            format!("is nested more than {MAX_PAYLOAD_DEPTH} levels deep"),
        ))
    };
    match value {
        Json::Object(map) => {
            if depth + 1 > MAX_PAYLOAD_DEPTH {
                return nested(path);
            }
            for (key, value) in map {
                if key.is_empty() {
                    return Err((path.clone(), "has an empty key".into()));
                }
                let len = path.len();
                path.push('.');
                path.push_str(key);
                check_payload(value, path, depth + 1)?;
                path.truncate(len);
            }
            Ok(())
        }
        Json::Array(items) => {
            if depth + 1 > MAX_PAYLOAD_DEPTH {
                return nested(path);
            }
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_payload(item, path, depth + 1)?;
                path.truncate(len);
            }
            Ok(())
        }
        Json::Number(n) => lifo_core::exact::check_number(n).map_err(|m| (path.clone(), m)),
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
