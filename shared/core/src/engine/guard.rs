//! The address guard (SECURITY.md S3-S5, S7): which destinations the service may connect to.
//!
//! Only globally routable addresses are allowed unless an operator lists a network explicitly.
//! Decisions are made on parsed addresses, after resolution, and the connection goes to the
//! address that was checked.

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// The destinations the service may connect to.
#[derive(Debug, Clone, Default)]
pub struct AddressPolicy {
    allow: Vec<IpNet>,
}

/// A destination the policy refuses. Carries no address, so nothing resolved is echoed (S8).
#[derive(Debug, thiserror::Error)]
#[error("destination address is not allowed")]
pub struct BlockedAddress;

impl AddressPolicy {
    /// A policy that also opens the listed networks, which are otherwise blocked.
    pub fn new(allow: Vec<IpNet>) -> Self {
        AddressPolicy { allow }
    }

    /// Whether a connection to `ip` is allowed.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.allow.iter().any(|n| n.contains(&ip)) {
            return true;
        }
        !is_blocked(ip)
    }

    /// Checks a URL's host when it is an IP literal; names are checked by the resolver.
    pub fn check_url(&self, url: &url::Url) -> Result<(), BlockedAddress> {
        match url.host() {
            Some(url::Host::Ipv4(v4)) if !self.permits(IpAddr::V4(v4)) => Err(BlockedAddress),
            Some(url::Host::Ipv6(v6)) if !self.permits(IpAddr::V6(v6)) => Err(BlockedAddress),
            Some(_) => Ok(()),
            None => Err(BlockedAddress),
        }
    }
}

fn v4_blocked(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0
        || a == 10
        || (a == 100 && (64..128).contains(&b))
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 192 && b == 168)
        || (a == 198 && (18..20).contains(&b))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224
}

/// The IPv4 address that an IPv6 address carries in a translation or tunnelling prefix.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff {
        return Some(tail()); // ::ffff:0:0/96 (IPv4-mapped)
    }
    if s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0 {
        return Some(tail()); // ::ffff:0:0:0/96 (IPv4-translated, RFC 2765)
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(tail()); // 64:ff9b::/96
    }
    if s[0] == 0x2002 {
        // 2002::/16 (6to4): the address sits in the second and third segments.
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

fn v6_blocked(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return v4_blocked(v4);
    }
    let s = ip.segments();
    s[..6] == [0, 0, 0, 0, 0, 0] // ::/96: unspecified, loopback, IPv4-compatible
        || (s[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local (fd00:ec2::254 included)
        || (s[0] & 0xffc0) == 0xfe80 // fe80::/10 link local
        || (s[0] & 0xffc0) == 0xfec0 // fec0::/10 site local (deprecated, still routed by some)
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // 64:ff9b:1::/48 local-use NAT64
        || (s[0] & 0xff00) == 0xff00 // ff00::/8 multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0) // Teredo hides an address
        || s[..4] == [0x100, 0, 0, 0] // discard-only
}

/// Whether an address is outside the globally routable space (SECURITY.md S4).
pub fn is_blocked(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_blocked(v4),
        IpAddr::V6(v6) => v6_blocked(v6),
    }
}

/// A DNS resolver for the HTTP client that refuses names resolving to any blocked address, and
/// hands the client only the addresses it checked (S5).
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    pub fn new(policy: Arc<AddressPolicy>) -> Self {
        GuardedResolver { policy }
    }
}

/// `localhost` and its subdomains always mean loopback (RFC 6761), whatever DNS says.
fn is_localhost_name(host: &str) -> bool {
    let h = host.trim_end_matches('.').to_ascii_lowercase();
    h == "localhost" || h.ends_with(".localhost")
}

/// Resolves `host` (a name or an IP literal) and returns its addresses with `port`, or
/// `None` when it resolves to nothing or to any address the policy refuses (S4, S5). Connect
/// only to the addresses returned.
pub async fn resolve_checked(
    policy: &AddressPolicy,
    host: &str,
    port: u16,
) -> std::io::Result<Option<Vec<SocketAddr>>> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = if let Ok(ip) = bare.parse::<IpAddr>() {
        vec![SocketAddr::new(ip, port)]
    } else if is_localhost_name(host) {
        vec![
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port),
        ]
    } else {
        tokio::net::lookup_host((host, port)).await?.collect()
    };
    if addrs.is_empty() || addrs.iter().any(|a| !policy.permits(a.ip())) {
        return Ok(None);
    }
    Ok(Some(addrs))
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            match resolve_checked(&policy, &host, 0).await? {
                Some(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                None => Err(Box::new(BlockedAddress) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host_blocked(url: &str) -> bool {
        let u = url::Url::parse(url).unwrap();
        AddressPolicy::default().check_url(&u).is_err()
    }

    #[test]
    fn obfuscated_loopback_parses_to_blocked_addresses() {
        for u in [
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[::1]/",
            "http://[fd00:ec2::254]/",
            "http://[2002:7f00:1::]/",
            "http://[::ffff:0:127.0.0.2]/",
            "http://[::ffff:0:a9fe:a9fe]/",
            "http://[64:ff9b:1::a9fe:a9fe]/",
            "http://[64:ff9b:1:ffff::1]/",
            "http://[fec0::1]/",
            "http://[feff::1]/",
            "http://169.254.170.2/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://100.64.0.1/",
            "http://198.18.0.1/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
        ] {
            assert!(host_blocked(u), "{u} should be blocked");
        }
        for u in ["http://93.184.215.14/", "http://[2606:4700::1111]/"] {
            assert!(!host_blocked(u), "{u} should be allowed");
        }
    }

    #[test]
    fn allow_list_opens_only_listed_networks() {
        let p = AddressPolicy::new(vec!["127.0.0.1/32".parse().unwrap()]);
        assert!(p.permits("127.0.0.1".parse().unwrap()));
        assert!(p.permits("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!p.permits("127.0.0.2".parse().unwrap()));
        assert!(!p.permits("::1".parse().unwrap()));
    }

    #[test]
    fn localhost_names_are_loopback() {
        assert!(is_localhost_name("localhost."));
        assert!(is_localhost_name("a.LOCALHOST"));
        assert!(!is_localhost_name("localhost.example.com"));
    }
}
