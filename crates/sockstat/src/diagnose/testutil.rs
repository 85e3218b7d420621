//! Synthetic samples for the rule tests: a `tcp_info` written field by field at its 6.18
//! offsets (doc/reference/linux.md#layout), sockets around it, and a context like this machine's.

use super::*;
use crate::model::tcp::{Memory, TcpDetails};
use crate::model::{Family, Owner, OwnersStatus, Process, RawString, SockType, Timer};

/// A `tcp_info` under construction.
#[derive(Clone)]
pub struct TcpBuilder {
    buf: Vec<u8>,
    pub state: State,
    pub memory: Option<Memory>,
    pub recv_q: u32,
    pub send_q: u32,
    pub timer: Option<Timer>,
    pub local: Endpoint,
    pub remote: Option<Endpoint>,
}

fn ep(s: &str) -> Endpoint {
    let sa: std::net::SocketAddr = s.parse().unwrap();
    Endpoint::Inet {
        addr: sa.ip(),
        port: sa.port(),
    }
}

impl TcpBuilder {
    /// An ESTABLISHED connection 192.0.2.1:40000 -> 198.51.100.2:5001 with timestamps, SACK
    /// and window scaling 10/10, MSS 1448, autotuned buffers.
    pub fn new() -> TcpBuilder {
        let mut t = TcpBuilder {
            buf: vec![0; 280],
            state: State::Established,
            memory: Some(Memory {
                rmem_alloc_bytes: 0,
                rcvbuf_bytes: 131_072,
                wmem_alloc_bytes: 0,
                sndbuf_bytes: 4_194_304,
                fwd_alloc_bytes: 0,
                wmem_queued_bytes: 0,
                optmem_bytes: 0,
                backlog_bytes: Some(0),
                drops: Some(0),
            }),
            recv_q: 0,
            send_q: 0,
            timer: Some(Timer::default()),
            local: ep("192.0.2.1:40000"),
            remote: Some(ep("198.51.100.2:5001")),
        };
        t.u8(0, 1)
            .u8(5, opt::TIMESTAMPS | opt::SACK | opt::WSCALE)
            .wscale(10, 10)
            .u32(16, 1448)
            .u32(20, 1448)
            .u32(84, 1448)
            .u32(80, 10)
            .u32(76, 0x7fff_ffff)
            .u32(8, 204_000)
            .u32(12, 40_000);
        t
    }

