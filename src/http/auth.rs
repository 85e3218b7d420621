//! HTTP basic authentication against the bcrypt hashes of `basic_auth_users`, and the request
//! rate limit of `rate_limit`, both bounded so that a flood cannot delay the right client.
//!
//! bcrypt is slow on purpose (about 60 ms of CPU at cost 10), so **successes** are cached by
//! (user, hash, password), as the toolkit caches its outcomes: Prometheus sends the same
//! credentials every scrape and pays for one hash only. Failures are not cached, so wrong
//! passwords cannot push Prometheus's success out of the cache. Hashes run one at a time
//! ([`BcryptGate`]), each client address (an IPv6 /64) may have one check waiting or running,
//! and at most [`MAX_WAITING`] wait in all; a check beyond that is answered at once (429), so a
//! flood of guesses costs one core and delays another client's first check by a few hashes at
//! most. An unknown user is checked against a decoy hash of the users' cost
//! (`WebConfig::decoy`), so the time taken does not tell which names exist.
//!
//! The rate limit is a token bucket per client address, taken after authentication: guessing
//! is bounded by the gate, and one client's scrapes never use up another's.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;

use super::pool::Peer;

/// Most successes kept. Only right passwords get in, so it fills only with users × the
/// passwords a hash accepts (bcrypt reads the first 72 bytes); past it one entry makes room.
const CACHE_MAX: usize = 64;

/// Checks waiting for the hasher, all clients together; one more is answered at once.
pub const MAX_WAITING: usize = 8;

/// Most client addresses a rate limit remembers; past it, buckets that are full again (their
/// clients idle for a whole burst) are forgotten first.
const LIMITER_MAX: usize = 4096;

/// The outcome of a credential check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A known user with the right password.
    Allowed,
    /// No credentials, an unknown user or a wrong password.
    Refused,
    /// Not checked: this client already has a check waiting, or too many clients do.
    Busy,
}

/// Checks credentials; shared by every connection.
#[derive(Default)]
pub struct BasicAuth {
    successes: Mutex<HashMap<(String, String, String), ()>>,
    gate: BcryptGate,
}

/// The user and password of an `Authorization: Basic ...` header value.
pub fn credentials(header: &[u8]) -> Option<(String, String)> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

impl BasicAuth {
    /// Whether `authorization` (the header's value), sent by `peer`, names a user of `users`
    /// with the right password; `decoy` stands in for an unknown user's hash. `wanted` is asked
    /// once the check's turn comes: a connection that was closed while it waited is not worth
    /// a hash (it gets [`Verdict::Refused`]).
    pub fn check(
        &self,
        users: &BTreeMap<String, String>,
        decoy: &str,
        authorization: Option<&[u8]>,
        peer: Peer,
        wanted: impl FnOnce() -> bool,
    ) -> Verdict {
        let Some((user, password)) = authorization.and_then(credentials) else {
            return Verdict::Refused;
        };
        let (known, hash) = match users.get(&user) {
            Some(h) => (true, h.as_str()),
            None => (false, decoy),
        };
        let key = (user, hash.to_string(), password);
        if known && lock(&self.successes).contains_key(&key) {
            return Verdict::Allowed;
        }
        let Some(_turn) = self.gate.enter(peer) else {
            return Verdict::Busy;
        };
        if !wanted() {
            return Verdict::Refused;
        }
        // A hash that does not parse was refused when the file was loaded.
        let ok = bcrypt::verify(&key.2, hash).unwrap_or(false) && known;
        if ok {
            let mut cache = lock(&self.successes);
            if cache.len() >= CACHE_MAX {
                if let Some(k) = cache.keys().next().cloned() {
                    cache.remove(&k);
                }
            }
            cache.insert(key, ());
            Verdict::Allowed
        } else {
            Verdict::Refused
        }
    }
}

/// Locks a mutex whose data stays valid if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One bcrypt at a time, served in arrival order, at most one check per client address waiting
/// or running and at most [`MAX_WAITING`] waiting in all.
#[derive(Default)]
pub struct BcryptGate {
    state: Mutex<GateState>,
    turn: Condvar,
}

