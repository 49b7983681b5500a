//! The C headers in `capi/include` against UCX 1.13's installed headers
//! (Debian's `libucx-dev`), which are the reference for every name, value
//! and layout.
//!
//! * `probe_prints_the_same_facts_as_ucx` builds `capi/abi/probe.c` once
//!   against `capi/include` and once against `/usr/include`, runs both and
//!   requires identical output: type sizes, enum signedness, the offset and
//!   size of every structure field, the value of every enum constant and
//!   public macro, and what the inline functions do.
//! * `declarations_match_ucx` preprocesses both header sets and requires
//!   the same names in the same files (functions, variables, typedefs,
//!   tags, enum constants, macros), then compiles UCX's own declarations
//!   of functions, variables and callback types after the rucx headers,
//!   where any prototype that differs is a "conflicting types" error, and
//!   checks that every structure field has the same type as UCX's.
//! * `examples_compile_unchanged` compiles UCX's example programs
//!   `ucp_hello_world.c` and `ucp_client_server.c` against `capi/include`
//!   with `-Wall -Werror`.
//! * `headers_give_c_linkage_in_cplusplus` compiles the headers as C++ and
//!   checks that the functions keep their C names.
//!
//! Every build with `capi/include` is run with `cc -H` and fails if any
//! `ucp/` or `ucs/` header comes from anywhere else. Without the UCX
//! headers (or a C compiler) the tests print `skipped: <why>`, or fail when
//! `RUCX_REQUIRE_ALL=1`.

mod common;

use common::skip_or_fail;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The reference header whose presence means `libucx-dev` is installed.
const UCX_UCP_H: &str = "/usr/include/ucp/api/ucp.h";

/// Where the reference headers live.
const SYSTEM_INCLUDE: &str = "/usr/include";

/// Where UCX's example programs are installed.
const UCX_EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";

/// The headers the rucx C API provides, by their path under the include
/// directory.
const HEADERS: &[&str] = &[
    "ucp/api/ucp.h",
    "ucp/api/ucp_def.h",
    "ucp/api/ucp_compat.h",
    "ucp/api/ucp_version.h",
    "ucs/type/status.h",
    "ucs/memory/memory_type.h",
    "ucs/type/thread_mode.h",
    "ucs/type/cpu_set.h",
    "ucs/config/types.h",
    "ucs/sys/compiler_def.h",
];

