//! The terminal views: how `stat` and `top` print their frames and
//! tables, as text for a terminal (names from outside escaped) or as a
//! JSON line each. The application ([`crate::app`]) opens the counters and
//! samplers, runs the loop and hands each frame or table to a view here.

pub(crate) mod stat;
pub(crate) mod top;

/// Why a view could not print.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// Writing to the output failed (a closed pipe, a full disk).
    #[error("cannot write the output: {0}")]
    Io(#[from] std::io::Error),
    /// A JSON line could not be made.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}
