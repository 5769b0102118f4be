//! Helpers for SarvCrawl's black-box tests: a `sarvcrawl serve` process on a free port with a
//! fresh data directory, an HTTP client for its API, fixture websites on 127.0.0.1, and
//! listeners that count connections.

pub mod browser;
pub mod clock;
mod docx;
pub mod faults;
pub mod fixture;
pub mod llm;
mod pdf;
pub mod procs;
pub mod proxy;
pub mod server;

pub use docx::{docx, docx_bomb, DOCX_MARKDOWN};
pub use fixture::{tree_paths, tree_site, Received, Receiver, Route, Site, Tap};
pub use pdf::{pdf, pdf_padded};
pub use proxy::{FirstPost, Proxy};
pub use server::{Api, Reply, Serve};

/// One node of a job's `/tree`, flattened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub url: String,
    pub status: String,
    pub reason: Option<String>,
    pub depth: u64,
    pub parent: Option<String>,
}

/// Every node of a `/tree` answer, parents before children.
pub fn tree_nodes(tree: &serde_json::Value) -> Vec<TreeNode> {
    fn walk(node: &serde_json::Value, parent: Option<&str>, out: &mut Vec<TreeNode>) {
        let url = node["url"].as_str().unwrap_or_default().to_string();
        out.push(TreeNode {
            url: url.clone(),
            status: node["status"].as_str().unwrap_or_default().to_string(),
            reason: node["reason"].as_str().map(String::from),
            depth: node["depth"].as_u64().unwrap_or_default(),
            parent: parent.map(String::from),
        });
        for c in node["children"].as_array().into_iter().flatten() {
            walk(c, Some(&url), out);
        }
    }
    let mut out = Vec::new();
    walk(&tree["root"], None, &mut out);
    out
}