/// The header that holds only a part of UCX's macros of the same name: the
/// rucx copy must define a subset of them, the others the same set.
const SUBSET_HEADER: &str = "ucs/sys/compiler_def.h";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `capi/include`, as an absolute path without symbolic links.
fn capi_include() -> PathBuf {
    repo()
        .join("capi/include")
        .canonicalize()
        .expect("capi/include exists")
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("capi_abi")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// Whether a program can be started (`prog --version` runs).
fn have(prog: &str) -> bool {
    Command::new(prog)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Checks what the tests need; `Some(why)` when they cannot run here.
fn missing_prerequisite() -> Option<&'static str> {
    if !Path::new(UCX_UCP_H).exists() {
        return Some("libucx-dev not installed");
    }
    if !have("cc") {
        return Some("no C compiler (cc)");
    }
    None
}

/// Runs a command, failing the test with its output when it fails.
fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Which headers a `cc -H` run included, from its standard error.
fn included_headers(stderr: &str) -> Vec<PathBuf> {
    stderr
        .lines()
        .filter(|l| l.starts_with('.'))
        .filter_map(|l| l.trim_start_matches('.').strip_prefix(' '))
        .map(|p| {
            let p = PathBuf::from(p.trim());
            p.canonicalize().unwrap_or(p)
        })
        .collect()
}

/// Fails unless every `ucp/` and `ucs/` header of a `cc -H` run came from
/// `include`, and returns how many did.
fn assert_headers_from(stderr: &str, include: &Path) -> usize {
    let mut ours = 0;
    for path in included_headers(stderr) {
        let s = path.to_string_lossy();
        let ucx_like = s.contains("/ucp/") || s.contains("/ucs/") || s.contains("/ucm/");
        if ucx_like {
            assert!(
                path.starts_with(include),
                "{} was included from outside {}",
                path.display(),
                include.display()
            );
            ours += 1;
        }
    }
    ours
}

/// Compiles `src` against `capi/include` (`Some`) or the system headers
/// (`None`) with `cc -H`, checks where the UCX headers came from, and
/// returns the compiler's standard error.
fn compile(src: &Path, include: Option<&Path>, extra: &[&str], out: &Path) -> String {
    let mut cmd = Command::new("cc");
    if let Some(dir) = include {
        cmd.arg("-I").arg(dir);
    }
    cmd.args(["-H", "-Wall", "-Werror"])
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg(src);
    let stderr = String::from_utf8_lossy(&run(&mut cmd).stderr).into_owned();
    let from = include.unwrap_or(Path::new(SYSTEM_INCLUDE));
    let n = assert_headers_from(&stderr, from);
    assert!(n > 0, "{} included no ucp/ucs header", src.display());
    stderr
}

#[test]
fn probe_prints_the_same_facts_as_ucx() {
    if let Some(why) = missing_prerequisite() {
        return skip_or_fail(why);
    }
    let dir = scratch("probe");
    let probe = repo().join("capi/abi/probe.c");
    let include = capi_include();
    let mut outputs = Vec::new();
    for (name, inc) in [("rucx", Some(include.as_path())), ("ucx", None)] {
        let exe = dir.join(format!("probe-{name}"));
        compile(&probe, inc, &[], &exe);
        let out = run(&mut Command::new(&exe));
        outputs.push(String::from_utf8(out.stdout).expect("probe prints text"));
    }
    let (rucx, ucx) = (&outputs[0], &outputs[1]);
    let ucx_lines: BTreeSet<&str> = ucx.lines().collect();
    let rucx_lines: BTreeSet<&str> = rucx.lines().collect();
    if rucx != ucx {
        let mut report = String::new();
        for l in rucx.lines().filter(|l| !ucx_lines.contains(l)) {
            let _ = writeln!(report, "  rucx only: {l}");
        }
        for l in ucx.lines().filter(|l| !rucx_lines.contains(l)) {
            let _ = writeln!(report, "  UCX only:  {l}");
        }
        if report.is_empty() {
            report.push_str("  same lines, different order\n");
        }
        panic!("capi/include differs from UCX 1.13's headers:\n{report}");
    }
    let facts = ucx.lines().count();
    assert!(facts > 500, "the probe printed only {facts} facts");
    println!("{facts} facts identical between capi/include and UCX 1.13");
}

/// Where a preprocessed line came from: a header path relative to its
/// include directory (`ucp/api/ucp.h`), or `None` for anything else.
fn header_of(file: &str, include: &Path) -> Option<String> {
    let rel = Path::new(file).strip_prefix(include).ok()?;
    let rel = rel.to_string_lossy().into_owned();
    (rel.starts_with("ucp/") || rel.starts_with("ucs/")).then_some(rel)
}

/// One top-level declaration of a header, whitespace collapsed, without
/// its final `;`.
#[derive(Debug, Clone)]
struct Chunk {
    file: String,
    text: String,
}

/// A header set read back from `cc -E -dD`: its declarations and the
/// macros each file defines.
#[derive(Debug, Default)]
struct Preprocessed {
    chunks: Vec<Chunk>,
    macros: BTreeSet<(String, String)>,
}

/// Splits preprocessed text into the top-level declarations of the
/// `ucp/` and `ucs/` headers, and collects their macros.
fn parse_preprocessed(text: &str, include: &Path) -> Preprocessed {
    let mut pp = Preprocessed::default();
    let mut file: Option<String> = None;
    let mut cur = String::new();
    let mut cur_file = String::new();
    let (mut braces, mut parens) = (0i32, 0i32);
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            // A line marker: `# <line> "<file>" <flags>`.
            let name = rest.split('"').nth(1).unwrap_or("");
            file = header_of(name, include);
            continue;
        }
        let Some(f) = &file else { continue };
        if let Some(def) = line.strip_prefix("#define ") {
            let name: String = def
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let body = def[name.len()..].trim();
            let guard = body.is_empty() && (name.ends_with("_H") || name.ends_with("_H_"));
            if !guard {
                pp.macros.insert((f.clone(), name));
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        for c in line.chars().chain(std::iter::once(' ')) {
            if cur.trim().is_empty() && !c.is_whitespace() {
                cur_file = f.clone();
            }
            cur.push(c);
            match c {
                '{' => braces += 1,
                '(' => parens += 1,
                ')' => parens -= 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 && parens == 0 && cur.trim_start().starts_with("static ") {
                        pp.chunks.push(Chunk {
                            file: cur_file.clone(),
                            text: collapse(&cur),
                        });
                        cur.clear();
                    }
                }
                ';' if braces == 0 && parens == 0 => {
                    cur.pop();
                    pp.chunks.push(Chunk {
                        file: cur_file.clone(),
                        text: collapse(&cur),
                    });
                    cur.clear();
                }
                _ => {}
            }
        }
    }
    assert!(cur.trim().is_empty(), "unterminated declaration: {cur}");
    pp.chunks.retain(|c| !c.text.is_empty());
    pp
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Identifiers and single punctuation characters.
fn tokens(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_ascii_alphanumeric() || c == '_' {
            let mut t = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    t.push(d);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(t);
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            chars.next();
        }
    }
    out
}

