//! The house's rules, over every crate of the workspace (docs/development.md
//! draws it):
//!
//! - **No upward imports between crates.** Each crate sits in a layer (the
//!   house's table in docs/development.md, read here) and depends (outside
//!   its tests) only on crates of lower layers: `lifo-core` (the protocol
//!   and its storage) < `lifo-lambda` (Lambda plumbing) < `lifo-ops` (the
//!   operations people drive) < the five function crates < `lifo-local`
//!   (the local stack) < `lifo-lab` < `lifo-cli`. No function crate depends
//!   on another.
//! - **No import circles inside a crate.** No module imports a module that
//!   imports it back, directly or around a longer circle.
//! - **A library's root only declares** its modules and what it re-exports.
//! - **The lab depends on the product, never the reverse**: only the `lifo`
//!   command and the suites depend on `lifo-lab`.
//! - **The claim policy's words stay in the processor.** `lifo-lambda` and
//!   `trigger` name no tenant and nothing that floods (the processor's
//!   handover passes through them unread); `lifo-core` names nothing that
//!   floods, and of tenants only the task's stored attribute, `tenant`.
//!
//! A module is a file; an import is any `crate::…` or `super::…` path in
//! its code (comments aside), resolved to the file that defines it; a path
//! to an item the crate root re-exports resolves to the module it comes
//! from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds tests/")
        .to_owned()
}

/// The workspace's crates, each with its name, folder and layer, from the
/// house's table in docs/development.md (the package name is its
/// Cargo.toml's).
fn layers() -> Vec<(String, String, u32)> {
    let doc = std::fs::read_to_string(root().join("docs/development.md")).expect("development.md");
    let house = doc
        .split("\n## The house\n")
        .nth(1)
        .expect("a house section");
    house
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let dir = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            let layer: u32 = cells.get(2)?.parse().ok()?;
            let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).ok()?;
            let name = manifest
                .lines()
                .find_map(|l| l.trim().strip_prefix("name = "))?
                .trim_matches('"')
                .to_owned();
            Some((name, dir.to_owned(), layer))
        })
        .collect()
}

/// The crates whose library root only declares modules and re-exports.
const DECLARING_ROOTS: &[&str] = &[
    "lifo-core",
    "lifo-lambda",
    "lifo-ops",
    "process",
    "lifo-lab",
    "lifo-cli",
];

