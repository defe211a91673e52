//! The layering of the `lifo` command: no module imports a module that
//! imports it back (directly or around a longer circle). The operations
//! live below, in `lifo-ops`; the faces (the command line, the console)
//! sit on top and the crate root only declares modules.
//!
//! A module is a file; an import is any `crate::…` or `super::…` path in
//! its code (comments aside), resolved to the file that defines it (a
//! path through the crate root or a `mod.rs` to an item defined there
//! counts as an import of that file).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every .rs file under `dir`, as its module path ("" for lib.rs,
/// "ui" for ui/mod.rs, "ui::pages" for ui/pages.rs).
fn modules(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = p
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_owned();
        let join = |n: &str| {
            if prefix.is_empty() {
                n.to_owned()
            } else {
                format!("{prefix}::{n}")
            }
        };
        if p.is_dir() {
            modules(&p, &join(&name), out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let module = match name.as_str() {
                "lib" if prefix.is_empty() => String::new(),
                "main" if prefix.is_empty() => continue, // a crate of its own
                "mod" => prefix.to_owned(),
                _ => join(&name),
            };
            out.insert(module, p);
        }
    }
}

/// The code of a file without comments and string literals.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut in_str = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The paths after each `crate::`/`super::` in `code`, braces expanded
/// one level deep (`crate::{a, b::c}` gives `a` and `b::c`).
fn paths(code: &str, anchor: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(anchor) {
        // `super::super::` and `self::` are not used here; a word that ends
        // in the anchor (`my_crate::`) is not it.
        let before = rest[..i].chars().last();
        rest = &rest[i + anchor.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let p: String = part
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                if !p.is_empty() {
                    found.push(p);
                }
            }
        } else {
            let p: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            found.push(p.trim_end_matches(':').to_owned());
        }
    }
    found
}

/// The module a path from `base` lands in: the longest prefix that is a
/// module (an item of a module is that module).
fn resolve(base: &str, path: &str, mods: &BTreeMap<String, PathBuf>) -> String {
    let mut segments: Vec<&str> = if base.is_empty() {
        Vec::new()
    } else {
        base.split("::").collect()
    };
    let mut best = base.to_owned();
    for seg in path.split("::").filter(|s| !s.is_empty()) {
        segments.push(seg);
        let candidate = segments.join("::");
        if mods.contains_key(&candidate) {
            best = candidate;
        } else {
            break;
        }
    }
    best
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut mods = BTreeMap::new();
    modules(&src(), "", &mut mods);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        // Tests beside the code may reach anywhere.
        let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        let code = code(text);
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        // `super` of ui/mod.rs is the crate root; of ui/pages.rs, ui.
        let super_base = parent;
        let mut to = BTreeSet::new();
        for p in paths(&code, "crate::") {
            to.insert(resolve("", &p, &mods));
        }
        for p in paths(&code, "super::") {
            to.insert(resolve(super_base, &p, &mods));
        }
        to.remove(module);
        edges.insert(module.clone(), to);
    }
    edges
}

/// A circle through `start`, if any.
fn circle(
    edges: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    at: &str,
    path: &mut Vec<String>,
    seen: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    for next in edges.get(at).into_iter().flatten() {
        if next == start {
            let mut c = path.clone();
            c.push(start.to_owned());
            return Some(c);
        }
        if seen.insert(next.clone()) {
            path.push(next.clone());
            if let Some(c) = circle(edges, start, next, path, seen) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

fn name(m: &str) -> &str {
    if m.is_empty() { "(crate root)" } else { m }
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let edges = graph();
    assert!(edges.len() > 20, "found only {:?}", edges.keys());
    let mut circles = Vec::new();
    for start in edges.keys() {
        let mut path = vec![start.clone()];
        if let Some(c) = circle(&edges, start, start, &mut path, &mut BTreeSet::new()) {
            circles.push(c.iter().map(|m| name(m)).collect::<Vec<_>>().join(" -> "));
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checker_sees_a_circle_when_there_is_one() {
    // The parsing and resolution on a made-up pair of files.
    let mods: BTreeMap<String, PathBuf> = ["", "a", "b", "ui", "ui::x"]
        .iter()
        .map(|m| (m.to_string(), PathBuf::new()))
        .collect();
    let a = code("use crate::{b::Thing, ui};\n// crate::nothing\nlet s = \"crate::no\";");
    let found: Vec<String> = paths(&a, "crate::")
        .iter()
        .map(|p| resolve("", p, &mods))
        .collect();
    assert_eq!(found, ["b", "ui"]);
    assert_eq!(resolve("ui", "Console", &mods), "ui");
    assert_eq!(resolve("ui", "x::f", &mods), "ui::x");
    let edges = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    let mut path = vec!["a".to_owned()];
    assert_eq!(
        circle(&edges, "a", "a", &mut path, &mut BTreeSet::new()),
        Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()])
    );
}

#[test]
fn the_crate_root_only_declares_modules() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap_or_default();
    for line in code(&lib).lines().map(str::trim).filter(|l| !l.is_empty()) {
        assert!(
            line.starts_with("pub mod ") || line.starts_with("mod "),
            "lib.rs: {line}"
        );
    }
}
