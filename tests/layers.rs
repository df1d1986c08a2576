//! The crate is a house whose floors only look down: the domain imports
//! nothing of the crate; the policies (`sched`, `market`, `ckpt`, `cost`,
//! `predict`, `capacity`) import the domain and never each other or the room;
//! the room imports policies and domain; the edges (engine, store, sim,
//! sources, live, host, tui, bench, …) sit on top. And no two files import
//! each other, directly or round a circle, on any floor.
//!
//! This test reads the crate's own `use` lines and paths (`crate::…`,
//! `super::…`, child modules, re-exports followed to the file that defines
//! the item), builds the file-level import graph, and fails on a downward
//! rule broken or a circle. It uses only the standard library, so it can also
//! be built alone (`rustc --test tests/layers.rs`) to print the graph:
//! `LAYERS_PRINT=1 cargo test --test layers -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, lowest first. A top-level module not named here is an edge.
const FLOORS: &[(&str, &[&str])] = &[("domain", &["domain"]), ("policies", &["sched", "market", "ckpt", "cost", "predict", "capacity"]), ("room", &["room"])];
const EDGE_FLOOR: usize = 3;
const POLICY_FLOOR: usize = 1;

fn floor_of(module: &str) -> usize {
    let top = module.split("::").next().unwrap_or("");
    FLOORS.iter().position(|(_, tops)| tops.contains(&top)).unwrap_or(EDGE_FLOOR)
}

fn floor_name(floor: usize) -> &'static str {
    FLOORS.get(floor).map_or("edges", |(name, _)| name)
}

// ---------------------------------------------------------------- source text

/// The text with comments, string and char literals blanked (newlines kept),
/// so that a path in a doc comment or a message is not an import.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    out.extend_from_slice(b"  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && !ident_byte(b, i.wrapping_sub(1)) {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&b'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &x in &b[i..j.min(b.len())] {
                blank(&mut out, x);
            }
            i = j;
        } else if c == b'"' {
            out.push(b' ');
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(b' ');
            i += 1;
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\''), or a lifetime ('a) left alone.
            if b.get(i + 1) == Some(&b'\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += 1;
                }
                out.extend(std::iter::repeat_n(b' ', j + 1 - i));
                i = j + 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                out.extend_from_slice(b"   ");
                i += 3;
            } else {
                // Multi-byte chars: find the closing quote within 5 bytes.
                let close = (i + 2..(i + 6).min(b.len())).find(|&j| b[j] == b'\'');
                match close {
                    Some(j) if !b[i + 1].is_ascii() => {
                        out.extend(std::iter::repeat_n(b' ', j + 1 - i));
                        i = j + 1;
                    }
                    _ => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident_byte(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// The code with every `#[cfg(test)]` item cut (tests may reach anywhere;
/// their files, declared `#[cfg(test)] mod x;`, are skipped whole).
fn product_code(code: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(start) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..start]);
        let item = &rest[start..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                ';' if depth == 0 => {
                    end = i + 1;
                    let decl = item[..end].split_whitespace().collect::<Vec<_>>();
                    if let Some(pos) = decl.iter().position(|w| *w == "mod") {
                        test_mods.push(decl.get(pos + 1).map(|n| n.trim_end_matches(';').to_string()).unwrap_or_default());
                    }
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
    (out, test_mods)
}

// ---------------------------------------------------------------- modules

struct Module {
    file: PathBuf,
    /// Product code only: comments, literals and test items gone.
    code: String,
    /// Child modules declared here (`mod x;`), not test-only ones.
    children: BTreeSet<String>,
    /// `pub use` re-exports: the name seen from outside → the path it names.
    reexports: BTreeMap<String, Vec<String>>,
    /// Globs re-exported (`pub use x::*`).
    reexport_globs: Vec<Vec<String>>,
}

fn module_path_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `use` trees of the code, expanded to paths (each a list of segments;
/// `self` inside braces names the prefix itself), with whether each is `pub`.
fn use_paths(code: &str) -> Vec<(bool, Vec<String>, Option<String>)> {
    let mut found = Vec::new();
    let b = code.as_bytes();
    let mut search = 0;
    while let Some(pos) = code[search..].find("use ") {
        let at = search + pos;
        search = at + 4;
        if ident_byte(b, at.wrapping_sub(1)) {
            continue;
        }
        let before = code[..at].trim_end();
        let is_pub = before.ends_with("pub") || before.ends_with("pub(crate)") || before.ends_with("pub(super)");
        let stmt_start = before.trim_end_matches("pub(crate)").trim_end_matches("pub(super)").trim_end_matches("pub").trim_end();
        if !(stmt_start.is_empty() || stmt_start.ends_with(';') || stmt_start.ends_with('{') || stmt_start.ends_with('}') || stmt_start.ends_with(']')) {
            continue;
        }
        let Some(end) = code[at..].find(';') else { break };
        // Whitespace matters only around `as`: keep it there as one space.
        let tree = code[at + 4..at + end].split_whitespace().collect::<Vec<_>>().join(" ");
        let tree = tree.replace(" as ", "\u{1}").replace(' ', "");
        let mut paths = Vec::new();
        expand_tree(&tree, &mut Vec::new(), &mut paths);
        for (path, alias) in paths {
            found.push((is_pub, path, alias));
        }
        search = at + end;
    }
    found
}

fn expand_tree(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, Option<String>)>) {
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let n = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut last = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_tree(&inner[last..i], prefix, out);
                    last = i + 1;
                }
                _ => {}
            }
        }
        expand_tree(&inner[last..], prefix, out);
        prefix.truncate(n);
    } else if !tree.is_empty() {
        let (path, alias) = match tree.split_once('\u{1}') {
            Some((p, a)) => (p, Some(a.to_string())),
            None => (tree, None),
        };
        let mut full = prefix.clone();
        for seg in path.split("::").filter(|s| !s.is_empty()) {
            if seg != "self" || full.is_empty() {
                full.push(seg.to_string());
            }
        }
        out.push((full, alias));
    }
}