fn is_ident(t: &str) -> bool {
    t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
}

/// Replaces whole identifiers of `s` by their entries in `map`.
fn rename(s: &str, map: &HashMap<&str, String>) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in s.chars().chain(std::iter::once('\0')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            // A word that starts with a digit is a number, never a name.
            match map.get(word.as_str()) {
                Some(new) if is_ident(&word) => out.push_str(new),
                _ => out.push_str(&word),
            }
            word.clear();
        }
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

/// What a top-level declaration is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Decl {
    /// `static inline` function with its body.
    StaticFn(String),
    /// Function prototype.
    Function(String),
    /// `extern` variable.
    Variable(String),
    /// Typedef without a body (handles, scalars, callbacks).
    Typedef(String),
    /// Structure or union with a body: typedef name (if any), tag (if any).
    Aggregate(Option<String>, Option<String>),
    /// Enum with a body: typedef name, tag, constants.
    Enum(Option<String>, Option<String>, Vec<String>),
}

/// The identifiers between the first `{` and its `}`, split at top-level
/// commas: the first identifier of each part.
fn enumerators(toks: &[String]) -> Vec<String> {
    let start = toks.iter().position(|t| t == "{").expect("enum body");
    let mut depth = 0;
    let mut out = Vec::new();
    let mut first: Option<&String> = None;
    for t in &toks[start + 1..] {
        match t.as_str() {
            "(" => depth += 1,
            ")" => depth -= 1,
            "}" if depth == 0 => break,
            "," if depth == 0 => {
                out.extend(first.take().cloned());
                continue;
            }
            _ => {}
        }
        if first.is_none() && is_ident(t) {
            first = Some(t);
        }
    }
    out.extend(first.cloned());
    out
}

fn classify(text: &str) -> Decl {
    let toks = tokens(text);
    let first_paren = toks.iter().position(|t| t == "(");
    let before_paren = |i: usize| toks[..i].iter().rev().find(|t| is_ident(t)).cloned();
    let has_body = toks.iter().any(|t| t == "{");
    if toks[0] == "static" {
        let i = first_paren.expect("static function");
        return Decl::StaticFn(before_paren(i).expect("function name"));
    }
    let (typedef, rest) = if toks[0] == "typedef" {
        (true, &toks[1..])
    } else {
        (false, &toks[..])
    };
    if has_body {
        let tag = (is_ident(&rest[1]) && rest[2] == "{").then(|| rest[1].clone());
        let name = typedef.then(|| toks.last().cloned().expect("typedef name"));
        return match rest[0].as_str() {
            "enum" => Decl::Enum(name, tag, enumerators(&toks)),
            "struct" | "union" => Decl::Aggregate(name, tag),
            other => panic!("unexpected declaration with a body ({other}): {text}"),
        };
    }
    if typedef {
        // A callback type `R (*name)(...)`, or `T name`.
        if let Some(i) = toks.windows(2).position(|w| w[0] == "(" && w[1] == "*") {
            return Decl::Typedef(toks[i + 2].clone());
        }
        return Decl::Typedef(toks.last().cloned().expect("typedef name"));
    }
    match first_paren {
        Some(i) => Decl::Function(before_paren(i).expect("function name")),
        None => {
            let end = toks.iter().position(|t| t == "[").unwrap_or(toks.len());
            Decl::Variable(before_paren(end).expect("variable name"))
        }
    }
}

/// Every name a header set declares, as (file, kind, name).
fn names(pp: &Preprocessed) -> BTreeSet<(String, &'static str, String)> {
    let mut out = BTreeSet::new();
    for c in &pp.chunks {
        let f = c.file.clone();
        match classify(&c.text) {
            Decl::StaticFn(n) => {
                out.insert((f, "inline function", n));
            }
            Decl::Function(n) => {
                out.insert((f, "function", n));
            }
            Decl::Variable(n) => {
                out.insert((f, "variable", n));
            }
            Decl::Typedef(n) => {
                out.insert((f, "typedef", n));
            }
            Decl::Aggregate(name, tag) => {
                out.extend(name.map(|n| (f.clone(), "typedef", n)));
                out.extend(tag.map(|t| (f.clone(), "struct tag", t)));
            }
            Decl::Enum(name, tag, consts) => {
                out.extend(name.map(|n| (f.clone(), "typedef", n)));
                out.extend(tag.map(|t| (f.clone(), "enum tag", t)));
                for k in consts {
                    out.insert((f.clone(), "enum constant", k));
                }
            }
        }
    }
    for (f, m) in &pp.macros {
        out.insert((f.clone(), "macro", m.clone()));
    }
    out
}

