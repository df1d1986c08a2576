//! Every number of a configuration file checked against its key's range,
//! with the key and the range in the message.
//!
//! Serde takes `nan`, `inf` and negatives into float and signed fields
//! without a word (an `idle_util_pct = inf` reclaims every GPU), and its own
//! refusals (a negative into an unsigned field, a float into an integer one)
//! name neither the key nor what it accepts. So the document is walked as a
//! TOML tree twice: before serde, numbers under known keys are held to their
//! rule; after serde accepted the document, any number under a key with no
//! rule must still be finite and not negative.

use crate::domain::units::{HORIZON_SECS, Micros};

/// What one key accepts.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Rule {
    /// A whole number within `[min, max]`.
    Int(i64, i64),
    /// A finite number from `min` (excluded when `above`) to `max` (inclusive; ∞: no bound).
    Float { min: f64, above: bool, max: f64 },
    /// An amount of money as decimal text ("19.22"), not negative.
    Money,
}

/// Durations in seconds: none past the horizon the core reasons about.
pub const SECS: Rule = Rule::Int(0, HORIZON_SECS);
/// Durations where 0 would make the thing run without pause.
pub const POSITIVE_SECS: Rule = Rule::Int(1, HORIZON_SECS);
pub const U8: Rule = Rule::Int(0, u8::MAX as i64);
pub const U32: Rule = Rule::Int(0, u32::MAX as i64);
/// Counts where 0 would leave nothing to do.
pub const COUNT: Rule = Rule::Int(1, u32::MAX as i64);
pub const NON_NEGATIVE: Rule = Rule::Float { min: 0.0, above: false, max: f64::INFINITY };
pub const POSITIVE: Rule = Rule::Float { min: 0.0, above: true, max: f64::INFINITY };
pub const FRACTION: Rule = Rule::Float { min: 0.0, above: false, max: 1.0 };
pub const PERCENT: Rule = Rule::Float { min: 0.0, above: false, max: 100.0 };

/// A value `key` accepts, as TOML, with the rules between keys taken into
/// account: what the documentation and the tests set each key to.
pub fn accepted_example(key: &str, rule: Rule) -> String {
    match (key, rule) {
        ("checkpoint.max_interval", _) => "7200".into(),
        ("spot.bids.top", _) => "2.5".into(),
        ("cost.budget.limit_pct" | "cost.budget.block_pct", _) => "120".into(),
        (_, Rule::Int(min, _)) => min.max(0).to_string(),
        (_, Rule::Float { min, above, .. }) => (if above { min + 0.5 } else { min }).to_string(),
        (_, Rule::Money) => "\"1.5\"".into(),
    }
}
/// Polling intervals (seconds) of the live adapters: a timer far in the
/// future overflows the runtime's clock, and 0 is taken as 1.
pub const EVERY_SECS: Rule = Rule::Int(0, 86_400);
/// Timeouts (milliseconds) of the live adapters; 0 is taken as 1.
pub const TIMEOUT_MS: Rule = Rule::Int(0, 3_600_000);

/// Which numbers a pass looks at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Those under keys with a rule (before serde, so its vaguer refusal never comes first).
    Known,
    /// Those under keys with none (after serde accepted the document, so a
    /// typo is reported as an unknown key, not as a number out of range).
    Rest,
}

impl Rule {
    fn accepts(&self, value: &toml::Value) -> Option<bool> {
        match (self, value) {
            (Rule::Int(min, max), toml::Value::Integer(i)) => Some(min <= i && i <= max),
            (Rule::Int(..), toml::Value::Float(_)) => Some(false),
            (Rule::Float { .. }, toml::Value::Integer(i)) => Some(self.accepts_float(*i as f64)),
            (Rule::Float { .. }, toml::Value::Float(f)) => Some(self.accepts_float(*f)),
            (Rule::Money, toml::Value::String(s)) => Some(Micros::parse_decimal(s).is_ok_and(|m| m.0 >= 0)),
            // Money is text, so that it is exact; a bare number is refused with that said.
            (Rule::Money, toml::Value::Integer(_) | toml::Value::Float(_)) => Some(false),
            // Any other type is serde's to refuse, with its line.
            _ => None,
        }
    }

    fn accepts_float(&self, f: f64) -> bool {
        let Rule::Float { min, above, max } = *self else { return false };
        f.is_finite() && (if above { f > min } else { f >= min }) && f <= max
    }

    /// What the key accepts, as the message says it.
    pub fn describe(&self) -> String {
        match *self {
            Rule::Int(min, max) => format!("must be a whole number within [{min}, {max}]"),
            Rule::Float { min, above, max } if max.is_infinite() => format!("must be a finite number {} {min}", if above { ">" } else { "≥" }),
            Rule::Float { min, above, max } => format!("must be a finite number within {}{min}, {max}]", if above { "(" } else { "[" }),
            Rule::Money => "must be an amount ≥ 0 as text with at most 6 decimals (\"19.22\")".into(),
        }
    }
}