/// A path as written in `module` → absolute segments from the crate root, or
/// None for an outside crate or a name this test cannot place.
fn absolute(module: &str, children: &BTreeSet<String>, path: &[String], bin: bool) -> Option<Vec<String>> {
    let here: Vec<String> = if module.is_empty() { vec![] } else { module.split("::").map(String::from).collect() };
    let first = path.first()?;
    let mut base = match first.as_str() {
        "crate" => vec![],
        "gpuroom" if bin => vec![],
        "self" => here.clone(),
        "super" => {
            let mut up = here.clone();
            let mut i = 0;
            while path.get(i).is_some_and(|s| s == "super") {
                up.pop();
                i += 1;
            }
            up.extend(path[i..].iter().cloned());
            return Some(up);
        }
        name if children.contains(name) => {
            let mut p = here.clone();
            p.push(name.to_string());
            p.extend(path[1..].iter().cloned());
            return Some(p);
        }
        _ => return None,
    };
    base.extend(path[1..].iter().cloned());
    Some(base)
}

struct Graph {
    modules: BTreeMap<String, Module>,
}

impl Graph {
    fn load(root: &Path) -> Graph {
        let src = root.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut raw: BTreeMap<String, (PathBuf, String, Vec<String>)> = BTreeMap::new();
        let mut test_files = BTreeSet::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let code = code_only(&text);
            // `#[path = "x.rs"]` test modules: their attribute survives code_only as `#[path =   ]`,
            // so read the attribute from the original text.
            for (at, _) in text.match_indices("#[cfg(test)]") {
                if let Some(p) = text[at..].lines().nth(1).and_then(|l| l.trim().strip_prefix("#[path = \"")).and_then(|r| r.strip_suffix("\"]")) {
                    test_files.insert(file.parent().unwrap().join(p));
                }
            }
            let (product, test_mods) = product_code(&code);
            for name in test_mods {
                let dir =
                    if file.file_stem().is_some_and(|s| s == "mod" || s == "lib") { file.parent().unwrap().to_path_buf() } else { file.with_extension("") };
                test_files.insert(file.parent().unwrap().join(format!("{name}.rs")));
                test_files.insert(dir.join(format!("{name}.rs")));
                test_files.insert(dir.join(name).join("mod.rs"));
            }
            let module = if file.ends_with("src/main.rs") { "main".to_string() } else { module_path_of(&src, file) };
            raw.insert(module, (file.clone(), product, vec![]));
        }
        let mut modules = BTreeMap::new();
        for (name, (file, code, _)) in raw {
            if test_files.contains(&file) {
                continue;
            }
            let children = child_decls(&code);
            modules.insert(name, Module { file, code, children, reexports: BTreeMap::new(), reexport_globs: vec![] });
        }
        let names: Vec<String> = modules.keys().cloned().collect();
        for name in names {
            let m = &modules[&name];
            let mut reexports = BTreeMap::new();
            let mut globs = Vec::new();
            for (is_pub, path, alias) in use_paths(&m.code) {
                if !is_pub {
                    continue;
                }
                let Some(abs) = absolute(&name, &m.children, &path, name == "main") else { continue };
                if abs.last().is_some_and(|s| s == "*") {
                    globs.push(abs[..abs.len() - 1].to_vec());
                } else if let Some(last) = alias.or_else(|| abs.last().cloned()) {
                    reexports.insert(last, abs);
                }
            }
            let m = modules.get_mut(&name).unwrap();
            m.reexports = reexports;
            m.reexport_globs = globs;
        }
        Graph { modules }
    }

    /// The module (file) that defines what an absolute path names, following
    /// `pub use` re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        let (module, rest) = (0..=path.len()).rev().find_map(|n| {
            let name = path[..n].join("::");
            self.modules.contains_key(&name).then(|| (name, &path[n..]))
        })?;
        if depth < 8
            && let Some(first) = rest.first()
        {
            let m = &self.modules[&module];
            if let Some(target) = m.reexports.get(first) {
                let mut next = target.clone();
                next.extend(rest[1..].iter().cloned());
                if next != path {
                    return self.resolve(&next, depth + 1);
                }
            }
            for glob in &m.reexport_globs {
                let mut next = glob.clone();
                next.extend(rest.iter().cloned());
                if let Some(found) = self.resolve(&next, depth + 1)
                    && found != module
                    && self.modules[&found].defines(first)
                {
                    return Some(found);
                }
            }
        }
        Some(module)
    }

    /// Each module → the modules it imports, with one path that shows it.
    fn edges(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for (name, m) in &self.modules {
            let bin = name == "main";
            let mut add = |abs: Vec<String>, shown: String| {
                if let Some(to) = self.resolve(&abs, 0)
                    && to != *name
                    && !to.is_empty()
                {
                    edges.entry(name.clone()).or_default().entry(to).or_insert(shown);
                }
            };
            // `use` trees; a module brought in by name also makes its later
            // `alias::item` paths resolvable.
            let mut aliases: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (_, path, alias) in use_paths(&m.code) {
                let Some(abs) = absolute(name, &m.children, &path, bin) else { continue };
                if abs.last().is_some_and(|s| s == "*") {
                    add(abs[..abs.len() - 1].to_vec(), format!("use {}", path.join("::")));
                    continue;
                }
                let resolved = self.resolve(&abs, 0);
                let names_module = resolved.as_deref() == Some(abs.join("::").as_str());
                if names_module {
                    let local = alias.clone().unwrap_or_else(|| abs.last().cloned().unwrap_or_default());
                    aliases.insert(local, abs.clone());
                }
                add(abs, format!("use {}", path.join("::")));
            }
            // Paths in the code: crate::…, super::…, self::…, child::…, alias::….
            for path in paths_in(&m.code) {
                let abs = match aliases.get(&path[0]) {
                    Some(base) if !matches!(path[0].as_str(), "crate" | "super" | "self") => {
                        let mut a = base.clone();
                        a.extend(path[1..].iter().cloned());
                        Some(a)
                    }
                    _ => absolute(name, &m.children, &path, bin),
                };
                if let Some(abs) = abs {
                    add(abs, path.join("::"));
                }
            }
        }
        edges
    }
}

