//! The reason a spot node is drained with: written by `gpuroom agent` on the
//! compute node (`scontrol update … state=drain reason=…`), read back from
//! Slurm by the room on the head node, so both sides share this one format.
//!
//! `spot interruption: terminate at 2026-12-04T22:10:00Z (gpuroom agent)`
//!
//! Plain data: no IO, no clock. `parse` is tolerant, since the text comes
//! back through Slurm (which may append its own `[user@time]` tail) and may
//! have been typed by a person, and it never panics.

use chrono::{DateTime, SecondsFormat};

use super::units::At;

/// How every spot drain reason starts.
pub const REASON_PREFIX: &str = "spot interruption";

/// Who wrote the reason, at its end.
const SIGNATURE: &str = "(gpuroom agent)";

/// A spot drain read back from a node's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpotDrain {
    /// `stop`, `terminate` or `hibernate` as IMDS said it (lowercase); empty
    /// when the reason names no action ("spot interruption" alone).
    pub kind: String,
    /// When the instance goes, to the second; `None` when the reason has no time.
    pub deadline: Option<At>,
}

/// The reason for an interruption notice of `kind` ("stop", "terminate",
/// "hibernate") due at `deadline`, to the second, in UTC.
pub fn reason(kind: &str, deadline: Option<At>) -> String {
    match deadline {
        Some(at) => format!("{REASON_PREFIX}: {kind} at {} {SIGNATURE}", at.to_rfc3339_opts(SecondsFormat::Secs, true)),
        None => format!("{REASON_PREFIX}: {kind} {SIGNATURE}"),
    }
}

/// The spot drain a node's reason describes, or `None` for any other
/// reason. Case of the prefix and the action is ignored; whatever follows
/// the time (our signature, Slurm's `[user@time]`) is ignored too.
pub fn parse(reason: &str) -> Option<SpotDrain> {
    let text = reason.trim_start();
    let head = text.get(..REASON_PREFIX.len())?;
    if !head.eq_ignore_ascii_case(REASON_PREFIX) {
        return None;
    }
    let rest = &text[REASON_PREFIX.len()..];
    // "spot interruptions" or "spot interruption2" is another word, not ours.
    if rest.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let rest = rest.trim_start().strip_prefix(':').unwrap_or(rest).trim_start();
    let mut words = rest.split_whitespace();
    let kind = match words.next() {
        Some(w) if !w.is_empty() && w.chars().all(|c| c.is_ascii_alphabetic()) && !w.eq_ignore_ascii_case("at") => w.to_ascii_lowercase(),
        Some(w) if w.eq_ignore_ascii_case("at") => {
            // No action named, a time only: "spot interruption: at …".
            let deadline = words.next().and_then(time);
            return Some(SpotDrain { kind: String::new(), deadline });
        }
        _ => return Some(SpotDrain { kind: String::new(), deadline: None }),
    };
    let deadline = match words.next() {
        Some(w) if w.eq_ignore_ascii_case("at") => words.next().and_then(time),
        _ => None,
    };
    Some(SpotDrain { kind, deadline })
}

fn time(word: &str) -> Option<At> {
    DateTime::parse_from_rfc3339(word.trim_end_matches([',', ';', '.'])).ok().map(|t| t.to_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> At {
        DateTime::parse_from_rfc3339(text).unwrap().to_utc()
    }

    #[test]
    fn the_reason_reads_as_documented_and_round_trips() {
        let deadline = at("2026-12-04T22:10:00Z");
        let text = reason("terminate", Some(deadline));
        assert_eq!(text, "spot interruption: terminate at 2026-12-04T22:10:00Z (gpuroom agent)");
        assert_eq!(parse(&text), Some(SpotDrain { kind: "terminate".into(), deadline: Some(deadline) }));
        for kind in ["stop", "hibernate"] {
            assert_eq!(parse(&reason(kind, Some(deadline))), Some(SpotDrain { kind: kind.into(), deadline: Some(deadline) }));
        }
        assert_eq!(parse(&reason("stop", None)), Some(SpotDrain { kind: "stop".into(), deadline: None }));
        // Sub-second times are written to the second.
        let fine = at("2026-12-04T22:10:00.750Z");
        assert_eq!(reason("stop", Some(fine)), "spot interruption: stop at 2026-12-04T22:10:00Z (gpuroom agent)");
    }

    #[test]
    fn what_slurm_and_people_do_to_the_text_is_tolerated() {
        let deadline = Some(at("2026-12-04T22:10:00Z"));
        let slurm = "spot interruption: terminate at 2026-12-04T22:10:00Z (gpuroom agent) [root@2026-12-04T22:08:01]";
        assert_eq!(parse(slurm).unwrap().deadline, deadline);
        assert_eq!(parse("Spot Interruption: TERMINATE at 2026-12-04T22:10:00Z").unwrap().kind, "terminate");
        assert_eq!(parse("  spot interruption:terminate at 2026-12-04T23:10:00+01:00").unwrap().deadline, deadline);
        assert_eq!(parse("spot interruption"), Some(SpotDrain { kind: String::new(), deadline: None }));
        assert_eq!(parse("spot interruption expected"), Some(SpotDrain { kind: "expected".into(), deadline: None }));
        assert_eq!(parse("spot interruption: stop at soon"), Some(SpotDrain { kind: "stop".into(), deadline: None }));
        assert_eq!(parse("spot interruption: at 2026-12-04T22:10:00Z").unwrap().deadline, deadline);
        assert_eq!(parse("spot interruption (gpuroom agent)").unwrap().kind, "");
    }

    #[test]
    fn other_reasons_are_not_spot_drains_and_nothing_panics() {
        for text in
            ["", "maintenance", "ECC errors on GPU 3", "spot", "spot interruptions", "spot interruption2", "not a spot interruption", "Kill task failed"]
        {
            assert_eq!(parse(text), None, "{text:?}");
        }
        // Multi-byte text at and around the prefix's length must not split a character.
        for text in [
            "spot interruptioné",
            "spot interruptionédrain",
            "ééééééééééééééééé",
            "spot interruption: 終了 at ∞",
            "spot interruption:",
            "spot interruption: at",
        ] {
            let _ = parse(text);
        }
        assert_eq!(parse("spot interruption:"), Some(SpotDrain { kind: String::new(), deadline: None }));
    }
}
