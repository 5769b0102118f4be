//! The black-box suite in one binary: SarvCrawl driven over HTTP (and its Lambda handlers fed
//! events, and its store adapters against their contract), one module per area. Each test
//! starts what it needs: a `sarvcrawl serve` on a free port with a fresh data directory or fresh
//! AWS resources, fixture websites on 127.0.0.1, taps that count connections.

mod api;
mod auth;
mod batch;
mod browser_lifecycle;
mod cli;
mod clients;
mod crawl;
mod documents;
mod emulator;
mod extract;
mod faults;
mod hostile;
mod idempotency;
mod lambda;
mod map;
mod monitors;
mod openapi;
mod politeness;
mod recovery;
mod redelivery;
mod render;
mod renderer;
mod scrape;
mod screenshots;
mod search;
mod ssrf;
mod store;
mod upload;
mod webhooks;