/// Every .rs file under `dir`, as its module path ("" for lib.rs,
/// "ui" for ui/mod.rs, "ui::pages" for ui/pages.rs); binaries (main.rs,
/// bin/) are crates of their own.
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
            if prefix.is_empty() && name == "bin" {
                continue;
            }
            modules(&p, &join(&name), out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let module = match name.as_str() {
                "lib" | "support" if prefix.is_empty() => String::new(),
                "main" if prefix.is_empty() => continue,
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
        // A word that ends in the anchor (`my_crate::`) is not it.
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

/// What the crate root re-exports: item name → the module it comes from
/// (`pub use processor::Processor;` gives `Processor` → `processor`).
fn reexports(root_code: &str, mods: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in root_code.split(';') {
        let Some(path) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim();
        let (base, items): (&str, Vec<&str>) = match path.split_once("::{") {
            Some((base, group)) => (
                base,
                group
                    .trim_end_matches('}')
                    .split(',')
                    .map(str::trim)
                    .collect(),
            ),
            None => match path.rsplit_once("::") {
                Some((base, item)) => (base, vec![item]),
                None => continue,
            },
        };
        let module = resolve("", base, mods);
        for item in items.into_iter().filter(|i| !i.is_empty()) {
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            out.insert(name.to_owned(), module.clone());
        }
    }
    out
}

/// The import graph of the crate in `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut mods = BTreeMap::new();
    modules(src, "", &mut mods);
    let root_code = mods
        .get("")
        .map(|f| code(&std::fs::read_to_string(f).unwrap_or_default()))
        .unwrap_or_default();
    let reexported = reexports(&root_code, &mods);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &mods {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        // Tests beside the code may reach anywhere.
        let text = text.split("#[cfg(test)]\nmod tests {").next().unwrap_or("");
        let code = code(text);
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        let mut to = BTreeSet::new();
        for p in paths(&code, "crate::") {
            let first = p.split("::").next().unwrap_or("");
            match reexported.get(first) {
                Some(m) if !mods.contains_key(first) => to.insert(m.clone()),
                _ => to.insert(resolve("", &p, &mods)),
            };
        }
        for p in paths(&code, "super::") {
            to.insert(resolve(parent, &p, &mods));
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

/// The keys of `section` in a Cargo.toml (`name.workspace = true` and
/// `name = …` give `name`).
fn keys(manifest: &str, section: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let key = line.split(['=', '.']).next().unwrap_or("").trim();
            out.push(key.trim_matches('"').to_owned());
        }
    }
    out
}

/// The workspace crates `manifest` depends on outside its tests.
fn dependencies(manifest: &str) -> Vec<String> {
    keys(manifest, "dependencies")
        .into_iter()
        .filter(|k| layers().iter().any(|(n, _, _)| n == k))
        .collect()
}

#[test]
fn every_crate_of_the_workspace_has_its_layer() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let list = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = ["))
        .expect("a members list");
    let mut members: Vec<String> = Vec::new();
    for m in list.trim_end_matches(']').split(',') {
        let m = m.trim().trim_matches('"');
        if m.is_empty() {
            continue;
        }
        match m.strip_suffix("/*") {
            Some(dir) => {
                for e in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
                    if e.path().join("Cargo.toml").exists() {
                        members.push(format!("{dir}/{}", e.file_name().to_string_lossy()));
                    }
                }
            }
            None => members.push(m.to_owned()),
        }
    }
    members.sort();
    let mut layered: Vec<String> = layers().into_iter().map(|(_, d, _)| d).collect();
    layered.sort();
    assert_eq!(
        members, layered,
        "a crate without a layer, or a layer without a crate"
    );
}

#[test]
fn no_crate_depends_on_a_crate_above_it_or_on_another_function() {
    let layers = layers();
    let mut upward = Vec::new();
    for (krate, dir, layer) in &layers {
        let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        for dep in dependencies(&manifest) {
            let (_, _, dep_layer) = layers.iter().find(|(n, _, _)| *n == dep).unwrap();
            if dep_layer >= layer {
                upward.push(format!(
                    "{krate} (layer {layer}) -> {dep} (layer {dep_layer})"
                ));
            }
        }
    }
    assert!(upward.is_empty(), "upward imports:\n{}", upward.join("\n"));
}

#[test]
fn no_module_imports_a_module_that_imports_it_back_in_any_crate() {
    let mut circles = Vec::new();
    let mut modules_seen = 0;
    for (krate, dir, _) in layers() {
        let src = if dir == "tests" {
            root().join(dir)
        } else {
            root().join(dir).join("src")
        };
        let edges = graph(&src);
        modules_seen += edges.len();
        for start in edges.keys() {
            let mut path = vec![start.clone()];
            if let Some(c) = circle(&edges, start, start, &mut path, &mut BTreeSet::new()) {
                circles.push(format!(
                    "{krate}: {}",
                    c.iter().map(|m| name(m)).collect::<Vec<_>>().join(" -> ")
                ));
            }
        }
    }
    assert!(modules_seen > 150, "found only {modules_seen} modules");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn a_librarys_root_only_declares_modules_and_reexports() {
    let layers = layers();
    for krate in DECLARING_ROOTS {
        let (_, dir, _) = layers.iter().find(|(n, _, _)| n == krate).unwrap();
        let lib = std::fs::read_to_string(root().join(dir).join("src/lib.rs")).unwrap();
        for line in code(&lib).lines().map(str::trim).filter(|l| !l.is_empty()) {
            assert!(
                line.starts_with("pub mod ")
                    || line.starts_with("mod ")
                    || line.starts_with("pub use ")
                    || line.starts_with("#[cfg("),
                "{krate}'s lib.rs: {line}"
            );
        }
    }
}

/// The identifiers in `code` (comments and strings already out) that
/// contain one of `words` (any case), but for those `allowed` exactly.
fn named(code: &str, words: &[&str], allowed: &[&str]) -> BTreeSet<String> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|id| {
            let lower = id.to_lowercase();
            words.iter().any(|w| lower.contains(w)) && !allowed.contains(id)
        })
        .map(str::to_owned)
        .collect()
}

