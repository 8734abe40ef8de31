//! The library's layers hold: no source file names a folder of a higher layer, and the sibling
//! folders `memory`, `session` and `checkpoint` never name each other (docs/design.md, "Source layout"). Rust
//! itself rejects no import cycle between modules, so this scan is what keeps a new one from
//! creeping back. Ranks: `domain` and `error.rs` 0, `storage` 1, `trust` 2, `memory`,
//! `session` and `checkpoint` 3, `import` 4, the top-level `verify.rs` and `lib.rs` 5, the
//! command line `cli` 6 (it uses the library through `somna::` paths, its public API, and itself
//! through `crate::cli::` and `super::` paths). `src/bin/` holds one `main.rs` that calls
//! `somna::cli::main` and names nothing else.
//!
//! Inside a folder, the files form no cycle either: each `crate::` and `super::` path is
//! followed to the file that defines what it names, through the `pub use` lines of a `mod.rs` or
//! of `lib.rs` (so a re-export hides no edge); a `super::` path inside an inline module (`mod
//! tests { ... }`) starts from that module. A `mod.rs` naming its own child modules by their
//! bare names (`args::parse`) is not followed: a folder's `mod.rs` declares its children, and in
//! some folders also holds what they share (`checkpoint/`, `memory/search/`, `storage/pg/`,
//! `cli/commands/mcp/`, `cli/commands/web/`), which such an edge would count as a cycle. The subfolders of one folder never name each other (the storage
//! engines `storage/redb/` and `storage/pg/` use the core files of `storage/`, not each other),
//! and the engines never name the files above them (`store.rs`, `any_engine.rs`).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// The rank of a folder (or top-level module) as `crate::NAME` names it.
fn rank(name: &str) -> Option<u8> {
    Some(match name {
        "domain" | "error" => 0,
        "storage" => 1,
        "trust" => 2,
        "memory" | "session" | "checkpoint" => 3,
        "import" => 4,
        "verify" => 5,
        "cli" => 6,
        _ => return None,
    })
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() && !p.ends_with("bin") {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("main.rs") {
            out.push(p);
        }
    }
}

