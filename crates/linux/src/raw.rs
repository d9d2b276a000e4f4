//! Hand-built Ethernet frames sent through an `AF_PACKET` socket: the gratuitous ARP that
//! refreshes neighbour caches when a cluster VIP moves to another machine. Call
//! [`send_frame`] on a thread that is inside the namespace (see [`crate::dhcp::netns`]). The
//! test probes (`probe`, behind the `testing` feature) build their forged frames on these.

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;

/// ARP request opcode.
pub const ARP_REQUEST: u16 = 1;
/// Broadcast MAC.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];

/// An Ethernet frame carrying ARP.
pub fn arp_frame(
    op: u16,
    src_mac: [u8; 6],
    src_ip: Ipv4Addr,
    dst_mac: [u8; 6],
    dst_ip: Ipv4Addr,
) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&0x0806u16.to_be_bytes());
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&src_ip.octets());
    let target_mac = if dst_mac == BROADCAST_MAC {
        [0; 6]
    } else {
        dst_mac
    };
    f.extend_from_slice(&target_mac);
    f.extend_from_slice(&dst_ip.octets());
    f.resize(60, 0);
    f
}

/// A gratuitous ARP announcing that `mac` holds `ip`.
pub fn gratuitous_arp(mac: [u8; 6], ip: Ipv4Addr) -> Vec<u8> {
    arp_frame(ARP_REQUEST, mac, ip, BROADCAST_MAC, ip)
}

/// Sends one raw frame out of `ifname` of the calling thread's namespace.
pub fn send_frame(ifname: &str, frame: &[u8]) -> io::Result<()> {
    let name = CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: plain libc calls on a descriptor we own and close; the sockaddr is zeroed and
    // then filled with valid values before use.
    unsafe {
        let index = libc::if_nametoindex(name.as_ptr());
        if index == 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut addr: libc::sockaddr_ll = std::mem::zeroed();
        addr.sll_family = u16::try_from(libc::AF_PACKET).unwrap_or(17);
        addr.sll_ifindex = i32::try_from(index).unwrap_or(0);
        addr.sll_halen = 6;
        addr.sll_addr[..6].copy_from_slice(&frame[..6]);
        let rc = libc::sendto(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            0,
            std::ptr::addr_of!(addr).cast(),
            u32::try_from(std::mem::size_of::<libc::sockaddr_ll>()).unwrap_or(20),
        );
        let err = io::Error::last_os_error();
        libc::close(fd);
        if rc < 0 {
            return Err(err);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gratuitous_arp_layout() {
        let mac = [2, 0, 0, 0, 0, 9];
        let f = gratuitous_arp(mac, Ipv4Addr::new(10, 0, 1, 200));
        assert_eq!(f.len(), 60);
        assert_eq!(&f[..6], &BROADCAST_MAC);
        assert_eq!(&f[6..12], &mac);
        assert_eq!(&f[12..14], &[8, 6]);
        assert_eq!(&f[20..22], &ARP_REQUEST.to_be_bytes());
        assert_eq!(&f[28..32], &[10, 0, 1, 200]);
        assert_eq!(&f[38..42], &[10, 0, 1, 200]);
    }
}
