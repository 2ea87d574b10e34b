//! Which loopback address each adopted node's "kubelet" listens on.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// The first address handed out: 127.0.0.1 stays the apiserver's and everything else's.
const FIRST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
/// The last address of 127.0.0.0/8 that is not its broadcast address.
const LAST: Ipv4Addr = Ipv4Addr::new(127, 255, 255, 254);

/// Node name to address, remembered for the agent's lifetime, so a node deleted and created
/// again gets its address back.
#[derive(Debug, Default)]
pub(crate) struct Addresses {
    by_node: BTreeMap<String, Ipv4Addr>,
}

impl Addresses {
    /// The address of `node`: the loopback `InternalIP` it already reports, else the one it
    /// had, else the lowest address from 127.0.0.2 up that no node has. `None` once
    /// 127.0.0.0/8 is used up.
    pub(crate) fn assign(&mut self, node: &str, reported: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        if let Some(ip) = reported.filter(Ipv4Addr::is_loopback) {
            self.by_node.insert(node.to_string(), ip);
            return Some(ip);
        }
        if let Some(ip) = self.by_node.get(node) {
            return Some(*ip);
        }
        let taken: std::collections::BTreeSet<u32> =
            self.by_node.values().map(|ip| u32::from(*ip)).collect();
        let ip = (u32::from(FIRST)..=u32::from(LAST))
            .find(|ip| !taken.contains(ip))
            .map(Ipv4Addr::from)?;
        self.by_node.insert(node.to_string(), ip);
        Some(ip)
    }

    /// Which node other than `node` holds `ip`, if one does.
    pub(crate) fn holder_other_than(&self, node: &str, ip: Ipv4Addr) -> Option<&str> {
        self.by_node
            .iter()
            .find(|(n, a)| **a == ip && n.as_str() != node)
            .map(|(n, _)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Ipv4Addr {
        Ipv4Addr::new(127, 0, 0, last)
    }

    #[test]
    fn lowest_unused_kept_and_reported() {
        let mut a = Addresses::default();
        assert_eq!(a.assign("a", None), Some(ip(2)));
        assert_eq!(a.assign("b", None), Some(ip(3)));
        // Asked again (a node re-created): the same address.
        assert_eq!(a.assign("a", None), Some(ip(2)));
        // A node that reports a loopback InternalIP keeps it; the next gap is used after it.
        assert_eq!(a.assign("c", Some(ip(4))), Some(ip(4)));
        assert_eq!(a.assign("d", Some(Ipv4Addr::new(10, 0, 0, 1))), Some(ip(5)));
        assert_eq!(a.assign("e", Some(ip(9))), Some(ip(9)));
        assert_eq!(a.assign("f", None), Some(ip(6)));
        assert_eq!(a.holder_other_than("x", ip(9)), Some("e"));
        assert_eq!(a.holder_other_than("e", ip(9)), None);
    }

    #[test]
    fn crosses_octets() {
        let mut a = Addresses::default();
        for n in 0..300 {
            a.assign(&format!("n{n}"), None);
        }
        assert_eq!(a.assign("next", None), Some(Ipv4Addr::new(127, 0, 1, 46)));
    }
}
