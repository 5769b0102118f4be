//! robots.txt per origin (RFC 9309, SECURITY.md C1): 2xx obey, 4xx allow all, 5xx or
//! unreachable disallow all.

use super::fetch::{FetchError, Fetcher};
use std::collections::BTreeMap;
use std::time::Duration;
use texting_robots::Robot;
use url::Url;

/// The product token matched against `User-agent` lines.
pub const ROBOTS_AGENT: &str = "SarvCrawl";
/// Longest `Crawl-delay` honoured.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(30);

/// What one origin's robots.txt allows.
pub enum Robots {
    AllowAll,
    DisallowAll {
        why: String,
    },
    /// The origin could not be reached at all: nothing may be fetched, and a page of this
    /// origin fails with the same error as the robots.txt request.
    Unreachable(FetchError),
    Rules(Box<Robot>),
}

impl Robots {
    /// Whether `url` may be fetched.
    pub fn allows(&self, url: &Url) -> bool {
        match self {
            Robots::AllowAll => true,
            Robots::DisallowAll { .. } | Robots::Unreachable(_) => false,
            Robots::Rules(r) => r.allowed(url.as_str()),
        }
    }

    /// The `Crawl-delay` that applies to us, at most [`MAX_CRAWL_DELAY`].
    pub fn crawl_delay(&self) -> Option<Duration> {
        match self {
            Robots::Rules(r) => r
                .delay
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| Duration::from_secs_f32(d.min(MAX_CRAWL_DELAY.as_secs_f32()))),
            _ => None,
        }
    }

    /// Sitemaps the file lists.
    pub fn sitemaps(&self) -> Vec<String> {
        match self {
            Robots::Rules(r) => r.sitemaps.clone(),
            _ => Vec::new(),
        }
    }

    /// A short account of the decision for the job's logs.
    pub fn describe(&self) -> String {
        match self {
            Robots::AllowAll => "no robots.txt rules apply: all allowed".into(),
            Robots::DisallowAll { why } => format!("robots.txt {why}: nothing may be fetched"),
            Robots::Unreachable(e) => format!("robots.txt could not be fetched ({e})"),
            Robots::Rules(_) => match self.crawl_delay() {
                Some(d) => format!(
                    "robots.txt rules apply; Crawl-delay {} s between fetches from this origin",
                    d.as_secs_f32()
                ),
                None => "robots.txt rules apply".into(),
            },
        }
    }
}

/// The robots.txt location of `url`'s origin.
pub fn robots_url(url: &Url) -> Option<Url> {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.set_path("/robots.txt");
    u.host_str()?;
    Some(u)
}

/// Fetches and parses the robots.txt of `url`'s origin.
pub async fn fetch_robots(fetcher: &Fetcher, url: &Url) -> Robots {
    let Some(robots_url) = robots_url(url) else {
        return Robots::DisallowAll {
            why: "has no origin".into(),
        };
    };
    match fetcher
        .get(&robots_url, &BTreeMap::new(), Duration::from_secs(15))
        .await
    {
        Ok(f) if (200..300).contains(&f.status) => {
            // RFC 9309: at least 500 KiB must be parsed; more is ignored.
            let body = &f.body[..f.body.len().min(512 * 1024)];
            match Robot::new(ROBOTS_AGENT, body) {
                Ok(r) => Robots::Rules(Box::new(r)),
                Err(_) => Robots::AllowAll,
            }
        }
        Ok(f) if (400..500).contains(&f.status) => Robots::AllowAll,
        Ok(f) => Robots::DisallowAll {
            why: format!("answered {}", f.status),
        },
        Err(e) => Robots::Unreachable(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Robots {
        Robots::Rules(Box::new(Robot::new(ROBOTS_AGENT, text.as_bytes()).unwrap()))
    }

    #[test]
    fn crawl_delay_is_read_and_bounded() {
        let r = rules("User-agent: *\nCrawl-delay: 2.5\nDisallow: /private\n");
        assert_eq!(r.crawl_delay(), Some(Duration::from_millis(2500)));
        assert!(r.describe().contains("Crawl-delay 2.5 s"));
        let r = rules("User-agent: SarvCrawl\nCrawl-delay: 86400\n");
        assert_eq!(r.crawl_delay(), Some(MAX_CRAWL_DELAY));
        assert_eq!(rules("User-agent: *\nDisallow: /x\n").crawl_delay(), None);
        assert_eq!(Robots::AllowAll.crawl_delay(), None);
    }
}