impl Module {
    /// Whether this module's own code defines `item` (a rough look for
    /// `fn item`, `struct item`, … or a `pub use` of that name).
    fn defines(&self, item: &str) -> bool {
        self.reexports.contains_key(item)
            || ["fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ", "macro_rules! "]
                .iter()
                .any(|kw| self.code.match_indices(&format!("{kw}{item}")).any(|(i, _)| !ident_byte(self.code.as_bytes(), i + kw.len() + item.len())))
    }
}

fn child_decls(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let Some(pos) = words.iter().position(|w| *w == "mod")
            && words[..pos].iter().all(|w| w.starts_with("pub") || w.starts_with("#["))
            && let Some(name) = words.get(pos + 1)
            && let Some(name) = name.strip_suffix(';')
        {
            out.insert(name.to_string());
        }
    }
    out
}

/// Every `a::b::c` path in the code (outside `use` lines too) whose first
/// segment is not itself after `::`, as segments.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if (b[i].is_ascii_alphabetic() || b[i] == b'_') && !ident_byte(b, i.wrapping_sub(1)) && !(i >= 2 && &b[i - 2..i] == b"::") {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while ident_byte(b, j) {
                    j += 1;
                }
                if s == j {
                    break;
                }
                segs.push(code[s..j].to_string());
                if b.get(j) == Some(&b':') && b.get(j + 1) == Some(&b':') && (b.get(j + 2).is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_')) {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() >= 2 {
                out.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------- checks

/// Strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeMap<String, String>>, nodes: &[String]) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on: BTreeSet<String>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit(t: &mut T, v: &str) {
        t.index.insert(v.to_string(), t.next);
        t.low.insert(v.to_string(), t.next);
        t.next += 1;
        t.stack.push(v.to_string());
        t.on.insert(v.to_string());
        let succ: Vec<String> = t.edges.get(v).map(|m| m.keys().cloned().collect()).unwrap_or_default();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low[v];
                t.low.insert(v.to_string(), lv.min(lw));
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low[v];
                t.low.insert(v.to_string(), lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), next: 0, out: vec![] };
    for n in nodes {
        if !t.index.contains_key(n) {
            visit(&mut t, n);
        }
    }
    t.out
}

