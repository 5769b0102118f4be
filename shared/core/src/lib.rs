//! SarvCrawl's application core.
//!
//! Everything here is independent of where the service runs: the domain model, the ports that
//! storage and queue adapters implement, the use cases, the fetch and extraction engine, and
//! transport-neutral HTTP handlers. The embedded server (SQLite and files) and the AWS deployment
//! (DynamoDB, SQS and S3) plug adapters into [`ports`].

pub mod app;
pub mod auth;
pub mod domain;
pub mod engine;
pub mod http;
pub mod known;
pub mod ports;
pub mod stages;

/// The crate version, reported by `/api/health` and in the User-Agent.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
