//! Which addresses a callback may reach (server-side request forgery).
//!
//! A timer service calls whatever URL a caller stored, from inside the
//! network. By default it refuses the addresses where that is dangerous
//! and never useful as a callback: link-local ranges, where cloud metadata
//! services answer with credentials (169.254.169.254 on AWS, GCP, Azure;
//! fd00:ec2::254 on AWS over IPv6; 100.100.100.200 on Alibaba Cloud), plus
//! unspecified, broadcast and multicast addresses. Loopback and private
//! ranges stay allowed (callbacks to a sidecar or a service next door are
//! the normal case) unless a deny list names them.
//!
//! Rules, first match wins: an address in `allow` is allowed; one in
//! `deny` or in [`DEFAULT_DENY`] is refused; anything else is allowed.
//! IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible and NAT64
//! (`64:ff9b::a.b.c.d`) IPv6 addresses are judged as the IPv4 address
//! they carry, so `[::ffff:169.254.169.254]` is refused too.
//!
//! The policy is applied twice: when a timer is created (to a literal IP,
//! or to every address its host name resolves to then) and when it fires,
//! after DNS resolution, so a name re-pointed later is still refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use crate::Error;

/// Ranges refused unless `allow` names them.
pub const DEFAULT_DENY: &[&str] = &[
    "169.254.0.0/16", // IPv4 link-local: cloud metadata (169.254.169.254), ECS task metadata (169.254.170.2)
    "fe80::/10",      // IPv6 link-local
    "fd00:ec2::254/128", // AWS metadata over IPv6
    "100.100.100.200/32", // Alibaba Cloud metadata
    "0.0.0.0/32",     // unspecified ("this host" on Linux)
    "::/128",         // unspecified
    "255.255.255.255/32", // broadcast
    "224.0.0.0/4",    // IPv4 multicast
    "ff00::/8",       // IPv6 multicast
];

/// The allow and deny lists, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPolicy {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
}

/// Why an address was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The address refused.
    pub ip: IpAddr,
    /// The deny range it fell in.
    pub range: IpNet,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "callback target {} is in the denied range {} (link-local and cloud metadata addresses are refused; \
             see callback.allow_cidrs)",
            self.ip, self.range
        )
    }
}

impl std::error::Error for Refusal {}

impl Default for TargetPolicy {
    fn default() -> Self {
        Self::new(&[], &[]).expect("default ranges parse")
    }
}

impl TargetPolicy {
    /// A policy with these extra allow and deny ranges (CIDR, or a bare
    /// address for a single host) on top of [`DEFAULT_DENY`]. Fails with
    /// [`Error::Config`] naming every entry that is not a range.
    pub fn new(allow: &[String], deny: &[String]) -> crate::Result<Self> {
        let mut problems = Vec::new();
        let mut parse = |list: &[String], name: &str| -> Vec<IpNet> {
            list.iter()
                .filter_map(|s| match parse_net(s) {
                    Ok(net) => Some(net),
                    Err(e) => {
                        problems.push(format!("callback.{name}: `{s}` {e}"));
                        None
                    }
                })
                .collect()
        };
        let allow = parse(allow, "allow_cidrs");
        let mut deny = parse(deny, "deny_cidrs");
        if !problems.is_empty() {
            return Err(Error::Config(problems));
        }
        deny.extend(DEFAULT_DENY.iter().map(|s| s.parse::<IpNet>().expect("default range")));
        Ok(Self { allow, deny })
    }

    /// Whether a callback may connect to `ip`.
    pub fn check(&self, ip: IpAddr) -> Result<(), Refusal> {
        let ip = canonical(ip);
        if self.allow.iter().any(|net| net.contains(&ip)) {
            return Ok(());
        }
        match self.deny.iter().find(|net| net.contains(&ip)) {
            Some(range) => Err(Refusal { ip, range: *range }),
            None => Ok(()),
        }
    }
}

impl TargetPolicy {
    /// Checks a URL's host at create time: a literal address (IPv6 in
    /// brackets or not, with or without a zone such as `%25eth0`) is
    /// checked as is; a name is resolved (within `timeout`) and refused if
    /// *any* of its addresses is. A name that does not resolve (yet)
    /// passes: the fire-time check covers it.
    pub async fn check_host(&self, host: &str, timeout: std::time::Duration) -> Result<(), Refusal> {
        if let Some(ip) = literal_ip(host) {
            return self.check(ip);
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let lookup = tokio::net::lookup_host((bare, 0));
        let Ok(Ok(addrs)) = tokio::time::timeout(timeout, lookup).await else { return Ok(()) };
        for addr in addrs {
            self.check(addr.ip())?;
        }
        Ok(())
    }
}

/// The address a URL host names literally: `a.b.c.d`, `[v6]` or `v6`, and
/// `[v6%zone]` (the zone, percent-encoded or not, picks an interface; the
/// address is what is reached, so it is what is judged).
pub fn literal_ip(host: &str) -> Option<IpAddr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Some(ip);
    }
    let (address, _zone) = bare.split_once('%')?;
    address.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
}

