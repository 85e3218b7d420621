//! Following one TCP connection (`sockstat trace`): the listing taken again at every step, the
//! one connection the filters select found in it, then followed by its socket cookie until it
//! closes, each sample a [`Point`] of its [`Trace`]. The caller keeps the clock (how often to
//! step, for how long) and writes what each step returns.

use std::time::Instant;

use crate::error::Error;
use crate::model::{Proto, Snapshot, Socket, Warning};
use crate::query::Query;
use crate::run::list::collect;
use crate::trace::{Point, Trace};

/// A connection being looked for, then followed.
#[derive(Debug)]
pub struct Follow {
    /// The listing that looks for the connection: with owners, to name it.
    query: Query,
    /// The listing that follows it: the dump alone, unless an owner filter must be applied at
    /// every sample.
    sampling: Query,
    id: Option<u64>,
    cookie: Option<u64>,
    trace: Option<Trace>,
    started: Option<Instant>,
    warnings: Vec<Warning>,
}

/// What one step saw.
#[derive(Debug)]
#[non_exhaustive]
pub enum Step {
    /// No connection matches yet.
    Waiting,
    /// The one connection that matches, `snapshot.sockets[socket]`: the trace starts, with its
    /// first point (`None` when the socket gave none).
    Found {
        /// The listing it was found in (to name it with its holders).
        snapshot: Snapshot,
        /// Its index in `snapshot.sockets`.
        socket: usize,
        /// The trace's first point.
        point: Option<Point>,
    },
    /// Several connections match (their indices in `snapshot.sockets`): the filters must be
    /// narrowed; nothing is followed.
    Several {
        /// The listing they were found in.
        snapshot: Snapshot,
        /// The indices of those that match.
        matching: Vec<usize>,
    },
    /// The connection's next point, taken `t_s` after it was found (`None` when the socket
    /// gave none this time).
    Point(Option<Point>),
    /// The connection is gone: the trace is over (`closed_at_s` set).
    Closed,
}

impl Follow {
    /// Looks for the one TCP connection (not a listener) `query` selects, narrowed to socket
    /// `id` or `cookie` when given. `query` should ask for TCP internals
    /// ([`Query::narrow_to_tcp_internals`]).
    pub fn new(query: &Query, id: Option<u64>, cookie: Option<u64>) -> Follow {
        // Owners are read once, to name the connection; the samples need only the dump (unless
        // an owner filter must be applied every time).
        let mut sampling = query.clone();
        sampling.gather.owners = query.filters_owners() && query.gather.owners;
        Follow {
            query: query.clone(),
            sampling,
            id,
            cookie,
            trace: None,
            started: None,
            warnings: Vec::new(),
        }
    }

    /// Takes one sample: looks for the connection, or, once found, its next point.
    pub fn step(&mut self) -> Result<Step, Error> {
        let snap = collect(if self.trace.is_some() {
            &self.sampling
        } else {
            &self.query
        })?;
        // Every kind of warning any sample raised, once (a dump interrupted mid-trace too).
        for w in &snap.warnings {
            if !self.warnings.iter().any(|x| x.code == w.code) {
                self.warnings.push(w.clone());
            }
        }
        match (&mut self.trace, self.started) {
            (Some(t), Some(started)) => {
                let now = started.elapsed().as_secs_f64();
                match snap.sockets.iter().find(|s| t.is_of(s)) {
                    Some(s) => {
                        let p = Point::of(s, now);
                        if let Some(p) = &p {
                            t.push(s, p.clone());
                        }
                        Ok(Step::Point(p))
                    }
                    None => {
                        t.closed_at_s = Some(now);
                        Ok(Step::Closed)
                    }
                }
            }
            _ => {
                let matching: Vec<usize> = snap
                    .sockets
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| self.matches(s))
                    .map(|(i, _)| i)
                    .collect();
                match matching[..] {
                    [] => Ok(Step::Waiting),
                    [i] => {
                        self.started = Some(Instant::now());
                        let s = &snap.sockets[i];
                        let mut t = Trace::new(s);
                        let point = Point::of(s, 0.0);
                        if let Some(p) = &point {
                            t.push(s, p.clone());
                        }
                        self.trace = Some(t);
                        Ok(Step::Found {
                            snapshot: snap,
                            socket: i,
                            point,
                        })
                    }
                    _ => Ok(Step::Several {
                        snapshot: snap,
                        matching,
                    }),
                }
            }
        }
    }

    /// Whether `s` is a connection this follow looks for.
    fn matches(&self, s: &Socket) -> bool {
        s.proto == Proto::Tcp
            && s.tcp.is_some()
            && !s.is_listening()
            && self.id.is_none_or(|id| s.id == Some(id))
            && self.cookie.is_none_or(|c| s.cookie == Some(c))
    }

    /// When the connection was found (the trace's time 0); `None` before.
    pub fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Every kind of warning the samples raised, the first of each.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The trace so far; `None` until the connection was found.
    pub fn into_trace(self) -> Option<Trace> {
        self.trace
    }
}
