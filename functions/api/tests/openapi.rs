//! docs/openapi.yaml and the router cannot drift: the document lists
//! exactly the router's routes (method and path), declares every path
//! parameter, and gives every operation a problem-document answer.

use serde_yaml_ng::Value;
use std::collections::BTreeSet;

fn document() -> Value {
    let path = format!("{}/../../docs/openapi.yaml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml_ng::from_str(&text).unwrap()
}

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

fn operations(doc: &Value) -> Vec<(String, String, Value, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_mapping().unwrap() {
        let path = path.as_str().unwrap().to_owned();
        for (method, op) in item.as_mapping().unwrap() {
            let method = method.as_str().unwrap();
            if METHODS.contains(&method) {
                out.push((
                    method.to_uppercase(),
                    path.clone(),
                    op.clone(),
                    item["parameters"].clone(),
                ));
            }
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_routers_routes() {
    let doc = document();
    assert_eq!(doc["openapi"].as_str(), Some("3.1.0"));
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(m, p, _, _)| (m, p))
        .collect();
    let served: BTreeSet<(String, String)> = api::routes::routes()
        .into_iter()
        .map(|(m, p, _)| (m.to_string(), p.to_owned()))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn every_path_parameter_is_declared_and_every_operation_can_answer_a_problem() {
    let doc = document();
    let problem = "#/components/responses/Problem";
    for (method, path, op, shared) in operations(&doc) {
        let declared: BTreeSet<String> = [&op["parameters"], &shared]
            .into_iter()
            .filter_map(|p| p.as_sequence())
            .flatten()
            .map(|p| {
                let p = match p["$ref"].as_str() {
                    Some(r) => {
                        doc["components"]["parameters"][r.rsplit('/').next().unwrap()].clone()
                    }
                    None => p.clone(),
                };
                assert!(p["schema"].is_mapping(), "{method} {path}: {p:?}");
                p
            })
            .filter(|p| p["in"].as_str() == Some("path"))
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect();
        let in_path: BTreeSet<String> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .map(str::to_owned)
            .collect();
        assert_eq!(declared, in_path, "{method} {path}");
        let responses = op["responses"].as_mapping().unwrap();
        assert!(
            responses.iter().any(|(code, r)| {
                code.as_str().is_some_and(|c| c.starts_with('4'))
                    && r["$ref"].as_str() == Some(problem)
            }),
            "{method} {path} has no problem answer"
        );
        assert!(op["operationId"].is_string(), "{method} {path}");
    }
}

#[test]
fn the_documented_statuses_are_the_tasks() {
    let doc = document();
    let documented: Vec<String> = doc["components"]["schemas"]["Status"]["enum"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    let every: Vec<String> = lifo_core::TaskStatus::ALL
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    // A client generated from the document must parse every status the
    // server answers (EXPIRED and SUPERSEDED were missing).
    assert_eq!(documented, every);
}

/// Issue 51, item 20: the words a route has where another has `{taskId}`
/// (`POST /tasks/retry` beside `/tasks/{taskId}`) are the ones create
/// refuses as ids and paths name encoded (`lifo_ops::path_id::ROUTE_WORDS`).
#[test]
fn the_route_words_create_refuses_are_the_routers() {
    let routes: Vec<Vec<&str>> = api::routes::routes()
        .into_iter()
        .map(|(_, p, _)| p.split('/').collect())
        .collect();
    let mut words = BTreeSet::new();
    for with_param in &routes {
        for (i, seg) in with_param.iter().enumerate() {
            if !seg.starts_with('{') {
                continue;
            }
            for other in &routes {
                if other.len() > i && other[..i] == with_param[..i] && !other[i].starts_with('{') {
                    words.insert(other[i].to_owned());
                }
            }
        }
    }
    let known: BTreeSet<String> = lifo_ops::path_id::ROUTE_WORDS
        .iter()
        .map(|w| (*w).to_owned())
        .collect();
    assert_eq!(words, known);
}

/// Issue 51, item 24: a pause takes effect within one `PAUSE_POLL_MS` of
/// each processor; the document's operation and docs/api.md say so, with
/// the default process reads.
#[test]
fn pause_states_its_delay_wherever_pause_is() {
    let poll = process::ProcessConfig::new("t", "a").pause_poll;
    let said = format!("{} s", poll.as_secs());
    let doc = document();
    let op = &doc["paths"]["/queue/pause"]["post"];
    let text = format!(
        "{} {}",
        op["summary"].as_str().unwrap_or(""),
        op["description"].as_str().unwrap_or("")
    );
    assert!(
        text.contains(&said) && text.contains("PAUSE_POLL_MS"),
        "openapi.yaml's pauseQueue: {text}"
    );
    let path = format!("{}/../../docs/api.md", env!("CARGO_MANIFEST_DIR"));
    let api_md = std::fs::read_to_string(path).unwrap();
    let row = api_md
        .lines()
        .find(|l| l.starts_with("| `POST /queue/pause`"))
        .unwrap();
    assert!(
        row.contains(&said) && row.contains("PAUSE_POLL_MS"),
        "docs/api.md: {row}"
    );
}
