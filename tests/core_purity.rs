//! The core and its policy modules never do IO, read a clock, draw random
//! numbers or panic on input. This test reads their sources and fails on any
//! import or call that would break that, so the rule cannot rot silently.

use std::path::Path;

const CORE_DIRS: &[&str] = &["src/core", "src/sched", "src/market", "src/ckpt", "src/cost", "src/predict"];

/// Builders for tests may unwrap; they never run in the product.
const EXEMPT: &[&str] = &["src/core/testkit.rs"];

const FORBIDDEN: &[&str] = &[
    "std::time", "SystemTime", "Instant", "Utc::now", "Local::now", "chrono::Local", "use rand", "rand::", "rand_chacha",
    "tokio", "rusqlite", "std::fs", "std::net", "std::env", "std::process", "std::thread", "std::io", "println!", "eprintln!",
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
/// anything); the cut item runs to the brace that closes its first `{`.
/// Cut lines are kept blank so that line numbers stay right.
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

#[test]
fn test_items_are_cut_but_code_after_them_is_kept() {
    let text = "use a;\n#[cfg(test)]\nmod tests {\n fn f() { x.unwrap(); }\n}\nfn late() { std::time::Instant::now(); }\n";
    let code = product_code(text);
    assert!(!code.contains("unwrap"));
    assert!(code.contains("Instant::now"));
    assert_eq!(code.lines().count(), text.lines().count());
}

#[test]
fn core_modules_do_no_io_read_no_clock_and_draw_no_random_numbers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in CORE_DIRS {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() >= 15, "found the core's files: {files:?}");
    let mut problems = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in product_code(&text).lines().enumerate() {
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