    fn u8(&mut self, off: usize, v: u8) -> &mut Self {
        self.buf[off] = v;
        self
    }
    fn u16(&mut self, off: usize, v: u16) -> &mut Self {
        self.buf[off..off + 2].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.buf[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.buf[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    pub fn options(mut self, o: u8) -> Self {
        self.u8(5, o);
        self
    }
    pub fn wscale(&mut self, snd: u8, rcv: u8) -> &mut Self {
        #[cfg(target_endian = "little")]
        let b = (snd & 0xf) | (rcv << 4);
        #[cfg(target_endian = "big")]
        let b = (snd << 4) | (rcv & 0xf);
        self.u8(6, b)
    }
    pub fn with_wscale(mut self, snd: u8, rcv: u8) -> Self {
        self.wscale(snd, rcv);
        self
    }
    pub fn app_limited(mut self, yes: bool) -> Self {
        #[cfg(target_endian = "little")]
        let bit = 0x01;
        #[cfg(target_endian = "big")]
        let bit = 0x80;
        if yes {
            self.buf[7] |= bit;
        } else {
            self.buf[7] &= !bit;
        }
        self
    }
    pub fn ca_state(mut self, s: u8) -> Self {
        self.u8(1, s);
        self
    }
    pub fn retransmits(mut self, n: u8) -> Self {
        self.u8(2, n);
        self
    }
    pub fn probes(mut self, n: u8) -> Self {
        self.u8(3, n);
        self
    }
    pub fn backoff(mut self, n: u8) -> Self {
        self.u8(4, n);
        self
    }
    pub fn mss(mut self, m: u32) -> Self {
        self.u32(16, m).u32(20, m).u32(84, m);
        self
    }
    pub fn unacked(mut self, n: u32) -> Self {
        self.u32(24, n);
        self
    }
    pub fn cwnd(mut self, n: u32) -> Self {
        self.u32(80, n);
        self
    }
    pub fn rtt(mut self, rtt: u32, var: u32) -> Self {
        self.u32(68, rtt).u32(72, var);
        self
    }
    pub fn min_rtt(mut self, us: u32) -> Self {
        self.u32(148, us);
        self
    }
    pub fn rcv_space(mut self, b: u32) -> Self {
        self.u32(96, b);
        self
    }
    pub fn bytes_acked(mut self, b: u64) -> Self {
        self.u64(120, b);
        self
    }
    pub fn bytes_received(mut self, b: u64) -> Self {
        self.u64(128, b);
        self
    }
    pub fn data_segs(mut self, inn: u32, out: u32) -> Self {
        self.u32(152, inn).u32(156, out);
        self
    }
    pub fn delivery_rate(mut self, r: u64) -> Self {
        self.u64(160, r);
        self
    }
    /// busy, rwnd_limited, sndbuf_limited (µs, cumulative).
    pub fn chrono(mut self, busy: u64, rwnd: u64, sndbuf: u64) -> Self {
        self.u64(168, busy).u64(176, rwnd).u64(184, sndbuf);
        self
    }
    pub fn bytes_sent(mut self, sent: u64, retrans: u64) -> Self {
        self.u64(200, sent).u64(208, retrans);
        self
    }
    pub fn snd_wnd(mut self, w: u32) -> Self {
        self.u32(228, w);
        self
    }
    pub fn rcv_wnd(mut self, w: u32) -> Self {
        self.u32(232, w);
        self
    }
    /// total_retrans (packets) and dsack_dups (cumulative).
    pub fn retrans_dsack(mut self, total_retrans: u32, dsack_dups: u32) -> Self {
        self.u32(100, total_retrans).u32(216, dsack_dups);
        self
    }
    pub fn total_rto(mut self, n: u16, time_ms: u32) -> Self {
        self.u16(240, n).u32(244, time_ms);
        self
    }
    pub fn sndbuf(mut self, tb: u32) -> Self {
        if let Some(m) = &mut self.memory {
            m.sndbuf_bytes = tb;
        }
        self
    }
    pub fn rcvbuf(mut self, rb: u32, r: u32) -> Self {
        if let Some(m) = &mut self.memory {
            m.rcvbuf_bytes = rb;
            m.rmem_alloc_bytes = r;
        }
        self
    }
    /// Bytes charged to the send queue (`skmem w`).
    pub fn queued(mut self, w: u32) -> Self {
        if let Some(m) = &mut self.memory {
            m.wmem_queued_bytes = w;
        }
        self
    }
    /// The receiver's RTT estimate (`tcpi_rcv_rtt`, µs).
    pub fn rcv_rtt(mut self, us: u32) -> Self {
        self.u32(92, us);
        self
    }
    pub fn drops(mut self, d: u32) -> Self {
        if let Some(m) = &mut self.memory {
            m.drops = Some(d);
        }
        self
    }
    pub fn queues(mut self, recv_q: u32, send_q: u32) -> Self {
        self.recv_q = recv_q;
        self.send_q = send_q;
        self
    }
    pub fn timer(mut self, kind: u8, retrans: u8) -> Self {
        self.timer = Some(Timer {
            kind,
            expires_ms: 200,
            retrans,
        });
        self
    }
    pub fn state(mut self, s: State) -> Self {
        self.state = s;
        self
    }
    pub fn local(mut self, s: &str) -> Self {
        self.local = ep(s);
        self
    }
    pub fn remote(mut self, s: Option<&str>) -> Self {
        self.remote = s.map(ep);
        self
    }

    /// The socket, with cookie and inode `cookie`, held by pid 100 ("app") fd 3.
    pub fn build(self, cookie: u64) -> Socket {
        let mut b = self.buf.clone();
        b[0] = match self.state {
            State::Listen => 10,
            State::CloseWait => 8,
            _ => 1,
        };
        Socket {
            id: Some(cookie),
            cookie: Some(cookie),
            recv_q: self.recv_q,
            send_q: self.send_q,
            uid: Some(1000),
            owners_status: OwnersStatus::Known,
            owners: vec![Owner { pid: 100, fd: 3 }],
            timer: self.timer,
            tcp: Some(Box::new(TcpDetails {
                info: TcpInfo::from_bytes(&b),
                congestion: Some("bbr".into()),
                bbr: None,
                read_at: None,
            })),
            memory: self.memory.map(Box::new),
            ..Socket::new(
                Proto::Tcp,
                Family::Inet,
                SockType::Stream,
                self.state,
                self.local,
                self.remote,
            )
        }
    }
}

/// A TIME_WAIT socket (no tcp_info, no inode, no owner).
pub fn time_wait(local: &str, remote: &str) -> Socket {
    let mut s = TcpBuilder::new().local(local).remote(Some(remote)).build(0);
    s.state = State::TimeWait;
    s.id = None;
    s.cookie = None;
    s.tcp = None;
    s.memory = None;
    s.owners.clear();
    s.owners_status = OwnersStatus::None;
    s.uid = None;
    s
}

/// Sysctls as on the study machine (doc/reference/linux.md#study-machine).
pub fn sysctls() -> Sysctls {
    Sysctls {
        tcp_wmem: Some([4096, 16384, 4_194_304]),
        tcp_rmem: Some([4096, 131_072, 33_554_432]),
        wmem_max: Some(4_194_304),
        rmem_max: Some(4_194_304),
        tcp_mem: Some([287_901, 383_868, 575_802]),
        tcp_window_scaling: Some(1),
        tcp_moderate_rcvbuf: Some(1),
        tcp_timestamps: Some(1),
        tcp_tw_reuse: Some(2),
        ip_local_port_range: Some((32768, 60999)),
        ip_local_reserved_ports: Some(crate::query::PortSet::default()),
        somaxconn: Some(4096),
        tcp_syncookies: Some(1),
        tcp_max_tw_buckets: Some(262_144),
        tcp_syn_retries: Some(6),
        tcp_synack_retries: Some(5),
        tcp_syn_linear_timeouts: Some(4),
        tcp_tw_reuse_delay_ms: Some(1000),
    }
}

/// A one-second interval, this machine's sysctls, no bandwidth.
pub fn ctx() -> Context {
    Context {
        interval_s: 1.0,
        sysctls: sysctls(),
        bandwidth: None,
        page_size: 4096,
        buf_locks: HashMap::new(),
        connects: None,
    }
}

/// A sample of these sockets, pid 100 named "app".
pub fn sample(sockets: Vec<Socket>) -> ZoneSample {
    let mut snap = Snapshot {
        sockets,
        ..Snapshot::default()
    };
    snap.processes.insert(
        100,
        Process {
            pid: 100,
            command: Some(RawString::new(b"app")),
            uid: Some(1000),
            args: None,
        },
    );
    ZoneSample {
        snapshot: snap,
        tcp_mem_pages: Some(1000),
        ..ZoneSample::default()
    }
}

/// Runs every rule over two samples of these sockets.
pub fn run(before: Vec<Socket>, after: Vec<Socket>, ctx: &Context) -> Vec<Finding> {
    evaluate(&sample(before), &sample(after), ctx)
}

/// Only the findings of one rule.
pub fn only(f: Vec<Finding>, rule: RuleId) -> Vec<Finding> {
    f.into_iter().filter(|x| x.rule == Some(rule)).collect()
}

/// An evidence number.
pub fn ev(f: &Finding, name: &str) -> f64 {
    f.evidence
        .get(name)
        .and_then(|v| v.as_f64())
        .unwrap_or_else(|| panic!("no evidence {name} in {:?}", f.evidence))
}

pub use crate::model::tcp::opt;
