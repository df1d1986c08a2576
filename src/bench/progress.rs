//! How the bench tells a person what it is doing: a line on standard error.

/// A progress line on standard error.
pub(crate) fn progress(what: std::fmt::Arguments<'_>) {
    eprintln!("bench: {what}");
}