fn root() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."))
}

/// Everything wrong with the graph, one line each.
fn violations(graph: &Graph) -> Vec<String> {
    let edges = graph.edges();
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        if from == "main" {
            continue;
        }
        let ff = floor_of(from);
        for (to, shown) in tos {
            let ft = floor_of(to);
            let file = graph.modules[from].file.display();
            if ft > ff {
                wrong.push(format!("{file}: `{shown}` — the {} floor looks up to the {} floor ({to})", floor_name(ff), floor_name(ft)));
            } else if ff == POLICY_FLOOR && ft == POLICY_FLOOR && from.split("::").next() != to.split("::").next() {
                wrong.push(format!("{file}: `{shown}` — one policy imports another ({to}); share it through the domain"));
            }
        }
    }
    let nodes: Vec<String> = graph.modules.keys().cloned().collect();
    for circle in circles(&edges, &nodes) {
        let mut shown = Vec::new();
        for a in &circle {
            for (b, how) in edges.get(a).into_iter().flatten() {
                if circle.contains(b) {
                    shown.push(format!("    {a} → {b}  (`{how}`)"));
                }
            }
        }
        wrong.push(format!("a circle of {} modules: {}\n{}", circle.len(), circle.join(", "), shown.join("\n")));
    }
    wrong
}

#[test]
fn floors_only_look_down_and_no_module_imports_round_a_circle() {
    let graph = Graph::load(&root());
    if std::env::var_os("LAYERS_PRINT").is_some() {
        for (from, tos) in graph.edges() {
            println!("{from} [{}]", floor_name(floor_of(&from)));
            for (to, how) in tos {
                println!("    → {to}   `{how}`");
            }
        }
    }
    let wrong = violations(&graph);
    let mut floors: BTreeMap<&str, usize> = BTreeMap::new();
    for name in graph.modules.keys() {
        *floors.entry(floor_name(floor_of(name))).or_default() += 1;
    }
    println!("{} modules: {floors:?}; {} violations", graph.modules.len(), wrong.len());
    assert!(wrong.is_empty(), "{} layer rules broken:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn the_checker_sees_an_upward_import_a_circle_and_a_policy_importing_another() {
    let dir = std::env::temp_dir().join(format!("gpuroom-layers-{}", std::process::id()));
    let write = |p: &str, s: &str| {
        let f = dir.join("src").join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, s).unwrap();
    };
    write("lib.rs", "pub mod domain;\npub mod sched;\npub mod market;\npub mod room;\npub mod tui;\n");
    write("domain/mod.rs", "pub mod job;\npub use job::Job;\n");
    // The domain reaches up into the room, in a path, not a `use`.
    write(
        "domain/job.rs",
        "pub struct Job;\nfn f() -> crate::room::Room { todo!() }\n// crate::tui::App in a comment is fine\nconst S: &str = \"crate::tui::App\";\n",
    );
    write("sched/mod.rs", "use crate::domain::Job;\nuse crate::market::{self, Price};\nfn g(_: Job) { market::price(); }\n");
    write("market/mod.rs", "pub struct Price;\npub fn price() {}\n#[cfg(test)]\nmod tests { use crate::room::Room; }\n");
    write("room/mod.rs", "pub mod spot;\npub struct Room;\nuse spot::x;\n");
    write("room/spot.rs", "use super::Room;\npub fn x(_: &Room) {}\n");
    write("tui/mod.rs", "use crate::room::Room;\n");
    let graph = Graph::load(&dir);
    let wrong = violations(&graph);
    std::fs::remove_dir_all(&dir).ok();
    let text = wrong.join("\n");
    assert!(text.contains("domain/job.rs: `crate::room::Room` — the domain floor looks up to the room floor"), "{text}");
    assert!(text.contains("one policy imports another (market)"), "{text}");
    assert!(text.contains("a circle of 2 modules: room, room::spot"), "{text}");
    assert!(!text.contains("tui"), "comments, strings and tests are not imports: {text}");
    assert!(!text.contains("market/mod.rs"), "a test module may reach anywhere: {text}");
    assert_eq!(wrong.len(), 3, "{text}");
}
