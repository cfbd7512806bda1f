//! The frame loop: captures opened and
//! merged, each frame handed to the `Dissector` (mirror copies skipped), then
//! link -> IP (with fragment reassembly) -> UDP datagram or TCP segment.

use crate::capture::{self, Frame, Merge};
use crate::dissector::{Dissector, Settings};
use crate::ip;
use crate::link::locate_ip;
use crate::rpc;

/// Parse captures, each opened by its opener when needed.  Err((file index,
/// message)) when one of them is not a capture at all.
pub fn parse_sources(
    openers: Vec<capture::Opener>,
    settings: Settings,
    progress: &mut dyn FnMut(i64),
) -> Result<(Dissector, Vec<capture::FileInfo>), (usize, String)> {
    let mut merge = Merge::open(
        openers,
        settings.max_frame_bytes,
        settings.max_interface_drops,
    )?;
    let mut d = Dissector::new(settings);
    d.run(&mut merge, progress);
    if let Some(e) = merge.error.take() {
        return Err(e);
    }
    d.finish();
    Ok((d, merge.into_infos()))
}

/// dissector.transport_end: where a frame's TCP or UDP payload begins, its
/// link, IP and transport headers' length (-1: not TCP/UDP, a later IP
/// fragment, or headers past the captured bytes).
fn transport_end(linktype: u32, data: &[u8]) -> i64 {
    let (version, off) = locate_ip(linktype, data);
    let n = data.len();
    let (proto, l4) = if version == 4 && n >= off + 20 {
        if ((data[off + 6] as usize) << 8 | data[off + 7] as usize) & 0x1FFF != 0 {
            return -1; // a later fragment: no transport header
        }
        (data[off + 9] as i32, off + (data[off] & 0x0F) as usize * 4)
    } else if version == 6 && n >= off + 40 {
        let (nh, pos, frag) =
            ip::walk_extensions(data, data[off + 6] as i32, (off + 40) as i64, n as i64);
        if matches!(frag, Some((o, _, _)) if o != 0) || pos < 0 {
            return -1;
        }
        (nh, pos as usize)
    } else {
        return -1;
    };
    if proto == ip::PROTO_TCP && n >= l4 + 13 {
        return (l4 + (data[l4 + 12] >> 4) as usize * 4) as i64;
    }
    if proto == ip::PROTO_UDP && n >= l4 + 8 {
        return (l4 + 8) as i64;
    }
    -1
}

impl Dissector {
    /// Read every frame of the merged captures (until max_messages is reached).
    pub fn run(&mut self, merge: &mut Merge, progress: &mut dyn FnMut(i64)) {
        let mut last: Option<usize> = None;
        while let Some((i, f)) = merge.next_frame(last) {
            let next = self.n_frames + 1;
            if next % self.check_every_frames == 0 && self.col.stats.messages >= self.max_messages {
                self.stopped_at = next;
                break;
            }
            last = Some(i);
            let data = merge.data(i, &f);
            // cut by the snaplen: where its transport payload began
            let cut = if (data.len() as i64) < f.origlen {
                transport_end(f.linktype, data)
            } else {
                -1
            };
            self.frame(&f, data, Some((merge, i)), progress);
            if let Some(info) = merge.info_mut(i) {
                info.cut_headers = info.cut_headers.max(cut);
            }
        }
    }

    pub(crate) fn layers(&mut self, f: &Frame, data: &[u8], frame_no: i64) {
        let ts = f.ts;
        let (ver, off) = locate_ip(f.linktype, data);
        // the frame's length on the wire (a record claiming less than it
        // captured is damaged: the captured length holds)
        let wire = if f.origlen >= data.len() as i64 {
            f.origlen - off as i64
        } else {
            data.len() as i64 - off as i64
        };
        let dg = if ver == 4 {
            self.counts.ipv4 += 1;
            ip::parse_ipv4(
                data,
                off,
                wire,
                ts,
                frame_no,
                &mut self.reasm,
                &mut self.facts,
            )
        } else if ver == 6 {
            self.counts.ipv6 += 1;
            ip::parse_ipv6(
                data,
                off,
                wire,
                ts,
                frame_no,
                &mut self.reasm,
                &mut self.facts,
            )
        } else {
            self.counts.non_ip += 1;
            return;
        };
        let dg = match dg {
            Some(d) => d,
            None => {
                if !self.reasm.partial.is_empty() {
                    self.partial_datagrams();
                }
                return;
            }
        };
        let p: &[u8] = &dg.payload;
        if dg.proto == ip::PROTO_TCP {
            self.counts.tcp += 1;
            if p.len() < 20 {
                self.counts.short += 1;
                self.count_packet(&dg);
                return;
            }
            let sport = u16::from_be_bytes([p[0], p[1]]) as i32;
            let dport = u16::from_be_bytes([p[2], p[3]]) as i32;
            let seq = rpc::be32(p, 4) as i64;
            let ack = rpc::be32(p, 8) as i64;
            let hl = ((p[12] >> 4) as usize) * 4;
            if hl < 20 || hl as i64 > dg.wire_len {
                // a header length that lies
                self.counts.bad_tcp_header += 1;
                self.count_packet(&dg);
                return;
            }
            let flags = p[13];
            let window = u16::from_be_bytes([p[14], p[15]]) as i64;
            self.tcp_segment(&dg, ts, frame_no, sport, dport, seq, ack, flags, window, hl);
        } else if dg.proto == ip::PROTO_UDP {
            self.counts.udp += 1;
            let slot = self.count_packet(&dg);
            if p.len() < 8 {
                self.counts.short += 1;
                return;
            }
            if let Some(s) = slot {
                if self.facts.rows[s][ip::F_CSUM_CHECKED] < ip::CHECKSUM_SAMPLE
                    && p.len() as i64 == dg.wire_len
                {
                    self.facts
                        .sample_checksum(s, dg.src, dg.dst, ip::PROTO_UDP, p);
                }
            }
            let sport = u16::from_be_bytes([p[0], p[1]]) as i32;
            let dport = u16::from_be_bytes([p[2], p[3]]) as i32;
            self.udp_datagram(&dg, ts, frame_no, sport, dport, &p[8..], true);
        } else {
            self.counts.other += 1;
            self.count_packet(&dg);
        }
    }
}
