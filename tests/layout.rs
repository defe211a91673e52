//! docs/development.md's layout is the workspace as it is: every crate,
//! function, example and top-level folder has its line there, and every
//! path the layout names exists.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace holds tests/")
}

/// The lines of the code block under "## Layout".
fn layout() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/development.md")).expect("development.md");
    let section = doc.split("\n## Layout\n").nth(1).expect("a Layout section");
    let block = section.split("```").nth(1).expect("a code block");
    block.lines().map(str::to_owned).collect()
}

/// Folders below `dir` (or the root), not hidden and not build output.
fn folders(dir: &str) -> Vec<String> {
    let base = root().join(dir);
    let mut out: Vec<String> = std::fs::read_dir(&base)
        .expect("readable")
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !["target", "node_modules"].contains(&n.as_str()))
        .map(|n| {
            if dir.is_empty() {
                n
            } else {
                format!("{dir}/{n}")
            }
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_crate_function_example_and_folder_has_its_line() {
    let lines = layout();
    let named = |path: &str| {
        lines
            .iter()
            .any(|l| l.starts_with(&format!("{path} ")) || l.starts_with(&format!("{path}/ ")))
    };
    let mut missing = Vec::new();
    for dir in folders("") {
        let grouped = ["crates", "functions", "examples"].contains(&dir.as_str());
        if !grouped && !named(&dir) {
            missing.push(dir);
        }
    }
    for group in ["crates", "functions", "examples"] {
        for dir in folders(group) {
            if !named(&dir) && !named(group) {
                missing.push(dir);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/development.md's layout lacks {missing:?}: give each a line saying what lives there"
    );
}

#[test]
fn every_path_the_layout_names_exists() {
    for line in layout() {
        let Some(path) = line.split_whitespace().next() else {
            continue;
        };
        if line.starts_with(' ') || !path.contains(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        let path = path.trim_end_matches('/');
        assert!(
            root().join(path).exists(),
            "docs/development.md's layout names {path}, which does not exist"
        );
    }
}

/// The house's table (docs/development.md): each crate's role is one
/// sentence, and each crate of the workspace has its row (its layer is
/// checked by tests/architecture.rs).
#[test]
fn each_crate_has_a_role_of_one_sentence() {
    let doc = std::fs::read_to_string(root().join("docs/development.md")).expect("development.md");
    let house = doc
        .split("\n## The house\n")
        .nth(1)
        .expect("a house section");
    let house = house.split("\n## ").next().unwrap_or("");
    let mut rows = Vec::new();
    for line in house.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (dir, role) = (cells[1].trim_matches('`'), cells[3]);
        assert!(
            root().join(dir).join("Cargo.toml").exists(),
            "{dir} is no crate"
        );
        assert!(role.ends_with('.'), "{dir}: {role}");
        let body = &role[..role.len() - 1];
        assert!(
            !body.contains(". ") && !body.contains("; "),
            "{dir}'s role is more than one sentence: {role}"
        );
        rows.push(dir.to_owned());
    }
    for group in ["crates", "functions"] {
        for dir in folders(group) {
            assert!(rows.contains(&dir), "{dir} has no row in the house's table");
        }
    }
    assert!(rows.contains(&"tests".to_owned()));
}

/// Every suite file in `tests/` is a module of the suites binary (or the
/// chaos binary, or the harness): a file named nowhere would never be
/// compiled, and its tests would silently never run.
#[test]
fn every_suite_file_is_compiled_into_a_test_binary() {
    let dir = root().join("tests");
    let suites = std::fs::read_to_string(dir.join("suites.rs")).expect("tests/suites.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/ is readable") {
        let path = entry.expect("an entry of tests/").path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let binaries = ["suites", "chaos", "support"];
        if path.extension().is_some_and(|e| e == "rs")
            && !binaries.contains(&name)
            && !suites.contains(&format!("\nmod {name};\n"))
        {
            missing.push(name.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "add `mod …;` to tests/suites.rs for {missing:?}"
    );
}
