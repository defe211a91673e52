//! How errors are shown: every error type of the queue keeps its cause as
//! `source()` and says only its own part in `Display`; [`Chain`] prints the
//! whole story, `outer: cause: cause…`, for logs and Lambda error messages.

use std::error::Error;
use std::fmt;

/// A boxed cause (an SDK error, an I/O error…).
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Displays an error followed by each of its sources, joined by `": "`.
pub struct Chain<'a>(pub &'a (dyn Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(e) = cause {
            write!(f, ": {e}")?;
            cause = e.source();
        }
        Ok(())
    }
}

/// The whole chain of `e` as one line.
pub fn chain(e: &(dyn Error + '_)) -> String {
    Chain(e).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn prints_every_cause_once() {
        let e = Outer(std::io::Error::other("disk full"));
        assert_eq!(chain(&e), "outer: disk full");
    }
}
