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
/// Rules (`Allow`, `Disallow`) read from one robots.txt at most: every URL is matched against
/// all of them, so their number bounds the work per link.
pub const MAX_RULES: usize = 1000;
/// Rules ending in `$` (each compiled to a regular expression) read at most.
pub const MAX_ANCHORED: usize = 100;
/// Longest rule pattern read.
pub const MAX_PATTERN: usize = 1024;

/// What one origin's robots.txt allows.
pub enum Robots {
    AllowAll,
    DisallowAll {
        why: String,
    },
    /// The origin could not be reached at all: nothing may be fetched, and a page of this
    /// origin fails with the same error as the robots.txt request.
    Unreachable(FetchError),
    /// The rules, and how many rules over the bounds were left out.
    Rules(Box<Robot>, usize),
}

impl Robots {
    /// Whether `url` may be fetched.
    pub fn allows(&self, url: &Url) -> bool {
        match self {
            Robots::AllowAll => true,
            Robots::DisallowAll { .. } | Robots::Unreachable(_) => false,
            Robots::Rules(r, _) => r.allowed(url.as_str()),
        }
    }

    /// The `Crawl-delay` that applies to us, at most [`MAX_CRAWL_DELAY`].
    pub fn crawl_delay(&self) -> Option<Duration> {
        match self {
            Robots::Rules(r, _) => r
                .delay
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| Duration::from_secs_f32(d.min(MAX_CRAWL_DELAY.as_secs_f32()))),
            _ => None,
        }
    }

    /// Sitemaps the file lists.
    pub fn sitemaps(&self) -> Vec<String> {
        match self {
            Robots::Rules(r, _) => r.sitemaps.clone(),
            _ => Vec::new(),
        }
    }

    /// A short account of the decision for the job's logs.
    pub fn describe(&self) -> String {
        match self {
            Robots::AllowAll => "no robots.txt rules apply: all allowed".into(),
            Robots::DisallowAll { why } => format!("robots.txt {why}: nothing may be fetched"),
            Robots::Unreachable(e) => format!("robots.txt could not be fetched ({e})"),
            Robots::Rules(_, dropped) => {
                let mut d = String::from("robots.txt rules apply");
                if let Some(delay) = self.crawl_delay() {
                    d.push_str(&format!(
                        "; Crawl-delay {} s between fetches from this origin",
                        delay.as_secs_f32()
                    ));
                }
                if *dropped > 0 {
                    d.push_str(&format!(
                        "; {dropped} rules past the first {MAX_RULES} (or too long) are ignored"
                    ));
                }
                d
            }
        }
    }
}

/// Parses a robots.txt within the bounds on its rules.
pub fn parse(body: &[u8]) -> Robots {
    let (kept, dropped) = bounded(body);
    match Robot::new(ROBOTS_AGENT, &kept) {
        Ok(r) => Robots::Rules(Box::new(r), dropped),
        Err(_) => Robots::AllowAll,
    }
}

/// The file without the rules past [`MAX_RULES`], past [`MAX_ANCHORED`] anchored ones, or longer
/// than [`MAX_PATTERN`]; and how many were left out.
fn bounded(body: &[u8]) -> (Vec<u8>, usize) {
    let (mut rules, mut anchored, mut dropped) = (0, 0, 0);
    let mut kept = Vec::with_capacity(body.len());
    for line in body.split_inclusive(|&b| b == b'\n') {
        let text = String::from_utf8_lossy(line);
        let directive = text.split('#').next().unwrap_or_default().trim();
        let rule = directive
            .split_once(':')
            .filter(|(name, _)| {
                let name = name.trim();
                name.eq_ignore_ascii_case("allow") || name.eq_ignore_ascii_case("disallow")
            })
            .map(|(_, pattern)| pattern.trim());
        if let Some(pattern) = rule {
            let is_anchored = pattern.ends_with('$');
            if rules >= MAX_RULES
                || pattern.len() > MAX_PATTERN
                || (is_anchored && anchored >= MAX_ANCHORED)
            {
                dropped += 1;
                continue;
            }
            rules += 1;
            anchored += usize::from(is_anchored);
        }
        kept.extend_from_slice(line);
    }
    (kept, dropped)
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

/// Bytes of a robots.txt read (RFC 9309 asks for at least 500 KiB).
pub const MAX_ROBOTS_BYTES: usize = 512 * 1024;

/// What fetching one origin's robots.txt gave, as kept for every process of a job: the file
/// itself (parsed where it is used), or the decision its absence or failure makes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum RobotsFile {
    /// A 2xx answer: its body, at most [`MAX_ROBOTS_BYTES`].
    Rules { body: String },
    /// A 4xx answer.
    AllowAll,
    /// A 5xx answer, or no origin.
    DisallowAll { why: String },
    /// No answer at all.
    Unreachable { error: FetchError },
}

impl RobotsFile {
    /// The rules this outcome stands for.
    pub fn rules(&self) -> Robots {
        match self {
            RobotsFile::Rules { body } => parse(body.as_bytes()),
            RobotsFile::AllowAll => Robots::AllowAll,
            RobotsFile::DisallowAll { why } => Robots::DisallowAll { why: why.clone() },
            RobotsFile::Unreachable { error } => Robots::Unreachable(error.clone()),
        }
    }
}

/// Fetches the robots.txt of `url`'s origin.
pub async fn fetch_robots(fetcher: &Fetcher, url: &Url) -> RobotsFile {
    let Some(robots_url) = robots_url(url) else {
        return RobotsFile::DisallowAll {
            why: "has no origin".into(),
        };
    };
    match fetcher
        .get(&robots_url, &BTreeMap::new(), Duration::from_secs(15))
        .await
    {
        Ok(f) if (200..300).contains(&f.status) => {
            let body = &f.body[..f.body.len().min(MAX_ROBOTS_BYTES)];
            RobotsFile::Rules {
                body: String::from_utf8_lossy(body).into_owned(),
            }
        }
        Ok(f) if (400..500).contains(&f.status) => RobotsFile::AllowAll,
        Ok(f) => RobotsFile::DisallowAll {
            why: format!("answered {}", f.status),
        },
        Err(error) => RobotsFile::Unreachable { error },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> Robots {
        parse(text.as_bytes())
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

    #[test]
    fn a_hostile_file_is_read_within_bounds() {
        let mut text = String::from("User-agent: *\nAllow: /first\n");
        for i in 0..20_000 {
            text.push_str(&format!("Disallow: /*a*b*c*{i}*$\n"));
        }
        text.push_str(&format!("Disallow: /{}\n", "x".repeat(5000)));
        let r = rules(&text);
        let Robots::Rules(_, dropped) = &r else {
            panic!("not parsed")
        };
        assert_eq!(*dropped, 20_000 - MAX_ANCHORED + 1);
        assert!(r.describe().contains("are ignored"));
        assert!(r.allows(&Url::parse("https://e.com/first").unwrap()));
        assert!(!r.allows(&Url::parse("https://e.com/xaybzc7q").unwrap()));
    }
}
