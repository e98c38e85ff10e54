//! The crate's front page (README.md, the crate docs by `include_str!` in src/lib.rs)
//! renders on docs.rs, where a relative link or image has nothing to point at: every
//! link and image in README.md is an absolute URL (or an anchor on the page itself), and
//! each one into this repository names a file or folder that exists here. And its
//! Quickstart is examples/readme_quickstart.rs, which tests/standalone/examples.rs runs.

use std::path::Path;

/// Cargo.toml's `repository`, the base of every link into the repository.
const REPOSITORY: &str = "https://github.com/redlatch/redlatch";

/// Every link target in `markdown`: inline `[text](url)` / `![alt](url)`, reference
/// definitions `[label]: url`, and HTML `href="url"` / `src="url"`.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        let line_no = i + 1;
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let end = after.find(')').unwrap_or(after.len());
            // `[text](url "title")`: the URL is the first word.
            let url = after[..end].split_whitespace().next().unwrap_or("");
            found.push((line_no, url.to_string()));
            rest = &after[end..];
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
        {
            let url = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
            found.push((line_no, url.to_string()));
        }
        for attr in ["href=\"", "src=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attr) {
                let after = &rest[at + attr.len()..];
                let end = after.find('"').unwrap_or(after.len());
                found.push((line_no, after[..end].to_string()));
                rest = &after[end..];
            }
        }
    }
    found
}

/// Where a link into the repository points in this checkout, if it is one.
fn repository_path(url: &str) -> Option<String> {
    let raw = "https://raw.githubusercontent.com/redlatch/redlatch/main/";
    if let Some(path) = url.strip_prefix(raw) {
        return Some(path.to_string());
    }
    let rest = url.strip_prefix(REPOSITORY)?;
    let path = rest
        .strip_prefix("/blob/main/")
        .or_else(|| rest.strip_prefix("/tree/main/"))?;
    Some(path.split('#').next().unwrap_or(path).to_string())
}

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md is readable")
}

#[test]
fn the_repository_constant_is_cargo_toml_s() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("Cargo.toml is readable");
    assert!(
        manifest.contains(&format!("repository = \"{REPOSITORY}\"")),
        "Cargo.toml's `repository` is no longer {REPOSITORY}: update README.md's links and this test"
    );
}

#[test]
fn every_link_and_image_in_the_front_page_is_absolute() {
    let readme = readme();
    let targets = link_targets(&readme);
    assert!(
        targets.len() > 20,
        "the scanner found only {} links",
        targets.len()
    );
    let relative: Vec<_> = targets
        .iter()
        .filter(|(_, url)| {
            !(url.starts_with("https://") || url.starts_with("http://") || url.starts_with('#'))
        })
        .collect();
    assert!(
        relative.is_empty(),
        "relative links in README.md (broken on docs.rs; use {REPOSITORY}/blob/main/PATH): {relative:?}"
    );
}

#[test]
fn every_link_into_the_repository_names_a_file_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for (line, url) in link_targets(&readme()) {
        if url.starts_with(REPOSITORY) || url.starts_with("https://raw.githubusercontent.com/") {
            let path = repository_path(&url).unwrap_or_else(|| {
                panic!("README.md:{line}: {url} is not {REPOSITORY}/blob/main/.. or /tree/main/..")
            });
            assert!(
                root.join(&path).exists(),
                "README.md:{line}: {url}: no {path} here"
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} links into the repository");
}

#[test]
fn the_scanner_finds_relative_links() {
    // The checks above can fail: the scanner sees each kind of link.
    let sample = "![img](docs/a.png) and [x](BENCH.md \"t\")\n[ref]: lua/\n<img src=\"a.png\">";
    let urls: Vec<_> = link_targets(sample).into_iter().map(|(_, u)| u).collect();
    assert_eq!(urls, ["docs/a.png", "BENCH.md", "lua/", "a.png"]);
    assert_eq!(
        repository_path("https://github.com/redlatch/redlatch/blob/main/docs/cli.md#x").as_deref(),
        Some("docs/cli.md")
    );
}

#[test]
fn the_quickstart_is_the_example_that_runs() {
    let readme = readme();
    let start = readme.find("## Quickstart").expect("a Quickstart section");
    let block = &readme[start..];
    let code = block
        .find("```rust")
        .expect("a rust block in the Quickstart");
    let code = &block[code..];
    let code = &code[code.find('\n').unwrap() + 1..];
    let code = &code[..code.find("```").unwrap()];
    let example = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/readme_quickstart.rs"),
    )
    .expect("examples/readme_quickstart.rs");
    // Without its own doc comment and the attribute that keeps rustfmt off it.
    let example: String = example
        .lines()
        .filter(|l| !l.starts_with("//!") && !l.starts_with("#[rustfmt::skip]"))
        .skip_while(|l| l.is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        code, example,
        "README's Quickstart and examples/readme_quickstart.rs differ"
    );
}