#[derive(Default)]
struct GateState {
    running: bool,
    next_ticket: u64,
    queue: VecDeque<u64>,
    /// Clients with a check waiting or running.
    busy: Vec<Peer>,
}

/// A turn at the hasher; the next waiter goes when it is dropped.
pub struct Turn<'a> {
    gate: &'a BcryptGate,
    peer: Peer,
}

impl BcryptGate {
    /// Waits for a turn, or `None` at once when `peer` already has a check waiting or running,
    /// or [`MAX_WAITING`] checks wait.
    pub fn enter(&self, peer: Peer) -> Option<Turn<'_>> {
        let mut st = lock(&self.state);
        if st.busy.contains(&peer) || st.queue.len() >= MAX_WAITING {
            return None;
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.queue.push_back(ticket);
        st.busy.push(peer);
        let mut st = self
            .turn
            .wait_while(st, |s| s.running || s.queue.front() != Some(&ticket))
            .unwrap_or_else(|p| p.into_inner());
        st.queue.pop_front();
        st.running = true;
        Some(Turn { gate: self, peer })
    }

    /// Checks waiting (not running).
    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.state).queue.len()
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut st = lock(&self.gate.state);
        st.running = false;
        if let Some(i) = st.busy.iter().position(|p| *p == self.peer) {
            st.busy.swap_remove(i);
        }
        drop(st);
        self.gate.turn.notify_all();
    }
}

/// A token bucket: `burst` requests at once, then one per `interval`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// `rate_limit`: one token bucket per client address.
pub struct RateLimiter {
    interval: Duration,
    burst: u32,
    buckets: HashMap<Peer, Bucket>,
}

impl RateLimiter {
    pub fn new(interval: Duration, burst: u32) -> RateLimiter {
        RateLimiter {
            interval,
            burst,
            buckets: HashMap::new(),
        }
    }

    /// Whether this limiter was made for these settings (a reload keeps buckets that did not
    /// change).
    pub fn is(&self, interval: Duration, burst: u32) -> bool {
        self.interval == interval && self.burst == burst
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        let earned =
            now.saturating_duration_since(b.last).as_secs_f64() / self.interval.as_secs_f64();
        b.tokens = (b.tokens + earned).min(f64::from(self.burst));
        b.last = now;
    }

