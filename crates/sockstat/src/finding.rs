//! What a verdict looks like, wherever it is reached: a [`Finding`] of the diagnosis rules
//! (`sockstat diagnose`, the live view, the exporter) or of the port report (`sockstat ports`),
//! with the numbers behind it ([`Evidence`]), how sure it is ([`Confidence`]) and the
//! connection or part of the namespace it is about. The port report's findings that are R7's
//! and R8's are the diagnosis's findings of those rules, unchanged (doc/diagnose.md, doc/ports.md).
//!
//! Data only: the analyses make findings (`crate::diagnose`, `crate::ports`), the renderers
//! write them in their documents' shapes (`crate::render`).

use serde::Serialize;
use serde_json::Value;

use crate::model::{Endpoint, Severity, Snapshot, Socket, State};

/// The rules, by the id used in JSON (`"rule"`) and in doc/diagnose.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RuleId {
    /// R1: the send buffer caps throughput.
    SendBufferLimited,
    /// R2b/R2c: the peer's receive window caps throughput.
    ReceiveWindowLimited,
    /// R2a: no window scaling, window capped at 64 KiB.
    WindowScalingMissing,
    /// R4: the local receive buffer is fixed (SO_RCVBUF) or cannot grow.
    ReceiveBufferLocked,
    /// R3: an application does not read (zero window, Recv-Q full).
    ReceiverNotReading,
    /// R5: delayed ACKs inflate a request/response connection's latency.
    DelayedAck,
    /// R6: global TCP memory pressure.
    MemoryPressure,
    /// R7: ephemeral ports running out, TIME-WAIT accumulation.
    EphemeralPorts,
    /// R8: SYNs for tuples still in TIME-WAIT are rejected.
    TimewaitSynRejected,
    /// R9: accept queue or SYN queue overflow.
    ListenOverflow,
    /// R10: retransmissions, RTO recovery, black holes.
    Retransmissions,
    /// R11: connections the peer closed pile up in CLOSE_WAIT, never closed by their process.
    CloseWait,
}

impl RuleId {
    /// Every rule, in documentation order.
    pub const ALL: [RuleId; 12] = [
        RuleId::SendBufferLimited,
        RuleId::ReceiveWindowLimited,
        RuleId::WindowScalingMissing,
        RuleId::ReceiveBufferLocked,
        RuleId::ReceiverNotReading,
        RuleId::DelayedAck,
        RuleId::MemoryPressure,
        RuleId::EphemeralPorts,
        RuleId::TimewaitSynRejected,
        RuleId::ListenOverflow,
        RuleId::Retransmissions,
        RuleId::CloseWait,
    ];

    /// The id used in JSON.
    pub fn id(self) -> &'static str {
        match self {
            RuleId::SendBufferLimited => "send-buffer-limited",
            RuleId::ReceiveWindowLimited => "receive-window-limited",
            RuleId::WindowScalingMissing => "window-scaling-missing",
            RuleId::ReceiveBufferLocked => "receive-buffer-locked",
            RuleId::ReceiverNotReading => "receiver-not-reading",
            RuleId::DelayedAck => "delayed-ack",
            RuleId::MemoryPressure => "memory-pressure",
            RuleId::EphemeralPorts => "ephemeral-ports",
            RuleId::TimewaitSynRejected => "timewait-syn-rejected",
            RuleId::ListenOverflow => "listen-overflow",
            RuleId::Retransmissions => "retransmissions",
            RuleId::CloseWait => "close-wait",
        }
    }
}

impl Serialize for RuleId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

/// How sure a verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Certainty {
    /// A plausible reading; other explanations fit as well.
    Low,
    /// The main signs agree, one is missing or borderline.
    Medium,
    /// Every sign agrees, or the kernel counted it directly.
    High,
}

impl Certainty {
    /// The name used in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            Certainty::Low => "low",
            Certainty::Medium => "medium",
            Certainty::High => "high",
        }
    }
}

/// How sure a finding is, and the observations that make it so (`"confidence"` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Confidence {
    /// The level.
    pub level: Certainty,
    /// One short sentence per observation for or against the verdict.
    pub because: Vec<String>,
}

impl Confidence {
    /// A level with its reasons.
    pub fn new(level: Certainty, because: Vec<String>) -> Confidence {
        Confidence { level, because }
    }

    /// The kernel counted the event itself (a counter moved, a queue is over its limit).
    pub fn counted(why: impl Into<String>) -> Confidence {
        Confidence::new(Certainty::High, vec![why.into()])
    }
}

/// The connection a finding is about.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SocketRef {
    /// Socket inode.
    pub id: Option<u64>,
    /// Kernel socket cookie (decimal string in JSON, as in the listing).
    #[serde(serialize_with = "cookie_str")]
    pub cookie: Option<u64>,
    /// Kernel state.
    pub state: State,
    /// Local end.
    pub local: Endpoint,
    /// Remote end.
    pub remote: Option<Endpoint>,
    /// Every (process, fd) holding it, with the command name when known.
    pub owners: Vec<OwnerRef>,
}

