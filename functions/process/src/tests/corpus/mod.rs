//! The scenario corpus: scripted workloads (`tests/corpus/*.txt`), each
//! run under several configurations, and what the selection picked and
//! read in each (`tests/corpus/*.expected`). A change that moves a pick
//! fails here; `CORPUS_RECORD=1` writes the files anew (for a change whose
//! picks are meant to move: say which and why in its commit).

mod driver;
mod index;
mod script;
mod stacked;

use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Every script's transcript under each of its configurations.
fn transcripts(start: driver::Start) -> Vec<(PathBuf, String)> {
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    scripts.sort();
    scripts
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a script");
            let script = script::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut out = String::new();
            for config in &script.configs {
                out.push_str(&format!("== {}\n", config.label));
                for line in driver::run(&script, config, start) {
                    out.push_str(&line);
                    out.push('\n');
                }
            }
            (path.with_extension("expected"), out)
        })
        .collect()
}

#[test]
fn the_corpus_picks_what_it_recorded() {
    let record = std::env::var_os("CORPUS_RECORD").is_some();
    let mut scenarios = 0;
    let mut moved = Vec::new();
    for (expected, got) in transcripts(stacked::start) {
        scenarios += got.lines().filter(|l| l.starts_with("== ")).count();
        if record {
            std::fs::write(&expected, &got).expect("writing the corpus");
            continue;
        }
        let want = std::fs::read_to_string(&expected).unwrap_or_default();
        if want != got {
            let first = want
                .lines()
                .zip(got.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(want.lines().count().min(got.lines().count()));
            moved.push(format!(
                "{} line {}:\n  recorded: {}\n  now:      {}",
                expected.display(),
                first + 1,
                want.lines().nth(first).unwrap_or("(none)"),
                got.lines().nth(first).unwrap_or("(none)")
            ));
        }
    }
    assert!(scenarios >= 50, "{scenarios} scenarios");
    assert!(moved.is_empty(), "picks moved:\n{}", moved.join("\n"));
}
