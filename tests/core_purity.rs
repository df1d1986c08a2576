//! The core and its policy modules never do IO, read a clock, draw random
//! numbers or panic on input. This test reads their sources and fails on any
//! import or call that would break that, so the rule cannot rot silently.

use std::path::Path;

const CORE_DIRS: &[&str] = &["src/domain", "src/room", "src/sched", "src/market", "src/ckpt", "src/cost", "src/predict", "src/capacity"];

/// Builders for tests may unwrap; they never run in the product.
const EXEMPT: &[&str] = &["src/domain/testkit.rs"];

const FORBIDDEN: &[&str] = &[
    "std::time",
    "SystemTime",
    "Instant",
    "Utc::now",
    "Local::now",
    "chrono::Local",
    "use rand",
    "rand::",
    "rand_chacha",
    "tokio",
    "rusqlite",
    "std::fs",
    "std::net",
    "std::env",
    "std::process",
    "std::thread",
    "std::io",
    "println!",
    "eprintln!",
];

const PANICKY: &[&str] = &[".unwrap()", "panic!(", "todo!(", "unimplemented!(", "unreachable!("];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's text with every `#[cfg(test)]` item cut out (tests may do
/// anything). A cut item ends at a `;` before any brace (`mod x_tests;`) or
/// at the brace that closes its first `{`. Cut lines are kept blank so that
/// line numbers stay right.
fn product_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..start]);
        let item = &rest[start..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                '{' => depth += 1,
                '}' if depth == 1 => {
                    end = i + 1;
                    break;
                }
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Files that `file` declares as test-only modules (`#[cfg(test)]`, maybe a
/// `#[path = "…"]`, then `mod name;`), resolved as rustc does: a `#[path]`
/// beside the declaring file, else `name.rs` beside a `mod.rs`/`lib.rs` or
/// under a folder named after any other file. They are tests: exempt whole.
fn test_module_files(file: &Path, text: &str) -> Vec<std::path::PathBuf> {
    let dir = file.parent().unwrap_or(Path::new("."));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut found = Vec::new();
    for (start, _) in text.match_indices("#[cfg(test)]") {
        let mut path_attr = None;
        for line in text[start + "#[cfg(test)]".len()..].lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(p) = line.strip_prefix("#[path = \"").and_then(|r| r.strip_suffix("\"]")) {
                path_attr = Some(p.to_string());
            } else if line.starts_with("#[") {
                continue;
            } else {
                let declared = line.trim_start_matches("pub(crate) ").trim_start_matches("pub ");
                if let Some(name) = declared.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                    found.push(match path_attr {
                        Some(p) => dir.join(p),
                        None if stem == "mod" || stem == "lib" => dir.join(format!("{name}.rs")),
                        None => dir.join(stem).join(format!("{name}.rs")),
                    });
                }
                break;
            }
        }
    }
    found
}

#[test]
fn test_items_are_cut_but_code_after_them_is_kept() {
    let text = "use a;\n#[cfg(test)]\nmod tests {\n fn f() { x.unwrap(); }\n}\nfn late() { std::time::Instant::now(); }\n";
    let code = product_code(text);
    assert!(!code.contains("unwrap"));
    assert!(code.contains("Instant::now"));
    assert_eq!(code.lines().count(), text.lines().count());
}

#[test]
fn a_test_module_declared_by_name_is_cut_alone_and_its_file_is_found() {
    let text = "pub mod a;\n#[cfg(test)]\nmod a_tests;\npub use a::{X, Y};\nfn f() { y.unwrap(); }\n#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod tests;\n";
    let code = product_code(text);
    assert!(code.contains("pub use a::{X, Y};") && code.contains("y.unwrap()"), "only the declaration is cut: {code:?}");
    assert!(!code.contains("a_tests") && !code.contains("b_tests"));
    let files = test_module_files(Path::new("src/core/mod.rs"), text);
    assert_eq!(files, [Path::new("src/core/a_tests.rs"), Path::new("src/core/b_tests.rs")]);
    let nested = test_module_files(Path::new("src/tui/app.rs"), "#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod inline {\n}\n");
    assert_eq!(nested, [Path::new("src/tui/app/tests.rs")]);
}

#[test]
fn core_modules_do_no_io_read_no_clock_and_draw_no_random_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in CORE_DIRS {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() >= 15, "found the core's files: {files:?}");
    let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let tests: Vec<std::path::PathBuf> = files.iter().zip(&texts).flat_map(|(f, t)| test_module_files(f, t)).collect();
    let mut problems = Vec::new();
    for (file, text) in files.iter().zip(&texts) {
        if tests.contains(file) {
            continue;
        }
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        for (n, line) in product_code(text).lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for bad in FORBIDDEN {
                if code.contains(bad) {
                    problems.push(format!("{rel}:{}: `{bad}` in {:?}", n + 1, line.trim()));
                }
            }
            if !EXEMPT.contains(&rel.as_str()) {
                for bad in PANICKY {
                    if code.contains(bad) {
                        problems.push(format!("{rel}:{}: `{bad}` can panic on input: {:?}", n + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "the core must stay pure:\n{}", problems.join("\n"));
}