/// Preprocesses every header of [`HEADERS`] from `include` (`None`: the
/// system headers) with macro definitions kept.
fn preprocess(dir: &Path, include: Option<&Path>) -> Preprocessed {
    let src = dir.join("all_headers.c");
    let text: String = HEADERS
        .iter()
        .map(|h| format!("#include <{h}>\n"))
        .collect();
    std::fs::write(&src, text).expect("write all_headers.c");
    let mut cmd = Command::new("cc");
    if let Some(d) = include {
        cmd.arg("-I").arg(d);
    }
    let out = run(cmd.args(["-E", "-dD", "-H"]).arg(&src));
    let text = String::from_utf8(out.stdout).expect("preprocessed text");
    let from = include.unwrap_or(Path::new(SYSTEM_INCLUDE));
    let n = assert_headers_from(&String::from_utf8_lossy(&out.stderr), from);
    assert!(n >= HEADERS.len(), "only {n} ucp/ucs headers included");
    let pp = parse_preprocessed(&text, from);
    assert!(
        pp.chunks.len() > 100,
        "only {} declarations found under {}",
        pp.chunks.len(),
        from.display()
    );
    pp
}

/// The (type, field) pairs of the probe's `FIELD(T, f)` lines, without a
/// union whose members are listed too (`cb` when `cb.send` is there).
fn probe_fields() -> Vec<(String, String)> {
    let probe = std::fs::read_to_string(repo().join("capi/abi/probe.c")).expect("probe.c");
    let mut fields = Vec::new();
    for line in probe.lines() {
        let Some(args) = line.trim().strip_prefix("FIELD(") else {
            continue;
        };
        let Some(args) = args.strip_suffix(");") else {
            continue;
        };
        let Some((t, f)) = args.split_once(',') else {
            continue;
        };
        let (t, f) = (t.trim(), f.trim());
        if !t.starts_with("probe_") {
            fields.push((t.to_string(), f.to_string()));
        }
    }
    let parents: BTreeSet<(String, String)> = fields
        .iter()
        .filter_map(|(t, f)| f.split_once('.').map(|(p, _)| (t.clone(), p.to_string())))
        .collect();
    fields.retain(|tf| !parents.contains(tf));
    assert!(
        fields.len() > 100,
        "probe.c lists only {} fields",
        fields.len()
    );
    fields
}

/// A C file that includes the rucx headers, then repeats UCX's own
/// declarations: prototypes, variables and typedefs as they are (the
/// compiler rejects any that conflicts), structures and inline functions
/// renamed with a `sys_` prefix, and compile-time checks that each field
/// and each inline function has the same type in both.
fn compat_source(ucx: &Preprocessed) -> String {
    let mut src = String::new();
    for h in HEADERS {
        let _ = writeln!(src, "#include <{h}>");
    }
    src.push_str("\n/* UCX 1.13's declarations, from its installed headers. */\n");
    let mut statics = Vec::new();
    for c in &ucx.chunks {
        match classify(&c.text) {
            Decl::Function(_) | Decl::Variable(_) => {
                let _ = writeln!(src, "{};", c.text);
            }
            Decl::Typedef(_) => {
                let _ = writeln!(src, "{};", c.text);
                let toks = tokens(&c.text);
                if toks[1] == "struct" && !c.text.contains('(') {
                    // The same handle over the renamed structure.
                    let tag = toks[2].as_str();
                    let name = toks.last().expect("typedef name").as_str();
                    let map =
                        HashMap::from([(tag, format!("sys_{tag}")), (name, format!("sys_{name}"))]);
                    let _ = writeln!(src, "{};", rename(&c.text, &map));
                }
            }
            Decl::Aggregate(name, tag) => {
                let mut map = HashMap::new();
                for n in name.iter().chain(tag.iter()) {
                    map.insert(n.as_str(), format!("sys_{n}"));
                }
                let _ = writeln!(src, "{};", rename(&c.text, &map));
            }
            Decl::StaticFn(name) => {
                let map = HashMap::from([(name.as_str(), format!("sys_{name}"))]);
                let _ = writeln!(src, "{}", rename(&c.text, &map));
                statics.push(name);
            }
            Decl::Enum(..) => {}
        }
    }
    src.push_str("\n/* Same types, field by field and function by function. */\n");
    for (t, f) in probe_fields() {
        let _ = writeln!(
            src,
            "_Static_assert(__builtin_types_compatible_p(\
             __typeof__((({t} *)0)->{f}), __typeof__(((sys_{t} *)0)->{f})), \
             \"field {f} of {t} differs from UCX\");"
        );
    }
    for f in statics {
        let _ = writeln!(
            src,
            "_Static_assert(__builtin_types_compatible_p(\
             __typeof__({f}), __typeof__(sys_{f})), \
             \"inline function {f} differs from UCX\");"
        );
    }
    src
}

