//! The opaque cursor of a paged list: where the previous page of a user's
//! tasks ended (the user index's key), as base64url of a small JSON
//! document. The server validates it: a cursor that is not base64url (or
//! too long for any key) is a bad request; one that is, but does not
//! decode, name exactly the user asked for and hold a well-formed key,
//! names no page of the list (404). Either way `cursor` is named. A cursor
//! forged for another user is refused; one made up for the same user can
//! only start that user's list somewhere else.

use crate::OpsError;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_types::base64;
use lifo_core::expr::attr;
use lifo_core::model::MAX_KEY_BYTES;
use lifo_core::store::Item;
use serde::{Deserialize, Serialize};

/// Longest cursor accepted: the base64 of a user id and a task id of up
/// to [`MAX_KEY_BYTES`] each (a task written by any producer), and a time.
pub const MAX_CURSOR_LEN: usize = (2 * MAX_KEY_BYTES + 64).div_ceil(3) * 4;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Position {
    /// The user.
    u: String,
    /// The last task's id.
    t: String,
    /// The last task's `taskCreated`.
    c: u64,
}

fn refused(message: impl Into<String>) -> OpsError {
    OpsError::invalid("cursor", message)
}

fn no_page(message: impl Into<String>) -> OpsError {
    OpsError::NamesNothing {
        field: "cursor".to_owned(),
        message: message.into(),
    }
}

/// The cursor for a page that ended at `key` (the index's
/// LastEvaluatedKey); `None` when it lacks the index's attributes.
pub fn encode(key: &Item) -> Option<String> {
    let s = |name: &str| key.get(name)?.as_s().ok().cloned();
    let position = Position {
        u: s(attr::USER_ID)?,
        t: s(attr::TASK_ID)?,
        c: key.get(attr::CREATED)?.as_n().ok()?.parse().ok()?,
    };
    let json = serde_json::to_vec(&position).ok()?;
    Some(base64::encode(json).replace('+', "-").replace('/', "_"))
}

/// Whether `cursor` has a cursor's shape (base64url, at most
/// [`MAX_CURSOR_LEN`]): a bad request if not.
pub fn check(cursor: &str) -> Result<(), OpsError> {
    if cursor.len() > MAX_CURSOR_LEN {
        return Err(refused(format!(
            "is {} characters; a cursor is at most {MAX_CURSOR_LEN}",
            cursor.len()
        )));
    }
    let body = cursor.trim_end_matches('=');
    if body.is_empty()
        || cursor.len() - body.len() > 2
        || !body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(refused(
            "is not base64url (A-Z a-z 0-9 - _, then up to two '=')",
        ));
    }
    Ok(())
}

/// A cursor of the right shape for a list that cannot exist (a user id no
/// key can hold): it names no page.
pub fn no_page_of(cursor: &str) -> Result<(), OpsError> {
    check(cursor)?;
    Err(no_page("names no page: no stored user has this id"))
}

/// The index key to continue `user`'s list from.
pub fn decode(cursor: &str, user: &str) -> Result<Item, OpsError> {
    check(cursor)?;
    let not_ours = || no_page("is not a cursor this API gave out for this list");
    let bytes =
        base64::decode(cursor.replace('-', "+").replace('_', "/")).map_err(|_| not_ours())?;
    let p: Position = serde_json::from_slice(&bytes).map_err(|_| not_ours())?;
    if p.u != user {
        return Err(no_page("was given out for another user's list"));
    }
    if p.t.is_empty() || p.t.len() > MAX_KEY_BYTES {
        return Err(not_ours());
    }
    Ok(Item::from([
        (attr::USER_ID.to_owned(), AttributeValue::S(p.u)),
        (attr::TASK_ID.to_owned(), AttributeValue::S(p.t)),
        (attr::CREATED.to_owned(), AttributeValue::N(p.c.to_string())),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(user: &str, id: &str, created: u64) -> Item {
        Item::from([
            (attr::USER_ID.to_owned(), AttributeValue::S(user.into())),
            (attr::TASK_ID.to_owned(), AttributeValue::S(id.into())),
            (
                attr::CREATED.to_owned(),
                AttributeValue::N(created.to_string()),
            ),
        ])
    }

    #[test]
    fn a_cursor_round_trips_for_its_own_user() {
        let k = key("alice", "order/1+2", 1_700_000_000_123);
        let c = encode(&k).unwrap_or_default();
        assert!(!c.contains(['+', '/']), "{c}");
        assert_eq!(decode(&c, "alice").ok(), Some(k));
    }

    #[test]
    fn a_cursor_for_another_user_or_forged_is_refused_naming_the_cursor() {
        let c = encode(&key("alice", "t1", 1)).unwrap_or_default();
        // Not a cursor's shape: a bad request.
        for cursor in ["not base64!", "a===", "", &"A".repeat(MAX_CURSOR_LEN + 1)] {
            match decode(cursor, "alice") {
                Err(OpsError::Invalid { field, .. }) => assert_eq!(field, "cursor"),
                other => panic!("{cursor:?}: {other:?}"),
            }
        }
        // A cursor's shape, but no page of this list: not found.
        for (cursor, user) in [(c.as_str(), "bob"), ("e30", "alice"), ("AAAA", "alice")] {
            match decode(cursor, user) {
                Err(OpsError::NamesNothing { field, .. }) => assert_eq!(field, "cursor"),
                other => panic!("{cursor:?} for {user}: {other:?}"),
            }
        }
        // A document with an extra field is not one of ours.
        let extra = base64::encode(br#"{"u":"alice","t":"t1","c":1,"x":2}"#);
        assert!(decode(&extra, "alice").is_err());
    }

    #[test]
    fn a_key_without_the_index_attributes_gives_no_cursor() {
        let mut k = key("alice", "t1", 1);
        k.remove(attr::CREATED);
        assert_eq!(encode(&k), None);
    }
}
