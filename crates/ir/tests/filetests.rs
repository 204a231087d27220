//! File tests: each `tests/filetests/*.kir` holds one function in the text form and expectations in
//! comments:
//!
//! ```text
//! # run: (f32[3] [1.0, 2.0, 3.0], f32[] 2.0) -> (f32[3] [2.0, 4.0, 6.0])
//! ```
//!
//! Arguments and results are `type value` with values written as constants are in the text form.
//! A directive continues on the following comment lines until its brackets balance. The runner
//! parses the file, checks that printing and parsing round-trips, then evaluates every `run` with
//! [`kiln_ir::eval`] and compares the results bitwise.

use kiln_ir::{Array, Function, eval, parse};
use std::path::{Path, PathBuf};

/// One `# run:` directive.
struct Run {
    line: usize,
    args: Vec<Array>,
    expected: Vec<Array>,
}

fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "kir"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "filetests missing in {}", dir.display());
    files
}

/// True when every bracket opened in `s` is closed.
fn balanced(s: &str) -> bool {
    let depth = |open, close| s.matches(open).count() == s.matches(close).count();
    depth('(', ')') && depth('[', ']')
}

/// Splits `(a, b, ...)` at its top-level commas.
fn tuple_items(s: &str) -> Vec<String> {
    let inner = s.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).expect("a parenthesized list");
    let (mut items, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in inner.chars() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        items.push(cur);
    }
    items
}

/// Typed values `f32[3] [1.0, 2.0, 3.0]`, read by the text parser itself: they become the constants
/// of a function with no equations.
fn values(s: &str) -> Vec<Array> {
    let items = tuple_items(s);
    let consts: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let item = item.trim();
            let end = item.find(']').expect("a type `dtype[dims]`") + 1;
            format!("x{i}:{} = {}", &item[..end], &item[end..])
        })
        .collect();
    let src = format!("{{ lambda ; {} . let in () }}", consts.join(", "));
    let f = parse(&src).unwrap_or_else(|e| panic!("bad values {s:?}: {e}"));
    f.consts.iter().map(|c| (*c.value).clone()).collect()
}

fn runs(src: &str) -> Vec<Run> {
    let lines: Vec<&str> = src.lines().collect();
    let mut runs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("# run:") else { continue };
        let mut text = rest.to_string();
        let mut j = i + 1;
        while !(text.contains("->") && balanced(&text) && !text.split("->").nth(1).unwrap().trim().is_empty())
        {
            let next = lines.get(j).and_then(|l| l.trim_start().strip_prefix('#'));
            text.push(' ');
            text.push_str(next.unwrap_or_else(|| panic!("line {}: unterminated run directive", i + 1)));
            j += 1;
        }
        let (args, expected) = text.split_once("->").unwrap();
        runs.push(Run { line: i + 1, args: values(args), expected: values(expected) });
    }
    runs
}

fn load(path: &Path) -> (Function, Vec<Run>) {
    let src = std::fs::read_to_string(path).unwrap();
    let f = parse(&src).unwrap_or_else(|e| panic!("{}:{e}", path.display()));
    let runs = runs(&src);
    assert!(!runs.is_empty(), "{}: no `# run:` directive", path.display());
    (f, runs)
}

#[test]
fn filetests_parse_and_round_trip() {
    for path in files() {
        let (f, runs) = load(&path);
        let (text, table) = f.to_text_with_consts();
        assert_eq!(Function::parse_with_consts(&text, &table).as_ref(), Ok(&f), "{}", path.display());
        for run in &runs {
            let types: Vec<_> = run.args.iter().map(Array::ty).collect();
            assert_eq!(types, f.param_types(), "{}:{}: argument types", path.display(), run.line);
            let types: Vec<_> = run.expected.iter().map(Array::ty).collect();
            assert_eq!(types, f.output_types(), "{}:{}: result types", path.display(), run.line);
        }
    }
}

#[test]
#[ignore = "needs the elementwise interpreter (branch interp-elem, not committed yet); run with --ignored"]
fn filetests_run() {
    for path in files() {
        let (f, runs) = load(&path);
        for run in runs {
            let got = eval(&f, &run.args).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), run.line));
            // `Array`'s equality is bitwise (NaN payloads, signed zeros).
            assert_eq!(got, run.expected, "{}:{}", path.display(), run.line);
        }
    }
}