#[test]
fn declarations_match_ucx() {
    if let Some(why) = missing_prerequisite() {
        return skip_or_fail(why);
    }
    let dir = scratch("declarations");
    let include = capi_include();
    let rucx = preprocess(&dir, Some(&include));
    let ucx = preprocess(&dir, None);

    // The same names in the same files.
    let (ours, theirs) = (names(&rucx), names(&ucx));
    let mut report = String::new();
    for (f, kind, n) in theirs.difference(&ours) {
        if kind == &"macro" && f == SUBSET_HEADER {
            continue;
        }
        let _ = writeln!(report, "  missing in rucx: {kind} {n} ({f})");
    }
    for (f, kind, n) in ours.difference(&theirs) {
        let _ = writeln!(report, "  only in rucx: {kind} {n} ({f})");
    }
    assert!(
        report.is_empty(),
        "capi/include declares other names than UCX 1.13:\n{report}"
    );
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, kind, _) in &ours {
        *per_kind.entry(*kind).or_default() += 1;
    }

    // The same types: UCX's declarations compile after ours.
    let src = dir.join("compat.c");
    std::fs::write(&src, compat_source(&ucx)).expect("write compat.c");
    compile(
        &src,
        Some(&include),
        &["-fsyntax-only"],
        &dir.join("compat.o"),
    );
    println!("same names and types as UCX 1.13: {per_kind:?}");
}

#[test]
fn examples_compile_unchanged() {
    if let Some(why) = missing_prerequisite() {
        return skip_or_fail(why);
    }
    let examples = Path::new(UCX_EXAMPLES);
    if !examples.join("ucp_hello_world.c").exists() {
        return skip_or_fail("UCX's examples not installed (libucx-dev docs)");
    }
    let dir = scratch("examples");
    let include = capi_include();
    for name in ["ucp_hello_world", "ucp_client_server"] {
        let src = examples.join(format!("{name}.c"));
        let obj = dir.join(format!("{name}.o"));
        compile(&src, Some(&include), &["-c"], &obj);
        assert!(obj.exists(), "{name}.o not written");
    }
}

#[test]
fn headers_give_c_linkage_in_cplusplus() {
    if let Some(why) = missing_prerequisite() {
        return skip_or_fail(why);
    }
    if !have("c++") {
        return skip_or_fail("no C++ compiler (c++)");
    }
    let dir = scratch("cplusplus");
    let include = capi_include();
    let src = dir.join("linkage.cc");
    let mut text: String = HEADERS
        .iter()
        .map(|h| format!("#include <{h}>\n"))
        .collect();
    // A few functions from each header that declares any: their symbols
    // must come out unmangled.
    let funcs = [
        "ucp_worker_progress",
        "ucp_init_version",
        "ucp_request_is_completed",
        "ucs_status_string",
    ];
    text.push_str("void *linkage_refs[] = {\n");
    for f in funcs {
        let _ = writeln!(text, "    (void *)&{f},");
    }
    text.push_str("    (void *)&ucs_memory_type_names,\n    (void *)&ucs_thread_mode_names,\n");
    text.push_str("};\nint linkage_init(ucp_context_h *c) { return ucp_init(0, 0, c); }\n");
    std::fs::write(&src, text).expect("write linkage.cc");
    let obj = dir.join("linkage.o");
    let mut cmd = Command::new("c++");
    cmd.arg("-I")
        .arg(&include)
        .args(["-H", "-Wall", "-Werror", "-c", "-o"])
        .arg(&obj)
        .arg(&src);
    let stderr = String::from_utf8_lossy(&run(&mut cmd).stderr).into_owned();
    assert!(assert_headers_from(&stderr, &include) >= HEADERS.len());
    let nm = run(Command::new("nm").arg("-u").arg(&obj));
    let undefined = String::from_utf8_lossy(&nm.stdout);
    for f in funcs {
        assert!(
            undefined
                .lines()
                .any(|l| l.split_whitespace().last() == Some(f)),
            "{f} is not referenced by its C name from C++:\n{undefined}"
        );
    }
}
