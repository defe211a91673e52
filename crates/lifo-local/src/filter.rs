//! Lambda event filtering (the subset the template uses), so the local
//! pipeline applies the event source mapping's own FilterCriteria.
//!
//! A pattern is a JSON object; each key must match the event's key:
//! an object recurses, an array lists acceptable leaf values: literals
//! (equality), `{"exists": bool}`, `{"prefix": "..."}`,
//! `{"anything-but": value | [values]}`.

use serde_json::Value;

/// True if `event` matches `pattern`.
pub fn matches(pattern: &Value, event: &Value) -> bool {
    let Some(fields) = pattern.as_object() else {
        return false;
    };
    fields.iter().all(|(key, rule)| {
        let value = event.get(key);
        match rule {
            Value::Object(_) => value.is_some_and(|v| matches(rule, v)),
            Value::Array(options) => options.iter().any(|o| leaf(o, value)),
            _ => false,
        }
    })
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
    }
}
