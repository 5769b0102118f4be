//! Helpers for SarvCrawl's black-box tests: a `sarvcrawl serve` process on a free port with a
//! fresh data directory, an HTTP client for its API, fixture websites on 127.0.0.1, and
//! listeners that count connections.

pub mod fixture;
pub mod server;

pub use fixture::{tree_paths, tree_site, Route, Site, Tap};
pub use server::{Api, Serve};
