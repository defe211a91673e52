//! Lambda event filtering (the subset the template uses), so the local
//! pipeline applies the event source mapping's own FilterCriteria.
//!
//! A pattern is a JSON object; each key must match the event's key:
//! an object recurses, an array lists acceptable leaf values: literals
//! (equality), `{"exists": bool}`, `{"prefix": "..."}`,
//! `{"anything-but": value | [values]}`. Anything else in a pattern (another
//! operator such as `numeric`, a malformed one) is an error that names it,
//! never a silent "no match": the local pipeline would otherwise drop
//! events that AWS delivers.

use serde_json::Value;

/// A pattern this matcher does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("filter pattern at {path}: {problem}")]
pub struct PatternError {
    /// Where in the pattern, e.g. `dynamodb.NewImage.claimableAt.N[0]`.
    pub path: String,
    pub problem: String,
}

/// Checks that every rule of `pattern` is one this matcher implements.
pub fn validate(pattern: &Value) -> Result<(), PatternError> {
    check(pattern, "")
}

fn check(pattern: &Value, path: &str) -> Result<(), PatternError> {
    let error = |path: &str, problem: String| PatternError {
        path: if path.is_empty() {
            "(top)".into()
        } else {
            path.to_owned()
        },
        problem,
    };
    let Some(fields) = pattern.as_object() else {
        return Err(error(path, format!("expected an object, got {pattern}")));
    };
    for (key, rule) in fields {
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        match rule {
            Value::Object(_) => check(rule, &here)?,
            Value::Array(options) => {
                for (i, option) in options.iter().enumerate() {
                    let at = format!("{here}[{i}]");
                    match option {
                        Value::Object(op) => {
                            let mut names = op.keys();
                            let (Some(name), None) = (names.next(), names.next()) else {
                                return Err(error(
                                    &at,
                                    format!(
                                        "an operator object must hold exactly one operator, got {option}"
                                    ),
                                ));
                            };
                            let value = &op[name];
                            let ok = match name.as_str() {
                                "exists" => value.is_boolean(),
                                "prefix" => value.is_string(),
                                "anything-but" => !value.is_object(),
                                other => {
                                    return Err(error(
                                        &at,
                                        format!(
                                            "operator {other:?} is not implemented by the local matcher \
                                         (it knows exists, prefix, anything-but)"
                                        ),
                                    ));
                                }
                            };
                            if !ok {
                                return Err(error(
                                    &at,
                                    format!("operator {name:?} cannot take {value}"),
                                ));
                            }
                        }
                        Value::Array(_) => {
                            return Err(error(
                                &at,
                                format!("a nested array is not a rule: {option}"),
                            ));
                        }
                        _ => {}
                    }
                }
            }
            other => {
                return Err(error(
                    &here,
                    format!("a rule must be an object or an array, got {other}"),
                ));
            }
        }
    }
    Ok(())
}

/// True if `event` matches `pattern`, which [`validate`] accepted (an
/// operator it would refuse never matches).
pub fn matches(pattern: &Value, event: &Value) -> bool {
    let Some(fields) = pattern.as_object() else {
        return false;
    };
    fields.iter().all(|(key, rule)| {
        let value = event.get(key);
        match rule {
            // A path the event lacks matches only rules that ask for the
            // leaf's absence (`exists: false`), as in AWS.
            Value::Object(_) => value.map_or_else(|| only_absence(rule), |v| matches(rule, v)),
            Value::Array(options) => options.iter().any(|o| leaf(o, value)),
            _ => false,
        }
    })
}

/// True if every leaf rule under `rule` accepts an absent value.
fn only_absence(rule: &Value) -> bool {
    match rule {
        Value::Object(fields) => fields.values().all(only_absence),
        Value::Array(options) => options.iter().any(|o| leaf(o, None)),
        _ => false,
    }
}

fn leaf(option: &Value, value: Option<&Value>) -> bool {
    match option {
        Value::Object(op) => {
            if let Some(exists) = op.get("exists").and_then(Value::as_bool) {
                return value.is_some() == exists;
            }
            if let Some(prefix) = op.get("prefix").and_then(Value::as_str) {
                return value
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.starts_with(prefix));
            }
            if let Some(but) = op.get("anything-but") {
                let Some(v) = value else { return false };
                return match but {
                    Value::Array(xs) => !xs.contains(v),
                    x => x != v,
                };
            }
            false
        }
        literal => value == Some(literal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaf_operators() {
        let p = json!({"eventName": ["INSERT"], "dynamodb": {"NewImage": {"claimableAt": {"N": [{"exists": true}]}}}});
        let insert =
            json!({"eventName": "INSERT", "dynamodb": {"NewImage": {"claimableAt": {"N": "5"}}}});
        assert!(matches(&p, &insert));
        assert!(!matches(
            &p,
            &json!({"eventName": "MODIFY", "dynamodb": {"NewImage": {"claimableAt": {"N": "5"}}}})
        ));
        assert!(!matches(
            &p,
            &json!({"eventName": "INSERT", "dynamodb": {"NewImage": {"taskId": {"S": "x"}}}})
        ));
        assert!(!matches(&p, &json!({"eventName": "INSERT"})));
        assert!(matches(
            &json!({"a": [{"prefix": "ab"}]}),
            &json!({"a": "abc"})
        ));
        assert!(matches(
            &json!({"a": [{"anything-but": ["x", "y"]}]}),
            &json!({"a": "z"})
        ));
        assert!(!matches(
            &json!({"a": [{"anything-but": "z"}]}),
            &json!({"a": "z"})
        ));
        assert!(matches(
            &json!({"a": [{"exists": false}]}),
            &json!({"b": 1})
        ));
        // A missing path satisfies `exists: false` below it, and nothing else.
        let absent =
            json!({"dynamodb": {"NewImage": {"announced": {"BOOL": [{"exists": false}]}}}});
        assert!(matches(
            &absent,
            &json!({"dynamodb": {"NewImage": {"taskId": {"S": "x"}}}})
        ));
        assert!(!matches(
            &absent,
            &json!({"dynamodb": {"NewImage": {"announced": {"BOOL": true}}}})
        ));
        assert!(!matches(&json!({"a": {"b": ["x"]}}), &json!({"c": 1})));
    }

    #[test]
    fn an_operator_it_does_not_know_is_an_error_naming_it() {
        let numeric = json!({"dynamodb": {"NewImage": {"n": {"N": [{"numeric": [">", 0]}]}}}});
        assert_eq!(
            validate(&numeric).unwrap_err().to_string(),
            "filter pattern at dynamodb.NewImage.n.N[0]: operator \"numeric\" is not implemented \
             by the local matcher (it knows exists, prefix, anything-but)"
        );
        assert_eq!(
            validate(&json!({"a": [{"exists": "yes"}]}))
                .unwrap_err()
                .to_string(),
            "filter pattern at a[0]: operator \"exists\" cannot take \"yes\""
        );
        assert_eq!(
            validate(&json!({"a": 1})).unwrap_err().to_string(),
            "filter pattern at a: a rule must be an object or an array, got 1"
        );
        assert!(validate(&json!({"eventName": ["INSERT"], "d": {"x": [{"prefix": "a"}, {"anything-but": ["b"]}]}})).is_ok());
    }
}
