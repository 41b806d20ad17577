//! The crate reads bottom-up: every file imports only from its own layer or
//! the layers below it (as ARCHITECTURE.md lists them), and no files import
//! each other in a circle, in the library or in a binary.
//!
//! The check reads the source as text: it strips comments and literals,
//! takes every `use` declaration and every path spelled from `crate`,
//! `super` or `self`, and resolves each to the file that defines what it
//! names (following `pub use` re-exports, which are not imports themselves).
//! The tests at the end show it failing on an upward import and on a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Source with comments, string and char literals blanked out (same
/// length, so byte offsets still give line numbers).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(b.len(), |e| i + e);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (0usize, i);
                while j < b.len() {
                    if b[j] == b'/' && b.get(j + 1) == Some(&b'*') {
                        depth += 1;
                        j += 2;
                    } else if b[j] == b'*' && b.get(j + 1) == Some(&b'/') {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        j += 1;
                    }
                }
                blank(&mut out, i, j);
                i = j;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = src[start..]
                    .find(&close)
                    .map_or(b.len(), |e| start + e + close.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                blank(&mut out, i, (j + 1).min(b.len()));
                i = j + 1;
            }
            b'\'' => {
                // A char literal ('a', '\n', '\u{..}'), not a lifetime ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    src[i + 2..].find('\'').map(|e| i + 2 + e + 1)
                } else {
                    src[i + 1..]
                        .char_indices()
                        .nth(1)
                        .filter(|&(_, c)| c == '\'')
                        .map(|(k, _)| i + 1 + k + 1)
                };
                match end {
                    Some(e) => {
                        blank(&mut out, i, e);
                        i = e;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 intact")
}

/// Remove inline modules (`mod tests { ... }`): their paths are relative to
/// themselves, and what they use is the file's own business.
fn drop_inline_modules(s: &str) -> String {
    let mut out = s.to_string();
    let mut from = 0;
    while let Some(k) = find_word(&out[from..], "mod") {
        let at = from + k;
        let rest = &out[at + 3..];
        let name_len = rest
            .trim_start()
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(0);
        let after = rest.trim_start()[name_len..].trim_start();
        if after.starts_with('{') {
            let open = at + 3 + rest.len() - after.len();
            let mut depth = 0;
            let mut end = open;
            for (k, c) in out[open..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + k + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let blanked: String = out[open..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' })
                .collect();
            out.replace_range(open..end, &blanked);
        }
        from = at + 3;
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The next occurrence of `word` as a whole word.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(k) = s[from..].find(word) {
        let at = from + k;
        let before = at == 0 || !is_ident(b[at - 1]);
        let after = b.get(at + word.len()).is_none_or(|&c| !is_ident(c));
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// One `use` tree expanded into paths: `a::{b, c::{d as e}}` gives
/// `[a, b]` and `[a, c, d]` (with the names they bind: `b`, `e`).
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    fn go(prefix: &[String], t: &str, out: &mut Vec<(Vec<String>, String)>) {
        let t = t.trim();
        if t.is_empty() {
            return;
        }
        if let Some(open) = t.find('{') {
            let base: Vec<String> = t[..open]
                .split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            let inner = &t[open + 1..t.rfind('}').expect("balanced use tree")];
            let mut p = prefix.to_vec();
            p.extend(base);
            let (mut depth, mut start) = (0, 0);
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&p, &inner[start..k], out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            go(&p, &inner[start..], out);
            return;
        }
        let (path, alias) = match t.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
            None => (t, None),
        };
        let mut p = prefix.to_vec();
        p.extend(path.split("::").map(|s| s.trim().to_string()));
        if p.last().is_some_and(|l| l == "self") {
            p.pop();
        }
        let name = alias.unwrap_or_else(|| p.last().cloned().unwrap_or_default());
        out.push((p, name));
    }
    let mut out = Vec::new();
    go(&[], tree, &mut out);
    out
}

/// A `use` declaration: its paths, whether it re-exports (`pub use`), and
/// the line it starts on.
struct Use {
    paths: Vec<(Vec<String>, String)>,
    public: bool,
    line: usize,
}

/// One file of a crate.
struct File {
    path: PathBuf,
    uses: Vec<Use>,
    /// Paths spelled from `crate`/`super`/`self` outside `use`, with lines.
    inline: Vec<(Vec<String>, usize)>,
    /// Names it declares as child modules (`mod x;`).
    children: BTreeSet<String>,
}

fn line_of(s: &str, at: usize) -> usize {
    s[..at].matches('\n').count() + 1
}

fn parse(path: &Path) -> File {
    let src = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let s = drop_inline_modules(&strip(&src));
    let mut uses = Vec::new();
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(k) = find_word(&s[from..], "use") {
        let at = from + k;
        let end = at + s[at..].find(';').expect("use ends with ;");
        let before = s[..at].trim_end();
        let public = before.ends_with("pub")
            || before.ends_with(')') && {
                let open = before.rfind('(').unwrap_or(0);
                before[..open].trim_end().ends_with("pub")
            };
        uses.push(Use {
            paths: expand(&s[at + 3..end]),
            public,
            line: line_of(&s, at),
        });
        spans.push(at..end);
        from = end;
    }
    let mut children = BTreeSet::new();
    let mut from = 0;
    while let Some(k) = find_word(&s[from..], "mod") {
        let at = from + k;
        let rest = s[at + 3..].trim_start();
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(0);
        if rest[len..].trim_start().starts_with(';') {
            children.insert(rest[..len].to_string());
        }
        from = at + 3;
    }
    let mut inline = Vec::new();
    for root in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(k) = find_word(&s[from..], root) {
            let at = from + k;
            from = at + root.len();
            if spans.iter().any(|r| r.contains(&at)) || !s[from..].starts_with("::") {
                continue;
            }
            let mut segs = vec![root.to_string()];
            let mut rest = &s[from..];
            while let Some(r) = rest.strip_prefix("::") {
                let len = r.bytes().take_while(|&c| is_ident(c)).count();
                if len == 0 {
                    break;
                }
                segs.push(r[..len].to_string());
                rest = &r[len..];
            }
            inline.push((segs, line_of(&s, at)));
        }
    }
    File {
        path: path.to_path_buf(),
        uses,
        inline,
        children,
    }
}

/// Every file of the crate rooted at `root` (lib.rs or a binary's main).
fn crate_files(root: &Path) -> BTreeMap<Vec<String>, File> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(root.to_path_buf(), Vec::new())];
    while let Some((path, module)) = todo.pop() {
        let f = parse(&path);
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let dir = if matches!(name, "lib.rs" | "main.rs" | "mod.rs") || module.is_empty() {
            path.parent().expect("a file has a folder").to_path_buf()
        } else {
            path.with_extension("")
        };
        for c in &f.children {
            let flat = dir.join(format!("{c}.rs"));
            let nested = dir.join(c).join("mod.rs");
            let child = if flat.exists() { flat } else { nested };
            let mut m = module.clone();
            m.push(c.clone());
            todo.push((child, m));
        }
        files.insert(module, f);
    }
    files
}

/// The file (by module path) that defines what `path` names, seen from the
/// file of module `from`; `None` for other crates.
fn resolve(
    files: &BTreeMap<Vec<String>, File>,
    from: &[String],
    path: &[String],
    depth: usize,
) -> Option<Vec<String>> {
    let mut module: Vec<String> = from.to_vec();
    let mut segs = path.iter().peekable();
    match segs.peek().map(|s| s.as_str()) {
        Some("crate") | Some("$crate") => {
            module.clear();
            segs.next();
        }
        Some("self") => {
            segs.next();
        }
        Some("super") => {
            while segs.peek().map(|s| s.as_str()) == Some("super") {
                module.pop();
                segs.next();
            }
        }
        Some(first) if files[from].children.contains(first) => {}
        _ => return None, // std, libc, another crate
    }
    while let Some(s) = segs.peek() {
        if files[&module].children.contains(*s) {
            module.push(s.to_string());
            segs.next();
        } else {
            break;
        }
    }
    let Some(item) = segs.next() else {
        return Some(module);
    };
    // A re-export of `item` in that module: follow it.
    if depth < 16 {
        for u in files[&module].uses.iter().filter(|u| u.public) {
            for (p, name) in &u.paths {
                if name == item {
                    if let Some(m) = resolve(files, &module, p, depth + 1) {
                        return Some(m);
                    }
                }
            }
        }
    }
    Some(module)
}

/// Whether `path` names an item through the crate root's re-exports
/// (`crate::Result`) rather than through the module that defines it.
fn through_root(files: &BTreeMap<Vec<String>, File>, path: &[String]) -> bool {
    matches!(path.first().map(String::as_str), Some("crate" | "$crate"))
        && path
            .get(1)
            .is_some_and(|s| !files[&Vec::new()].children.contains(s))
}

/// An import of one file by another, with the line it is on.
struct Edge {
    from: Vec<String>,
    to: Vec<String>,
    line: usize,
    /// Spelled through a re-export of the crate root (`crate::Result`).
    via_root: bool,
}

fn edges(files: &BTreeMap<Vec<String>, File>) -> Vec<Edge> {
    let mut out = Vec::new();
    for (m, f) in files {
        let paths = f
            .uses
            .iter()
            .filter(|u| !u.public)
            .flat_map(|u| u.paths.iter().map(move |(p, _)| (p.clone(), u.line)))
            .chain(f.inline.iter().cloned());
        for (p, line) in paths {
            if let Some(to) = resolve(files, m, &p, 0) {
                if &to != m {
                    out.push(Edge {
                        from: m.clone(),
                        via_root: through_root(files, &p) && !to.is_empty() && !m.is_empty(),
                        to,
                        line,
                    });
                }
            }
        }
    }
    out
}

/// Files that import each other in a circle (strongly connected
/// components of more than one file).
fn cycles(files: &BTreeMap<Vec<String>, File>, edges: &[Edge]) -> Vec<Vec<Vec<String>>> {
    let mut next: BTreeMap<&Vec<String>, BTreeSet<&Vec<String>>> = BTreeMap::new();
    for e in edges {
        next.entry(&e.from).or_default().insert(&e.to);
    }
    let reach = |a: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![a.clone()];
        while let Some(x) = todo.pop() {
            for y in next.get(&x).into_iter().flatten() {
                if seen.insert((*y).clone()) {
                    todo.push((*y).clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> =
        files.keys().map(|m| (m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for m in files.keys() {
        if done.contains(m) {
            continue;
        }
        let scc: Vec<Vec<String>> = files
            .keys()
            .filter(|o| *o == m || (reaches[m].contains(*o) && reaches[o].contains(m)))
            .cloned()
            .collect();
        if scc.len() > 1 {
            done.extend(scc.iter().cloned());
            out.push(scc);
        }
    }
    out
}

/// The layers in ARCHITECTURE.md's `layers` block, bottom up: each a name
/// and its patterns (`dir/` for a folder, else a file, relative to src/).
fn layers(architecture: &str) -> Vec<(String, Vec<String>)> {
    let start = architecture
        .find("```layers")
        .expect("ARCHITECTURE.md has a ```layers block");
    let body = &architecture[start + 9..];
    let body = &body[..body.find("```").expect("the layers block ends")];
    body.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(name, pats)| {
            (
                name.trim().to_string(),
                pats.split_whitespace().map(String::from).collect(),
            )
        })
        .collect()
}

/// Everything wrong with the crate under `src`, as messages.
fn check(src: &Path, architecture: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let layers = layers(architecture);
    let layer_of = |file: &Path| -> Option<usize> {
        let rel = file
            .strip_prefix(src)
            .ok()?
            .to_string_lossy()
            .replace('\\', "/");
        layers.iter().position(|(_, pats)| {
            pats.iter().any(|p| match p.strip_suffix('/') {
                Some(dir) => rel.starts_with(&format!("{dir}/")),
                None => rel == *p,
            })
        })
    };
    let show = |f: &File| {
        f.path
            .strip_prefix(src)
            .unwrap_or(&f.path)
            .display()
            .to_string()
    };
    let mut bins: Vec<PathBuf> = std::fs::read_dir(src.join("bin"))
        .map(|d| {
            d.flatten()
                .map(|b| b.path())
                .map(|p| if p.is_dir() { p.join("main.rs") } else { p })
                .collect()
        })
        .unwrap_or_default();
    bins.sort();
    // The library first (layers and cycles), then each binary (cycles).
    let roots = std::iter::once(src.join("lib.rs")).chain(bins);
    for (k, root) in roots.enumerate() {
        let files = crate_files(&root);
        let edges = edges(&files);
        if k == 0 {
            for f in files.values() {
                if layer_of(&f.path).is_none() {
                    problems.push(format!("{} is in no layer of ARCHITECTURE.md", show(f)));
                }
            }
            for e in edges.iter().filter(|e| e.via_root) {
                problems.push(format!(
                    "{}:{} names an item through the crate root: spell it through its module",
                    show(&files[&e.from]),
                    e.line
                ));
            }
            for e in &edges {
                let (a, b) = (&files[&e.from], &files[&e.to]);
                if let (Some(la), Some(lb)) = (layer_of(&a.path), layer_of(&b.path)) {
                    if lb > la {
                        problems.push(format!(
                            "{}:{} ({}) imports {} ({}): an upward import",
                            show(a),
                            e.line,
                            layers[la].0,
                            show(b),
                            layers[lb].0
                        ));
                    }
                }
            }
        }
        for scc in cycles(&files, &edges) {
            let names: Vec<String> = scc.iter().map(|m| show(&files[m])).collect();
            let inside: BTreeSet<String> = edges
                .iter()
                .filter(|e| scc.contains(&e.from) && scc.contains(&e.to))
                .map(|e| {
                    format!(
                        "{}:{} -> {}",
                        show(&files[&e.from]),
                        e.line,
                        show(&files[&e.to])
                    )
                })
                .collect();
            let inside: Vec<String> = inside.into_iter().collect();
            problems.push(format!(
                "files import each other in a circle: {} ({})",
                names.join(", "),
                inside.join("; ")
            ));
        }
    }
    problems
}

#[test]
fn the_crate_is_layered_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let arch = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let problems = check(&root.join("src"), &arch);
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// A crate of three files in two layers, written to a temporary folder.
fn sample(lib: &str, low: &str, high: &str) -> Vec<String> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("gaspi-layers-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("high")).unwrap();
    std::fs::write(dir.join("lib.rs"), lib).unwrap();
    std::fs::write(dir.join("low.rs"), low).unwrap();
    std::fs::write(dir.join("high/mod.rs"), high).unwrap();
    std::fs::write(dir.join("high/part.rs"), "pub struct Part;\n").unwrap();
    let arch = "```layers\nlow: lib.rs low.rs\nhigh: high/\n```\n";
    let p = check(&dir, arch);
    std::fs::remove_dir_all(&dir).unwrap();
    p
}

const LIB: &str = "mod low;\nmod high;\n";

#[test]
fn a_downward_import_passes() {
    let high = "mod part;\npub use part::Part;\nuse crate::low::Low;\n";
    assert!(sample(LIB, "pub struct Low;\n", high).is_empty());
}

#[test]
fn an_upward_import_fails() {
    // `Part` is re-exported by high/mod.rs: the import resolves to the
    // file that defines it.
    let low = "pub struct Low;\n// crate::high::Part in a comment is no import\nfn f() { let _ = crate::high::Part; }\n";
    let p = sample(LIB, low, "mod part;\npub use part::Part;\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("low.rs:3 (low) imports high/part.rs (high)"),
        "{p:?}"
    );
}

#[test]
fn a_cycle_fails() {
    let lib = "mod low;\nmod high;\npub struct Root;\n";
    let low = "use crate::Root;\npub struct Low;\n";
    let p = sample(lib, low, "mod part;\n");
    assert!(p.is_empty(), "lib.rs and low.rs share a layer: {p:?}");
    let lib = "mod low;\nmod high;\nuse low::Low;\npub struct Root;\n";
    let p = sample(lib, low, "mod part;\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("in a circle: lib.rs, low.rs"), "{p:?}");
}

#[test]
fn a_path_through_the_crate_root_fails() {
    let lib = "mod low;\nmod high;\npub use high::Part;\n";
    let high = "mod part;\npub use part::Part;\nfn f() { let _ = crate::Part; }\n";
    let p = sample(lib, "pub struct Low;\n", high);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("high/mod.rs:3 names an item through the crate root"),
        "{p:?}"
    );
}

#[test]
fn use_trees_expand() {
    let got = expand("a::{b, c::{d as e, self}}");
    let want: Vec<(Vec<String>, String)> = vec![
        (vec!["a".into(), "b".into()], "b".into()),
        (vec!["a".into(), "c".into(), "d".into()], "e".into()),
        (vec!["a".into(), "c".into()], "c".into()),
    ];
    assert_eq!(got, want);
    let src = "let s = \"use x;\"; // use y;\nlet c = ';'; // ' 'a'\n";
    let stripped = strip(src);
    assert_eq!(stripped.len(), src.len());
    assert!(!stripped.contains("use"));
    assert_eq!(
        stripped.lines().map(str::trim_end).collect::<Vec<_>>(),
        ["let s =         ;", "let c =    ;"]
    );
}
