//! Slurm's hostlist expressions, as Slurm hands them to a ResumeProgram or
//! SuspendProgram: `cloud-[1-3,5],gpu-st-p4d-1`, `n[001-010]` (zero padding
//! kept: the width of a range's first number), several bracket groups in one
//! name (`rack[1-2]-n[1-2]`, the first group outermost), items separated by
//! commas (or blanks) outside brackets.
//!
//! Owns the parsing only, and says what is wrong with bad input (never a
//! panic); it must not run Slurm's commands (`scontrol show hostnames` is
//! not needed) nor know what the names are for. It refuses anything that is
//! not a plain node name (letters, digits, `-`, `_`, `.`), since the names go
//! on into commands and tags; `domain::slurm::expand_hostlist`, which reads
//! Slurm's own outputs, is this parser without its words.

/// The most names one expression may give (Slurm's own MAX_RANGE is 64k).
pub const MAX_NAMES: usize = 65_536;

/// Why an expression could not be expanded, with the expression itself.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("hostlist {expr:?}: {why}")]
pub struct HostlistError {
    pub expr: String,
    pub why: String,
}

/// Every node name of `expr`, in order, each once; only plain node-name
/// characters (the names go into commands and tags).
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    expand_names(expr, Names::Plain)
}

/// The same grammar for the node lists Slurm itself prints: any character
/// but a control, a blank, a bracket or a comma may be part of a name, since
/// one odd name (the console cleans it) must not cost the whole reading.
pub fn expand_printed(expr: &str) -> Result<Vec<String>, HostlistError> {
    expand_names(expr, Names::AsPrinted)
}

/// Which characters a node name may have.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Names {
    Plain,
    AsPrinted,
}

fn expand_names(expr: &str, names_are: Names) -> Result<Vec<String>, HostlistError> {
    let fail = |why: String| HostlistError { expr: crate::domain::text::clean(expr).chars().take(200).collect(), why };
    if let Some(c) = expr.chars().find(|c| c.is_control() && !c.is_whitespace()) {
        return Err(fail(format!("a control character ({c:?}) is not part of a node name")));
    }
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    // Repeats count too: a thousand copies of one large range would otherwise
    // be expanded a thousand times before anything says no.
    let mut made = 0usize;
    for item in items(expr).map_err(&fail)? {
        let expanded = expand_item(item, names_are, MAX_NAMES - made).map_err(|why| fail(format!("{item:?}: {why}")))?;
        made += expanded.len();
        for name in expanded {
            if seen.insert(name.clone()) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Err(fail("no node names in it".into()));
    }
    Ok(names)
}

/// The items: split at commas and blanks outside brackets.
fn items(expr: &str) -> Result<Vec<&str>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in expr.char_indices() {
        match c {
            '[' if depth > 0 => return Err(format!("a bracket inside a bracket at byte {i}")),
            '[' => depth = 1,
            ']' if depth == 0 => return Err(format!("a ']' with no '[' before it at byte {i}")),
            ']' => depth = 0,
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !expr[start..i].is_empty() {
                    out.push(&expr[start..i]);
                } else if c == ',' {
                    return Err(format!("an empty name before the comma at byte {i}"));
                }
                start = i + c.len_utf8();
            }
            c if depth > 0 && c.is_whitespace() => return Err(format!("a blank inside brackets at byte {i}")),
            _ => {}
        }
    }
    if depth > 0 {
        return Err("a '[' is never closed".into());
    }
    if !expr[start..].is_empty() {
        out.push(&expr[start..]);
    } else if expr.trim_end().ends_with(',') {
        return Err("it ends with a comma".into());
    }
    Ok(out)
}

fn name_chars(text: &str, names_are: Names) -> Result<(), String> {
    if names_are == Names::AsPrinted {
        // Blanks, controls, brackets and commas never reach here as names.
        return Ok(());
    }
    match text.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        Some(c) => Err(format!("{c:?} is not a character of a node name (letters, digits, '-', '_', '.')")),
        None => Ok(()),
    }
}

/// One bracket group's numbers: `(lo, hi, width)` per range, in order.
type Ranges = Vec<(u64, u64, usize)>;

fn ranges_of(ranges: &str) -> Result<Ranges, String> {
    if ranges.is_empty() {
        return Err("empty brackets".into());
    }
    let mut out = Vec::new();
    for part in ranges.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let number = |t: &str| -> Result<u64, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{part:?} is not a number or a range of numbers (like 1-3 or 001-010)"));
            }
            t.parse().map_err(|_| format!("{t} is too large a number"))
        };
        let (lo, hi) = (number(a)?, number(b)?);
        if hi < lo {
            return Err(format!("the range {part} runs backwards"));
        }
        out.push((lo, hi, a.len()));
    }
    Ok(out)
}