/// Checks the numbers of `doc` that `pass` covers; the message names the key
/// (`sources.nodes[0].gpus`), the value and what the key accepts.
pub fn check(doc: &toml::Table, rules: &[(&str, Rule)], pass: Pass) -> Result<(), String> {
    let mut path = String::new();
    walk_table(doc, &mut path, &mut |path, value| {
        let pattern = pattern_of(path);
        let rule = rules.iter().find(|(key, _)| *key == pattern).map(|(_, rule)| *rule);
        let (rule, accepted) = match (pass, rule) {
            (Pass::Known, Some(rule)) => (rule, rule.accepts(value)),
            (Pass::Rest, None) => (NON_NEGATIVE, NON_NEGATIVE.accepts(value)),
            _ => return Ok(()),
        };
        match accepted {
            Some(false) => Err(format!("{path} = {}: {}", shown(value), rule.describe())),
            _ => Ok(()),
        }
    })
}

/// Checks one number given outside a TOML tree (a field serde already read).
pub fn check_value(key: &str, value: toml::Value, rule: Rule) -> Result<(), String> {
    match rule.accepts(&value) {
        Some(false) => Err(format!("{key} = {}: {}", shown(&value), rule.describe())),
        _ => Ok(()),
    }
}

type Visit<'a> = dyn FnMut(&str, &toml::Value) -> Result<(), String> + 'a;

fn walk_table(table: &toml::Table, path: &mut String, visit: &mut Visit) -> Result<(), String> {
    for (key, value) in table {
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        walk(value, path, visit)?;
        path.truncate(len);
    }
    Ok(())
}

fn walk(value: &toml::Value, path: &mut String, visit: &mut Visit) -> Result<(), String> {
    match value {
        toml::Value::Table(table) => walk_table(table, path, visit),
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(item, path, visit)?;
                path.truncate(len);
            }
            Ok(())
        }
        leaf => visit(path, leaf),
    }
}

/// `sources.nodes[3].gpus` as its rule is keyed: `sources.nodes[].gpus`.
fn pattern_of(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => {
                in_index = false;
                out.push_str("[]");
            }
            _ if in_index => {}
            c => out.push(c),
        }
    }
    out
}

/// A value as TOML writes it (`nan`, `-inf`, `"text"`), long text cut.
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::Float(f) if f.is_nan() => "nan".into(),
        // Escaped once here; Debug's quoting would escape the escapes again.
        toml::Value::String(s) => format!("\"{}\"", crate::domain::text::bounded(s, 80, 80)),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn known_keys_are_held_to_their_rule_and_the_message_says_which() {
        let rules = [("a.pct", PERCENT), ("a.list[].n", COUNT), ("a.price", Rule::Money)];
        let err = check(&doc("[a]\npct = inf\n"), &rules, Pass::Known).unwrap_err();
        assert_eq!(err, "a.pct = inf: must be a finite number within [0, 100]");
        assert_eq!(check(&doc("[a]\npct = nan\n"), &rules, Pass::Known).unwrap_err(), "a.pct = nan: must be a finite number within [0, 100]");
        assert!(check(&doc("[a]\npct = 100\n"), &rules, Pass::Known).is_ok());
        let err = check(&doc("[[a.list]]\nn = 2\n[[a.list]]\nn = 0\n"), &rules, Pass::Known).unwrap_err();
        assert_eq!(err, "a.list[1].n = 0: must be a whole number within [1, 4294967295]");
        assert!(check(&doc("[a]\nlist = [{ n = 2.5 }]\n"), &rules, Pass::Known).unwrap_err().contains("whole number"));
        assert!(check(&doc("[a]\nprice = \"-1.5\"\n"), &rules, Pass::Known).unwrap_err().starts_with("a.price = \"-1.5\": must be an amount ≥ 0"));
        // A type serde refuses anyway is left to serde, which names the line.
        assert!(check(&doc("[a]\npct = \"five\"\n"), &rules, Pass::Known).is_ok());
    }

    #[test]
    fn the_rest_must_be_finite_and_not_negative() {
        let rules = [("a.pct", PERCENT)];
        assert!(check(&doc("[a]\nother = -inf\n"), &rules, Pass::Known).is_ok(), "not its pass");
        assert_eq!(check(&doc("[a]\nother = -inf\n"), &rules, Pass::Rest).unwrap_err(), "a.other = -inf: must be a finite number ≥ 0");
        assert!(check(&doc("[a]\nxs = [1, -2]\n"), &rules, Pass::Rest).unwrap_err().starts_with("a.xs[1] = -2"));
        assert!(check(&doc("[a]\npct = 1e9\nother = 3\n"), &rules, Pass::Rest).is_ok(), "a ruled key is the known pass's");
    }

    #[test]
    fn ranges_read_as_intervals() {
        assert_eq!(Rule::Float { min: 0.0, above: true, max: 1.0 }.describe(), "must be a finite number within (0, 1]");
        assert_eq!(POSITIVE.describe(), "must be a finite number > 0");
        assert_eq!(pattern_of("s.nodes[12].gpus"), "s.nodes[].gpus");
    }
}
