//! The domain model: identifiers, jobs and their status machine, validated requests.

pub mod extract;
pub mod ids;
pub mod job;
pub mod monitor;
pub mod request;
pub mod validate;
pub mod webhook;

pub use extract::{ExtractSpec, Field, FieldKind, SelectorSchema};
pub use ids::{JobId, UserId};
pub use job::{ErrorCode, Job, JobError, JobKind, JobStatus, Progress};
pub use monitor::{
    CheckRequest, LastDelivery, Monitor, MonitorId, MonitorPatch, MonitorRequest, MonitorStatus,
    Snapshot,
};
pub use request::{
    BatchBody, BatchRequest, CrawlRequest, Format, JobRequest, MapRequest, PageOptions,
    ScrapeRequest, ScreenshotOptions, SearchRequest, UploadRequest,
};
pub use webhook::{EventType, SigningKeys, WebhookSpec};
