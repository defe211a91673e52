//! An id in a URL path. API Gateway's HTTP APIs decode the path before the
//! function sees it (`%2F` arrives as `/`), browsers and HTTP clients
//! resolve `.` and `..` segments away, and `#` or `?` end a path. So an
//! id travels as itself only when it is plain (create's rules for new ids:
//! letters, digits and `- _ . : @`, not only dots); any other id, which an
//! older version, a migration or a producer writing straight to the table
//! may have stored, travels as `~` and the base64url of its bytes (no
//! padding): `a/b` is `~YS9i`. No plain id starts with `~`, so the two
//! forms never meet.

use crate::OpsError;
use aws_smithy_types::base64;

/// The first character of an encoded id.
pub const ENCODED: char = '~';

/// The path segment that names `id`.
pub fn encode(id: &str) -> String {
    if create::check_id(id).is_ok() {
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

/// The id a path segment names (`field` names it in a refusal).
pub fn decode(field: &str, segment: &str) -> Result<String, OpsError> {
    let Some(b64url) = segment.strip_prefix(ENCODED) else {
        return Ok(segment.to_owned());
    };
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
    let refused = |why: &str| {
        OpsError::invalid(
            field,
            format!(
                "{segment:?} starts with '{ENCODED}' but {why}; an encoded id is '{ENCODED}' and the base64url of its bytes"
            ),
        )
    };
    if b64url.is_empty()
        || !b64url
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(refused("is not base64url"));
    }
    let bytes = base64::decode(&b64).map_err(|_| refused("is not base64url"))?;
    String::from_utf8(bytes).map_err(|_| refused("does not decode to UTF-8"))
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
        for id in [
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
            assert_eq!(decode("taskId", &seg).unwrap(), id);
        }
    }

    #[test]
    fn a_bad_encoded_id_is_refused_naming_its_field() {
        for seg in ["~", "~a/b", "~!!", "~_w"] {
            let e = decode("taskId", seg).unwrap_err();
            assert!(
                matches!(&e, OpsError::Invalid { field, .. } if field == "taskId"),
                "{seg}: {e}"
            );
        }
    }
}