/// Every .rs file under `dir`, tests included.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn the_lab_depends_on_the_product_never_the_reverse() {
    let layers = layers();
    let (_, _, lab) = layers
        .iter()
        .find(|(n, _, _)| n == "lifo-lab")
        .expect("lifo-lab has a layer");
    let mut wrong = Vec::new();
    for (krate, dir, layer) in &layers {
        let manifest = std::fs::read_to_string(root().join(dir).join("Cargo.toml")).unwrap();
        let on_lab = ["dependencies", "dev-dependencies"]
            .iter()
            .any(|section| keys(&manifest, section).iter().any(|k| k == "lifo-lab"));
        let user = krate == "lifo-cli" || krate == "lifo-tests";
        if on_lab && !user {
            wrong.push(format!("{krate} depends on lifo-lab"));
        }
        if !user && krate != "lifo-lab" && layer >= lab {
            wrong.push(format!(
                "{krate} (layer {layer}) sits at or above the lab ({lab})"
            ));
        }
    }
    let lab_manifest = std::fs::read_to_string(root().join("crates/lifo-lab/Cargo.toml")).unwrap();
    assert!(
        dependencies(&lab_manifest).contains(&"process".to_owned()),
        "the lab runs the processor"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_claim_policy_s_words_stay_in_the_processor() {
    // (crate folder, words it must not name, the names it may).
    let rules: [(&str, &[&str], &[&str]); 3] = [
        ("crates/lifo-lambda", &["tenant", "flood"], &[]),
        ("functions/trigger", &["tenant", "flood"], &[]),
        // The task's attribute, as stored and projected into the index.
        (
            "crates/lifo-core",
            &["tenant", "flood"],
            &["tenant", "TENANT"],
        ),
    ];
    let mut found = Vec::new();
    for (dir, words, allowed) in rules {
        let mut files = Vec::new();
        rust_files(&root().join(dir).join("src"), &mut files);
        assert!(!files.is_empty(), "{dir}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for id in named(&code(&text), words, allowed) {
                found.push(format!(
                    "{}: {id}",
                    f.strip_prefix(root()).unwrap_or(&f).display()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "names that belong to the claim policy:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checker_sees_a_circle_and_an_upward_import_when_there_is_one() {
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
    let re = reexports(
        &code("pub use ui::x::Thing;\npub use b::{One, Two as T};"),
        &mods,
    );
    assert_eq!(re["Thing"], "ui::x");
    assert_eq!(re["T"], "b");
    let edges = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    let mut path = vec!["a".to_owned()];
    assert_eq!(
        circle(&edges, "a", "a", &mut path, &mut BTreeSet::new()),
        Some(vec!["a".to_owned(), "b".to_owned(), "a".to_owned()])
    );
    let manifest = "[dependencies]\nlifo-cli.workspace = true\nserde = \"1\"\n\n[dev-dependencies]\nlifo-local.workspace = true\n";
    assert_eq!(dependencies(manifest), ["lifo-cli"]);
    let policy =
        code("pub tenant: Option<String>, // a tenant_name\nfn flooding(t: &TenantHead) {}");
    let got = named(&policy, &["tenant", "flood"], &["tenant"]);
    assert_eq!(
        got,
        BTreeSet::from(["TenantHead".to_owned(), "flooding".to_owned()])
    );
}