fn cookie_str<S: serde::Serializer>(c: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_str(&c.to_string()),
        None => s.serialize_none(),
    }
}

/// One holder of the socket a finding names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OwnerRef {
    /// Process id.
    pub pid: u32,
    /// File descriptor.
    pub fd: u32,
    /// Command name (untrusted: sanitize before showing on a terminal).
    pub command: Option<String>,
}

impl SocketRef {
    pub(crate) fn of(s: &Socket, snap: &Snapshot) -> SocketRef {
        SocketRef {
            id: s.id,
            cookie: s.cookie,
            state: s.state,
            local: s.local.clone(),
            remote: s.remote.clone(),
            owners: s
                .owners
                .iter()
                .map(|o| OwnerRef {
                    pid: o.pid,
                    fd: o.fd,
                    command: snap
                        .process(o.pid)
                        .and_then(|p| p.command.as_ref())
                        .map(|c| c.to_string_lossy().into_owned()),
                })
                .collect(),
        }
    }
}

/// Numbers that support a finding, in the order they were added; names carry units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence(pub Vec<(&'static str, Value)>);

impl Evidence {
    /// Adds a value (skipped when `None`).
    pub fn put(&mut self, name: &'static str, v: impl Into<Option<Value>>) -> &mut Self {
        if let Some(v) = v.into() {
            self.0.push((name, v));
        }
        self
    }

    /// Adds an integer.
    pub fn int(&mut self, name: &'static str, v: impl Into<Option<u64>>) -> &mut Self {
        self.put(name, v.into().map(Value::from))
    }

    /// Adds a rate or share, rounded to something readable.
    pub fn num(&mut self, name: &'static str, v: impl Into<Option<f64>>) -> &mut Self {
        let v = v.into().filter(|x| x.is_finite()).map(|x| {
            if x.abs() >= 100.0 {
                Value::from(x.round() as i64)
            } else {
                Value::from((x * 1000.0).round() / 1000.0)
            }
        });
        self.put(name, v)
    }

    /// Adds a string.
    pub fn text(&mut self, name: &'static str, v: impl Into<String>) -> &mut Self {
        self.put(name, Some(Value::from(v.into())))
    }

    /// A value by name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// What a port finding is about, so that other views (the diagnosis's R7 and R8, the renderers)
/// can take its numbers from the port report it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Subject {
    /// The namespace (the range, the TIME-WAIT table, the counters), or, for a diagnosis
    /// finding, what [`Finding::socket`] names.
    #[default]
    Namespace,
    /// The port report's `destinations[i]`.
    Destination(usize),
    /// The port report's `servers[i]`.
    Server(usize),
}

/// One verdict: which rule reached it, how bad, which connection (or `None` for the host), what
/// was seen, the numbers behind it, and what to change.
///
/// Its `Serialize` is the diagnosis document's shape (doc/diagnose.schema.json: `rule`,
/// `severity`, `socket`, `summary`, `evidence`, `advice`, `count`, `confidence`, `zone`); the
/// port document writes `code`, `level`, `message` and `advice` (doc/ports.schema.json,
/// `crate::render::ports`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finding {
    /// The diagnosis rule this is a finding of; `None` for the port findings no rule reports
    /// (`server-time-wait`, `time-wait-reused`).
    pub rule: Option<RuleId>,
    /// The stable code of this finding: the rule's id ([`RuleId::id`]) for the diagnosis
    /// rules; for a port finding its own (`ephemeral-ports-critical`, `ephemeral-ports-warning`,
    /// `ephemeral-ports-rate`, `no-ephemeral-ports`, `time-wait-buckets`, `time-wait-overflow`,
    /// `time-wait-syn-rejects`, `time-wait-reused`, `server-time-wait`), which a diagnosis
    /// of rule R7 or R8 gives as its evidence's `finding`.
    #[serde(skip)]
    pub code: &'static str,
    /// How bad.
    pub severity: Severity,
    /// The connection, or `None` for a host- or namespace-wide finding.
    pub socket: Option<SocketRef>,
    /// For a port finding, the entry of its report it is about.
    #[serde(skip)]
    pub subject: Subject,
    /// The verdict in one sentence.
    pub summary: String,
    /// The numbers behind it.
    pub evidence: Evidence,
    /// The concrete change (empty when there is nothing to change, as for `time-wait-reused`).
    pub advice: String,
    /// How many connections (or handshakes) share this one cause: 1 for a finding about one
    /// connection, more when one cause shows on several (they are then one finding); `None`
    /// for a namespace-wide finding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How sure the verdict is, and why.
    pub confidence: Confidence,
    /// The zone (network namespace) it was found in, with `-z`/`-Z`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<crate::zone::Zone>,
}
