//! flycode's integration tests, one binary: fixtures, the real `flycode` executable, properties.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::disallowed_methods)] // tests make their fixtures directly

mod suite;
