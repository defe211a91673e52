//! An id in a URL path. API Gateway's HTTP APIs decode the path before the
//! function sees it (`%2F` arrives as `/`), browsers and HTTP clients
//! resolve `.` and `..` segments away, and `#` or `?` end a path. So an
//! id travels as itself only when it is plain (create's rules for new ids:
//! letters, digits and `- _ . : @`, not only dots); any other id, which an
//! older version, a migration or a producer writing straight to the table
//! may have stored, travels as `~` and the base64url of its bytes (no
//! padding): `a/b` is `~YS9i`. No plain id starts with `~`, so the two
//! forms never meet.

use crate::{OpsError, tasks};
use aws_smithy_types::base64;

/// The first character of an encoded id.
pub const ENCODED: char = '~';

/// Words of the API's routes that stand where a task id does
/// (`POST /tasks/retry` beside `/tasks/{taskId}`): a task named by one
/// would meet the route, not the task. No new id may be one (create
/// refuses it), and a stored one is named in its encoded form
/// (`retry` is `~cmV0cnk`). The API's tests derive this list from its
/// router.
pub const ROUTE_WORDS: &[&str] = &["retry"];

/// The path segment that names `id`.
pub fn encode(id: &str) -> String {
    if crate::create::check_id(id).is_ok() {
        id.to_owned()
    } else {
        let b64 = base64::encode(id.as_bytes());
        let url: String = b64
            .trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '+' => '-',
                '/' => '_',
                c => c,
            })
            .collect();
        format!("{ENCODED}{url}")
    }
}

/// Longest path segment: `~` and the base64url of a 2,048-byte key.
pub const MAX_SEGMENT: usize = 1 + (tasks::MAX_KEY_BYTES * 4).div_ceil(3);

/// The id a path segment names: `Ok(None)` when the segment is well formed
/// but can name no stored id (an encoded one that is not UTF-8 or longer
/// than any key), which is "not found", not a bad request. A segment that
/// is neither form is refused, `field` naming it. These are the two
/// patterns of docs/openapi.yaml's `taskId`.
pub fn decode(field: &str, segment: &str) -> Result<Option<String>, OpsError> {
    let Some(b64url) = segment.strip_prefix(ENCODED) else {
        return plain(field, segment).map(|()| Some(segment.to_owned()));
    };
    let refused = |why: &str| {
        OpsError::invalid(
            field,
            format!(
                "{segment:?} starts with '{ENCODED}' but {why}; an encoded id is '{ENCODED}' and the base64url of its bytes"
            ),
        )
    };
    if b64url.len() % 4 == 1
        || b64url.is_empty()
        || !b64url
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(refused("is not base64url"));
    }
    if segment.len() > MAX_SEGMENT {
        return Err(refused(&format!(
            "is {} characters; no key of at most {} bytes encodes to more than {MAX_SEGMENT}",
            segment.len(),
            tasks::MAX_KEY_BYTES
        )));
    }
    let mut b64: String = b64url
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !b64.len().is_multiple_of(4) {
        b64.push('=');
    }
    Ok(base64::decode(&b64)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .filter(|id| !id.is_empty() && id.len() <= tasks::MAX_KEY_BYTES))
}

/// The task a path segment names: [`decode`], where a segment that can
/// name no stored id is no such task.
pub fn task(segment: &str) -> Result<String, OpsError> {
    decode("taskId", segment)?.ok_or_else(|| OpsError::NotFound {
        task_id: segment.to_owned(),
    })
}

/// A plain id as a path names it: 1 to 2,048 of `A-Z a-z 0-9 - _ . : @`,
/// not only dots.
fn plain(field: &str, segment: &str) -> Result<(), OpsError> {
    tasks::check_id(field, segment)?;
    if ROUTE_WORDS.contains(&segment) {
        return Err(OpsError::invalid(
            field,
            format!(
                "{segment:?} is a word of the API's routes; a path names that id as {}",
                encode(segment)
            ),
        ));
    }
    if let Some(c) = segment
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.:@".contains(*c)))
    {
        return Err(OpsError::invalid(
            field,
            format!(
                "contains {c:?}: a path names a plain id (A-Z a-z 0-9 - _ . : @) as itself and \
                 any other as '{ENCODED}' and the base64url of its bytes"
            ),
        ));
    }
    if segment.bytes().all(|b| b == b'.') {
        return Err(OpsError::invalid(
            field,
            format!(
                "{segment:?} is only dots; such an id travels as '{ENCODED}' and its base64url"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_travel_as_themselves_and_any_other_id_encoded() {
        assert_eq!(encode("order-1001"), "order-1001");
        assert_eq!(encode("a:b@c.d_e"), "a:b@c.d_e");
        assert_eq!(encode("a/b"), "~YS9i");
        assert_eq!(encode("."), "~Lg");
        assert_eq!(encode(".."), "~Li4");
        assert_eq!(encode("~x"), "~fng");
        // A route word is never plain: /tasks/retry is the bulk retry.
        assert_eq!(encode("retry"), "~cmV0cnk");
        assert_eq!(encode("retry-1"), "retry-1");
        for id in [
            "retry",
            "a/b",
            ".",
            "..",
            "sp ace",
            "x#frag",
            "q?s",
            "%2F",
            "Júý",
            "~",
            &"z".repeat(1500),
        ] {
            let seg = encode(id);
            assert!(
                seg.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:@~".contains(&b)),
                "{seg}"
            );
            assert_eq!(decode("taskId", &seg).unwrap().as_deref(), Some(id));
        }
    }

    #[test]
    fn a_segment_of_neither_form_is_refused_naming_its_field() {
        let long = "x".repeat(2049);
        let too_long = format!("~{}", "A".repeat(MAX_SEGMENT));
        for seg in [
            "~", "~a/b", "~!!", "~A", "~AAAAA", "", "sp ace", "J\u{fa}", "..", "a/b", "retry",
            &long, &too_long,
        ] {
            let e = decode("taskId", seg).unwrap_err();
            assert!(
                matches!(&e, OpsError::Invalid { field, .. } if field == "taskId"),
                "{seg}: {e}"
            );
        }
    }

    #[test]
    fn a_well_formed_segment_that_can_name_no_key_names_nothing() {
        // 0xFF is not UTF-8.
        for seg in ["~_w", "~__8", "~_-8"] {
            assert_eq!(decode("taskId", seg).unwrap(), None, "{seg}");
        }
        assert_eq!(MAX_SEGMENT, 2732);
    }
}