fn parse_net(s: &str) -> Result<IpNet, &'static str> {
    let s = s.trim();
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    s.parse::<IpAddr>().map(IpNet::from).map_err(|_| "is not a CIDR range (`10.0.0.0/8`) or an address")
}

/// The IPv4 address an IPv6 address carries, if it is a form that reaches it.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else { return ip };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    // NAT64 well-known prefix 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return IpAddr::V4(low_v4(v6));
    }
    // Deprecated IPv4-compatible ::a.b.c.d (not :: and ::1).
    if s[..6] == [0; 6] && (s[6] != 0 || s[7] > 1) {
        return IpAddr::V4(low_v4(v6));
    }
    ip
}

fn low_v4(v6: Ipv6Addr) -> Ipv4Addr {
    let o = v6.octets();
    Ipv4Addr::new(o[12], o[13], o[14], o[15])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn metadata_and_link_local_are_refused_by_default() {
        let p = TargetPolicy::default();
        for bad in [
            "169.254.169.254",
            "169.254.170.2",
            "fe80::1",
            "fd00:ec2::254",
            "100.100.100.200",
            "0.0.0.0",
            "::",
            "224.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "::169.254.169.254",
        ] {
            let err = p.check(ip(bad)).unwrap_err();
            assert!(err.to_string().contains("denied range"), "{bad}: {err}");
        }
        assert_eq!(p.check(ip("::ffff:169.254.169.254")).unwrap_err().ip, ip("169.254.169.254"));
    }

    #[test]
    fn loopback_private_and_public_are_allowed_by_default() {
        let p = TargetPolicy::default();
        for good in ["127.0.0.1", "::1", "10.1.2.3", "192.168.1.1", "172.16.0.1", "93.184.216.34", "2606:4700::1"] {
            assert_eq!(p.check(ip(good)), Ok(()), "{good}");
        }
    }

    #[test]
    fn deny_adds_ranges_and_allow_wins_over_any_deny() {
        let p = TargetPolicy::new(&["169.254.10.0/24".into()], &["127.0.0.0/8".into(), "10.0.0.5".into()]).unwrap();
        assert_eq!(p.check(ip("127.0.0.1")).unwrap_err().range, "127.0.0.0/8".parse().unwrap());
        assert!(p.check(ip("10.0.0.5")).is_err());
        assert!(p.check(ip("10.0.0.6")).is_ok());
        assert!(p.check(ip("169.254.10.7")).is_ok());
        assert!(p.check(ip("169.254.169.254")).is_err());
    }

    #[tokio::test]
    async fn hosts_are_checked_as_literals_or_after_resolution() {
        let p = TargetPolicy::new(&[], &["127.0.0.0/8".into(), "::1".into()]).unwrap();
        let t = std::time::Duration::from_secs(2);
        assert!(p.check_host("169.254.169.254", t).await.is_err());
        assert!(p.check_host("[fe80::1]", t).await.is_err());
        assert!(p.check_host("[fe80::1%25eth0]", t).await.is_err(), "a zone does not hide the address");
        assert!(p.check_host("[fe80::1%eth0]", t).await.is_err());
        assert!(p.check_host("[::1%25lo]", t).await.is_err());
        assert!(p.check_host("localhost", t).await.is_err(), "localhost resolves to loopback, denied here");
        assert!(p.check_host("10.0.0.1", t).await.is_ok());
        assert!(p.check_host("name.invalid", t).await.is_ok(), "an unresolvable name is left to fire time");
        assert!(TargetPolicy::default().check_host("localhost", t).await.is_ok());
    }

    #[test]
    fn a_bad_range_is_named() {
        let err = TargetPolicy::new(&["x".into()], &["10.0.0.0/33".into()]).unwrap_err().to_string();
        assert!(err.contains("callback.deny_cidrs: `10.0.0.0/33`"), "{err}");
        assert!(err.contains("callback.allow_cidrs: `x`"), "every bad entry is named: {err}");
    }
}