/// One item, its bracket groups expanded (the first group outermost), at
/// most `room` names. A loop over the groups, not a recursion: a name with
/// tens of thousands of groups must not exhaust the stack.
fn expand_item(item: &str, names_are: Names, room: usize) -> Result<Vec<String>, String> {
    // The item as text, group, text, group, …, text.
    let mut texts = Vec::new();
    let mut groups: Vec<Ranges> = Vec::new();
    let mut rest = item;
    while let Some((text, tail)) = rest.split_once('[') {
        let (ranges, after) = tail.split_once(']').ok_or("a '[' is never closed")?;
        name_chars(text, names_are)?;
        texts.push(text);
        groups.push(ranges_of(ranges)?);
        rest = after;
    }
    name_chars(rest, names_are)?;
    texts.push(rest);
    let mut count: u64 = 1;
    for group in &groups {
        let size = group.iter().map(|(lo, hi, _)| hi - lo + 1).fold(0u64, u64::saturating_add);
        count = count.saturating_mul(size);
        if count > room as u64 {
            return Err(format!("more than {MAX_NAMES} names"));
        }
    }
    // Built from the last group back, so the first group varies slowest.
    let mut names = vec![texts[groups.len()].to_string()];
    for (group, text) in groups.iter().zip(&texts).rev() {
        let mut longer = Vec::with_capacity(names.len());
        for &(lo, hi, width) in group {
            for n in lo..=hi {
                longer.extend(names.iter().map(|s| format!("{text}{n:0width$}{s}")));
            }
        }
        names = longer;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(expr: &str) -> Vec<String> {
        expand(expr).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn ranges_lists_padding_and_several_groups_expand_in_order() {
        assert_eq!(names("cloud-[1-3,5],gpu-st-p4d-1"), ["cloud-1", "cloud-2", "cloud-3", "cloud-5", "gpu-st-p4d-1"]);
        assert_eq!(names("n[001-003]"), ["n001", "n002", "n003"]);
        assert_eq!(names("n[08-11]"), ["n08", "n09", "n10", "n11"]);
        assert_eq!(names("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(names("n[7]"), ["n7"]);
        assert_eq!(names("rack[1-2]-n[1-2]"), ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]);
        assert_eq!(names("a[1-2]b"), ["a1b", "a2b"]);
        assert_eq!(names("localhost"), ["localhost"]);
        assert_eq!(names("a1 a2,a3"), ["a1", "a2", "a3"], "blanks separate too");
        assert_eq!(names("a[1-2],a1,a[2]"), ["a1", "a2"], "each name once");
        assert_eq!(names("gpu-dy-p4d-24xlarge-[1-2]"), ["gpu-dy-p4d-24xlarge-1", "gpu-dy-p4d-24xlarge-2"]);
    }

    #[test]
    fn what_slurm_printed_may_hold_odd_names_what_goes_into_commands_may_not() {
        assert_eq!(expand_printed("local\u{202e}host,n[1-2]é").unwrap(), ["local\u{202e}host", "n1é", "n2é"]);
        assert!(expand("local\u{202e}host").unwrap_err().to_string().contains("not a character"));
        assert!(expand_printed("n[1-2").is_err() && expand_printed("a\u{7}b").is_err(), "the grammar is the same");
    }

    #[test]
    fn bad_input_is_a_clear_error_never_a_panic() {
        for (expr, says) in [
            ("", "no node names"),
            ("  ", "no node names"),
            ("n[1-3", "never closed"),
            ("n1-3]", "no '['"),
            ("n[[1-3]]", "inside a bracket"),
            ("n[3-1]", "runs backwards"),
            ("n[a-c]", "not a number"),
            ("n[1-]", "not a number"),
            ("n[]", "empty brackets"),
            ("n[1,,2]", "not a number"),
            ("a,,b", "empty name"),
            ("a,b,", "ends with a comma"),
            ("n[1-99999999999999999999]", "too large"),
            ("n[0-99999999]", "more than 65536"),
            ("no;de", "not a character"),
            ("node=1", "not a character"),
            ("n[1 - 2]", "blank inside"),
            ("a\u{1b}[31m", "control character"),
            ("n[1-2]x[", "never closed"),
            ("n[1-40000],n[1-40000]", "more than 65536"),
        ] {
            let err = expand(expr).expect_err(expr);
            assert!(err.to_string().contains(says), "{expr:?}: {err}");
        }
    }

    /// Issue 33: 40,000 bracket groups overflowed the stack of
    /// `slurm-resume`; a thousand copies of one range took 17 s to refuse.
    #[test]
    fn many_groups_and_many_repeats_are_cheap() {
        let deep = format!("n{}", "[1]".repeat(40_000));
        assert_eq!(expand(&deep).unwrap(), [format!("n{}", "1".repeat(40_000))]);
        let repeats = vec!["n[1-60000]"; 1_000].join(",");
        // Refused at the second copy, counting repeats, not after expanding all thousand.
        assert!(expand(&repeats).unwrap_err().to_string().contains("more than 65536"));
    }
}