/// The folder of a file under `src/` (its first path component, without `.rs`).
fn home(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

#[test]
fn no_file_names_a_higher_layer_and_memory_and_session_stay_apart() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut violations = Vec::new();
    for f in &files {
        let from = home(&src, f);
        let Some(own) = rank(&from).or(if from == "lib" { Some(5) } else { None }) else {
            violations.push(format!("{}: not in a ranked folder", f.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let Some(r) = rank(&name) else { continue };
                let third = ["memory", "session", "checkpoint"];
                let siblings = from != name
                    && third.contains(&from.as_str())
                    && third.contains(&name.as_str());
                if r > own || siblings {
                    violations.push(format!("{}:{}: {from} names {name}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        files.len() > 20,
        "the scan found only {} files",
        files.len()
    );
    assert!(
        violations.is_empty(),
        "layer violations:\n{}",
        violations.join("\n")
    );
}

/// The module path of a file under `src/`: `storage::redb::engine` is `["storage", "redb",
/// "engine"]`, `storage/mod.rs` is `["storage"]`, `lib.rs` is `[]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file
        .strip_prefix(src)
        .expect("under src")
        .with_extension("");
    let mut m: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib")) {
        m.pop();
    }
    m
}

/// The code of a file, statement by statement (comments dropped, `;` ends a statement), with
/// the 1-based line each starts on.
fn statements(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut start = 0;
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if cur.trim().is_empty() {
            start = n + 1;
        }
        cur.push_str(code);
        cur.push(' ');
        if code.contains(';') || code.contains('{') || code.contains('}') {
            out.push((start, std::mem::take(&mut cur)));
        }
    }
    out.push((start, cur));
    out
}

/// The paths a statement names after `crate::`, each as its segments; a group (`a::{b, c::d}`)
/// gives one path per member. With `module` (the module the statement is in), also the paths
/// after `super::` (any number of them), made absolute.
fn crate_paths(code: &str, module: Option<&[String]>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in code.char_indices() {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let (mut base, mut rest): (Vec<String>, &str) =
            if let Some(r) = code[i..].strip_prefix("crate::") {
                (Vec::new(), r)
            } else if let (Some(m), Some(_)) = (module, code[i..].strip_prefix("super::")) {
                let mut rest = &code[i..];
                let mut up = 0;
                while let Some(r) = rest.strip_prefix("super::") {
                    rest = r;
                    up += 1;
                }
                (m[..m.len().saturating_sub(up)].to_vec(), rest)
            } else {
                continue;
            };
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        base.extend(
            path.split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        rest = &rest[path.len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let inner = group.split('}').next().unwrap_or("");
                for member in inner.split(',') {
                    let mut p = base.clone();
                    p.extend(
                        member
                            .split(" as ")
                            .next()
                            .unwrap_or("")
                            .split("::")
                            .map(|s| s.trim().to_string())
                            .filter(|s| !s.is_empty() && s != "self"),
                    );
                    out.push(p);
                }
            }
            None => out.push(base),
        }
    }
    out
}

/// The name of the inline module a statement opens (`mod tests {`), if it opens one.
fn inline_module(statement: &str) -> Option<String> {
    let words: Vec<&str> = statement.split_whitespace().collect();
    words
        .windows(3)
        .find_map(|w| (w[0] == "mod" && w[2] == "{").then(|| w[1].to_string()))
}

/// The `pub use` lines of a module: the name each brings in, and the absolute path it names.
fn reexports(module: &[String], text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (_, st) in statements(text) {
        let st = st.trim();
        let Some(body) = st
            .strip_prefix("pub use ")
            .or_else(|| st.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let body = body.trim_end_matches(';').trim();
        let (abs, body) = match body.strip_prefix("crate::") {
            Some(b) => (Vec::new(), b),
            None => (module.to_vec(), body.strip_prefix("self::").unwrap_or(body)),
        };
        let (head, members) = match body.split_once("::{") {
            Some((h, g)) => (h, g.trim_end_matches('}').split(',').collect::<Vec<_>>()),
            None => match body.rsplit_once("::") {
                Some((h, last)) => (h, vec![last]),
                None => ("", vec![body]),
            },
        };
        for m in members {
            let m = m.trim();
            let name = m.split(" as ").last().unwrap_or(m).trim();
            let target = m.split(" as ").next().unwrap_or(m).trim();
            if name.is_empty() || name == "*" {
                continue;
            }
            let mut p = abs.clone();
            p.extend(
                head.split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            p.extend(
                target
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            );
            out.push((name.split("::").last().unwrap_or(name).to_string(), p));
        }
    }
    out
}

/// The source files, what module each is, and what each module re-exports.
struct Tree {
    files: Vec<PathBuf>,
    texts: Vec<String>,
    module_of: Vec<Vec<String>>,
    modules: HashMap<Vec<String>, usize>,
    reexported: HashMap<(usize, String), Vec<Vec<String>>>,
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut files = Vec::new();
        sources(src, &mut files);
        files.sort();
        let texts: Vec<String> = files
            .iter()
            .map(|f| std::fs::read_to_string(f).expect("read"))
            .collect();
        let mut modules = HashMap::new();
        let mut reexported: HashMap<(usize, String), Vec<Vec<String>>> = HashMap::new();
        let module_of: Vec<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
        for (i, m) in module_of.iter().enumerate() {
            for (name, path) in reexports(m, &texts[i]) {
                reexported.entry((i, name)).or_default().push(path);
            }
            modules.insert(m.clone(), i);
        }
        Tree {
            files,
            texts,
            module_of,
            modules,
            reexported,
        }
    }

    /// The files that define what `path` names, through re-exports.
    fn resolve(&self, path: &[String], depth: u8, out: &mut BTreeSet<usize>) {
        let Some((len, file)) = (0..=path.len())
            .rev()
            .find_map(|n| self.modules.get(&path[..n]).map(|f| (n, *f)))
        else {
            return;
        };
        let through = path
            .get(len)
            .and_then(|name| self.reexported.get(&(file, name.clone())));
        match through {
            Some(targets) if depth < 8 => {
                for t in targets {
                    self.resolve(t, depth + 1, out);
                }
            }
            _ => {
                out.insert(file);
            }
        }
    }

    /// Every file each file names, with the line that names it.
    fn edges(&self) -> Vec<Vec<(usize, usize)>> {
        (0..self.files.len())
            .map(|i| {
                let mut out = Vec::new();
                let mut module = self.module_of[i].clone();
                for (line, st) in statements(&self.texts[i]) {
                    if let Some(inner) = inline_module(&st) {
                        module.push(inner);
                    }
                    for p in crate_paths(&st, Some(&module)) {
                        let mut to = BTreeSet::new();
                        self.resolve(&p, 0, &mut to);
                        out.extend(to.into_iter().filter(|t| *t != i).map(|t| (t, line)));
                    }
                }
                out
            })
            .collect()
    }
}

/// The folder path of a file under `src/` (`storage/redb` for `storage/redb/kv.rs`).
fn folder(src: &Path, file: &Path) -> PathBuf {
    let rel = file.strip_prefix(src).expect("under src");
    rel.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// The cycles among `nodes` along `edges` (Tarjan's strongly connected components of two or
/// more files).
fn cycles(n: usize, edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct S<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut S<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &s.edges[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = S {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// The files of `storage/` above its engines, which the engines must not name.
const ABOVE_ENGINES: [&str; 2] = ["storage/store.rs", "storage/any_engine.rs"];

#[test]
fn files_inside_a_folder_form_no_cycle_and_subfolders_stay_apart() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tree = Tree::read(&src);
    let edges = tree.edges();
    let top = |i: usize| home(&src, &tree.files[i]);
    let mut violations = Vec::new();
    for (i, out) in edges.iter().enumerate() {
        let (from_dir, f) = (folder(&src, &tree.files[i]), &tree.files[i]);
        for &(t, line) in out {
            let to_dir = folder(&src, &tree.files[t]);
            let rel = tree.files[t].strip_prefix(&src).expect("under src");
            let siblings = from_dir.parent().is_some_and(|p| !p.as_os_str().is_empty())
                && from_dir.parent() == to_dir.parent()
                && from_dir != to_dir;
            let engine_up = from_dir.starts_with("storage")
                && from_dir != Path::new("storage")
                && ABOVE_ENGINES.iter().any(|a| rel == Path::new(a));
            if siblings || engine_up {
                violations.push(format!("{}:{line} names {}", f.display(), rel.display()));
            }
        }
    }
    let within: Vec<Vec<usize>> = edges
        .iter()
        .enumerate()
        .map(|(i, out)| {
            let mut to: Vec<usize> = out
                .iter()
                .map(|(t, _)| *t)
                .filter(|t| top(*t) == top(i) && !top(i).is_empty())
                .collect();
            to.sort_unstable();
            to.dedup();
            to
        })
        .collect();
    for c in cycles(tree.files.len(), &within) {
        let names: Vec<String> = c
            .iter()
            .map(|i| {
                tree.files[*i]
                    .strip_prefix(&src)
                    .expect("under src")
                    .display()
                    .to_string()
            })
            .collect();
        violations.push(format!("a cycle: {}", names.join(" <-> ")));
    }
    let storage = tree
        .modules
        .keys()
        .filter(|m| m.first().is_some_and(|s| s == "storage"));
    assert!(storage.count() > 15, "the scan found too few storage files");
    assert!(
        edges.iter().map(Vec::len).sum::<usize>() > 100,
        "the scan found too few edges"
    );
    assert!(
        violations.is_empty(),
        "violations inside folders:\n{}",
        violations.join("\n")
    );
}

/// The crate root's modules: a path inside the library starts with one of these, never with a
/// name the root re-exports (`crate::Store`), so that the root's `pub use` list is the public
/// surface and nothing inside depends on it.
const ROOT_MODULES: [&str; 11] = [
    "checkpoint",
    "domain",
    "error",
    "import",
    "memory",
    "session",
    "storage",
    "trust",
    "verify",
    "format",
    "cli",
];

#[test]
fn no_path_inside_the_library_goes_through_a_crate_root_reexport() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut violations = Vec::new();
    let mut paths = 0;
    for f in files.iter().filter(|f| !f.ends_with("lib.rs")) {
        let text = std::fs::read_to_string(f).expect("read source");
        for (line, st) in statements(&text) {
            for p in crate_paths(&st, None) {
                paths += 1;
                match p.first() {
                    Some(first) if ROOT_MODULES.contains(&first.as_str()) => {}
                    Some(first) => violations.push(format!(
                        "{}:{line} names crate::{first}, a crate-root re-export",
                        f.display()
                    )),
                    None => {}
                }
            }
        }
    }
    assert!(paths > 200, "the scan found too few crate paths ({paths})");
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// The names `lib.rs` re-exports at the crate root itself (its `pub use` items outside any
/// `pub mod NAME { ... }` block), each a `use` tree's last segment.
fn root_names(lib: &str) -> Vec<String> {
    let code: String = lib
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut rest = code.as_str();
    while let Some(c) = rest.chars().next() {
        if depth == 0 && rest.starts_with("pub use ") {
            let end = rest.find(';').unwrap_or(rest.len());
            let tree = &rest["pub use ".len()..end];
            let inner = match (tree.find('{'), tree.rfind('}')) {
                (Some(a), Some(b)) if a < b => &tree[a + 1..b],
                _ => tree,
            };
            for item in inner.split(',').map(str::trim).filter(|i| !i.is_empty()) {
                names.push(item.rsplit("::").next().unwrap_or(item).to_string());
            }
            rest = &rest[end..];
            continue;
        }
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    names
}

#[test]
fn the_crate_root_is_one_screen_and_reexports_no_engine() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read lib.rs");
    // The scan itself: a group, a facade module's list (not the root's), a lone name.
    assert_eq!(
        root_names("pub use a::{B, c::D}; // pub use e::F;\npub mod m {\n    pub use x::{Y, Z};\n}\npub use redb;"),
        ["B", "D", "redb"]
    );
    let names = root_names(&lib);
    assert!(names.contains(&"Store".to_string()), "{names:?}");
    assert!(
        names.len() <= 45,
        "the crate root re-exports {} names (a screen is 45): group the new ones in a module: {names:?}",
        names.len()
    );
    for internal in ["redb", "TailRepair", "url_of", "StorageBackend", "Embedder"] {
        assert!(
            !names.iter().any(|n| n == internal),
            "the crate root re-exports {internal}"
        );
    }
}