    /// Takes one of `peer`'s tokens if it has one.
    pub fn allow(&mut self, peer: Peer, now: Instant) -> bool {
        if !self.buckets.contains_key(&peer) && self.buckets.len() >= LIMITER_MAX {
            // Forget the clients whose buckets have filled up again: for them a new bucket is
            // the same thing.
            let (full, interval) = (f64::from(self.burst), self.interval.as_secs_f64());
            self.buckets.retain(|_, b| {
                let idle = now.saturating_duration_since(b.last).as_secs_f64();
                b.tokens + idle / interval < full
            });
            if self.buckets.len() >= LIMITER_MAX {
                return false;
            }
        }
        let burst = f64::from(self.burst);
        let mut b = *self.buckets.entry(peer).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        self.refill(&mut b, now);
        let ok = b.tokens >= 1.0;
        if ok {
            b.tokens -= 1.0;
        }
        self.buckets.insert(peer, b);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;
    use std::sync::Arc;

    fn header(user: &str, password: &str) -> Vec<u8> {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {token}").into_bytes()
    }

    fn peer(ip: &str) -> Peer {
        Peer::of(ip.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn credentials_are_decoded_and_other_schemes_refused() {
        assert_eq!(
            credentials(&header("prom", "a:b")),
            Some(("prom".into(), "a:b".into()))
        );
        assert_eq!(credentials(b"Bearer abc"), None);
        assert_eq!(credentials(b"Basic !!!"), None);
        assert_eq!(credentials(b"basic cHJvbQ=="), None); // "prom", no colon
    }

    #[test]
    fn only_successes_are_cached() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let decoy = format!("$2b$04${}", &hash[hash.len() - 53..]);
        let users = BTreeMap::from([("prom".to_string(), hash)]);
        let auth = BasicAuth::default();
        let p = peer("192.0.2.1");
        let check = |h: Option<&[u8]>| auth.check(&users, &decoy, h, p, || true);
        assert_eq!(check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
        assert_eq!(check(Some(&header("prom", "s3cret"))), Verdict::Allowed);
        for _ in 0..3 {
            assert_eq!(check(Some(&header("prom", "wrong"))), Verdict::Refused);
            assert_eq!(check(Some(&header("eve", "s3cret"))), Verdict::Refused);
        }
        assert_eq!(check(None), Verdict::Refused);
        assert_eq!(lock(&auth.successes).len(), 1);
        // A connection gone by its turn costs no hash, and is not let in.
        let mut asked = false;
        let v = auth.check(&users, &decoy, Some(&header("eve", "x")), p, || {
            asked = true;
            false
        });
        assert!(asked && v == Verdict::Refused);
        // The decoy's password is no secret: an unknown user is refused whatever it matches.
        assert_eq!(
            check(Some(&header("eve", "sockstat: the decoy of unknown users"))),
            Verdict::Refused
        );
    }

    /// `enter` on another thread: `Some(true)` when it got a turn, `Some(false)` when it was
    /// refused at once, `None` when it is still waiting after `wait`.
    fn try_enter(gate: &Arc<BcryptGate>, ip: &str, wait: Duration) -> Option<bool> {
        let (gate, p) = (Arc::clone(gate), peer(ip));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(gate.enter(p).is_some());
        });
        rx.recv_timeout(wait).ok()
    }

    /// While one check runs, the same client's next check (an IPv6 /64 being one client) and
    /// checks past MAX_WAITING are answered at once; other clients wait their turn.
    #[test]
    fn the_gate_bounds_waiters_and_allows_one_check_per_client() {
        let gate = Arc::new(BcryptGate::default());
        let first = gate.enter(peer("192.0.2.1")).expect("an idle gate");
        let now = Duration::from_secs(2);
        assert_eq!(
            try_enter(&gate, "192.0.2.1", now),
            Some(false),
            "one per client"
        );
        // Waits behind `first` (and is still waiting when the test ends: `first` is held).
        assert_eq!(
            try_enter(&gate, "2001:db8::1", Duration::from_millis(50)),
            None
        );
        assert_eq!(
            try_enter(&gate, "2001:db8::2", now),
            Some(false),
            "one per /64"
        );
        let waiters: Vec<_> = (1..MAX_WAITING)
            .map(|i| {
                let gate = Arc::clone(&gate);
                std::thread::spawn(move || gate.enter(peer(&format!("198.51.100.{i}"))).is_some())
            })
            .collect();
        while gate.waiting() < MAX_WAITING {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            try_enter(&gate, "203.0.113.1", now),
            Some(false),
            "the queue is full"
        );
        drop(first);
        for w in waiters {
            assert!(w.join().unwrap());
        }
        assert_eq!(try_enter(&gate, "192.0.2.1", now), Some(true), "free again");
    }

    #[test]
    fn each_client_has_its_own_bucket() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(Duration::from_secs(1), 2);
        let (a, b) = (peer("192.0.2.1"), peer("192.0.2.2"));
        assert!(r.allow(a, t0));
        assert!(r.allow(a, t0));
        assert!(!r.allow(a, t0));
        assert!(r.allow(b, t0), "another client's bucket is full");
        assert!(!r.allow(a, t0 + Duration::from_millis(500)));
        assert!(r.allow(a, t0 + Duration::from_millis(1001)));
    }

    #[test]
    fn idle_clients_are_forgotten_when_the_limiter_is_full() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(Duration::from_millis(10), 1);
        for i in 0..LIMITER_MAX as u32 {
            assert!(r.allow(Peer::of(IpAddr::from((0x0a00_0000 + i).to_be_bytes())), t0));
        }
        // Every bucket is empty: a new client cannot be given one yet.
        assert!(!r.allow(peer("192.0.2.9"), t0));
        // 10 ms later they are all full again, and forgotten to make room.
        assert!(r.allow(peer("192.0.2.9"), t0 + Duration::from_millis(10)));
        assert!(r.buckets.len() < 16);
    }
}
